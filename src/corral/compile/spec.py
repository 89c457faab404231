"""What the output must match, as plain data: the one constraint type every host builds.

In:  a constraint as a host receives it — ``corral.generate`` keyword arguments, an OpenAI request
     (``response_format``, ``tools``, corral's extensions; parsed by :mod:`corral.server.protocol`),
     vLLM ``extra_args`` / ``structured_outputs`` (parsed by :mod:`corral.vllm`).
Out: a :class:`ConstraintSpec`: the kind, the payload as plain data, the schema options and engine
     limits with the defaults applied, and a content key for the compile cache.

Invariants:
* Defaults are defined here once (:data:`SCHEMA_DEFAULTS`), and the "exactly one constraint" rule
  lives in :func:`spec_from_args`; hosts never re-implement either.
* The key preserves everything that changes the grammar. In particular *property order*: declared
  properties are generated in schema order, so ``{"answer", "reasoning"}`` and ``{"reasoning",
  "answer"}`` are different constraints (the payload is hashed in its own key order; only the
  option and limit names, which do not change the grammar by their order, are sorted).
* A spec never holds compiled state; compiling is :func:`corral.compile.compile_spec`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.errors import SchemaError
from corral.grammar.tools import TOOL_CHOICES, Tool, tools_from
from corral.schema import schema_of

__all__ = [
    "KINDS",
    "SCHEMA_DEFAULTS",
    "ConstraintSpec",
    "choices_regex",
    "spec_from_args",
    "validate_choices",
]

KINDS = (
    "json_schema",
    "json",
    "json_object",
    "regex",
    "grammar",
    "choices",
    "tools",
    "structural_tag",
    "text",
)
"""Constraint kinds. ``json``: any JSON value; ``json_object``: any JSON object (OpenAI's JSON
mode); ``tools``: one call of one of the tools (``tool_mode="required"``) or plain text or a call
(``"auto"``); ``structural_tag``: free text in which triggers open constrained segments
(:mod:`corral.compile.thinking`); ``text``: any text (the answer of a think block with no other
constraint). Any kind may be preceded by a think block (``ConstraintSpec.thinking``)."""

SCHEMA_DEFAULTS: dict[str, Any] = {"whitespace": "pretty", "escapes": "canonical"}
"""Schema options every generating host uses unless the request overrides them: the
``json.dumps(indent=2)`` layout small instruct models write anyway, fully dictated by the grammar
(so jump-ahead skips every layout token and the model cannot pad with whitespace), and one
spelling per string (``json.dumps(ensure_ascii=False)``), so keys are forced byte for byte and the
model cannot drift into ``\\u0072``-style spellings. ``corral.compile_json_schema`` itself keeps
the permissive engine defaults (flexible whitespace, every escape)."""

_JSON_KINDS = ("json_schema", "json", "json_object", "tools", "structural_tag")
_ANY_OBJECT = {"type": "object", "additionalProperties": True}


@dataclass(frozen=True, eq=False)
class ConstraintSpec:
    """One constraint, as plain data, before compiling.

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`.
    payload : Any
        The JSON Schema (dict/bool, key order kept), the regex or grammar text, the choices as a
        tuple, or None (``json``, ``json_object``, ``tools``: see ``tools``).
    options : dict
        Schema-converter options (``whitespace``, ``extra_properties``, budgets, ...) for the
        JSON kinds, with :data:`SCHEMA_DEFAULTS` applied; empty otherwise.
    limits : dict
        Engine limits (see ``corral.DEFAULT_LIMITS``) that differ from the defaults.
    tools : tuple of Tool
        The tools of a ``tools`` constraint.
    tool_mode : str
        ``"required"`` or ``"auto"`` for ``tools``; "" otherwise.
    thinking : Mapping or None
        A think block before the answer (:func:`corral.compile.thinking.thinking_of`):
        ``budget_tokens`` (int or None), ``open`` / ``close`` (marker strings; None: the model's
        own, chosen at compile time from the vocabulary) and ``optional`` (bool).
    model : Any
        The Pydantic model / type the schema came from (outputs are parsed into it); not part of
        the key — equal schemas share one compiled grammar.
    param : str
        Where the constraint came from (a request field or argument name), for error messages.
    """

    kind: str
    payload: Any = None
    options: Mapping[str, Any] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)
    tools: tuple[Tool, ...] = ()
    tool_mode: str = ""
    thinking: Mapping[str, Any] | None = None
    model: Any = None
    param: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown constraint kind {self.kind!r}; expected one of {list(KINDS)}")

    # ------------------------------------------------------------------ constructors

    @classmethod
    def json_schema(
        cls,
        schema: Any,
        options: Mapping[str, Any] | None = None,
        limits: Mapping[str, int] | None = None,
        param: str = "schema",
    ) -> ConstraintSpec:
        """A JSON Schema given as a dict/bool, JSON text or a Pydantic model / type."""
        raw, model = schema_of(schema)
        if not isinstance(raw, (dict, bool)):
            raise SchemaError(f"a JSON Schema is an object or a boolean, got {type(raw).__name__}", "#")
        return cls("json_schema", raw, _options(options), _limits(limits), model=model, param=param)

    @classmethod
    def json_value(cls, options: Mapping[str, Any] | None = None, param: str = "json") -> ConstraintSpec:
        """Any JSON value (RFC 8259)."""
        return cls("json", None, _options(options), param=param)

    @classmethod
    def json_object(
        cls, options: Mapping[str, Any] | None = None, param: str = "response_format"
    ) -> ConstraintSpec:
        """Any JSON object (OpenAI's ``json_object`` response format)."""
        return cls("json_object", None, _options(options), param=param)

    @classmethod
    def regex(
        cls, pattern: Any, limits: Mapping[str, int] | None = None, param: str = "regex"
    ) -> ConstraintSpec:
        if not isinstance(pattern, str):
            raise TypeError(f"{param} must be a string, got {type(pattern).__name__}")
        return cls("regex", pattern, limits=_limits(limits), param=param)

    @classmethod
    def grammar(
        cls,
        text: Any,
        limits: Mapping[str, int] | None = None,
        param: str = "grammar",
        syntax: str = "auto",
    ) -> ConstraintSpec:
        """A grammar: GBNF with ``/regex/`` terminals, or Lark (``syntax="lark"``; ``"auto"``,
        the default, tells them apart: see :func:`corral.grammar.lark.grammar_syntax`)."""
        if not isinstance(text, str):
            raise TypeError(
                f"{param} must be a string (GBNF with /regex/ terminals, or Lark), got {type(text).__name__}"
            )
        from corral.grammar.lark import grammar_syntax

        chosen = grammar_syntax(text) if syntax == "auto" else syntax
        if chosen not in ("gbnf", "lark"):
            raise ValueError(f"syntax must be 'gbnf', 'lark' or 'auto', got {syntax!r}")
        options = {"syntax": "lark"} if chosen == "lark" else {}  # GBNF keys stay as they were
        return cls("grammar", text, options=options, limits=_limits(limits), param=param)

    @classmethod
    def choices(cls, values: Any, param: str = "choices") -> ConstraintSpec:
        validate_choices(values)
        return cls("choices", tuple(values), param=param)

    @classmethod
    def tool_calls(
        cls,
        tools: Any,
        mode: str = "required",
        options: Mapping[str, Any] | None = None,
        param: str = "tools",
        *,
        tool_format: str = "json",
        parallel: bool = False,
        answer: Any = None,
    ) -> ConstraintSpec:
        """One call of one of ``tools`` (``mode="required"``), or a call or plain text
        (``"auto"``). ``tools`` are :class:`Tool` records or anything
        :func:`corral.grammar.tools.tools_from` takes. ``tool_format``: the call syntax (a
        :data:`corral.grammar.tool_formats.FORMATS` name); ``parallel``: one or more calls;
        ``answer``: under ``auto``, a JSON Schema the reply must match when it is not a call."""
        from corral.grammar.tool_formats import get_format

        if mode not in ("required", "auto"):
            raise ValueError(f'tool mode must be "required" or "auto", got {mode!r}')
        fmt = get_format(tool_format)
        if not isinstance(parallel, bool):
            raise TypeError(f"parallel tool calls must be true or false, got {parallel!r}")
        if isinstance(tools, Sequence) and tools and all(isinstance(t, Tool) for t in tools):
            parsed = list(tools)
        else:
            parsed = tools_from(tools, param)
        if answer is not None:
            answer, _model = schema_of(answer)
            if not isinstance(answer, (dict, bool)):
                raise SchemaError("the answer of a tools constraint must be a JSON Schema", "#")
            if mode != "auto":
                raise ValueError('an answer schema next to tools needs tool_choice "auto"')
        # The call syntax, as data; None for corral's original single plain-JSON call.
        payload = (
            None
            if fmt.name == "json" and not parallel and answer is None
            else {"format": fmt.name, "parallel": parallel, "answer": answer}
        )
        opts = {**fmt.options, **(options or {})}
        return cls("tools", payload, _options(opts), tools=tuple(parsed), tool_mode=mode, param=param)

    @property
    def tool_format(self) -> str:
        """The call syntax of a ``tools`` constraint ("" for other kinds)."""
        if self.kind != "tools":
            return ""
        return str(self.payload["format"]) if self.payload else "json"

    @property
    def parallel(self) -> bool:
        """Whether a ``tools`` constraint allows several calls in one reply."""
        return bool(self.payload and self.payload["parallel"])

    @property
    def answer_schema(self) -> Any:
        """A ``tools`` constraint's answer schema (``auto`` with a response format), else None."""
        return self.payload["answer"] if self.kind == "tools" and self.payload else None

    @classmethod
    def structural_tag(
        cls, value: Any, options: Mapping[str, Any] | None = None, param: str = "structural_tags"
    ) -> ConstraintSpec:
        """Free text with tagged segments (see :func:`corral.compile.thinking.structural_of` for
        the accepted shapes: a list of tags, or XGrammar's / vLLM's ``structural_tag``)."""
        from corral.compile.thinking import structural_of

        return cls("structural_tag", structural_of(value), _options(options), param=param)

    @classmethod
    def text(cls, param: str = "thinking") -> ConstraintSpec:
        """Any text (the answer of a think block that constrains nothing else)."""
        return cls("text", None, param=param)

    def with_thinking(self, thinking: Any) -> ConstraintSpec:
        """The same constraint after a think block (``thinking``: budget in tokens, True, or a
        dict; see :func:`corral.compile.thinking.thinking_of`); None/False: none."""
        from corral.compile.thinking import thinking_of

        return dataclasses.replace(self, thinking=thinking_of(thinking))

    def without_thinking(self) -> ConstraintSpec:
        """The answer's own constraint (the think block removed)."""
        return dataclasses.replace(self, thinking=None) if self.thinking is not None else self

    # ------------------------------------------------------------------ identity

    def content(self) -> list[Any]:
        """Everything that changes the compiled grammar, as plain data (order-preserving)."""
        payload = self.payload
        if self.kind == "tools":
            payload = [t.as_json() for t in self.tools] + ([self.payload] if self.payload else [])
        if isinstance(payload, tuple):
            payload = list(payload)
        content = [
            self.kind,
            payload,
            sorted(self.options.items()),
            sorted(self.limits.items()),
            self.tool_mode,
        ]
        if self.thinking is not None:
            content.append(sorted(self.thinking.items()))
        return content

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConstraintSpec):
            return NotImplemented
        return self._identity() == other._identity() and self.model is other.model

    def __hash__(self) -> int:
        return hash(self._identity())

    def _identity(self) -> str:
        return json.dumps(self.content(), ensure_ascii=False, separators=(",", ":"), default=str)

    def key(self, tokenizer_hash: str) -> str:
        """The compile cache's content hash for one tokenizer (SHA-256, hex)."""
        text = self._identity()
        return hashlib.sha256((text + "\0" + tokenizer_hash).encode("utf-8", "surrogatepass")).hexdigest()

    def source_size(self) -> int:
        """Bytes of the constraint's source (the cache's memory estimate starts from it)."""
        return len(json.dumps(self.content(), default=str))

    def with_limits(self, limits: Mapping[str, int]) -> ConstraintSpec:
        """The same constraint with these engine limits (on top of its own)."""
        if not limits:
            return self
        return dataclasses.replace(self, limits={**self.limits, **_limits(limits)})

    def with_options(self, **options: Any) -> ConstraintSpec:
        """The same constraint with more schema options (JSON kinds only)."""
        if self.kind not in _JSON_KINDS:
            raise ValueError(f"schema options apply to {list(_JSON_KINDS)}, not {self.kind}")
        return dataclasses.replace(self, options={**self.options, **options})

    @property
    def schema(self) -> Any:
        """The JSON Schema a JSON kind compiles (None for the other kinds)."""
        if self.kind == "json_schema":
            return self.payload
        if self.kind == "json":
            return {}
        if self.kind == "json_object":
            return _ANY_OBJECT
        if self.kind == "tools":
            from corral.grammar.tool_formats import call_schema_for, get_format

            return call_schema_for(self.tools, get_format(self.tool_format))
        return None

    def describe(self) -> str:
        """A short description for logs and error messages."""
        text = json.dumps(self.content()[1], ensure_ascii=False, default=str)
        return f"{self.kind}({text[:60]}{'...' if len(text) > 60 else ''})"

    def __repr__(self) -> str:
        return f"ConstraintSpec({self.describe()})"


# ---------------------------------------------------------------------- from arguments

_ALIASES = {"schema": "json_schema", "json_mode": "json", "structural_tag": "structural_tags"}
# The constraint arguments (``structural_tags`` builds the ``structural_tag`` kind).
_ARG_KINDS = ("json_schema", "json", "json_object", "regex", "grammar", "choices", "tools", "structural_tags")


def spec_from_args(
    args: Mapping[str, Any],
    *,
    where: str = "",
) -> ConstraintSpec | None:
    """The one constraint named in ``args`` (None when none is: free generation).

    ``args`` may hold one of ``json_schema`` (alias ``schema``), ``regex``, ``grammar``,
    ``choices``, ``json`` (true), ``json_object`` (true), ``tools`` (with optional
    ``tool_choice``, ``tool_format``, ``parallel_tool_calls``; with ``json_schema`` too under
    ``tool_choice="auto"``: a call or an answer valid for the schema) or ``structural_tags``
    (with optional ``triggers``), plus ``schema_options``, ``limits`` and ``thinking`` (a think
    block before the answer; alone, the answer is free text). Values that are None or False do
    not count. ``where`` prefixes error messages (``"corral: "`` for vLLM).

    Raises ValueError/TypeError for two constraints at once, options without a constraint they
    apply to, or values of the wrong type; :class:`corral.SchemaError` for schema text that is not
    JSON; :class:`corral.errors.ToolError` for bad tools.
    """
    norm: dict[str, Any] = {}
    for k, v in args.items():
        name = _ALIASES.get(k, k)
        if name in norm and norm[name] is not None:
            raise ValueError(f"{where}{name} is given twice")
        norm[name] = v
    extras = {
        "schema_options",
        "limits",
        "tool_choice",
        "thinking",
        "triggers",
        "tool_format",
        "parallel_tool_calls",
    }
    unknown = sorted(set(norm) - set(_ARG_KINDS) - extras)
    if unknown:
        raise ValueError(
            f"{where}unknown argument(s) {unknown}; expected one of {list(_ARG_KINDS)} "
            "and optionally schema_options, limits, tool_choice, thinking, triggers"
        )
    if norm.get("triggers") is not None:
        if norm.get("structural_tags") is None:
            raise ValueError(f"{where}triggers given without structural_tags")
        tags = norm["structural_tags"]
        norm["structural_tags"] = {"structures": tags, "triggers": norm["triggers"]}
    from corral.compile.thinking import thinking_of

    try:
        thinking = thinking_of(norm.get("thinking"))
    except (TypeError, ValueError) as e:
        raise type(e)(f"{where}{e}") from None
    given = [k for k in _ARG_KINDS if norm.get(k) is not None and norm.get(k) is not False]
    answer = None
    if "tools" in given and len(given) == 2 and given[0] in ("json_schema", "json_object"):
        # tools with a schema under tool_choice "auto": a call, or an answer valid for the schema
        answer = norm["json_schema"] if given[0] == "json_schema" else _ANY_OBJECT
        if norm.get("tool_choice") not in (None, "auto"):
            raise ValueError(f'{where}tools with {given[0]} need tool_choice "auto"')
        given = ["tools"]
    if len(given) > 1:
        raise ValueError(f"{where}give one constraint, not {' and '.join(given)}")
    options = norm.get("schema_options") or {}
    if not isinstance(options, Mapping):
        raise TypeError(f"{where}schema_options must be an object/dict, got {type(options).__name__}")
    limits = norm.get("limits") or {}
    if not isinstance(limits, Mapping):
        raise TypeError(f"{where}limits must be an object/dict, got {type(limits).__name__}")
    if not given and thinking is not None:
        try:
            return ConstraintSpec.text().with_limits(limits).with_thinking(thinking)
        except (TypeError, ValueError) as e:
            raise type(e)(f"{where}{e}") from None
    if not given:
        for extra in ("schema_options", "limits", "tool_choice"):
            if norm.get(extra):
                raise ValueError(f"{where}{extra} given without a constraint")
        return None
    kind = given[0]
    value = norm[kind]
    if norm.get("schema_options") and kind not in (*_JSON_KINDS, "structural_tags"):
        raise ValueError(f"{where}schema_options apply to json_schema, json and tools, not {kind}")
    for extra in ("tool_choice", "tool_format", "parallel_tool_calls"):
        if norm.get(extra) is not None and kind != "tools":
            raise ValueError(f"{where}{extra} given without tools")
    tool_args = {
        "tool_format": norm.get("tool_format") or "json",
        "parallel": norm.get("parallel_tool_calls") or False,
        "answer": answer,
    }
    try:
        spec = _spec_of(kind, value, norm.get("tool_choice"), options, tool_args)
        if thinking is not None:
            spec = spec.with_thinking(thinking)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{where}{e}") from None
    if limits:
        spec = dataclasses.replace(spec, limits=_limits(limits))
    return spec


def _spec_of(
    kind: str,
    value: Any,
    tool_choice: Any,
    options: Mapping[str, Any],
    tool_args: Mapping[str, Any] | None = None,
) -> ConstraintSpec:
    if kind == "json_schema":
        return ConstraintSpec.json_schema(value, options)
    if kind in ("json", "json_object"):
        if value is not True and value not in (1, "true", "1"):
            raise ValueError(f"{kind} must be true, got {value!r}")
        return ConstraintSpec.json_value(options) if kind == "json" else ConstraintSpec.json_object(options)
    if kind == "regex":
        return ConstraintSpec.regex(value)
    if kind == "grammar":
        return ConstraintSpec.grammar(value)
    if kind == "choices":
        return ConstraintSpec.choices([value] if isinstance(value, str) else value)
    if kind == "structural_tags":
        return ConstraintSpec.structural_tag(value, options)
    mode = "auto" if tool_choice is None else tool_choice
    spec_tools = tools_from(value)
    name = None
    if isinstance(mode, Mapping):  # {"type": "function", "function": {"name": ...}} or {"name": ...}
        fn = mode.get("function", mode)
        name = fn.get("name") if isinstance(fn, Mapping) else None
        if not isinstance(name, str):
            raise ValueError("tool_choice names no function")
        mode = "required"
    elif isinstance(mode, str) and mode not in TOOL_CHOICES:
        name, mode = mode, "required"  # a tool's name
    if mode not in TOOL_CHOICES:
        raise ValueError(f'tool_choice must be "none", "auto", "required" or a tool name, got {mode!r}')
    if mode == "none":
        raise ValueError('tool_choice "none" means no tool call: leave tools out instead')
    if name is not None:
        chosen = [t for t in spec_tools if t.name == name]
        if not chosen:
            raise ValueError(f"tool_choice names {name!r}, which is not among the tools")
        spec_tools = chosen
    return ConstraintSpec.tool_calls(spec_tools, mode, options, **(tool_args or {}))


# ---------------------------------------------------------------------- helpers


def _options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    if options is not None and not isinstance(options, Mapping):
        raise TypeError(f"schema options must be a dict, got {type(options).__name__}")
    from corral.grammar.json_schema import SchemaOptions

    known = {f.name for f in dataclasses.fields(SchemaOptions)}
    merged = {**SCHEMA_DEFAULTS, **(options or {})}
    unknown = sorted(set(merged) - known)
    if unknown:
        raise TypeError(f"unknown schema option(s) {unknown}; valid options: {sorted(known)}")
    SchemaOptions(**merged)  # values checked now, not in a compile thread
    return merged


def _limits(limits: Mapping[str, int] | None) -> dict[str, int]:
    if not limits:
        return {}
    from corral.engine import _limits as check

    return check(dict(limits))


def validate_choices(choices: Any, what: str = "choice") -> None:
    """Check a closed set of strings: a non-empty list of distinct, non-empty strings."""
    if isinstance(choices, str) or not isinstance(choices, Sequence):
        raise TypeError(f"{what}s must be a list of strings")
    if not choices:
        raise ValueError(f"the {what} set is empty: give at least one")
    seen: set[str] = set()
    for i, c in enumerate(choices):
        if not isinstance(c, str):
            raise TypeError(f"{what} {i} is {type(c).__name__}, not a string")
        if not c:
            raise ValueError(f"{what} {i} is the empty string")
        if c in seen:
            raise ValueError(f"{what} {c!r} is listed twice")
        seen.add(c)


def choices_regex(choices: Sequence[str]) -> str:
    """A regex matching exactly one of ``choices`` (validated: non-empty, distinct strings)."""
    validate_choices(choices)
    return "|".join(re.escape(c) for c in choices)
