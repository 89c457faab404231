"""The grammar operators ``A & B`` (intersection) and ``A - B`` (difference) of regular languages.

The language is checked in both directions against Python's ``re`` applied to each operand
separately (random strings, and strings sampled from the operands so the interesting corner is
well covered); masks are checked for soundness with real tokenizers (random walks never leave
the language), for completeness (sentences are accepted in any tokenization) and for exactness
against the parser; ``/…/j`` operands are checked on every JSON spelling; bad input gets a
CompileError with a position or a LimitExceeded.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable

import pytest
from helpers import byte_tokenizer, bytes_index, mask_matches_accept, random_tokenization, random_walk

import corral

# (id, operand A in grammar syntax, A as a Python regex, operand B, B as a Python regex, alphabet)
CASES = [
    ("keywords", "/[a-z_][a-z0-9_]*/", r"[a-z_][a-z0-9_]*", '("if" | "in" | "int")', r"if|in|int", "fint_0"),
    ("length", "/[a-c]+(-[a-c]+)*/", r"[a-c]+(-[a-c]+)*", "/.{0,6}/", r".{0,6}", "abc-\n"),
    ("modulo", "/(aa)*/", r"(aa)*", "/(aaa)*/", r"(aaa)*", "a"),
    ("suffixes", "/[ab]*a[ab]{2}/", r"[ab]*a[ab]{2}", "/[ab]*b/", r"[ab]*b", "ab"),
    ("unicode", "/[α-ω]+é?/", r"[α-ω]+é?", "/.{2,3}/", r".{2,3}", "αβωéa"),
    ("rules", "word", r"[a-z]+(?:-[a-z]+)*", "short", r"[a-z-]{1,4}", "ab-"),
]
RULES = 'word ::= /[a-z]+/ ("-" /[a-z]+/)*\nshort ::= [a-z-]{1,4}\n'
OPS: dict[str, Callable[[bool, bool], bool]] = {"&": lambda a, b: a and b, "-": lambda a, b: a and not b}


def grammar(a: str, op: str, b: str) -> str:
    return f"root ::= {a} {op} {b}\n{RULES}"


def in_language(compiled: corral.CompiledGrammar, data: bytes) -> bool:
    m = compiled.matcher()
    return m.accept_bytes(data) and m.is_accepting()


def samples(case: tuple[str, ...], tok: corral.Tokenizer, rng: random.Random) -> list[str]:
    """Random strings over the case's alphabet, plus sentences of each operand alone."""
    _, a, _, b, _, alphabet = case
    out = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9))) for _ in range(400)]
    for operand in (a, b):
        g = corral.compile_grammar(f"root ::= {operand}\n{RULES}", tok)
        out += [random_walk(g, rng, max_steps=12, eos_weight=0.3)[0].decode() for _ in range(60)]
    return out


