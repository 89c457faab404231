"""`/regex/j`: a regex over *decoded* JSON string contents matches their *encoded* spellings.

The oracle is Python: a string s is accepted in any JSON spelling (json.dumps with and without
ensure_ascii, and random per-character mixes of raw / short escape / \\uXXXX in either hex case /
surrogate pairs) exactly when re.fullmatch(pattern, s) matches. Invalid JSON string bodies (raw
control characters, raw quotes, lone surrogates, bad escapes) are always rejected.
"""

from __future__ import annotations

import json
import random
import re
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corral

TOK = corral.Tokenizer.from_tokens(
    [bytes([b]) for b in range(256)] + [b"<eos>"], special_ids=[256], eos_ids=[256]
)

SHORT = {'"': '\\"', "\\": "\\\\", "/": "\\/"}
SHORT |= {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}

# Patterns over decoded text (Python `re` syntax); `/` is escaped for the grammar text below.
PATTERNS = [
    r"[a-z]+",
    r"[A-Za-z0-9_]{2,8}",
    r"\d{3}",
    r"\d+",
    r".",
    r".{0,10}",
    r"(?s).{0,10}",
    r"[^\"]*",
    r"[^\"\\]{0,8}",
    r"[^a-z]+",
    r"\w+",
    r"\W{1,3}",
    r"\s*",
    r"\S{2,5}",
    r"[é-ü]{1,3}",
    r"[\u0100-\u2fff]+",
    r"[😀-🙏]+",
    r"[\U00010000-\U0010ffff]{1,3}",
    r"[^\x00-\x7f]{1,4}",
    r"[\x00-\x1f]{1,4}",
    r"[\"\\/]+",
    r"a/b\\c\"d",
    r"(ab|c\d)*x?",
    r"(?i)straße",
    r"[\ud7f0-\ue010]{1,2}",
    r"x{2}[^x]{1,2}y?",
]

# Code points Python strings may hold but UTF-8/JSON text cannot carry as characters.
TEXT_CHARS = st.characters(exclude_categories=["Cs"])


def grammar_text(pattern: str) -> str:
    return "root ::= /" + pattern.replace("/", "\\/") + "/j"


@cache
def compiled(pattern: str) -> corral.CompiledGrammar:
    return corral.compile_grammar(grammar_text(pattern), TOK)


def accepts(pattern: str, data: bytes) -> bool:
    m = compiled(pattern).matcher()
    return m.accept_bytes(data) and m.is_accepting()


def u_escape(unit: int, rnd: random.Random) -> str:
    return "\\u" + "".join(rnd.choice((d.lower(), d.upper())) for d in f"{unit:04x}")


def spell(c: str, rnd: random.Random) -> str:
    """One random valid JSON spelling of the character c."""
    cp = ord(c)
    options = []
    if cp >= 0x20 and c not in '"\\':
        options.append(c)
    if c in SHORT:
        options.append(SHORT[c])
    if cp <= 0xFFFF:
        options.append(u_escape(cp, rnd))
    else:
        v = cp - 0x10000
        options.append(u_escape(0xD800 + (v >> 10), rnd) + u_escape(0xDC00 + (v & 0x3FF), rnd))
    return rnd.choice(options)


def spellings(s: str, rnd: random.Random) -> list[bytes]:
    out = [json.dumps(s)[1:-1], json.dumps(s, ensure_ascii=False)[1:-1]]
    out += ["".join(spell(c, rnd) for c in s) for _ in range(3)]
    return [x.encode("utf-8") for x in out]


def check(pattern: str, s: str, rnd: random.Random) -> None:
    expected = re.fullmatch(pattern, s) is not None
    for data in spellings(s, rnd):
        assert accepts(pattern, data) == expected, (pattern, s, data)


