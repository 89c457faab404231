"""Per-request constraints for vLLM, as a request states them: no vLLM import here.

In:  ``SamplingParams.extra_args`` (the OpenAI server fills it from ``vllm_xargs``):

* nested (offline ``LLM``): ``{"corral": {"json_schema": {...}}}``, or ``"regex"``,
  ``"grammar"``, ``"choices"`` (list of str), ``"json": true``, ``"tools"`` (OpenAI tool objects)
  with ``"tool_choice"``, ``"structural_tags"`` (with optional ``"triggers"``); optional
  ``"schema_options"``, ``"limits"`` (engine limits), ``"slots"`` (values for the constraint's
  slots, bound per request without recompiling) and ``"thinking"`` (a think block before the
  answer: a budget in tokens, true, or ``{"budget_tokens", "open", "close", "optional"}``);
* flat (``vllm_xargs`` allows only strings, numbers and lists of them): ``corral_json_schema``
  (JSON text), ``corral_regex``, ``corral_grammar``, ``corral_choices``, ``corral_json``,
  ``corral_tools``, ``corral_tool_choice``, ``corral_structural_tags``, ``corral_triggers``,
  ``corral_thinking``, ``corral_schema_options``, ``corral_limits``, ``corral_slots`` (objects
  as JSON text), ``corral_tool_format`` and ``corral_parallel_tool_calls`` (tools in a model
  family's call format, several calls per reply: :mod:`corral.grammar.tool_formats`).

Out: a :class:`RequestConstraint` — the :class:`corral.compile.ConstraintSpec` (built by the same
rules as ``corral.generate``: :func:`corral.compile.spec_from_args`) and the slot values — or None
for an unconstrained request; malformed arguments raise ``ValueError`` with a message meant for
the client (vLLM turns it into an HTTP 400). Compiling goes through corral's one compile cache.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.compile import Constraint, ConstraintSpec, SchemaConverter, compile_constraint, spec_from_args
from corral.compile.vllm_fields import CONSTRAINT_FIELDS, OPTION_FIELDS, VLLMFieldError, constraint_args
from corral.errors import CorralError, LimitExceeded
from corral.grammar import bounded_json
from corral.tokenizer import Tokenizer

__all__ = [
    "BACKEND_NAME",
    "KINDS",
    "MARKER",
    "OPTION_FIELDS",
    "RequestConstraint",
    "bind_request",
    "check_spec",
    "compile_spec",
    "corral_args",
    "from_structured_outputs",
    "parse_request",
    "request_from_key",
    "request_spec",
    "routed_grammar",
]

BACKEND_NAME = "corral"
"""The name ``--structured-outputs-config`` selects corral's structured-output backend by."""

KINDS = ("json_schema", "regex", "grammar", "choices", "json", "json_object", "tools", "structural_tags")
"""The constraint kinds a request may give (exactly one)."""

_OPTIONS = (
    "schema_options",
    "limits",
    "slots",
    "tool_choice",
    "thinking",
    "triggers",
    "tool_format",
    "parallel_tool_calls",
)
_JSON_TEXT = (
    "json_schema",
    "schema_options",
    "limits",
    "slots",
    "tools",
    "tool_choice",
    "structural_tags",
    "thinking",
    "triggers",
    "parallel_tool_calls",
)


@dataclass(frozen=True)
class RequestConstraint:
    """One request's constraint: the spec, and the values for its slots (None: no slots)."""

    spec: ConstraintSpec
    slots: dict[str, list[str]] | None = None

    def describe(self) -> str:
        return self.spec.describe()


def _json_arg(name: str, value: Any) -> Any:
    """A flat argument's value: JSON text decoded (a tool_choice may also be a plain word)."""
    if not isinstance(value, str) or (name == "tool_choice" and not value.lstrip().startswith("{")):
        return value
    try:
        return bounded_json.loads(value, 900, "max_arg_depth", name)
    except LimitExceeded as e:  # vLLM reports ValueError as a bad request
        raise ValueError(f"corral: {e}") from None
    except ValueError as e:
        raise ValueError(f"corral: {name} is not valid JSON text: {e}") from None


