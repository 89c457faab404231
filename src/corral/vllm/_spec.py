"""Per-request constraints for vLLM, as a request states them: no vLLM import here.

In:  ``SamplingParams.extra_args`` (the OpenAI server fills it from ``vllm_xargs``):

* nested (offline ``LLM``): ``{"corral": {"json_schema": {...}}}``, or ``"regex"``,
  ``"grammar"``, ``"choices"`` (list of str), ``"json": true``; optional ``"schema_options"``;
* flat (``vllm_xargs`` allows only strings, numbers and lists of them): ``corral_json_schema``
  (JSON text), ``corral_regex``, ``corral_grammar``, ``corral_choices``, ``corral_json``,
  ``corral_schema_options`` (JSON text).

Out: a :class:`Spec` (hashable, normalised) or None for an unconstrained request; malformed
arguments raise ``ValueError`` with a message meant for the client (vLLM turns it into an
HTTP 400). :func:`compile_spec` compiles a spec for a tokenizer through corral's compile cache.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.generation.constraint import Constraint, make_constraint, validate_choices
from corral.tokenizer import Tokenizer

__all__ = ["KINDS", "Spec", "check_spec", "compile_spec", "from_structured_outputs", "request_spec"]

KINDS = ("json_schema", "regex", "grammar", "choices", "json")
"""The constraint kinds a request may give (exactly one)."""

# What corral.generate uses for schemas and JSON mode: the json.dumps(indent=2) layout, fully
# dictated by the grammar (bounded whitespace: the model cannot pad with spaces or newlines), and
# one spelling per string (no \u0072-style drift). A request's schema_options override them.
SCHEMA_DEFAULTS: dict[str, Any] = {"whitespace": "pretty", "escapes": "canonical"}


@dataclass(frozen=True)
class Spec:
    """One request's constraint, normalised so equal constraints compare (and cache) equal.

    ``value`` is the regex / grammar text, the schema as compact JSON text (property order
    kept), the choices as a tuple, or None for JSON mode; ``options`` the schema options as
    canonical JSON text.
    """

    kind: str
    value: Any
    options: str = "{}"

    def describe(self) -> str:
        """A short description for logs and error messages."""
        text = str(self.value)
        return f"{self.kind}({text[:60]}{'...' if len(text) > 60 else ''})"


def _json_arg(name: str, value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as e:
            raise ValueError(f"corral: {name} is not valid JSON text: {e}") from None
    return value


def request_spec(extra_args: Mapping[str, Any] | None) -> Spec | None:
    """The constraint a request asks for (None: not constrained by corral).

    Raises ValueError for a malformed request: an unknown key, two constraints at once, or a
    value of the wrong type.
    """
    if not extra_args:
        return None
    args: dict[str, Any] = {}
    nested = extra_args.get("corral")
    if nested is not None:
        if not isinstance(nested, Mapping):
            raise ValueError(
                "corral: extra_args['corral'] must be an object such as {\"json_schema\": {...}}, "
                f"got {type(nested).__name__}"
            )
        args.update(nested)
    for key, value in extra_args.items():
        if key.startswith("corral_"):
            name = key[len("corral_") :]
            if name in args:
                raise ValueError(f"corral: {name} is given twice (in extra_args['corral'] and as {key})")
            args[name] = value
    if not args:
        return None
    unknown = sorted(set(args) - set(KINDS) - {"schema_options"})
    if unknown:
        raise ValueError(
            f"corral: unknown argument(s) {unknown}; expected one of {list(KINDS)} "
            "and optionally schema_options"
        )
    given = [k for k in KINDS if args.get(k) not in (None, False)]
    if len(given) > 1:
        raise ValueError(f"corral: give one constraint, not {' and '.join(given)}")
    if not given:
        if "schema_options" in args:
            raise ValueError("corral: schema_options given without json_schema or json")
        return None
    kind = given[0]
    value = args[kind]
    options = _json_arg("schema_options", args.get("schema_options") or {})
    if not isinstance(options, dict):
        raise ValueError("corral: schema_options must be an object")
    if "schema_options" in args and kind not in ("json_schema", "json"):
        raise ValueError(f"corral: schema_options apply to json_schema and json, not {kind}")
    opts = (
        json.dumps({**SCHEMA_DEFAULTS, **options}, sort_keys=True)
        if kind in ("json_schema", "json")
        else "{}"
    )
    if kind == "json_schema":
        schema = _json_arg("json_schema", value)
        if not isinstance(schema, (dict, bool)):
            raise ValueError(
                f"corral: json_schema must be a JSON object (or true/false), got {type(schema).__name__}"
            )
        # Key order kept: it is the order the properties are generated in.
        return Spec(kind, json.dumps(schema), opts)
    if kind in ("regex", "grammar"):
        if not isinstance(value, str):
            raise ValueError(f"corral: {kind} must be a string, got {type(value).__name__}")
        return Spec(kind, value)
    if kind == "choices":
        if isinstance(value, str):
            value = [value]  # a single choice given flat
        try:
            validate_choices(value)
        except (TypeError, ValueError) as e:
            raise ValueError(f"corral: {e}") from None
        return Spec(kind, tuple(value))
    if value is not True and value not in (1, "true", "1"):
        raise ValueError(f"corral: json must be true, got {value!r}")
    return Spec("json", None, opts)


def from_structured_outputs(so: Any) -> Spec | None:
    """The corral spec for a vLLM ``StructuredOutputsParams`` (what ``response_format`` and
    ``structured_outputs`` requests become), or None when corral has no equivalent
    (structural tags, an empty object)."""
    if so is None:
        return None
    if getattr(so, "json", None) is not None:
        schema = _json_arg("response_format json_schema", so.json)
        return request_spec({"corral": {"json_schema": schema}})
    if getattr(so, "regex", None):
        return request_spec({"corral": {"regex": so.regex}})
    if getattr(so, "choice", None):
        return request_spec({"corral": {"choices": list(so.choice)}})
    if getattr(so, "grammar", None):
        return request_spec({"corral": {"grammar": so.grammar}})
    if getattr(so, "json_object", None):
        return request_spec({"corral": {"json": True}})
    return None


def compile_spec(spec: Spec, tokenizer: Tokenizer) -> Constraint:
    """Compile (or fetch from corral's compile cache) a spec for a tokenizer.

    Raises corral's errors (CompileError, LimitExceeded, SchemaError, ...) for constraints that
    do not compile.
    """
    options = json.loads(spec.options)
    c: Constraint | None
    if spec.kind == "json_schema":
        c = make_constraint(tokenizer, schema=spec.value, schema_options=options)
    elif spec.kind == "json":
        c = make_constraint(tokenizer, json_mode=True, schema_options=options)
    elif spec.kind == "regex":
        c = make_constraint(tokenizer, regex=spec.value)
    elif spec.kind == "grammar":
        c = make_constraint(tokenizer, grammar=spec.value)
    else:
        c = make_constraint(tokenizer, choices=list(spec.value))
    assert c is not None
    return c


_BYTE_TOKENIZER: Tokenizer | None = None


def check_spec(spec: Spec) -> None:
    """Compile a spec against a 256-byte vocabulary: catches syntax errors, unsupported schema
    keywords and every compile limit before a request is admitted, where no model tokenizer is
    at hand (vLLM's ``validate_params`` runs in the API process). Raises ValueError with corral's
    message."""
    global _BYTE_TOKENIZER
    if _BYTE_TOKENIZER is None:
        _BYTE_TOKENIZER = Tokenizer.from_tokens(
            [bytes([b]) for b in range(256)] + [b"<eos>"], special_ids=[256], eos_ids=[256]
        )
    try:
        compile_spec(spec, _BYTE_TOKENIZER)
    except ValueError as e:
        raise ValueError(f"corral: the {spec.kind} constraint does not compile: {e}") from None
    except Exception as e:  # corral's CompileError / LimitExceeded / SchemaError and friends
        raise ValueError(
            f"corral: the {spec.kind} constraint does not compile: {type(e).__name__}: {e}"
        ) from None
