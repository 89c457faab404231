"""Random constraints for the fuzzer, each with a way to sample strings of its language.

Regexes and grammars are built as small trees over a little alphabet (ASCII letters, a dash, a
space and a two-byte character, so tokens that split a UTF-8 sequence are exercised) and
rendered to corral's syntax — and, for grammars, to Lark's, which is the reference parser.
Schemas come from a random generator or from mutating real schemas (``mutate_schema``).
"""

from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass
from typing import Any

ALPHABET = ["a", "b", "c", "-", " ", "é"]


# -- regexes -----------------------------------------------------------------------------------
@dataclass
class Rx:
    kind: str  # lit, cls, any, cat, alt, rep
    value: Any = None
    kids: list[Rx] | None = None
    lo: int = 0
    hi: int | None = None


def _esc(ch: str) -> str:
    return "\\" + ch if ch in ".^$*+?{}[]\\|()-/ " else ch


def random_regex(rng: random.Random, depth: int = 0) -> Rx:
    r = rng.random()
    if depth > 3 or r < 0.3:
        if rng.random() < 0.7:
            return Rx("lit", rng.choice(ALPHABET))
        if rng.random() < 0.2:
            return Rx("any")
        return Rx("cls", sorted(set(rng.sample(ALPHABET, rng.randint(1, 3)))))
    if r < 0.55:
        return Rx("cat", kids=[random_regex(rng, depth + 1) for _ in range(rng.randint(2, 4))])
    if r < 0.75:
        return Rx("alt", kids=[random_regex(rng, depth + 1) for _ in range(rng.randint(2, 3))])
    lo = rng.randint(0, 2)
    hi = rng.choice([None, lo, lo + rng.randint(1, 3)])
    return Rx("rep", kids=[random_regex(rng, depth + 1)], lo=lo, hi=hi)


def render_regex(n: Rx) -> str:
    if n.kind == "lit":
        return _esc(n.value)
    if n.kind == "any":
        return "."
    if n.kind == "cls":
        return "[" + "".join(_esc(c) for c in n.value) + "]"
    if n.kind == "cat":
        return "".join(render_regex(k) for k in n.kids or [])
    if n.kind == "alt":
        return "(" + "|".join(render_regex(k) for k in n.kids or []) + ")"
    inner = "(" + render_regex((n.kids or [])[0]) + ")"
    if n.hi is None:
        return inner + ("*" if n.lo == 0 else "+" if n.lo == 1 else f"{{{n.lo},}}")
    return inner + (f"{{{n.lo}}}" if n.lo == n.hi else f"{{{n.lo},{n.hi}}}")


def sample_regex(n: Rx, rng: random.Random) -> str:
    if n.kind == "lit":
        return str(n.value)
    if n.kind == "any":
        return rng.choice(ALPHABET + ["x", "Ω"])
    if n.kind == "cls":
        return rng.choice(n.value)
    if n.kind == "cat":
        return "".join(sample_regex(k, rng) for k in n.kids or [])
    if n.kind == "alt":
        return sample_regex(rng.choice(n.kids or []), rng)
    hi = n.hi if n.hi is not None else n.lo + 3
    return "".join(sample_regex((n.kids or [])[0], rng) for _ in range(rng.randint(n.lo, hi)))


def shrink_regex(n: Rx) -> list[Rx]:
    """Smaller variants of ``n`` (for minimising a failing case): each child alone, and each
    child shrunk in place."""
    out: list[Rx] = []
    for i, k in enumerate(n.kids or []):
        out.append(k)
        for s in shrink_regex(k):
            kids = list(n.kids or [])
            kids[i] = s
            out.append(Rx(n.kind, n.value, kids, n.lo, n.hi))
    if n.kind == "cls" and len(n.value) > 1:
        out += [Rx("cls", [c]) for c in n.value]
    return out


# -- grammars ----------------------------------------------------------------------------------
# An expression: ("lit", str) | ("ref", i) | ("seq", [e]) | ("alt", [e]) | ("opt"|"star", e)
Expr = tuple


@dataclass
class Cfg:
    rules: list[list[Expr]]  # rule i: alternatives; alternative 0 never refers to a rule >= i