@pytest.mark.parametrize("op", ["&", "-"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_language_is_exact_in_both_directions(case: tuple[str, ...], op: str) -> None:
    name, a, ra, b, rb, _ = case
    tok = byte_tokenizer()
    g = corral.compile_grammar(grammar(a, op, b), tok)
    rng = random.Random(f"{name}{op}")
    for s in samples(case, tok, rng):
        expected = OPS[op](re.fullmatch(ra, s) is not None, re.fullmatch(rb, s) is not None)
        assert in_language(g, s.encode()) == expected, (name, op, s)


def test_precedence_and_chains() -> None:
    tok = byte_tokenizer()
    # Looser than concatenation, tighter than `|`.
    g = corral.compile_grammar('root ::= /[a-z]+/ & /.{0,5}/ | "q1"', tok)
    assert in_language(g, b"abcde") and in_language(g, b"q1")
    assert not in_language(g, b"abcdef")
    g = corral.compile_grammar('root ::= "a" "b" & /.{2}/', tok)
    assert in_language(g, b"ab")
    # A chain reads left to right: ((A & B) - C) - D.
    g = corral.compile_grammar('root ::= /[a-z]/ & /[a-m]/ - "b" - ("c" | "d")', tok)
    assert [c for c in "abcdemnz" if in_language(g, c.encode())] == ["a", "e", "m"]


def test_operators_merge_with_their_neighbours() -> None:
    tok = byte_tokenizer()
    g = corral.compile_grammar('root ::= "<" (/[a-z]+/ - "b") ">" ";"', tok)
    # One terminal: a composite terminal prints as one parenthesised item.
    assert "root ::= (/</ (/[a-z]+/ - /b/) />;/)\n" in g.grammar_text
    assert in_language(g, b"<a>;") and not in_language(g, b"<b>;")


def test_printed_grammar_reparses_to_the_same_language() -> None:
    tok = byte_tokenizer()
    text = 'root ::= "<" ((/[a-z]+/ & /.{0,3}/) | "x" - "y")* ">" (/[0-9]+/ - "0")'
    g = corral.compile_grammar(text, tok)
    again = corral.compile_grammar(g.grammar_text, tok, start="start")
    for s in [b"<abc>1", b"<>10", b"<x>0", b"<abcd>1", b"<y>1", b"<a>01", b"<abxab>7"]:
        assert in_language(g, s) == in_language(again, s), s


# ---- masks with real tokenizers ------------------------------------------------------------

KEYS = r"""
root  ::= "{" pair ("," pair)* "}"
pair  ::= "\"" key "\"" ":" [0-9]{1,3}
key   ::= (/[a-z][a-z_]*/ & /.{1,8}/) - ("id" | "name" | "type")
"""


def key_ok(s: str) -> bool:
    m = re.fullmatch(r"\{(.*)\}", s)
    if not m:
        return False
    for pair in m.group(1).split(","):
        pm = re.fullmatch(r'"([^"]*)":[0-9]{1,3}', pair)
        if not pm:
            return False
        key = pm.group(1)
        if not re.fullmatch(r"[a-z][a-z_]{0,7}", key) or key in ("id", "name", "type"):
            return False
    return True


@pytest.mark.real_tokenizer
def test_walks_under_the_mask_stay_in_the_language(
    smollm2: corral.Tokenizer, llama32: corral.Tokenizer
) -> None:
    for tok in (smollm2, llama32):
        g = corral.compile_grammar(KEYS, tok)
        rng = random.Random(7)
        for _ in range(25):
            out, _ = random_walk(g, rng, max_steps=25, eos_weight=0.2)
            assert key_ok(out.decode()), out


@pytest.mark.real_tokenizer
def test_sentences_are_accepted_in_any_tokenization(llama32: corral.Tokenizer) -> None:
    g = corral.compile_grammar(KEYS, llama32)
    index = bytes_index(llama32)
    rng = random.Random(3)
    for s in ['{"ids":1}', '{"a":12,"type_x":3}', '{"names":0,"typ":999}']:
        for ids in (llama32.encode(s), random_tokenization(s.encode(), index, rng)):
            m = g.matcher()
            assert all(m.accept_token(t) for t in ids), s
            assert m.is_accepting(), s
    for s in ['{"id":1}', '{"a":1,"name":2}', '{"abcdefghi":1}']:
        m = g.matcher()
        assert not (all(m.accept_token(t) for t in llama32.encode(s)) and m.is_accepting()), s


@pytest.mark.real_tokenizer
def test_mask_equals_parser_inside_and_across_the_operator(llama32: corral.Tokenizer) -> None:
    g = corral.compile_grammar(KEYS, llama32)
    rng = random.Random(5)
    relevant = [
        i
        for i, b in enumerate(llama32.token_bytes)
        if b and set(b) <= set(b'{}",:_0123456789abcdefghijklmnopqrstuvwxyz')
    ]
    sample = sorted(
        set(rng.sample(relevant, min(3000, len(relevant))) + rng.sample(range(llama32.width), 500))
    )
    m = g.matcher()
    for piece in [b'{"', b"i", b"d", b"_", b'":1', b',"nam', b"e", b"s", b'":2}']:
        mask_matches_accept(m, llama32, sample)
        assert m.accept_bytes(piece), piece
    assert m.is_accepting()


# ---- /…/j operands -----------------------------------------------------------------------------


def spellings(value: str, rng: random.Random) -> str:
    """A random JSON spelling of the string body of `value` (raw, short or \\u escapes)."""
    out = []
    for ch in value:
        r = rng.random()
        if ch in '"\\' or ord(ch) < 0x20 or r < 0.3:
            code = f"{ord(ch):04x}"
            out.append("\\u" + (code.upper() if rng.random() < 0.5 else code))
        else:
            out.append(ch)
    return "".join(out)


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        (r'root ::= "\"" (/[a-z]+/j & /.{0,3}/j) "\""', lambda v: re.fullmatch(r"[a-z]{1,3}", v) is not None),
        (
            r'root ::= "\"" (/[a-z]{1,5}/j - /null|true|false/j) "\""',
            lambda v: re.fullmatch(r"[a-z]{1,5}", v) is not None and v not in ("null", "true", "false"),
        ),
    ],
)
def test_json_string_operands_work_on_every_spelling(text: str, ok: Callable[[str], bool]) -> None:
    tok = byte_tokenizer()
    g = corral.compile_grammar(text, tok)
    rng = random.Random(text)
    values = ["abc", "abcd", "null", "nul", "truex", "true", "a", "", "aB", "é", "x\ny"]
    values += ["".join(rng.choice("abcdelnrtuA") for _ in range(rng.randint(0, 6))) for _ in range(80)]
    for v in values:
        for _ in range(4):
            body = spellings(v, rng)
            assert json.loads(f'"{body}"') == v
            assert in_language(g, f'"{body}"'.encode()) == ok(v), (v, body)
    for _ in range(20):  # walks under the mask produce only valid JSON strings in the language
        out, _ = random_walk(g, rng, max_steps=20)
        assert ok(json.loads(out)), out


