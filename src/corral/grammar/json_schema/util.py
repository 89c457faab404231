"""Small pure helpers the converter's modules share.

In:  schema fragments, pointers, text.
Out: JSON pointers, grammar literals and ``/regex/`` terminals, JSON value equality and kinds,
     keyword walks, and the two internal signals (:class:`_NoValue`, :class:`_TooBig`).

Invariants: no function here reads or changes converter state; each output depends on its
arguments only. ``_regex_terminal`` never lets a pattern end its terminal early (an unescaped
``/`` is escaped, escapes are copied as they are).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from corral.errors import SchemaError
from corral.grammar.json_schema.keywords import _ANNOTATIONS


def _count(schema: dict[str, Any], key: str, pointer: str, default: int | None) -> int | None:
    """A non-negative integer keyword (JSON Schema allows 2.0 for 2)."""
    v = schema.get(key, default)
    if v is None:
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise SchemaError(f"{key} must be a non-negative integer", _ptr(pointer, key))
    return v


def _ptr(base: str, *parts: str | int) -> str:
    out = base
    for p in parts:
        s = p if isinstance(p, str) else str(p)
        if "~" in s or "/" in s:  # (rare: most keys and names need no escaping)
            s = s.replace("~", "~0").replace("/", "~1")
        out += "/" + s
    return out


def _lit(text: str) -> str:
    """A grammar string literal for `text` (escaped)."""
    out = ['"']
    for ch in text:
        cp = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif cp < 0x20 or cp == 0x7F:
            out.append(f"\\x{cp:02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _regex_terminal(pattern: str, flag: str = "") -> str:
    """A /regex/ terminal; with flag "j" (or "c") matched as JSON string contents in every (or the
    canonical) spelling. An unescaped `/` would end the terminal, so it is escaped; escape
    sequences are copied as they are."""
    if "/" in pattern:
        # One pass of the C regex engine (a character loop in Python was a tenth of the
        # conversion of big schemas, whose key-complement patterns run to kilobytes).
        pattern = _SLASH_OR_ESCAPE.sub(_escape_slash, pattern)
    return "/" + pattern + "/" + flag


# An escape sequence (copied as it is, so an escaped `/` stays escaped) or a bare `/`. A lone
# trailing backslash matches neither and is copied.
_SLASH_OR_ESCAPE = re.compile(r"\\.|/", re.S)


def _escape_slash(m: re.Match[str]) -> str:
    return "\\/" if m.group() == "/" else m.group()


def _json_string_of(regex: str, flag: str = "j") -> str:
    """Grammar for a JSON string whose decoded value fully matches `regex` (flag "j": every
    JSON spelling; "c": only the canonical one)."""
    return f'"\\"" {_regex_terminal(regex, flag)} "\\""'


class _NoValue(SchemaError):
    """A (sub)schema that no JSON value satisfies."""


class _TooBig(Exception):
    """A product automaton over the state budget (see _Converter.regular_string)."""


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def _has_ref(node: Any) -> bool:
    if isinstance(node, dict):
        return "$ref" in node or any(_has_ref(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_ref(v) for v in node)
    return False


def _content_key(schema: Any) -> str | None:
    """A content key for schemas whose expansion may recurse without passing a memoised pointer."""
    if isinstance(schema, dict) and "allOf" in schema and _has_ref(schema["allOf"]):
        return "allOf:" + json.dumps(schema, sort_keys=True, default=str)
    return None


def _constraining(schema: dict[str, Any]) -> bool:
    return any(k not in _ANNOTATIONS for k in schema)


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return Decimal(str(a)) == Decimal(str(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return bool(a == b) and type(a) is type(b)


def iter_keywords(schema: Any) -> Iterator[str]:
    """All keywords used anywhere in a schema (for reports and tests)."""
    if isinstance(schema, dict):
        for k, v in schema.items():
            yield k
            yield from iter_keywords(v)
    elif isinstance(schema, list):
        for v in schema:
            yield from iter_keywords(v)
