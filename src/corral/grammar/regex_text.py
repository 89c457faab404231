"""Scanning Python-syntax regex text without parsing it: where the top-level `|` and the group
boundaries are. Shared by the JSON Schema frontend (anchors, branches) and the number-range
builder (when to wrap a regex in a group)."""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["scan", "top_level_branches"]


def scan(pattern: str) -> Iterator[tuple[int, str, int]]:
    """Yield (index, char, depth) for every structural character of `pattern`: characters that
    are not escaped and not inside a character class. `depth` is the group nesting *before* the
    character (an opening parenthesis is reported at its outer depth, a closing one at its inner
    depth)."""
    depth = 0
    in_class = False
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            i += 1
            continue
        if c == "[":
            in_class = True
            # A `]` right after `[` or `[^` is a literal member, not the end of the class.
            j = i + 1
            if pattern[j : j + 1] == "^":
                j += 1
            if pattern[j : j + 1] == "]":
                j += 1
            i = j
            continue
        yield i, c, depth
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        i += 1


def top_level_branches(pattern: str) -> list[str]:
    """Split a regex at its top-level `|` (outside groups and classes)."""
    out, start = [], 0
    for i, c, depth in scan(pattern):
        if c == "|" and depth == 0:
            out.append(pattern[start:i])
            start = i + 1
    out.append(pattern[start:])
    return out
