"""Tool calls as a compiled constraint: a ``tools`` spec's grammar in its call format, and the
one way a reply is read back into typed calls.

In:  a ``tools`` :class:`~corral.compile.spec.ConstraintSpec` (tools, mode, format, parallel,
     optional answer schema), the tokenizer (the format's opener may be a special token), the
     schema converter.
Out: grammar text and start rule (:func:`tools_grammar`); :class:`ToolReply` for a decoded reply
     (:func:`read_reply`): the prose or answer, the calls (each a
     :class:`~corral.grammar.tools.ToolCall` checked against its tool), the first error.

Invariant: a reply the grammar produced reads with no error: every call names a declared tool
and its arguments validate (keywords the grammar leaves to validation are checked here).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from corral.grammar.structural import Marker, rename_rules
from corral.grammar.tool_formats import get_format, parse_reply, reply_grammar
from corral.grammar.tools import ToolCall, check_call
from corral.tokenizer import Tokenizer

__all__ = ["ToolReply", "read_reply", "tools_grammar"]


def _opener(tokenizer: Tokenizer | None, text: str) -> Marker | None:
    if not text:
        return None
    if tokenizer is None:
        return Marker(text)
    special = tokenizer.special_ids
    return Marker(text, tuple(i for i in tokenizer.ids_of(text) if i in special))


def tools_grammar(spec: Any, tokenizer: Tokenizer | None, convert: Any, prefix: str) -> tuple[str, str]:
    """(grammar text, start rule) of a ``tools`` spec's reply; ``convert(schema, options) ->
    text`` runs the schema converter (rule ``root``)."""
    fmt = get_format(spec.tool_format)
    call = convert(spec.schema, spec.options)
    answer = None
    if spec.answer_schema is not None:
        text = rename_rules(convert(spec.answer_schema, spec.options), prefix + "a-")
        answer = (text, prefix + "a-root")
    return reply_grammar(
        fmt,
        call,
        mode=spec.tool_mode,
        parallel=spec.parallel,
        prefix=prefix,
        opener=_opener(tokenizer, fmt.opener),
        answer=answer,
    )


@dataclass(frozen=True)
class ToolReply:
    """A reply read back: ``content`` (the prose, or the answer's text; None when the reply is
    only calls), ``calls`` in order, ``answer`` (the answer read by its schema, when there is
    one and no call was made) and the first ``error`` (None when everything validates)."""

    content: str | None
    calls: tuple[ToolCall, ...] = ()
    answer: Any = None
    error: str | None = None
    raw_calls: tuple[Any, ...] = field(default=(), repr=False)

    @property
    def value(self) -> Any:
        """What ``Constraint.read`` returns: the one call, the list of calls when there are
        several, else the answer (or the prose)."""
        if len(self.calls) == 1:
            return self.calls[0]
        if self.calls:
            return list(self.calls)
        return self.answer if self.answer is not None else self.content


def read_reply(text: str, spec: Any, validators: dict[str, Any], answer_reader: Any = None) -> ToolReply:
    """``text`` (a reply under ``spec``) as a :class:`ToolReply`; ``answer_reader`` (a compiled
    constraint of the answer schema) reads a reply that is not a call."""
    fmt = get_format(spec.tool_format)
    content, parsed, error = parse_reply(text, fmt)
    calls: list[ToolCall] = []
    for p in parsed:
        call, err = check_call(p.name, p.arguments, spec.tools, validators)
        if call is not None:
            calls.append(call)
        error = error or err
    if parsed and not spec.parallel and len(parsed) > 1:
        error = error or f"{len(parsed)} calls where parallel tool calls are off"
    if answer_reader is not None and (not parsed or error):
        # Not (valid) calls: the reply is the answer (a JSON answer may look like a call).
        answer, err = answer_reader.read(text.strip())
        if err is None or not parsed:
            return ToolReply(text.strip(), (), answer, err)
    if not parsed and spec.tool_mode == "required":
        error = error or "no tool call in a reply that must call a tool"
    return ToolReply(content, tuple(calls), None, error, tuple(parsed))
