"""Free text that stops at markers, as grammar text: think-then-answer and structural tags.

In:  markers (a think block's open/close, the triggers of structural tags) as strings, each
     optionally also a special token of the tokenizer (its ids); the answer's or a segment's
     grammar text (from the schema converter, a regex, a user grammar, choices).
Out: grammar text for the engine (GBNF + ``/regex/`` + the exact ``-`` difference operator),
     with every embedded grammar's rules renamed into a namespace of its own.

The languages, over code points (``A`` = any text, ``A1`` = any non-empty text, ``T`` = the
alternation of the text triggers):

* ``upto(T, k)``: text that ends with trigger ``k`` and contains no trigger occurrence ending
  earlier — "text up to and including the first trigger", written ``A "Tk" - A T A1``;
* ``no_trigger(T)``: text containing no trigger — ``A - A T A``.

Both are regular and the engine builds them exactly on its automata (a product DFA, minimised),
so no regex is spelled out here (state elimination would be exponential in the worst case);
every automaton on the way stays within ``2 * sum(len(Ti)) + 4`` DFA states (measured through
``max_dfa_states``), self-overlapping triggers included (``aa`` in ``aaa`` fires at the first
``aa``). Grammar terminals end at any accepting point (not greedy lexemes),
so ``upto`` followed by the segment is exact; ``upto`` is also prefix-free, so the first trigger
occurrence is where the segment starts — there is no other parse.

A marker that is a special token of the tokenizer is also accepted as that token (``<[id]>``),
which free text can never produce; its text spelling counts too (the model may spell it out).

Triggers must not contain one another (the contained one would always fire first); structural
tags' begins must each start with exactly one trigger.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ANY_TEXT",
    "Marker",
    "StructuralTag",
    "literal",
    "no_trigger",
    "regex_terminal",
    "rename_rules",
    "upto",
]

ANY_TEXT = "/(?s).*/"
_ANY1 = "/(?s).+/"


@dataclass(frozen=True)
class Marker:
    """A marker string and, when the tokenizer has it as a special token, that token's ids."""

    text: str
    token_ids: tuple[int, ...] = ()


def literal(s: str) -> str:
    """``s`` as a grammar string literal (every character outside printable ASCII escaped)."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= o < 0x7F:
            out.append(ch)
        elif o <= 0xFFFF:
            out.append(f"\\u{o:04X}")
        else:
            out.append(f"\\U{o:08X}")
    out.append('"')
    return "".join(out)


def _alt(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else "(" + " | ".join(items) + ")"


def _token(m: Marker) -> str:
    return _alt([f"<[{i}]>" for i in m.token_ids])


def no_trigger(triggers: Sequence[Marker]) -> str:
    """Grammar expression: any text in which no trigger's text occurs (special-token triggers
    need nothing more: free text never produces a special token)."""
    texts = [literal(t.text) for t in triggers if t.text]
    if not texts:
        return ANY_TEXT
    return f"({ANY_TEXT} - {ANY_TEXT} {_alt(texts)} {ANY_TEXT})"


def upto(triggers: Sequence[Marker], k: int) -> str:
    """Grammar expression: text up to and including the first trigger occurrence, which is
    trigger ``k`` (its text, or its special token after text with no trigger)."""
    texts = [literal(t.text) for t in triggers if t.text]
    mine = triggers[k]
    alts = []
    if mine.text:
        alts.append(f"({ANY_TEXT} {literal(mine.text)} - {ANY_TEXT} {_alt(texts)} {_ANY1})")
    if mine.token_ids:
        alts.append(f"{no_trigger(triggers)} {_token(mine)}")
    return _alt(alts)


def marker(m: Marker) -> str:
    """Grammar expression for the marker itself (its text or its special token)."""
    alts = ([literal(m.text)] if m.text else []) + ([_token(m)] if m.token_ids else [])
    return _alt(alts)


def check_triggers(triggers: Sequence[str], what: str = "trigger") -> None:
    """Refuse empty, duplicated or nested triggers (ValueError naming them)."""
    for i, t in enumerate(triggers):
        if not isinstance(t, str) or not t:
            raise ValueError(f"{what} {i} must be a non-empty string, got {t!r}")
    for i, a in enumerate(triggers):
        for j, b in enumerate(triggers):
            if i != j and a in b:
                raise ValueError(
                    f"{what} {b!r} contains {what} {a!r}: {a!r} would always fire first"
                    if a != b
                    else f"{what} {a!r} is given twice"
                )


# ---------------------------------------------------------------------- embedding grammars

_NAME_START = re.compile(r"[A-Za-z_]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def rename_rules(text: str, prefix: str) -> str:
    """``text`` (GBNF + ``/regex/``) with every rule it defines renamed ``prefix + name``, in
    definitions and references alike; literals, classes, regexes, token references, slots,
    repetition counts and comments are left as they are (scanned the way the engine's grammar
    parser scans them)."""
    defined = set(re.findall(r"(?m)^[ \t]*([A-Za-z_][A-Za-z0-9_-]*)[ \t]*::=", text))
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
        elif c == "[":
            j = i + 1
            while j < n and text[j] != "]" and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
        elif c == "/":
            j, in_class = i + 1, False
            while j < n and text[j] != "\n":
                if text[j] == "\\":
                    j += 2
                    continue
                if text[j] == "[":
                    in_class = True
                elif text[j] == "]":
                    in_class = False
                elif text[j] == "/" and not in_class:
                    break
                j += 1
            j = min(j + 1, n)
        elif c == "<" or c == "{" or (c == "$" and text.startswith("${", i)):
            end = {"<": ">", "{": "}", "$": "}"}[c]
            k = text.find(end, i + 1)
            j = n if k < 0 else k + 1
        elif c == "#":
            k = text.find("\n", i)
            j = n if k < 0 else k
        elif _NAME_START.match(c):
            m = _NAME.match(text, i)
            assert m is not None
            j = m.end()
            name = m.group(0)
            out.append(prefix + name if name in defined else name)
            i = j
            continue
        else:
            j = i + 1
        out.append(text[i:j])
        i = j
    return "".join(out)


def regex_terminal(pattern: str) -> str:
    """A regex (Python ``re`` syntax) as a grammar ``/regex/`` terminal: ``/`` outside classes
    and raw line breaks are escaped (the grammar parser ends the terminal at either)."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append("\\n" if nxt == "\n" else "\\r" if nxt == "\r" else c + nxt)
            i += 2
            continue
        if c == "[":
            in_class = True
        elif c == "]":
            in_class = False
        if c == "/" and not in_class:
            out.append("\\/")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        else:
            out.append(c)
        i += 1
    return "/" + "".join(out) + "/"


