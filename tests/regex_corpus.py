"""The regex corpus shared by the constraint tests and the benchmark: hand-written patterns
covering the supported syntax, plus deterministically generated ones."""

from __future__ import annotations

import random

HAND_WRITTEN: list[str] = [
    # literals, alternation, quantifiers
    r"abc",
    r"a|b|c",
    r"a*",
    r"a+b*",
    r"(ab)+",
    r"a?b?c?",
    r"x{3}",
    r"x{2,}",
    r"x{,2}y",
    r"x{2,4}",
    r"(ab|a)(bc|c)",
    r"(a|aa)*",
    r"((a*)*)*b",
    r"(a|b)*a(a|b){3}",
    r"(foo|foobar)(bar)?",
    r"a+?b",
    r"(a|b)*?c",
    r"x{1,3}?y",
    r"(?:foo|bar)+",
    r"(?P<x>ab)c",
    r"^abc$",
    r"\Aabc\Z",
    r"(ab|cd|ef){0,3}",
    r"(x|xy|xyz)+z?",
    r"()a",
    r"a(|b)",
    r"(a*)+b?",
    # classes and escapes
    r"[a-z]+",
    r"[^a-z]{1,5}",
    r"[A-Z][a-z]*( [A-Z][a-z]*)*",
    r"[\]\-\\]+",
    r"\.\*\+\?",
    r"\x41\u00e9",
    r"\t\n?",
    r"[^\n]{0,4}",
    r"[-a]+",
    r"[a-]+",
    r"[]a]+",
    r"[\d\s]+",
    r"[^\W\d]+",
    r"\d+",
    r"\D\d",
    r"\w+",
    r"\W+",
    r"\s+",
    r"\S\s\S",
    r"[.]+",
    r"\{\}\[\]\(\)",
    # dot and flags
    r".{0,5}",
    r"(?s).{2}",
    r".x.",
    r"(?i)hello",
    r"(?i)[a-c]+z",
    r"(?x) a b  # comment",
    r"(?s)a.b",
    # unicode
    r"[α-ω]+",
    r"日本語|中文",
    r"é+",
    r"[😀-🙏]{1,3}",
    r"(ü|ö|ä)+ß",
    r"[^\x00-\x7f]+",
    r"\u2581?x",
    r"[\u0400-\u04ff]{2,6}",
    r"(?i)straße",
    # realistic
    r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}",
    r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])",
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})",
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    r"\+?[1-9]\d{0,2}[ -]?\(?\d{1,4}\)?([ -]?\d{2,4}){2,4}",
    r"((25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(25[0-5]|2[0-4]\d|1?\d?\d)",
    r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?",
    r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"',
    r"(true|false|null)",
    r"(yes|no|maybe)( \(\d{1,2}%\))?",
    r"https?://[a-z0-9-]+(\.[a-z0-9-]+)+(/[a-zA-Z0-9_.-]*)*",
    r"#[0-9a-fA-F]{6}",
    r"[A-Z]{3}-\d{3,5}",
    r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{1,2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4}",
    r"\$\d{1,3}(,\d{3})*(\.\d{2})?",
    r"[a-z_][a-z0-9_]*\([a-z0-9_, ]*\)",
    r"(\w+ ){2,5}\w+\.",
    r"<(b|i|u)>[^<>]{1,10}</(b|i|u)>",
    r"(0|1)+",
    r"(red|green|blue)(, (red|green|blue)){0,2}",
    r"P(\d+Y)?(\d+M)?(\d+D)?(T(\d+H)?(\d+M)?(\d+S)?)?",
    r"[a-z]+(-[a-z]+)*",
    r"\d{1,3}(\.\d{1,3}){3}",
    r"(\d{2}:){2}\d{2}",
]

_ATOMS = ["a", "b", "c", "é", "ü", "漢", "😀", "[ab]", "[^a]", r"\d", ".", "[a-c漢]", r"\w", "x"]


def _gen(rng: random.Random, depth: int) -> str:
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(_ATOMS)
    kind = rng.choice(["cat", "cat", "alt", "star", "plus", "opt", "count", "group"])
    if kind == "cat":
        return _gen(rng, depth - 1) + _gen(rng, depth - 1)
    if kind == "alt":
        return "(" + _gen(rng, depth - 1) + "|" + _gen(rng, depth - 1) + ")"
    inner = "(" + _gen(rng, depth - 1) + ")"
    if kind == "star":
        return inner + "*"
    if kind == "plus":
        return inner + "+"
    if kind == "opt":
        return inner + "?"
    if kind == "count":
        lo = rng.randint(0, 2)
        return inner + f"{{{lo},{lo + rng.randint(0, 2)}}}"
    return inner


def generated(n: int = 50, seed: int = 1234) -> list[str]:
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        p = _gen(rng, 4)
        if p not in out:
            out.append(p)
    return out


CORPUS: list[str] = HAND_WRITTEN + generated()