# ---- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "column", "needle"),
    [
        ('root ::= /[()]*/ & paren\nparen ::= "(" paren ")" | ""', 1, 20, "rule 'paren' is recursive"),
        (
            'root ::= "x" - wrap\nwrap ::= "[" inner "]"\ninner ::= wrap | ""',
            1,
            16,
            "'wrap' -> 'inner' -> 'wrap'",
        ),
        ('root ::= "a" & root', 1, 16, "recursive"),
        ("root ::= /.*/ - <|eot_id|>", 1, 17, "names the token <|eot_id|>"),
        ('root ::= "a" & w\nw ::= "b" <[5]>', 1, 16, "rule 'w' names the token"),
        ('root ::= & "a"', 1, 10, "expected an expression before `&`"),
        ('root ::= "a" &', 1, 15, "expected an expression after `&`"),
        ('root ::= "a" - | "b"', 1, 16, "expected an expression after `-`"),
        ('root ::= ("a" &)', 1, 16, "expected an expression after `&`"),
        ('root ::= "a" |  - "b"', 1, 17, "expected an expression before `-`"),
        ('root ::= "a" &\nx ::= "b"', 2, 1, "expected an expression after `&`"),
        ("root ::= /[a-z]+/ - /[a-z]*/", 0, 0, "matches no string"),
    ],
)
def test_errors_name_line_and_column(text: str, line: int, column: int, needle: str) -> None:
    with pytest.raises(corral.CompileError) as ei:
        corral.compile_grammar(text, byte_tokenizer())
    assert needle in str(ei.value), str(ei.value)
    if line:
        assert (ei.value.line, ei.value.column) == (line, column), str(ei.value)


def test_minus_elsewhere_is_unchanged() -> None:
    tok = byte_tokenizer()
    g = corral.compile_grammar('root ::= [a-c-]+ /[x-z]-/ "-" my-rule\nmy-rule ::= "-"', tok)
    assert in_language(g, b"a-cy---")
    g = corral.compile_grammar('root ::= my-rule - "b"\nmy-rule ::= [a-c]', tok)
    assert in_language(g, b"a") and not in_language(g, b"b")


@pytest.mark.parametrize(
    ("text", "limits", "limit"),
    [
        ("root ::= /(a{7})*/ & /(a{11})*/", {"max_dfa_states": 50}, "max_dfa_states"),
        ("root ::= /(a{101})*/ & /(a{103})*/ & /(a{107})*/", {}, "max_dfa_states"),
        ("root ::= /[ab]*/ - /[ab]*a[ab]{16}/", {}, "max_dfa_states"),
        (
            'root ::= r30 & /.*/\nr0 ::= "ab"\n'
            + "".join(f"r{i} ::= r{i - 1} r{i - 1}\n" for i in range(1, 31)),
            {},
            "max_nfa_states",
        ),
    ],
)
def test_hostile_products_hit_a_limit_fast(text: str, limits: dict[str, int], limit: str) -> None:
    t0 = time.process_time()  # CPU time: a loaded machine does not fail it
    with pytest.raises(corral.LimitExceeded) as ei:
        corral.compile_grammar(text, byte_tokenizer(), **limits)
    assert ei.value.limit == limit, str(ei.value)
    assert time.process_time() - t0 < 5.0
