"""A compiled constraint and the one way to read an output back.

In:  a :class:`~corral.compile.spec.ConstraintSpec` and the grammar compiled for it.
Out: :class:`Constraint`: what matchers run (``grammar``) plus :meth:`Constraint.read` — the
     output as a value (Pydantic instance, JSON value, :class:`~corral.grammar.tools.ToolCall`,
     chosen string or text) and the validation error, if any.

Invariant: validators are built once per compiled grammar (per slot binding) and reused by every
read; a read never raises for an output the constraint produced — failures come back as the error
string (``parse`` raises :class:`corral.OutputValidationError` for callers that want that).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.compile.spec import ConstraintSpec
from corral.compile.thinking import ThinkFormat, read_segments, split_reasoning
from corral.engine import CompiledGrammar
from corral.errors import LimitExceeded
from corral.grammar import bounded_json
from corral.grammar.tools import Tool
from corral.schema import JsonSchemaGrammar, OutputValidationError

# Deepest output read back as JSON (nesting levels): below Python's own recursion limit, past
# which json.loads would raise RecursionError.
_MAX_OUTPUT_DEPTH = 900

__all__ = ["Constraint"]


@dataclass(frozen=True, eq=False)
class Constraint:
    """A constraint compiled for one tokenizer.

    Attributes
    ----------
    spec : ConstraintSpec
        What was compiled.
    grammar : CompiledGrammar
        What the rows' matchers run (a :class:`~corral.JsonSchemaGrammar` for schemas).
    source_len : int
        Size of the constraint's source and grammar text (the compile cache's memory estimate).
    think : ThinkFormat or None
        The think block (markers resolved for the vocabulary, budget), when the spec has one:
        hosts give it to :class:`corral.runtime.thinking.ThinkBudget`.
    answer : Constraint or None
        The answer's own constraint (reads the answer after a think block).
    readers : tuple
        For ``structural_tag``: each tag's content constraint (None: text or a constant).
    """

    spec: ConstraintSpec
    grammar: CompiledGrammar
    source_len: int = 0
    think: ThinkFormat | None = None
    answer: Constraint | None = None
    readers: tuple[Constraint | None, ...] = ()
    _validators: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def choices(self) -> tuple[str, ...] | None:
        return tuple(self.spec.payload) if self.spec.kind == "choices" else None

    @property
    def tools(self) -> list[Tool]:
        return list(self.spec.tools)

    @property
    def tool_mode(self) -> str:
        return self.spec.tool_mode

    @property
    def schema(self) -> Any:
        return self.spec.schema

    @classmethod
    def from_grammar(cls, grammar: CompiledGrammar) -> Constraint:
        """Wrap a grammar compiled by the caller (``generate(grammar=compiled)``)."""
        if isinstance(grammar, JsonSchemaGrammar):
            spec = ConstraintSpec("json_schema", grammar.schema, model=grammar.model)
        else:
            spec = ConstraintSpec("grammar", grammar.grammar_text)
        return cls(spec, grammar)

    def with_model(self, model: Any) -> Constraint:
        """The same compiled constraint, parsing outputs into ``model`` (a cache hit for a
        schema that another model produced too)."""
        if model is self.spec.model:
            return self
        answer = self.answer.with_model(model) if self.answer is not None else None  # reads the answer
        spec = dataclasses.replace(self.spec, model=model)
        return dataclasses.replace(self, spec=spec, answer=answer, _validators={})

    @property
    def slot_names(self) -> list[str]:
        return self.grammar.slot_names

    def missing_slots(self, slots: Mapping[str, Sequence[str]] | None) -> list[str]:
        """The grammar's slot names ``slots`` gives no values for, sorted."""
        return sorted(set(self.grammar.slot_names) - set(slots or {}))

    def bind(self, slots: Mapping[str, Sequence[str]] | None) -> Constraint:
        """Bind the grammar's slots for one request (see :meth:`CompiledGrammar.bind`); reads of
        the result also check each slot string against its values. Raises
        :class:`corral.SlotError` for missing, unknown or bad slots."""
        from corral.errors import SlotError

        names = self.grammar.slot_names
        if not names:
            if slots:
                raise SlotError("slots given, but the constraint has no slots (x-corral-slot / ${name})")
            return self
        missing = self.missing_slots(slots)
        if missing:
            raise SlotError(f"the constraint's slot(s) {missing} need values", missing[0])
        answer = self.answer.bind(slots) if self.answer is not None else None
        return dataclasses.replace(
            self, grammar=self.grammar.bind(slots or {}), answer=answer, _validators={}
        )

    # ------------------------------------------------------------------ reading outputs

    def split(self, text: str) -> tuple[str | None, str]:
        """(reasoning, answer) of a decoded output: the think block's text (None when the
        constraint has none, or an optional block was skipped) and the rest."""
        if self.think is None:
            return None, text
        reasoning, answer = split_reasoning(text, self.think)
        if self.spec.without_thinking().kind in ("json_schema", "json", "json_object", "tools"):
            answer = answer.lstrip(" \n")
        return reasoning, answer

    def read(self, text: str) -> tuple[Any, str | None]:
        """(value, error) for a decoded output: the value as the constraint's kind reads it and
        the validation error for keywords the grammar leaves to validation (None when valid).
        After a think block, the answer alone is read (:meth:`split`); a ``structural_tag``
        output reads as its list of :class:`~corral.compile.thinking.Segment` (the error: the
        first segment's that does not validate)."""
        if self.think is not None:
            _, text = self.split(text)
            if self.answer is not None:
                return self.answer.read(text)
        kind = self.spec.kind
        if kind == "structural_tag":
            segments = read_segments(text, self.spec.payload, self.readers)
            return segments, next((s.error for s in segments if s.error is not None), None)
        if kind == "tools":
            reply = self.read_tools(text)
            return reply.value, reply.error
        if kind in ("json", "json_object"):
            try:
                return bounded_json.loads(text, _MAX_OUTPUT_DEPTH, "max_output_depth", "the output"), None
            except LimitExceeded as e:
                return None, str(e)
            except ValueError as e:
                return None, f"output is not JSON: {e}"
        if kind == "json_schema" and isinstance(self.grammar, JsonSchemaGrammar):
            try:
                value = self.grammar.validate(text)
            except OutputValidationError as e:
                try:
                    partial = bounded_json.loads(text, _MAX_OUTPUT_DEPTH, "max_output_depth", "the output")
                except (ValueError, LimitExceeded):
                    partial = None
                return partial, str(e)
            model = self.spec.model
            if model is None:
                return value, None
            try:
                return self._adapter(model).validate_json(text), None
            except Exception as e:  # a Pydantic validator the schema cannot express
                return value, f"output fails the model's validation: {e}"
        return text, None

    def read_tools(self, text: str) -> Any:
        """A ``tools`` reply as a :class:`~corral.compile.tool_calls.ToolReply` (prose or answer,
        calls, error); after a think block, the answer part."""
        from corral.compile.tool_calls import read_reply

        if self.think is not None:
            _, text = self.split(text)
            if self.answer is not None:
                return self.answer.read_tools(text)
        if self.spec.kind != "tools":
            raise TypeError(f"a {self.spec.kind} constraint has no tool calls")
        reader = self.readers[0] if self.readers else None
        return read_reply(text, self.spec, self._validators, reader)

    def parse(self, text: str) -> Any:
        """The output as a value (see :meth:`read`); raises :class:`corral.OutputValidationError`
        when it does not validate."""
        value, error = self.read(text)
        if error is not None:
            raise OutputValidationError(error, [error])
        return value

    def _adapter(self, model: Any) -> Any:
        adapter = self._validators.get("__pydantic__")
        if adapter is None:
            from pydantic import TypeAdapter

            adapter = self._validators["__pydantic__"] = TypeAdapter(model)
        return adapter
