"""Fuzzing the frontends and the matcher with Hypothesis: arbitrary regex and grammar text either
compiles or raises a CorralError subclass that names the problem (never InternalError, a crash or
a hang); arbitrary byte/token streams never break a matcher."""

from __future__ import annotations

import os
import re

import pytest
from helpers import byte_tokenizer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corral

TOK = byte_tokenizer([b"ab", b'"}', b"\xc3"])
# CORRAL_FUZZ_EXAMPLES=5000 for a longer local run; CI runs the default.
FUZZ = settings(
    max_examples=int(os.environ.get("CORRAL_FUZZ_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)

REGEX_ALPHABET = st.sampled_from(
    list("ab(|)*+?{}[]^$-.\\,0123456789dwsDWSbBnPx<>=!:iéΩ ") + ["(?", "{2,", "\\u00"]
)
GRAMMAR_ALPHABET = st.sampled_from(
    ["root", " ::= ", "x", "::=", '"a"', '"', "[", "]", "a-z", "^", "(", ")", "|", "*", "+", "?"]
    + ["{1,2}", "{", "}", "\n", " ", "/a+/", "/", "<|eot|>", "<[3]>", "<", ">", "#c\n", "\\", "x ::= "]
    + [".", "é", "'b'"]
)


@FUZZ
@given(st.lists(REGEX_ALPHABET, max_size=24).map("".join))
def test_regex_frontend_never_crashes(pattern: str) -> None:
    try:
        m = corral.compile_regex(pattern, TOK, max_compile_ms=2000).matcher()
    except (corral.CompileError, corral.LimitExceeded) as e:
        assert str(e)
        return
    # A pattern we accept must mean what Python means (where Python accepts it too).
    try:
        py = re.compile(pattern)
    except re.error:
        pytest.fail(f"corral accepted {pattern!r} which Python's re rejects")
    out = m.shortest_completion()
    assert py.fullmatch(out.decode("utf-8")), (pattern, out)


@FUZZ
@given(st.lists(GRAMMAR_ALPHABET, max_size=30).map("".join))
def test_grammar_frontend_never_crashes(text: str) -> None:
    try:
        g = corral.compile_grammar(text, TOK, max_compile_ms=2000)
    except (corral.CompileError, corral.LimitExceeded) as e:
        assert str(e)
        return
    m = g.matcher()
    try:
        out = m.shortest_completion()
    except corral.LimitExceeded:
        return  # the only completion needs a named token (not bytes)
    assert m.accept_bytes(out) and m.is_accepting()


@FUZZ
@given(st.lists(st.integers(min_value=-3, max_value=TOK.width + 3), max_size=40))
def test_matcher_survives_any_token_stream(ids: list[int]) -> None:
    g = corral.compile_json(TOK)
    m = g.matcher()
    mask = corral.allocate_bitmask(1, TOK)
    steps = 0
    for t in ids:
        m.fill_next_token_bitmask(mask, 0)
        allowed = set(corral.allowed_tokens(mask[0], TOK))
        ok = m.accept_token(t)
        assert ok == (t in allowed)
        steps += ok
        if steps and t % 7 == 0:
            m.rollback(1)
            steps -= 1
    assert m.error == ""