def corral_args(extra_args: Mapping[str, Any] | None) -> dict[str, Any]:
    """The corral arguments of a request, nested and flat forms merged (flat values decoded)."""
    if not extra_args:
        return {}
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
            args[name] = _json_arg(name, value) if name in _JSON_TEXT else value
    return args


def parse_request(extra_args: Mapping[str, Any] | None) -> RequestConstraint | None:
    """The constraint a request asks for (None: not constrained by corral).

    Raises ValueError for a malformed request: an unknown key, two constraints at once, or a
    value of the wrong type.
    """
    args = corral_args(extra_args)
    if not args:
        return None
    unknown = sorted(set(args) - set(KINDS) - set(_OPTIONS))
    if unknown:
        raise ValueError(
            f"corral: unknown argument(s) {unknown}; expected one of {list(KINDS)} "
            f"and optionally {list(_OPTIONS)}"
        )
    slots = args.pop("slots", None)
    if "json_schema" in args:
        args["json_schema"] = _json_arg("json_schema", args["json_schema"])
    if isinstance(args.get("choices"), str):
        args["choices"] = [args["choices"]]  # a single choice given flat
    try:
        spec = spec_from_args(args, where="corral: ")
    except (TypeError, CorralError) as e:  # SchemaError, ToolError: all the client's doing
        raise ValueError(f"corral: {e}" if not str(e).startswith("corral: ") else str(e)) from None
    if spec is None:
        if slots:
            raise ValueError("corral: slots given without a constraint")
        return None
    return RequestConstraint(spec, _slots(slots))


def _slots(raw: Any) -> dict[str, list[str]] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(x, str) for x in v)
        for k, v in raw.items()
    ):
        raise ValueError("corral: slots must be an object mapping slot names to lists of strings")
    return {k: list(v) for k, v in raw.items()}


def request_spec(extra_args: Mapping[str, Any] | None) -> ConstraintSpec | None:
    """The spec of :func:`parse_request` (None: not constrained by corral)."""
    r = parse_request(extra_args)
    return None if r is None else r.spec


MARKER = "\x00corral\n"
"""How a request's corral arguments ride in vLLM's ``structured_outputs.grammar`` to the
structured-output backend (whose ``compile_grammar`` sees only a kind and one string): the marker,
then the arguments as JSON. A NUL byte starts no GBNF or Lark grammar, so nothing a client
writes as a grammar is read this way by accident; and what is read this way is checked like
any other corral request."""


def from_structured_outputs(so: Any) -> dict[str, Any] | None:
    """corral's ``extra_args["corral"]`` for a vLLM ``StructuredOutputsParams`` (what
    ``response_format`` and ``structured_outputs`` requests become), or None when it sets no
    constraint. Per-request options (``disable_any_whitespace``, ``whitespace_pattern``,
    ``disable_additional_properties``) become schema options; one corral cannot follow is a
    ValueError naming it (:mod:`corral.compile.vllm_fields`)."""
    if so is None:
        return None
    grammar = getattr(so, "grammar", None)
    if isinstance(grammar, str) and grammar.startswith(MARKER):
        return _routed(grammar)[0]
    fields = {f: getattr(so, f, None) for f in (*CONSTRAINT_FIELDS, *OPTION_FIELDS)}
    try:
        return constraint_args(fields)
    except VLLMFieldError as e:
        raise ValueError(f"corral: {e}") from None


_KEY_FIELD = {
    "JSON": "json",
    "JSON_OBJECT": "json_object",
    "REGEX": "regex",
    "CHOICE": "choice",
    "GRAMMAR": "grammar",
    "STRUCTURAL_TAG": "structural_tag",
}


