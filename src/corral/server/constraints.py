"""What a request asks the output to match, as a cache key and a compile function.

A :class:`ConstraintSpec` is plain data taken from the request (kind, payload, options); its
:meth:`~ConstraintSpec.key` is the compile cache's content hash and :meth:`~ConstraintSpec.build`
(run in a compile thread) returns a :class:`ServerConstraint`: the compiled grammar plus how to
read the output (JSON value, text, or a tool call).

Schemas are compiled as :func:`corral.generate` compiles them: the ``json.dumps(indent=2)``
layout (every layout token forced, so jump-ahead skips it) and canonical string escapes.

A JSON Schema compiles in two stages: the schema → grammar-text conversion (pure Python) and the
engine's compile (C++, GIL released). The first runs in a :class:`SchemaConverter` *process*:
in the server's own process it would hold the GIL for up to seconds on a big schema, and the
scheduler thread — which takes the GIL back after every torch operation — would stall with it
(measured: a 3-pass request took 1.7 s instead of 0.3 s while a big schema converted).
"""

from __future__ import annotations

import json
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from corral import _core
from corral.engine import CompiledGrammar, _limits, _vocab, compile_grammar, compile_regex
from corral.errors import SchemaError
from corral.generation.constraint import choices_regex
from corral.grammar.json_schema import SchemaOptions, schema_to_grammar
from corral.schema import JsonSchemaGrammar, _check_regex, _validator
from corral.server.compile_cache import constraint_key
from corral.server.errors import APIError, error_from_exception
from corral.server.tools import AUTO_RULES, AUTO_START, Tool, call_schema, map_schema_error
from corral.tokenizer import Tokenizer

__all__ = [
    "ConstraintSpec",
    "ServerConstraint",
    "ToolCall",
    "json_object_spec",
    "schema_spec",
    "tools_spec",
]

SCHEMA_OPTIONS: dict[str, Any] = {"whitespace": "pretty", "escapes": "canonical"}


def _convert(schema: Any, options: dict[str, Any]) -> tuple[str, Any]:
    """Schema → (grammar text, report); runs in the converter process."""
    return schema_to_grammar(schema, SchemaOptions(**options), check_regex=_check_regex)


def _converter_init() -> None:
    try:  # the converter only ever competes with decoding for the CPU: let decoding win
        os.nice(19)
    except OSError:  # pragma: no cover - not permitted
        pass


class SchemaConverter:
    """Runs schema → grammar-text conversions in a separate low-priority process (see the
    module doc); in-process when ``workers`` is 0."""

    def __init__(self, workers: int = 1) -> None:
        self._pool: ProcessPoolExecutor | None = None
        if workers > 0:
            # spawn: a fork of a process that holds torch threads is not safe.
            ctx = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_converter_init)
            self._pool.submit(_convert, {}, {}).result()  # start it now, not on the first request

    def convert(self, schema: Any, options: dict[str, Any]) -> tuple[str, Any]:
        if self._pool is None:
            return _convert(schema, options)
        return self._pool.submit(_convert, schema, options).result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


_IN_PROCESS = SchemaConverter(0)


def _compile_schema(
    schema: Any, tokenizer: Tokenizer, options: dict[str, Any], converter: SchemaConverter
) -> JsonSchemaGrammar:
    """What :func:`corral.compile_json_schema` does, with the conversion in ``converter``."""
    text, report = converter.convert(schema, options)
    native = _core.compile_grammar(text, "root", _vocab(tokenizer), _limits({}))
    return JsonSchemaGrammar(native, tokenizer, schema, report, text)


