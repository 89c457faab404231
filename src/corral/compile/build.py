"""Compiling a :class:`~corral.compile.spec.ConstraintSpec` for a tokenizer: the one place every
host's constraint reaches the engine.

In:  a spec, a tokenizer, and where schema conversion runs (:mod:`corral.compile.converter`).
Out: a :class:`~corral.compile.constraint.Constraint`.

Errors are corral's own (:class:`corral.CompileError`, :class:`corral.SchemaError`,
:class:`corral.LimitExceeded`, :class:`corral.errors.ToolError`, ...); a schema error inside a
tool's parameters is reported against that tool (``tools[i].function.parameters`` and the pointer
inside them), never against the internal call schema.
"""

from __future__ import annotations

from typing import Any

from corral.compile.constraint import Constraint
from corral.compile.converter import IN_PROCESS, SchemaConverter
from corral.compile.spec import ConstraintSpec, choices_regex
from corral.engine import compile_grammar, compile_regex
from corral.errors import SchemaError, ToolError, UnsupportedSchemaError
from corral.grammar.tools import tool_pointer
from corral.schema import schema_grammar
from corral.tokenizer import Tokenizer

__all__ = ["compile_spec"]


def compile_spec(
    spec: ConstraintSpec, tokenizer: Tokenizer, converter: SchemaConverter | None = None
) -> Constraint:
    """Compile ``spec`` for ``tokenizer`` (uncached: see :func:`corral.compile.compile_constraint`
    for the cached path). Schema conversion runs in ``converter`` (default: this thread)."""
    conv = converter or IN_PROCESS
    if spec.thinking is not None or spec.kind in ("structural_tag", "text"):
        return _compile_composite(spec, tokenizer, conv)
    kind = spec.kind
    limits: dict[str, Any] = dict(spec.limits)
    size = spec.source_size()
    if kind in ("json_schema", "json", "json_object"):
        schema = spec.schema
        text, report = conv.convert(schema, spec.options)
        g = schema_grammar(schema, text, report, tokenizer, limits, spec.model)
        return Constraint(spec, g, size + len(text))
    if kind == "regex":
        return Constraint(spec, compile_regex(spec.payload, tokenizer, **limits), size)
    if kind == "grammar":
        syntax = spec.options.get("syntax", "gbnf")
        return Constraint(spec, compile_grammar(spec.payload, tokenizer, syntax=syntax, **limits), size)
    if kind == "choices":
        return Constraint(spec, compile_regex(choices_regex(spec.payload), tokenizer, **limits), size)
    assert kind == "tools"
    from corral.compile import compile_constraint
    from corral.compile.tool_calls import tools_grammar

    answer = spec.answer_schema
    readers = (
        ()
        if answer is None
        else (compile_constraint(ConstraintSpec.json_schema(answer, spec.options), tokenizer),)
    )
    if spec.payload is None and spec.tool_mode == "required":  # one plain-JSON call: the schema itself
        schema = spec.schema
        try:
            text, report = conv.convert(schema, spec.options)
        except SchemaError as e:
            raise _tool_error(e, spec) from None
        g = schema_grammar(schema, text, report, tokenizer, limits)
        return Constraint(spec, g, size + len(text))

    def convert(schema: Any, options: Any) -> str:
        try:
            return conv.convert(schema, options)[0]
        except SchemaError as e:
            raise _tool_error(e, spec) from None

    # A call in the spec's format, several, or (auto) prose / the answer: one grammar.
    text, start = tools_grammar(spec, tokenizer, convert, "corral-tc-")
    reply = compile_grammar(text, tokenizer, start=start, **limits)
    return Constraint(spec, reply, size + len(text), readers=readers)


def _compile_composite(spec: ConstraintSpec, tokenizer: Tokenizer, conv: SchemaConverter) -> Constraint:
    """A think block and/or structural tags: one grammar for the whole output
    (:mod:`corral.compile.thinking`), plus the answer's / each segment's own compiled
    constraint for reading outputs back (from the cache: compiled once per tokenizer)."""
    from corral.compile import compile_constraint
    from corral.compile.thinking import composite_text, content_spec

    def convert(schema: Any, options: Any) -> str:
        try:
            return conv.convert(schema, options)[0]
        except SchemaError as e:
            raise (_tool_error(e, spec) if spec.kind == "tools" else e) from None

    text, start, fmt = composite_text(spec, tokenizer, convert)
    engine_limits: dict[str, Any] = dict(spec.limits)
    g = compile_grammar(text, tokenizer, start=start, **engine_limits)
    base = spec.without_thinking()
    answer = None
    readers: tuple[Constraint | None, ...] = ()
    if base.kind == "structural_tag":
        subs = [content_spec(t["content"], base.options) for t in base.payload["tags"]]
        readers = tuple(None if s is None else compile_constraint(s, tokenizer) for s in subs)
    elif base.kind != "text" and base is not spec:
        answer = compile_constraint(base, tokenizer)
    return Constraint(spec, g, spec.source_size() + len(text), think=fmt, answer=answer, readers=readers)


def _tool_error(e: SchemaError, spec: ConstraintSpec) -> ToolError:
    loc = tool_pointer(e.pointer, spec.tools, spec.param or "tools")
    if loc is None:
        err = ToolError(f"tools: {e}", spec.param or "tools", e.pointer)
    else:
        where, pointer = loc
        err = ToolError(f"{where}: {e.message} (at {pointer})", where, pointer)
    err.unsupported = isinstance(e, UnsupportedSchemaError)
    return err
