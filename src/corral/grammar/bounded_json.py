"""JSON text and values from strangers, with their nesting bounded before anything recurses.

In:  JSON text (a schema, a model's output) or an already parsed value, and a nesting limit.
Out: ``loads``: the parsed value, or ``LimitExceeded(limit_name, depth, limit)`` naming the line
     and column where the text first nests deeper than the limit; ``check_value``: nothing, or
     the same error naming the JSON pointer of the first container past the limit.

Invariants: neither function recurses (the text is scanned with one regex, the value walked
with an explicit stack), so a text or value nested 100,000 deep costs time linear in its size
and never raises ``RecursionError``; after either check passes, every recursive walker over the
value (``json.loads``'s scanner, ``json.dumps``, ``jsonschema``, the schema converter's helpers)
descends at most `limit` containers. Invalid JSON is left for ``json.loads`` to report.
"""

from __future__ import annotations

import json
import re
from typing import Any

from corral.errors import LimitExceeded

__all__ = ["check_value", "loads"]

# A string (skipped whole, so brackets inside it do not count) or one bracket.
_SCAN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)


def text_depth_error(text: str, limit: int, limit_name: str, what: str) -> LimitExceeded | None:
    """The error for the first point where `text` nests deeper than `limit`, or None."""
    depth = 0
    for m in _SCAN.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > limit:
                line = text.count("\n", 0, m.start()) + 1
                col = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
                return LimitExceeded(
                    limit_name,
                    depth,
                    limit,
                    f"{what} nests more than {limit_name}={limit} arrays/objects deep "
                    f"(at line {line}, column {col})",
                )
        elif c in "]}":
            depth -= 1
    return None


def loads(text: str | bytes, limit: int, limit_name: str, what: str) -> Any:
    """``json.loads(text)`` for text nested at most `limit` deep (else ``LimitExceeded``);
    ``json.JSONDecodeError`` for text that is not JSON."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="surrogateescape")
    err = text_depth_error(text, limit, limit_name, what)
    if err is not None:
        raise err
    return json.loads(text)


def check_value(value: Any, limit: int, limit_name: str, what: str, ids: set[int] | None = None) -> None:
    """Raise ``LimitExceeded`` naming the JSON pointer where `value` (dicts and lists) nests
    deeper than `limit`. A value that contains itself is reported as too deep. `ids`, when
    given, receives the ``id`` of every dict and list in `value` (one walk for both)."""
    if not isinstance(value, (dict, list)):
        return
    # Only containers are stacked (it walks every schema before conversion: a tight loop).
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        if ids is not None:
            ids.add(id(node))
        if depth > limit:
            where = _pointer_at(value, limit)
            raise LimitExceeded(
                limit_name,
                depth,
                limit,
                f"{what} nests more than {limit_name}={limit} arrays/objects deep (at {where})",
            )
        depth += 1
        for v in node.values() if isinstance(node, dict) else node:
            if isinstance(v, (dict, list)):
                push((v, depth))


def _pointer_at(value: Any, limit: int) -> str:
    """The JSON pointer of the first container nested deeper than `limit` in `value` (a second
    walk, only on error: it keeps each container's key and parent, to build the pointer once)."""
    path: list[tuple[Any, int]] = [("", -1)]
    stack: list[tuple[Any, int, int]] = [(value, 1, 0)]
    while stack:
        node, depth, at = stack.pop()
        items: Any = node.items() if isinstance(node, dict) else enumerate(node)
        if depth > limit:
            parts = []
            while at > 0:
                key, at = path[at]
                parts.append(str(key).replace("~", "~0").replace("/", "~1"))
            return "#" + "".join("/" + p for p in reversed(parts))
        for k, v in items:
            if isinstance(v, (dict, list)):
                path.append((k, at))
                stack.append((v, depth + 1, len(path) - 1))
    return "#"
