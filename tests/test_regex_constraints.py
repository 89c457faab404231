"""Regex constraints: outputs produced under the mask always full-match, and strings that
full-match are always accepted — byte by byte, as canonical tokens of a real tokenizer and as
random alternative tokenizations."""

from __future__ import annotations

import random
import re

import pytest
from helpers import byte_tokenizer, bytes_index, mask_matches_accept, random_tokenization, random_walk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from regex_corpus import CORPUS

import corral

EXTRA = [
    b"ab",
    b"abc",
    b"aa",
    b"ba",
    b"x-",
    b"-1",
    b"12",
    b"\xc3",
    b"\xc3\xa9x",
    b"\xe6\xbc",
    b"\xa2",
    b"\xf0\x9f",
    b"\x98\x80",
    b"00",
    b"a\n",
    b", ",
    b"@",
    b".com",
    b"2024-",
    b"T1",
]


@pytest.fixture(scope="module")
def small_tok() -> corral.Tokenizer:
    return byte_tokenizer(EXTRA)


@pytest.mark.parametrize("pattern", CORPUS)
def test_random_walks_fullmatch(pattern: str, small_tok: corral.Tokenizer) -> None:
    compiled = corral.compile_regex(pattern, small_tok)
    rng = random.Random(hash(pattern) & 0xFFFF)
    for _ in range(6):
        out, _eos = random_walk(compiled, rng, max_steps=25)
        text = out.decode("utf-8")  # the DFA only admits valid UTF-8
        assert re.fullmatch(pattern, text), f"{pattern!r} produced {text!r}"


@pytest.mark.parametrize("pattern", CORPUS[::3])
def test_mask_equals_parser_on_every_token(pattern: str, small_tok: corral.Tokenizer) -> None:
    # Both directions of exactness at every step of a walk, over the whole (small) vocabulary.
    compiled = corral.compile_regex(pattern, small_tok)
    rng = random.Random(7)
    m = compiled.matcher()
    for _ in range(8):
        mask_matches_accept(m, small_tok)
        mask = corral.allocate_bitmask(1, small_tok)
        m.fill_next_token_bitmask(mask, 0)
        ids = [i for i in corral.allowed_tokens(mask[0], small_tok) if i not in small_tok.eos_ids]
        if not ids:
            break
        assert m.accept_token(rng.choice(ids))


@pytest.mark.parametrize("pattern", CORPUS)
def test_matching_strings_are_accepted(
    pattern: str, small_tok: corral.Tokenizer, llama32: corral.Tokenizer
) -> None:
    compiled_small = corral.compile_regex(pattern, small_tok)
    compiled_llama = corral.compile_regex(pattern, llama32)
    index = bytes_index(llama32)
    rng = random.Random(99)

    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.from_regex(pattern, fullmatch=True))
    def check(s: str) -> None:
        assert re.fullmatch(pattern, s)
        data = s.encode("utf-8")
        # byte by byte
        m = compiled_small.matcher()
        for b in data:
            assert m.accept_token(b), f"{pattern!r} rejected byte {bytes([b])!r} of {s!r}"
        assert m.is_accepting()
        assert m.accept_token(small_tok.eos_ids[0]) and m.is_terminated()
        # canonical tokens of a real tokenizer, then a random alternative tokenization
        for ids in (llama32.encode(s), random_tokenization(data, index, rng)):
            m = compiled_llama.matcher()
            for t in ids:
                assert m.accept_token(t), f"{pattern!r} rejected token {llama32.token_bytes[t]!r} of {s!r}"
            assert m.is_accepting()

    check()


def test_non_matching_strings_are_rejected(small_tok: corral.Tokenizer) -> None:
    cases = {
        r"\d{3}": ["12", "1234", "abc", "١٢"],
        r"[a-z]+@[a-z]+\.com": ["a@b.co", "@b.com", "a@b.comx"],
        r"(ab)+": ["", "a", "aba", "abab a"],
        r".{2}": ["a\n", "abc"],
        r"(?i)k": ["x"],
    }
    for pattern, bad in cases.items():
        compiled = corral.compile_regex(pattern, small_tok)
        for s in bad:
            assert not re.fullmatch(pattern, s)
            m = compiled.matcher()
            ok = m.accept_bytes(s.encode()) and m.is_accepting()
            assert not ok, f"{pattern!r} accepted {s!r}"


def test_unicode_digit_classes_follow_python(small_tok: corral.Tokenizer) -> None:
    m = corral.compile_regex(r"\d+", small_tok).matcher()
    assert m.accept_bytes("٣٤5".encode())  # Arabic-Indic digits are \d in Python str patterns
    assert m.is_accepting()
    assert not m.accept_bytes("½".encode())  # numeric but not decimal