def request_from_key(kind: str, text: str) -> tuple[RequestConstraint, int | None]:
    """The request behind a vLLM structured-output key (``StructuredOutputOptions`` member name,
    grammar string), as the backend's ``compile_grammar`` receives it, and the request's
    ``max_tokens`` when the marker form carries it (None otherwise). Raises ValueError for a key
    corral does not know or arguments that do not parse."""
    field = _KEY_FIELD.get(kind)
    if field is None:
        raise ValueError(f"corral: unknown structured-output kind {kind!r}")
    max_tokens: int | None = None
    args: Mapping[str, Any] | None
    if field == "grammar" and text.startswith(MARKER):
        args, max_tokens = _routed(text)
    else:
        value: Any = True if field == "json_object" else text
        try:
            args = constraint_args({field: value})
        except VLLMFieldError as e:
            raise ValueError(f"corral: {e}") from None
    request = parse_request({"corral": dict(args or {})})
    if request is None:
        raise ValueError(f"corral: the {kind} structured-output request names no constraint")
    return request, max_tokens


def _routed(text: str) -> tuple[dict[str, Any], int | None]:
    """(corral arguments, max_tokens) of a routed grammar string (:func:`routed_grammar`)."""
    routed = _json_arg("structured_outputs.grammar", text[len(MARKER) :])
    if not isinstance(routed, Mapping) or not isinstance(routed.get("corral"), Mapping):
        raise ValueError("corral: the routed request is not an object with corral arguments")
    budget = routed.get("max_tokens")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
        raise ValueError(
            f"corral: the routed request's max_tokens must be a positive integer, got {budget!r}"
        )
    return dict(routed["corral"]), budget


def routed_grammar(args: Mapping[str, Any], max_tokens: int | None) -> str:
    """The ``structured_outputs.grammar`` text that carries a request's corral arguments and its
    budget to the backend (:data:`MARKER`). Raises ValueError when the arguments are not JSON
    data (a Pydantic class given offline: pass its ``model_json_schema()``)."""
    try:
        return MARKER + json.dumps({"corral": dict(args), "max_tokens": max_tokens})
    except (TypeError, ValueError) as e:
        raise ValueError(f"corral: the request's corral arguments must be JSON data: {e}") from None


def compile_spec(
    spec: ConstraintSpec | RequestConstraint, tokenizer: Tokenizer, converter: SchemaConverter | None = None
) -> Constraint:
    """Compile (or fetch from corral's compile cache) a request's constraint for a tokenizer, its
    slots bound; schema conversion runs in ``converter`` (default: this thread). Raises corral's
    errors (CompileError, LimitExceeded, SchemaError, SlotError, ...) for constraints that do not
    compile or bind."""
    if isinstance(spec, RequestConstraint):
        return bind_request(compile_constraint(spec.spec, tokenizer, converter=converter), spec)
    return compile_constraint(spec, tokenizer, converter=converter)


def bind_request(compiled: Constraint, request: RequestConstraint) -> Constraint:
    """A request's compiled constraint with its slot values bound (SlotError when they do not
    fit; a constraint with slots and no values is refused the same way)."""
    return compiled.bind(request.slots) if request.slots is not None or compiled.slot_names else compiled


_BYTE_TOKENIZER: Tokenizer | None = None


def check_spec(spec: ConstraintSpec | RequestConstraint, converter: SchemaConverter | None = None) -> None:
    """Compile a request's constraint against a 256-byte vocabulary and bind its slots: catches
    syntax errors, unsupported schema keywords, every compile limit and bad slot values before a
    request is admitted, where no model tokenizer is at hand (vLLM's ``validate_params`` runs in
    the API process); schema conversion runs in ``converter`` (default: this thread). Raises
    ValueError with corral's message."""
    global _BYTE_TOKENIZER
    if _BYTE_TOKENIZER is None:
        _BYTE_TOKENIZER = Tokenizer.from_tokens(
            [bytes([b]) for b in range(256)] + [b"<eos>"], special_ids=[256], eos_ids=[256]
        )
    kind = spec.spec.kind if isinstance(spec, RequestConstraint) else spec.kind
    try:
        compile_spec(spec, _BYTE_TOKENIZER, converter)
    except ValueError as e:
        raise ValueError(f"corral: the {kind} constraint does not compile: {e}") from None
    except Exception as e:  # corral's CompileError / LimitExceeded / SchemaError and friends
        raise ValueError(f"corral: the {kind} constraint does not compile: {type(e).__name__}: {e}") from None
