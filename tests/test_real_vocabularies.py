"""Random walks under the mask with real vocabularies (byte-level BPE and SentencePiece with
byte fallback): never a dead end, every finished output valid; byte-fallback tokens carry partial
UTF-8 and are allowed exactly when they can be completed."""

from __future__ import annotations

import json
import random
import re

import pytest
from helpers import allowed, random_walk

import corral

REGEXES = [
    r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}",
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})",
    r"[😀-🙏]{1,4} (日本|中文)+",
    r"(?i)(yes|no)[.!]?",
    r"[^\x00-\x1f]{3,12}",
    r"\w+( \w+){0,3}",
]


@pytest.fixture(scope="module", params=["smollm2", "llama32", "gemma3"])
def vocab(request: pytest.FixtureRequest) -> corral.Tokenizer:
    return request.getfixturevalue(request.param)


@pytest.mark.real_tokenizer
@pytest.mark.parametrize("pattern", REGEXES)
def test_regex_walks_on_real_vocabularies(pattern: str, vocab: corral.Tokenizer) -> None:
    g = corral.compile_regex(pattern, vocab)
    rng = random.Random(2)
    for _ in range(4):
        out, _ = random_walk(g, rng, max_steps=20)
        assert re.fullmatch(pattern, out.decode("utf-8")), out


@pytest.mark.real_tokenizer
def test_json_walks_on_real_vocabularies(vocab: corral.Tokenizer) -> None:
    g = corral.compile_json(vocab)
    rng = random.Random(4)
    for _ in range(6):
        out, _ = random_walk(g, rng, max_steps=30, eos_weight=0.3)
        json.loads(out.decode("utf-8"))


@pytest.mark.real_tokenizer
def test_gemma_byte_fallback_tokens(gemma3: corral.Tokenizer) -> None:
    # The <0xNN> byte-fallback pieces are the only Gemma tokens for lone non-ASCII bytes.
    ids = {b: gemma3.ids_of(bytes([b]))[0] for b in (0xF0, 0x9F, 0x98, 0x80, 0xE6, 0x97, 0xA5)}
    g = corral.compile_regex(r"[😀-🙏]+", gemma3)
    m = g.matcher()
    a = set(allowed(m, gemma3))
    assert ids[0xF0] in a  # lead byte of a 4-byte emoji
    assert ids[0xE6] not in a and ids[0x9F] not in a
    for b in (0xF0, 0x9F, 0x98):
        assert m.accept_token(ids[b])
        assert not m.is_accepting()
    a = set(allowed(m, gemma3))
    assert ids[0x80] in a  # completes U+1F600
    assert all(len(gemma3.token_bytes[t]) == 1 for t in a)  # only a single continuation byte fits
    assert m.accept_token(ids[0x80]) and m.is_accepting()
    # the same emoji as one whole token is allowed too (every tokenization of the same text)
    whole = [i for i in gemma3.ids_of("😀") if gemma3.token_bytes[i] == "😀".encode()]
    if whole:
        m2 = g.matcher()
        assert whole[0] in allowed(m2, gemma3)
    # a JSON string may be spelled with byte-fallback pieces of a CJK character
    j = corral.compile_json(gemma3).matcher()
    assert j.accept_bytes(b'"')
    for b in "日".encode():
        assert j.accept_token(gemma3.ids_of(bytes([b]))[0])
    assert j.accept_bytes(b'"') and j.is_accepting()


@pytest.mark.real_tokenizer
def test_sentencepiece_space_tokens(gemma3: corral.Tokenizer) -> None:
    g = corral.compile_regex(r"hello world", gemma3)
    m = g.matcher()
    assert m.accept_bytes(b"hello")
    a = allowed(m, gemma3)
    assert a and all(b" world".startswith(gemma3.token_bytes[t]) for t in a)
    assert any(gemma3.token_bytes[t] == b" world" for t in a)  # the ▁world piece
