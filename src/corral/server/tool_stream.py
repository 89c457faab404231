"""Tool calls in OpenAI's response shapes: a finished reply as ``message`` fields, and a reply
being written as stream deltas — prose as ``content``, each call as a first delta with its
``id``, ``type`` and ``function.name``, then ``function.arguments`` deltas as the arguments
are written (what OpenAI's own streams look like).

In:  a compiled ``tools`` constraint (its format says where calls start) and the reply's
     answer text (after any think block), whole or in pieces.
Out: ``message`` updates (:func:`tool_message`) or delta dicts (:class:`ToolDeltas`).

Invariant: for each call, the concatenated argument deltas are the call's argument JSON as the
model wrote it, and ``json.loads`` of it equals the non-streamed ``arguments``; the calls'
``index`` values are 0, 1, ... in the order written.
"""

from __future__ import annotations

import json
from typing import Any

from corral.grammar.tool_formats import get_format, scan_partial
from corral.grammar.tools import ToolCall

__all__ = ["ToolDeltas", "call_json", "tool_message"]


def call_json(call: ToolCall, call_id: str) -> dict[str, Any]:
    """One call as an OpenAI ``tool_calls`` entry (``arguments`` a JSON string)."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)},
    }


def tool_message(constraint: Any, text: str, id_prefix: str) -> tuple[dict[str, Any], str | None]:
    """(message fields, error) for a finished ``tools`` reply: ``content`` (None when the reply
    is only calls) and, when it calls, ``tool_calls`` with ids ``<id_prefix>_<k>``."""
    reply = constraint.read_tools(text)
    fields: dict[str, Any] = {"content": reply.content}
    if reply.calls:
        fields["tool_calls"] = [call_json(c, f"{id_prefix}_{k}") for k, c in enumerate(reply.calls)]
    return fields, reply.error


class ToolDeltas:
    """A ``tools`` reply streamed as OpenAI deltas: ``feed(piece)`` returns the deltas the new
    text decides, ``finish()`` the rest and whether the reply called a tool."""

    def __init__(self, constraint: Any, id_prefix: str) -> None:
        self.constraint = constraint
        self.fmt = get_format(constraint.spec.without_thinking().tool_format)
        self.answer = constraint.spec.without_thinking().answer_schema is not None
        self.id_prefix = id_prefix
        self.text = ""
        self.sent_content = 0
        self.sent_args: list[int] = []  # per call: argument characters sent (-1: not started)

    def feed(self, piece: str) -> list[dict[str, Any]]:
        self.text += piece
        return self._deltas(final=False)

    def finish(self) -> tuple[list[dict[str, Any]], bool]:
        out = self._deltas(final=True)
        return out, bool(self.sent_args)

    def _deltas(self, final: bool) -> list[dict[str, Any]]:
        state, content_len, calls = scan_partial(self.text, self.fmt)
        out: list[dict[str, Any]] = []
        if final and not calls:
            # Prose or an answer: whatever is left, as the finished reply reads it.
            fields, _ = tool_message(self.constraint, self.text, self.id_prefix)
            content = fields.get("content") or ""
            if fields.get("tool_calls"):  # a call the partial reader could not place
                return [{"tool_calls": [{"index": k, **c} for k, c in enumerate(fields["tool_calls"])]}]
            rest = content[self.sent_content :] if content.startswith(self.text[: self.sent_content]) else ""
            self.sent_content = len(content)
            return [{"content": rest}] if rest else []
        if state == "calls" and self.answer and not calls:
            return out  # a JSON answer or a call: decided at the end
        # Trailing whitespace may be the gap before the first call (the reply reads stripped).
        content_len = len(self.text[:content_len].rstrip())
        if content_len > self.sent_content and not (state == "calls" and not self.fmt.opener):
            out.append({"content": self.text[self.sent_content : content_len]})
            self.sent_content = content_len
        for k, c in enumerate(calls):
            if k >= len(self.sent_args):
                self.sent_args.append(0)
                head = {"index": k, "id": f"{self.id_prefix}_{k}", "type": "function"}
                out.append({"tool_calls": [{**head, "function": {"name": c.name, "arguments": ""}}]})
            if len(c.args) > self.sent_args[k]:
                delta = c.args[self.sent_args[k] :]
                self.sent_args[k] = len(c.args)
                out.append({"tool_calls": [{"index": k, "function": {"arguments": delta}}]})
        return out