def random_grammar(rng: random.Random) -> Cfg:
    n = rng.randint(1, 4)
    rules: list[list[Expr]] = []
    for _ in range(n):

        def expr(depth: int, base: bool) -> Expr:
            r = rng.random()
            if depth > 2 or r < 0.35:
                if not base and rng.random() < 0.4:
                    return ("ref", rng.randrange(n))
                return ("lit", "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 2))))
            if r < 0.6:
                return ("seq", [expr(depth + 1, base) for _ in range(rng.randint(2, 3))])
            if r < 0.8:
                return ("alt", [expr(depth + 1, base) for _ in range(2)])
            return (rng.choice(["opt", "star"]), expr(depth + 1, base))

        # Alternative 0 has no references (a base case), so every rule derives a string.
        rules.append([expr(0, True)] + [expr(0, False) for _ in range(rng.randint(0, 2))])
    return Cfg(rules)


def _gbnf_lit(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _render(e: Expr, ref: Any, lit: Any) -> str:
    k = e[0]
    if k == "lit":
        return lit(e[1])
    if k == "ref":
        return ref(e[1])
    if k == "seq":
        return " ".join(_render(x, ref, lit) for x in e[1])
    if k == "alt":
        return "(" + " | ".join(_render(x, ref, lit) for x in e[1]) + ")"
    return "(" + _render(e[1], ref, lit) + ")" + ("?" if k == "opt" else "*")


def render_gbnf(g: Cfg) -> str:
    lines = ["root ::= r0"]
    for i, alts in enumerate(g.rules):
        lines.append(f"r{i} ::= " + " | ".join(_render(a, lambda j: f"r{j}", _gbnf_lit) for a in alts))
    return "\n".join(lines) + "\n"


def render_lark(g: Cfg) -> str:
    lines = ["start: r0"]
    for i, alts in enumerate(g.rules):
        lines.append(
            f"r{i}: "
            + " | ".join(
                _render(a, lambda j: f"r{j}", lambda s: json.dumps(s, ensure_ascii=False)) for a in alts
            )
        )
    return "\n".join(lines) + "\n"


def sample_grammar(g: Cfg, rng: random.Random, budget: int = 40) -> str:
    out: list[str] = []
    # An explicit stack (no recursion); past the budget only base alternatives are taken.
    stack: list[Expr] = [("ref", 0)]
    steps = 0
    while stack:
        e = stack.pop()
        steps += 1
        k = e[0]
        if k == "lit":
            out.append(e[1])
        elif k == "ref":
            alts = g.rules[e[1]]
            stack.append(alts[0] if steps > budget else rng.choice(alts))
        elif k == "seq":
            stack.extend(reversed(e[1]))
        elif k == "alt":
            stack.append(rng.choice(e[1]))
        elif k == "opt":
            if steps <= budget and rng.random() < 0.5:
                stack.append(e[1])
        elif k == "star" and steps <= budget:
            stack.extend([e[1]] * rng.randint(0, 2))
    return "".join(out)


# -- JSON Schemas -----------------------------------------------------------------------------
def random_schema(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    r = rng.random()
    if depth > 2 or r < 0.4:
        return rng.choice(
            [
                {"type": "integer", "minimum": rng.randint(-5, 5), "maximum": rng.randint(5, 50)},
                {"type": "string", "maxLength": rng.randint(0, 6)},
                {"type": "string", "pattern": "^[a-c]{1,3}$"},
                {"enum": ["x", 1, None, True]},
                {"type": "boolean"},
                {"type": "number", "exclusiveMinimum": 0},
                {"const": "k"},
            ]
        )
    if r < 0.7:
        props = {f"p{i}": random_schema(rng, depth + 1) for i in range(rng.randint(1, 3))}
        required = rng.sample(sorted(props), rng.randint(0, len(props)))
        return {
            "type": "object",
            "properties": props,
            "required": required,
            "additionalProperties": rng.random() < 0.5,
        }
    if r < 0.85:
        return {"type": "array", "items": random_schema(rng, depth + 1), "maxItems": rng.randint(0, 3)}
    return {rng.choice(["anyOf", "oneOf", "allOf"]): [random_schema(rng, depth + 1) for _ in range(2)]}


_MUTATIONS = ["drop", "type", "bound", "required", "wrap"]


def mutate_schema(schema: Any, rng: random.Random) -> Any:
    """A near-miss variant of a real schema: one keyword dropped, retyped, re-bounded, a
    required name added, or the node wrapped in anyOf/not."""
    out = copy.deepcopy(schema)
    nodes: list[dict[str, Any]] = []
    stack = [out]
    while stack and len(nodes) < 5000:
        n = stack.pop()
        if isinstance(n, dict):
            nodes.append(n)
            stack.extend(v for v in n.values() if isinstance(v, (dict, list)))
        elif isinstance(n, list):
            stack.extend(v for v in n if isinstance(v, (dict, list)))
    if not nodes:
        return out
    n = rng.choice(nodes)
    m = rng.choice(_MUTATIONS)
    if m == "drop" and n:
        n.pop(rng.choice(sorted(n)))
    elif m == "type":
        n["type"] = rng.choice(["string", "integer", "object", "array", ["string", "null"]])
    elif m == "bound":
        n[rng.choice(["minimum", "maximum", "minLength", "maxLength", "maxItems"])] = rng.randint(0, 5)
    elif m == "required":
        n.setdefault("required", [])
        if isinstance(n["required"], list):
            n["required"].append(rng.choice(["id", "name", "x"]))
    else:
        inner = dict(n)
        n.clear()
        n[rng.choice(["anyOf", "not"])] = [inner, {"type": "null"}] if rng.random() < 0.5 else inner
        if "not" in n and isinstance(n["not"], list):
            n["not"] = n["not"][0]
    return out