@dataclass(frozen=True)
class ToolCall:
    """A decoded tool call."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ServerConstraint:
    """A compiled constraint and how to read what it produced.

    Attributes
    ----------
    kind : str
        "json_schema", "json_object", "regex", "grammar", "choices" or "tools".
    grammar : CompiledGrammar
        What the rows' matchers run.
    source_len : int
        Size of the constraint's source (the cache's memory estimate).
    tools : list of Tool
        The tools a "tools" constraint allows.
    tool_mode : str
        "required" (the output is a call) or "auto" (a call or plain text).
    """

    kind: str
    grammar: CompiledGrammar
    source_len: int = 0
    schema: Any = None
    tools: list[Tool] = field(default_factory=list)
    tool_mode: str = ""

    def read(self, text: str) -> tuple[Any, str | None]:
        """(value, error): the output as a JSON value / :class:`ToolCall` / text, and the
        validation error for keywords the grammar leaves to validation (None when valid)."""
        if self.kind == "tools":
            return self._read_call(text)
        if self.kind in ("json_schema", "json_object"):
            try:
                value = json.loads(text)
            except ValueError as e:
                return None, f"output is not JSON: {e}"
            if self.kind == "json_schema":
                # A slot binding's validator also checks each slot string against its values.
                slot_values = getattr(self.grammar, "slot_values", None)
                errors = [e.message for e in _validator(self.schema, slot_values).iter_errors(value)]
                if errors:
                    return value, "output violates the schema: " + "; ".join(errors[:3])
            return value, None
        return text, None

    def _read_call(self, text: str) -> tuple[Any, str | None]:
        if self.tool_mode == "auto" and not text.startswith("{"):
            return text, None
        try:
            obj = json.loads(text)
        except ValueError as e:
            return None, f"tool call is not JSON: {e}"
        tool = next((t for t in self.tools if t.name == obj.get("name")), None)
        if tool is None:  # impossible under the grammar; checked so a bug cannot pass silently
            return None, f"unknown tool {obj.get('name')!r}"
        call = ToolCall(tool.name, obj.get("arguments") or {})
        errors = [e.message for e in _validator(tool.parameters).iter_errors(call.arguments)]
        return call, ("arguments violate the parameters: " + "; ".join(errors[:3]) if errors else None)


@dataclass(frozen=True)
class ConstraintSpec:
    """A constraint as the request gave it (plain data), before compiling.

    ``param`` names the request field it came from (for error messages)."""

    kind: str
    payload: Any
    options: dict[str, Any] = field(default_factory=dict)
    param: str = ""
    tools: tuple[Tool, ...] = ()

    def key(self, tokenizer: Tokenizer) -> str:
        """The compile cache's content hash."""
        return constraint_key(self.kind, self.payload, self.options, tokenizer.hash)

    def build(self, tokenizer: Tokenizer, converter: SchemaConverter | None = None) -> ServerConstraint:
        """Compile (slow for big schemas: runs in a compile thread). Raises APIError 400 for a
        constraint that does not compile, with the schema pointer when there is one."""
        try:
            return self._build(tokenizer, converter or _IN_PROCESS)
        except SchemaError as e:
            if self.kind == "tools":
                raise map_schema_error(e, list(self.tools)) from None
            raise error_from_exception(e, self.param) from None
        except Exception as e:
            raise error_from_exception(e, self.param) from None

    def _build(self, tokenizer: Tokenizer, converter: SchemaConverter) -> ServerConstraint:
        kind, p = self.kind, self.payload
        size = len(json.dumps(p, default=str))
        if kind in ("json_schema", "json_object"):
            g = _compile_schema(p, tokenizer, self.options, converter)
            return ServerConstraint(kind, g, size + len(g.grammar_source), schema=p)
        if kind == "regex":
            return ServerConstraint(kind, compile_regex(p, tokenizer), size)
        if kind == "grammar":
            return ServerConstraint(kind, compile_grammar(p, tokenizer), size)
        if kind == "choices":
            return ServerConstraint(kind, compile_regex(choices_regex(p), tokenizer), size)
        if kind == "tools":
            tools = list(self.tools)
            schema = call_schema(tools)
            mode = self.options["mode"]
            opts = {k: v for k, v in self.options.items() if k != "mode"}
            if mode == "required":
                g = _compile_schema(schema, tokenizer, opts, converter)
                return ServerConstraint(kind, g, size + len(g.grammar_source), schema, tools, mode)
            # "auto": the call grammar's root, or plain text — one grammar, start rule AUTO_START.
            text, _ = converter.convert(schema, opts)
            auto = compile_grammar(text + AUTO_RULES, tokenizer, start=AUTO_START)
            return ServerConstraint(kind, auto, size + len(text), schema, tools, mode)
        raise APIError(400, f"unknown constraint kind {kind!r}", "invalid_request", self.param)


def schema_spec(schema: Any, strict: bool, param: str) -> ConstraintSpec:
    """The spec of a ``json_schema`` response format / completions extension."""
    if not isinstance(schema, (dict, bool)):
        raise APIError(400, f"{param} must be a JSON Schema object", "invalid_schema", param)
    return ConstraintSpec("json_schema", schema, {**SCHEMA_OPTIONS, "strict": bool(strict)}, param)


def json_object_spec(param: str) -> ConstraintSpec:
    """JSON mode: any JSON object."""
    return ConstraintSpec(
        "json_object", {"type": "object", "additionalProperties": True}, dict(SCHEMA_OPTIONS), param
    )


def tools_spec(tools: list[Tool], mode: str) -> ConstraintSpec:
    payload = [t.as_json() for t in tools]
    return ConstraintSpec("tools", payload, {**SCHEMA_OPTIONS, "mode": mode}, "tools", tuple(tools))