def mutations(s: str, rnd: random.Random) -> list[str]:
    """Near misses: s with one character inserted, deleted or replaced."""
    pool = 'aZ09_-"\\/\n\t\x00\x1f\x7fé€\U0001f600\U0010ffff '
    out = []
    for _ in range(4):
        i = rnd.randrange(len(s) + 1)
        c = rnd.choice(pool)
        out.append(s[:i] + c + s[i:])
        if s:
            j = rnd.randrange(len(s))
            out.append(s[:j] + s[j + 1 :])
            out.append(s[:j] + c + s[j + 1 :])
    return out


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_matching_strings_in_every_spelling(pattern: str, data: st.DataObject) -> None:
    s = data.draw(st.from_regex(pattern, fullmatch=True, alphabet=TEXT_CHARS), label="s")
    assert re.fullmatch(pattern, s)
    rnd = data.draw(st.randoms(use_true_random=False))
    check(pattern, s, rnd)
    for near in mutations(s, rnd):
        check(pattern, near, rnd)


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=25, deadline=None)
@given(s=st.text(alphabet=TEXT_CHARS, max_size=8), rnd=st.randoms(use_true_random=False))
def test_arbitrary_strings_agree_with_re(pattern: str, s: str, rnd: random.Random) -> None:
    check(pattern, s, rnd)


def test_exhaustive_bmp_escapes_for_one_class() -> None:
    # Every \uXXXX (both hex cases) and every raw BMP character, against Python's own `re`.
    pattern = r"[^\x00-\x08a-f\u00e9-\u0fff\ue000]"
    rx = re.compile(pattern)
    m0 = compiled(pattern).matcher()
    for cp in range(0x10000):
        surrogate = 0xD800 <= cp <= 0xDFFF
        expected = not surrogate and rx.fullmatch(chr(cp)) is not None
        for text in (f"\\u{cp:04x}", f"\\u{cp:04X}"):
            m = m0.copy()
            assert (m.accept_bytes(text.encode()) and m.is_accepting()) == expected, text
        if not surrogate:
            m = m0.copy()
            raw_ok = expected and cp >= 0x20 and chr(cp) not in '"\\'
            assert (m.accept_bytes(chr(cp).encode()) and m.is_accepting()) == raw_ok, hex(cp)


@pytest.mark.parametrize(
    "data",
    [
        b"a\x01b",  # raw control characters are never valid JSON
        b"\x00",
        b"\n",
        b"\t",
        b'"',  # a raw quote ends the string
        b"\\",  # an unfinished escape
        b"\\x41",  # not a JSON escape
        b"\\U00000041",
        b"\\u004",
        b"\\u004g",
        b"\\ud800",  # lone surrogates
        b"\\udc00",
        b"\\uDBFF",
        b"\\ud800\\ud800",
        b"\\udc00\\ud800",
        b"\\ud800a",
        b"\\ud800\\n",
        b"\xed\xa0\x80",  # a UTF-8-encoded surrogate
        b"\xc0\xaf",  # overlong UTF-8
        b"\xff",
    ],
)
def test_invalid_json_string_bodies_are_rejected(data: bytes) -> None:
    for pattern in (r"(?s).*", r"[^a]*", r"[\x00-\uffff]*"):
        assert not accepts(pattern, data), (pattern, data)


def test_any_character_counts_code_points() -> None:
    pattern = r"(?s).{2,3}"
    assert accepts(pattern, b"\\ud83d\\ude00\\n")  # a surrogate pair is one character
    assert accepts(pattern, "ab😀".encode())
    assert not accepts(pattern, b"\\ud83d\\ude00")
    assert not accepts(pattern, b"abcd")
    assert accepts(pattern, b'\\\\\\"')  # two escaped characters


def test_flag_errors() -> None:
    with pytest.raises(corral.CompileError, match="unknown regex flag") as e:
        corral.compile_grammar("root ::= /ab/x", TOK)
    assert (e.value.line, e.value.column) == (1, 14)
    with pytest.raises(corral.CompileError):
        corral.compile_grammar("root ::= /ab/jj", TOK)
    # Without the flag nothing changes: the regex is over the raw output text.
    g = corral.compile_grammar('root ::= /a"b/ "c"', TOK)
    m = g.matcher()
    assert m.accept_bytes(b'a"bc') and m.is_accepting()
    # Inside a grammar: a JSON string whose decoded value is a lowercase word.
    g = corral.compile_grammar('root ::= "\\"" /[a-z\\/]{1,3}/j "\\""', TOK)
    for text, ok in [(b'"a\\/b"', True), (b'"\\u0061/"', True), (b'"abcd"', False), (b'""', False)]:
        m = g.matcher()
        assert (m.accept_bytes(text) and m.is_accepting()) == ok, text