# ---------------------------------------------------------------------- structural tags


@dataclass(frozen=True)
class StructuralTag:
    """One tagged segment: ``begin`` (starts with one of the triggers), the content's grammar
    (rule ``root`` of ``grammar``, ``start`` naming another start rule), and ``end``."""

    begin: str
    end: str
    grammar: str
    start: str = "root"
    extra: Mapping[str, Any] = field(default_factory=dict)


def structural_grammar(
    tags: Sequence[StructuralTag],
    triggers: Sequence[Marker],
    *,
    at_least_one: bool = False,
    stop_after_first: bool = False,
    name: str = "corral-st",
) -> str:
    """Grammar text whose rule ``name`` is: free text in which each trigger opens a segment —
    the rest of one tag's begin (among the tags whose begin starts with that trigger), its
    content, its end — after which free text resumes; ``at_least_one``: one segment or more;
    ``stop_after_first``: the output ends right after the first segment."""
    lines = []
    parts = []
    for k, trig in enumerate(triggers):
        mine = [(i, t) for i, t in enumerate(tags) if t.begin.startswith(trig.text)]
        if not mine:
            raise ValueError(f"trigger {trig.text!r} starts no tag's begin")
        alts = []
        for i, t in mine:
            pre = f"{name}-t{i}-"
            lines.append(rename_rules(t.grammar, pre))
            seq = [literal(t.begin[len(trig.text) :])] if len(t.begin) > len(trig.text) else []
            seq.append(pre + t.start)
            if t.end:
                seq.append(literal(t.end))
            alts.append(" ".join(seq))
        lines.append(f"{name}-after{k} ::= {' | '.join(alts)}")
        lines.append(f"{name}-lead{k} ::= {upto(triggers, k)}")
        parts.append(f"{name}-lead{k} {name}-after{k}")
    lines.append(f"{name}-part ::= {' | '.join(parts)}")
    lines.append(f"{name}-tail ::= {no_trigger(triggers)}")
    if stop_after_first:
        body = f"{name}-part" if at_least_one else f"{name}-part | {name}-tail"
    else:
        rep = "+" if at_least_one else "*"
        body = f"{name}-part{rep} {name}-tail"
    lines.append(f"{name} ::= {body}")
    return "\n".join(lines) + "\n"


def think_grammar(
    open_: Marker,
    close: Marker,
    answer: str,
    answer_start: str,
    *,
    optional: bool,
    name: str = "corral-think",
) -> str:
    """Grammar text whose rule ``name`` is the think block (``open``, text up to and including
    the first ``close``), optional or forced, followed by rule ``answer_start`` of ``answer``
    (already renamed into its own namespace by the caller)."""
    block = f"{marker(open_)} {name}-body"
    body = f"{name}-body ::= {upto([close], 0)}"
    root = f"{name} ::= ({block})? {answer_start}" if optional else f"{name} ::= {block} {answer_start}"
    return f"{answer}\n{body}\n{root}\n"
