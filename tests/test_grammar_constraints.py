"""Grammar constraints against reference checkers: random walks under the mask produce only
sentences of the language (soundness), and sentences generated independently are accepted in
any tokenization (completeness) — for recursive, ambiguous and nullable grammars."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

import pytest
from helpers import byte_tokenizer, bytes_index, mask_matches_accept, random_tokenization, random_walk

import corral

ARITH = r"""
root   ::= expr
expr   ::= term ( ("+" | "-") term )*
term   ::= factor ( ("*" | "/") factor )*
factor ::= [0-9]+ | "(" expr ")" | "-" factor
"""

BRACKETS = r"""
root ::= ( "(" root ")" | "[" root "]" | "{" root "}" )*
"""

AMBIGUOUS = r"""
root ::= a b
a    ::= "x"* | a "x"
b    ::= "x"* "y"?
"""

LISTS = r"""
root  ::= "[" ws ( item ( ws "," ws item )* )? ws "]"
item  ::= /[a-z]{1,3}/ | root | <[0]>? "z"
ws    ::= " "{0,2}
"""


def arith_ok(s: str) -> bool:
    pos = 0

    def expr() -> bool:
        nonlocal pos
        if not term():
            return False
        while pos < len(s) and s[pos] in "+-":
            pos += 1
            if not term():
                return False
        return True

    def term() -> bool:
        nonlocal pos
        if not factor():
            return False
        while pos < len(s) and s[pos] in "*/":
            pos += 1
            if not factor():
                return False
        return True

    def factor() -> bool:
        nonlocal pos
        if pos < len(s) and s[pos].isdigit():
            while pos < len(s) and s[pos] in "0123456789":
                pos += 1
            return True
        if pos < len(s) and s[pos] == "(":
            pos += 1
            if not expr() or pos >= len(s) or s[pos] != ")":
                return False
            pos += 1
            return True
        if pos < len(s) and s[pos] == "-":
            pos += 1
            return factor()
        return False

    return expr() and pos == len(s)


def brackets_ok(s: str) -> bool:
    stack: list[str] = []
    pairs = {")": "(", "]": "[", "}": "{"}
    for c in s:
        if c in "([{":
            stack.append(c)
        elif c in pairs:
            if not stack or stack.pop() != pairs[c]:
                return False
        else:
            return False
    return not stack


def gen_arith(rng: random.Random, depth: int = 0) -> str:
    def factor(d: int) -> str:
        r = rng.random()
        if r < 0.5 or d > 3:
            return str(rng.randint(0, 999))
        if r < 0.8:
            return "(" + gen_arith(rng, d + 1) + ")"
        return "-" + factor(d + 1)

    def term(d: int) -> str:
        return factor(d) + "".join(rng.choice("*/") + factor(d) for _ in range(rng.randint(0, 2)))

    return term(depth) + "".join(rng.choice("+-") + term(depth) for _ in range(rng.randint(0, 2)))


def gen_brackets(rng: random.Random, depth: int = 0) -> str:
    out = ""
    for _ in range(rng.randint(0, 3 if depth < 4 else 0)):
        o, c = rng.choice(["()", "[]", "{}"])
        out += o + gen_brackets(rng, depth + 1) + c
    return out


CASES: list[tuple[str, str, Callable[[str], bool], Callable[[random.Random], str]]] = [
    ("arith", ARITH, arith_ok, gen_arith),
    ("brackets", BRACKETS, brackets_ok, gen_brackets),
    (
        "ambiguous",
        AMBIGUOUS,
        lambda s: re.fullmatch(r"x*y?", s) is not None,
        lambda r: "x" * r.randint(0, 9) + r.choice(["", "y"]),
    ),
]


@pytest.mark.parametrize(("name", "grammar", "ok", "gen"), CASES, ids=[c[0] for c in CASES])
def test_walks_are_sound(name: str, grammar: str, ok: Callable[[str], bool], gen: object) -> None:
    tok = byte_tokenizer([b"((", b"))", b"12", b"+(", b")*", b"xx", b"xy", b"[]", b"{[", b"]}"])
    g = corral.compile_grammar(grammar, tok)
    rng = random.Random(name)
    for _ in range(25):
        out, _ = random_walk(g, rng, max_steps=30, eos_weight=0.2)
        assert ok(out.decode()), f"{name}: produced {out!r}"


@pytest.mark.parametrize(("name", "grammar", "ok", "gen"), CASES, ids=[c[0] for c in CASES])
def test_generated_sentences_accepted(
    name: str,
    grammar: str,
    ok: Callable[[str], bool],
    gen: Callable[[random.Random], str],
    llama32: corral.Tokenizer,
) -> None:
    g = corral.compile_grammar(grammar, llama32)
    index = bytes_index(llama32)
    rng = random.Random(1)
    for _ in range(30):
        s = gen(rng)
        assert ok(s), s
        for ids in (llama32.encode(s), random_tokenization(s.encode(), index, rng)):
            m = g.matcher()
            assert all(m.accept_token(t) for t in ids), s
            assert m.is_accepting(), s


def test_mask_equals_parser_for_recursive_grammar() -> None:
    tok = byte_tokenizer([b"((", b"))", b"12", b"+(", b")*", b"1)", b"(-"])
    g = corral.compile_grammar(ARITH, tok)
    m = g.matcher()
    for piece in [b"((", b"1", b"+(", b"-", b"12", b")*", b"3", b"))"]:
        mask_matches_accept(m, tok)
        assert m.accept_bytes(piece)
    assert m.is_accepting()


def test_list_grammar_with_regex_terminals_and_token_reference() -> None:
    tok = byte_tokenizer()
    g = corral.compile_grammar(LISTS, tok)
    m = g.matcher()
    assert m.accept_bytes(b"[ab, [x,[]],  z]")
    assert m.is_accepting()
    assert not g.matcher().accept_bytes(b"[abcd]")
    # <[0]> names token 0 (the byte 0x00 here): allowed only as that token, before "z"
    m2 = g.matcher()
    assert m2.accept_bytes(b"[")
    assert m2.accept_token(0)
    assert m2.accept_bytes(b"z]") and m2.is_accepting()
