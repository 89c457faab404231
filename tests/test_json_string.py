"""`/regex/j`: a regex over *decoded* JSON string contents matches their *encoded* spellings.

The oracle is Python: a string s is accepted in any JSON spelling (json.dumps with and without
ensure_ascii, and random per-character mixes of raw / short escape / \\uXXXX in either hex case /
surrogate pairs) exactly when re.fullmatch(pattern, s) matches. Invalid JSON string bodies (raw
control characters, raw quotes, lone surrogates, bad escapes) are always rejected.

`/regex/c` (last section): the same, but only the canonical spelling
``json.dumps(s, ensure_ascii=False)[1:-1]`` is accepted; every other spelling is rejected.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from functools import cache

import pytest
from helpers import allowed, bytes_index
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


# ---- /regex/c: only the canonical spelling, json.dumps(s, ensure_ascii=False) ------------------

# Spellings of single characters that are valid JSON but never canonical.
NON_CANONICAL = {"/": ["\\/", "\\u002f", "\\u002F"], "\n": ["\\u000a", "\\u000A"], "a": ["\\u0061"]}


def canonical(s: str) -> bytes:
    return json.dumps(s, ensure_ascii=False)[1:-1].encode("utf-8")


def canonical_grammar(pattern: str) -> str:
    return "root ::= /" + pattern.replace("/", "\\/") + "/c"


@cache
def compiled_c(pattern: str) -> corral.CompiledGrammar:
    return corral.compile_grammar(canonical_grammar(pattern), TOK)


def accepts_c(pattern: str, data: bytes) -> bool:
    m = compiled_c(pattern).matcher()
    return m.accept_bytes(data) and m.is_accepting()


def other_spellings(s: str, rnd: random.Random) -> list[bytes]:
    """Valid JSON spellings of s that differ from the canonical one (none when s is empty)."""
    out = [json.dumps(s)[1:-1].encode()]  # ensure_ascii=True
    out += [x for x in spellings(s, rnd)[2:]]  # random per-character mixes
    for i, c in enumerate(s):  # exactly one character spelled differently
        alternatives = [
            x
            for x in NON_CANONICAL.get(c, []) + [spell(c, rnd), f"\\u{ord(c):04X}"]
            if ord(c) <= 0xFFFF or x != f"\\u{ord(c):04X}"
        ]
        alt = rnd.choice(alternatives)
        out.append(
            (
                json.dumps(s[:i], ensure_ascii=False)[1:-1]
                + alt
                + json.dumps(s[i + 1 :], ensure_ascii=False)[1:-1]
            ).encode()
        )
    return [x for x in out if x != canonical(s)]


def check_c(pattern: str, s: str, rnd: random.Random) -> None:
    expected = re.fullmatch(pattern, s) is not None
    assert accepts_c(pattern, canonical(s)) == expected, (pattern, s)
    for data in other_spellings(s, rnd):
        assert json.loads(b'"' + data + b'"') == s
        assert not accepts_c(pattern, data), (pattern, s, data)


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_canonical_matching_strings(pattern: str, data: st.DataObject) -> None:
    s = data.draw(st.from_regex(pattern, fullmatch=True, alphabet=TEXT_CHARS), label="s")
    rnd = data.draw(st.randoms(use_true_random=False))
    check_c(pattern, s, rnd)
    for near in mutations(s, rnd):
        check_c(pattern, near, rnd)


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=20, deadline=None)
@given(s=st.text(alphabet=TEXT_CHARS, max_size=8), rnd=st.randoms(use_true_random=False))
def test_canonical_arbitrary_strings_agree_with_re(pattern: str, s: str, rnd: random.Random) -> None:
    check_c(pattern, s, rnd)


def test_canonical_every_single_character() -> None:
    # Each BMP character and sampled astral ones: its canonical spelling and nothing else.
    m0 = compiled_c(r"(?s).").matcher()
    for cp in [*range(0xD800), *range(0xE000, 0x10000), *range(0x10000, 0x110000, 101), 0x10FFFF]:
        c = chr(cp)
        m = m0.copy()
        assert m.accept_bytes(canonical(c)) and m.is_accepting(), hex(cp)
        for data in {f"\\u{cp:04x}", f"\\u{cp:04X}", c} if cp <= 0xFFFF else {c}:
            if data.encode() != canonical(c):
                m = m0.copy()
                assert not (m.accept_bytes(data.encode()) and m.is_accepting()), (hex(cp), data)


@pytest.mark.parametrize(
    ("data", "ok"),
    [
        (b"\\u001f", True),  # Python writes lower-case hex
        (b"\\u001F", False),
        (b"\\u000b", True),
        (b"\\u000B", False),
        (b"\\u0000", True),
        (b"\\n", True),
        (b"\\u000a", False),
        (b"\\t\\b\\f\\r", True),
        (b"\\u0009", False),
        (b'\\"', True),
        (b"\\u0022", False),
        (b"\\\\", True),
        (b"\\u005c", False),
        (b"/", True),
        (b"\\/", False),
        (b"\x7f", True),  # DEL is not escaped
        (b"\\u007f", False),
        (b"\\u0061", False),
        ("é😀".encode(), True),
        (b"\\u00e9", False),
        (b"\\ud83d\\ude00", False),
        (b"\\uD83D\\uDE00", False),
        (b"\\ud800", False),  # lone surrogates never match
        (b"\n", False),  # raw control characters are never valid JSON
        (b'"', False),
    ],
)
def test_canonical_spellings_of_any_string(data: bytes, ok: bool) -> None:
    assert accepts_c(r"(?s).*", data) == ok
    if ok:
        assert canonical(json.loads(b'"' + data + b'"')) == data


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        (r'root ::= "\"" (/[a-z]+/c & /.{0,3}/j) "\""', lambda v: re.fullmatch(r"[a-z]{1,3}", v) is not None),
        (r'root ::= "\"" (/[a-z]+/c & /.{0,3}/c) "\""', lambda v: re.fullmatch(r"[a-z]{1,3}", v) is not None),
        (
            r'root ::= "\"" (/[a-z\/]{1,5}/c - /null|true|a\/b/c) "\""',
            lambda v: re.fullmatch(r"[a-z/]{1,5}", v) is not None and v not in ("null", "true", "a/b"),
        ),
        (
            r'root ::= "\"" (/(?s).{0,4}/c - /[a-z]*/j) "\""',
            lambda v: len(v) <= 4 and not re.fullmatch("[a-z]*", v),
        ),
    ],
)
def test_canonical_operands_of_the_algebra(text: str, ok: Callable[[str], bool]) -> None:
    g = corral.compile_grammar(text, TOK)
    rnd = random.Random(text)
    values = ["abc", "abcd", "null", "nul", "true", "a/b", "a", "", "aB", "é", "x\ny", "\x01", "/"]
    values += ["".join(rnd.choice('abclnrtu/\n"\\é') for _ in range(rnd.randint(0, 6))) for _ in range(80)]
    for v in values:
        m = g.matcher()
        assert (m.accept_bytes(b'"' + canonical(v) + b'"') and m.is_accepting()) == ok(v), v
        for data in other_spellings(v, rnd):
            m = g.matcher()
            assert not (m.accept_bytes(b'"' + data + b'"') and m.is_accepting()), (v, data)


def test_canonical_flag_errors() -> None:
    for text, column in [("root ::= /ab/cc", 15), ("root ::= /ab/jc", 15), ("root ::= /ab/cj", 15)]:
        with pytest.raises(corral.CompileError) as e:
            corral.compile_grammar(text, TOK)
        assert (e.value.line, e.value.column) == (1, column), text


# Keys the way a JSON Schema converter writes them: re.escape of the name, `/` escaped.
KEYS = ["arguments", "name", "a/b", 'say "hi"', "back\\slash", "tab\there", "ctl\x01\x1f", "é😀 x", "\x7f"]


def key_terminal(name: str, flag: str) -> str:
    return "/" + re.escape(name).replace("/", "\\/") + "/" + flag


@pytest.mark.parametrize("name", KEYS)
def test_canonical_keys_are_forced(name: str) -> None:
    grammar = f'root ::= "{{" "\\"" {key_terminal(name, "c")} "\\"" ":" [0-9]+ "}}"'
    m = corral.compile_grammar(grammar, TOK).matcher()
    assert m.accept_bytes(b"{")
    expected = b'"' + canonical(name) + b'":'
    assert m.forced_bytes() == expected
    assert m.accept_bytes(b'"')
    assert m.forced_bytes() == expected[1:]  # after the opening quote: the whole key
    # With `j` jump-ahead stops at the first character that has several spellings.
    any_spelling = grammar.replace(key_terminal(name, "c"), key_terminal(name, "j"))
    m = corral.compile_grammar(any_spelling, TOK).matcher()
    assert m.accept_bytes(b'{"')
    assert len(m.forced_bytes()) < len(expected) - 1


def canonical_prefix_ok(body: bytes) -> bool:
    """Is `body` a prefix of some canonical JSON string body (possibly followed by the closing
    quote)? Works on bytes: raw UTF-8 needs no check beyond 'no control byte'."""
    short = set(b'"\\bfnrt')
    i = 0
    while i < len(body):
        c = body[i]
        if c == ord('"'):
            return i == len(body) - 1  # the closing quote ends the string (and the grammar)
        if c < 0x20:
            return False
        if c != ord("\\"):
            i += 1
            continue
        if i + 1 == len(body):
            return True
        e = body[i + 1]
        if e in short:
            i += 2
            continue
        if e != ord("u"):
            return False
        hex4 = body[i + 2 : i + 6].decode("latin-1")
        # \u00XX, lower case, for a control character that has no short escape
        for code in (f"{v:04x}" for v in range(0x20) if v not in (8, 9, 10, 12, 13)):
            if code.startswith(hex4):
                break
        else:
            return False
        i += 6
    return True


@pytest.mark.real_tokenizer
@pytest.mark.parametrize("fixture", ["smollm2", "llama32"])
def test_canonical_masks_never_allow_other_spellings(fixture: str, request: pytest.FixtureRequest) -> None:
    tok: corral.Tokenizer = request.getfixturevalue(fixture)
    g = corral.compile_grammar(r'root ::= "\"" /(?s).{0,48}/c "\""', tok)
    index = bytes_index(tok)
    specials = set(tok.special_ids) | set(tok.eos_ids)
    # The start: canonical escape pieces are allowed, other spellings are not.
    m = g.matcher()
    assert m.accept_bytes(b'"')
    start = set(allowed(m, tok))
    for piece, ok in [
        (b"\\n", True),
        (b'\\"', True),
        (b"\\\\", True),
        (b"/", True),
        (b"\\/", False),
        (b"\\u", True),
        (b"\\u00", True),
        (b"\\u0041", False),
        (b"\\ud83d", False),
    ]:
        if piece in index:
            assert (index[piece] in start) == ok, piece
    rnd = random.Random(fixture)
    escapes = {t for b, t in index.items() if b"\\" in b}
    # Tokens that can break canonical form by themselves; any token can after a pending `\`.
    risky = {t for t, b in enumerate(tok.token_bytes) if any(c < 0x20 or c in b'"\\' for c in b)}
    for _ in range(12):
        m = g.matcher()
        assert m.accept_bytes(b'"')
        out = b""
        for _ in range(24):
            ids = [t for t in allowed(m, tok) if t not in specials]
            if not ids:
                break
            pending = not canonical_prefix_ok(out + b"x")  # inside an escape: `x` cannot follow
            for t in ids if pending else risky.intersection(ids):
                assert canonical_prefix_ok(out + tok.token_bytes[t]), (out, tok.token_bytes[t])
            # Prefer escapes so the walk reaches the interesting states.
            pool = [t for t in ids if t in escapes] if rnd.random() < 0.5 else ids
            t = rnd.choice(pool or ids)
            assert m.accept_token(t)
            out += tok.token_bytes[t]
            if m.is_accepting():
                break
        rest = m.shortest_completion()
        assert m.accept_bytes(rest) and m.is_accepting()
        text = b'"' + out + rest
        assert canonical(json.loads(text)) == text[1:-1], text
