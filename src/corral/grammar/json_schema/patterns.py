"""Regex text for JSON Schema patterns and name sets (pure functions over pattern strings).

In:  ECMA-262-style ``pattern`` strings from a schema, or a finite list of names.
Out: full-match regexes in the engine's dialect: ``pattern`` made unanchored the way
     ``re.search`` reads it (``_unanchored``), ``\\d``/``\\w`` narrowed to ASCII where that only
     narrows (``_ascii_classes``), the exact complement of a finite set of names
     (``_not_in_regex``, or its top-level branches ``_not_in_branches``), and a ``re.search``
     that treats a bad pattern as no match.

Invariants: each rewrite keeps the language or narrows it (never widens what a pattern
generates): narrowing is used only for positive occurrences; negated classes keep Python's
Unicode meaning. ``_not_in_regex(names)`` matches exactly the strings not in ``names``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from corral.errors import LimitExceeded
from corral.grammar.regex_text import scan, top_level_branches

# Group nesting a schema pattern may have before Python's ``re`` (a recursive parser) reads it:
# the engine's default ``max_nesting``, which would refuse a deeper one anyway.
PATTERN_MAX_NESTING = 200


def check_nesting(pattern: str, where: str) -> None:
    """Raise LimitExceeded("max_nesting") when `pattern` nests groups deeper than
    PATTERN_MAX_NESTING (an iterative scan: escapes and character classes skipped)."""
    depth = 0
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":  # a class: up to its closing bracket (a leading ']' or '^]' is literal)
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
            continue
        if c == "(":
            depth += 1
            if depth > PATTERN_MAX_NESTING:
                raise LimitExceeded(
                    "max_nesting",
                    depth,
                    PATTERN_MAX_NESTING,
                    f"pattern groups nest more than max_nesting={PATTERN_MAX_NESTING} deep "
                    f"(at character {i}) at {where}",
                )
        elif c == ")":
            depth -= 1
        i += 1


def _safe_search(pattern: str, text: str) -> bool:
    """``re.search`` that reads a bad pattern as no match (a too deeply nested one raises)."""
    check_nesting(pattern, "patternProperties")
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False


def _ascii_classes(pattern: str) -> str:
    """`\\d` and `\\w` as in JSON Schema's regex dialect (ECMA-262): ASCII only. Every ASCII match
    is also a Python match, so this only narrows what is generated (the negated forms keep
    Python's meaning), and it keeps e.g. `[\\w-]{5,96}` from needing one automaton state per
    Unicode word character range and position."""
    out = []
    i = 0
    in_class = False
    negated = False  # inside [^...] the Unicode meaning must stay (ASCII would widen the set)
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if negated:
                out.append(pattern[i : i + 2])
            elif nxt == "d":
                out.append("0-9" if in_class else "[0-9]")
            elif nxt == "w":
                out.append("A-Za-z0-9_" if in_class else "[A-Za-z0-9_]")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class and c == "]":
            in_class = negated = False
        elif not in_class and c == "[":
            in_class = True
            out.append(c)
            i += 1
            if pattern[i : i + 1] == "^":
                out.append("^")
                negated = True
                i += 1
            if pattern[i : i + 1] == "]":
                out.append("]")
                i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _unanchored(pattern: str) -> str:
    """A full-match regex for JSON Schema's `pattern`, which (like Python's ``re.search``, what
    the reference validator uses) matches anywhere unless anchored. Anchors are handled per
    top-level branch; ``$`` also matches before a final newline, as in Python."""
    out = []
    for branch in top_level_branches(pattern):
        inner = _outer_group(branch)
        if inner is not None and ("^" in inner or "$" in inner or "\\A" in inner or "\\Z" in inner):
            # `(^a$)|(^b)`: anchors inside a group that spans the whole branch.
            out.append(_unanchored(inner))
            continue
        body = branch
        start = body.startswith("^") or body.startswith("\\A")
        if start:
            body = body[1:] if body.startswith("^") else body[2:]
        inner = _outer_group(body) if start else None
        if inner is not None and ("$" in inner or "\\Z" in inner):
            # `^(a|b$)`: the start anchor distributes over the group's branches.
            out.append(_unanchored("|".join("^" + b for b in top_level_branches(inner))))
            continue
        end_dollar = body.endswith("$") and not _escaped_at_end(body)
        end_z = body.endswith("\\Z") and not _escaped_at_end(body[:-1])
        if end_dollar:
            body = body[:-1]
        elif end_z:
            body = body[:-2]
        prefix = "" if start else "(?s:.)*"
        suffix = "\\n?" if end_dollar else ("" if end_z else "(?s:.)*")
        out.append(f"{prefix}(?:{body}){suffix}")
    return out[0] if len(out) == 1 else "|".join(f"(?:{b})" for b in out)


def _outer_group(branch: str) -> str | None:
    """The content of a group that spans the whole branch (`(x)`, `(?:x)`, `(?P<n>x)`), else None."""
    if not (branch.startswith("(") and branch.endswith(")")) or _escaped_at_end(branch):
        return None
    start = 1
    if branch.startswith("(?:"):
        start = 3
    elif branch.startswith("(?P<"):
        close = branch.find(">")
        if close < 0:
            return None
        start = close + 1
    elif branch.startswith("(?"):
        return None  # lookaround, flags, ...: leave to the regex engine
    for i, c, depth in scan(branch):
        if c == ")" and depth == 1 and i != len(branch) - 1:
            return None  # the first group closes before the end
    return branch[start:-1]


def _escaped_at_end(body: str) -> bool:
    """Is the last character of `body` escaped by an odd number of backslashes?"""
    n = 0
    i = len(body) - 2
    while i >= 0 and body[i] == "\\":
        n += 1
        i -= 1
    return n % 2 == 1


def _not_in_regex(names: list[str]) -> str:
    """A regex matching every string except those in `names` (exact complement of a finite set)."""
    return "|".join(_not_in_branches(names))


def _not_in_branches(names: list[str]) -> tuple[str, ...]:
    """The top-level branches of ``_not_in_regex(names)``: the empty string when it is not a
    name, the strings whose first character starts no name, and one branch per first character
    of the names (each a regex; their union is the complement, and no two match one string)."""
    # Memoised by the names in their order (the output lists a node's children in order of first
    # appearance): schemas repeat an object's declared keys wherever its definition is used.
    return _not_in_regex_of(tuple(names))


@lru_cache(maxsize=1024)
def _not_in_regex_of(names: tuple[str, ...]) -> tuple[str, ...]:
    # The regex is that of the trie of names, written node by node: a node's text is its
    # alternatives joined by "|": "" when stopping there is not a name; then "[^kids](?s:.)*"
    # (a string leaving the trie), or "(?s:.)+" at a leaf (continuing past a name); then
    # "kid(?:text of the kid's node)" per kid, in order of first appearance. A node is the
    # (depth, indices of the names through it) pair, split on the character at that depth
    # only when it is reached; a node of one name writes the rest of that name as one run
    # (most names branch off within a few characters), with no per-character nodes. Written
    # left to right from an explicit stack of pending text and nodes, so a long name costs no
    # Python recursion and no nested string copies (this was 20% of converting a typical
    # object-heavy schema when each character was a dict and each node's text a new string).
    esc = _escape_char
    stops, groups = _split(names, 0, range(len(names)))
    alts: list[str] = [] if stops else [""]  # stopping here is not a name
    if not groups:
        alts.append("(?s:.)+")
        return tuple(alts)
    alts.append("[^" + "".join(map(esc, groups)) + "](?s:.)*")
    out: list[str] = []
    for c, through in groups.items():
        out.clear()
        stack: list[str | tuple[int, list[int]]] = [(1, through)]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                out.append(item)
                continue
            depth, through = item
            if len(through) == 1:  # one name: the rest of it is a chain ending at a leaf
                rest = names[through[0]][depth:]
                out.extend(map(_chain_link, rest))
                out.append("(?s:.)+")
                out.append(")" * len(rest))
                continue
            stops, kids = _split(names, depth, through)
            if not kids:  # (the same name listed twice)
                out.append("(?s:.)+")
                continue
            out.append(("[^" if stops else "|[^") + "".join(map(esc, kids)) + "](?s:.)*")
            for k in reversed(kids):
                stack.append(")")
                stack.append((depth + 1, kids[k]))
                stack.append("|" + esc(k) + "(?:")
        alts.append(esc(c) + "(?:" + "".join(out) + ")")
    return tuple(alts)


def _split(names: tuple[str, ...], depth: int, through: Any) -> tuple[bool, dict[str, list[int]]]:
    """(whether a name of `through` ends at `depth`, the names of `through` that go on, by their
    character at `depth` in order of first appearance)."""
    stops = False
    kids: dict[str, list[int]] = {}
    for i in through:
        name = names[i]
        if len(name) == depth:
            stops = True
            continue
        kid = kids.get(name[depth])
        if kid is None:
            kids[name[depth]] = [i]
        else:
            kid.append(i)
    return stops, kids


@lru_cache(maxsize=4096)
def _chain_link(c: str) -> str:
    """The text of a trie node that ends no name and has the one kid `c`, up to that kid's
    own text (closed by a ")" after it)."""
    e = re.escape(c)
    return "|[^" + e + "](?s:.)*|" + e + "(?:"


@lru_cache(maxsize=4096)
def _escape_char(c: str) -> str:
    return re.escape(c)
