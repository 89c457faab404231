"""JSON mode on real vocabularies: every finished output parses, every valid document is
accepted in any tokenization, invalid documents are rejected."""

from __future__ import annotations

import json
import random

import pytest
from helpers import bytes_index, mask_matches_accept, random_tokenization, random_walk

import corral

VALID = [
    '{"name": "Ada", "age": 36, "tags": ["math", "poetry"], "active": true, "spouse": null}',
    "[1, -2.5, 3e10, 0.0, -0, 1E-7]",
    '"caf\\u00e9 \\"quoted\\" \\\\ \\n"',
    '{"nested": {"deeper": {"deepest": [[[]]]}}, "empty": {}}',
    '  {"unicode": "日本語 😀 ümlaut", "esc": "\\t\\r\\b\\f\\/"}\n',
    "true",
    "-12345678901234567890",
    '{"a":[{"b":[{"c":[1,2,{"d":"e"}]}]}]}',
    '[\n  {\n    "id": 1,\n    "ok": false\n  }\n]',
]
INVALID = [
    '{"a":}',
    "[1,]",
    '{"a" 1}',
    "01",
    '"raw\ncontrol"',
    "tru",
    "{'a': 1}",
    "[1 2]",
    "1.",
    "-",
    '"\\x"',
    "nul",
]


@pytest.fixture(scope="module", params=["smollm2", "llama32"])
def json_grammar(request: pytest.FixtureRequest) -> corral.CompiledGrammar:
    tok = request.getfixturevalue(request.param)
    return corral.compile_json(tok)


def test_valid_documents_accepted_in_every_tokenization(json_grammar: corral.CompiledGrammar) -> None:
    tok = json_grammar.tokenizer
    index = bytes_index(tok)
    rng = random.Random(5)
    for doc in VALID:
        json.loads(doc)
        data = doc.encode()
        tokenizations = [
            tok.encode(doc),
            random_tokenization(data, index, rng),
            random_tokenization(data, index, rng),
        ]
        # character by character (each UTF-8 character as the tokens of its bytes)
        tokenizations.append([t for ch in doc for t in tok.encode(ch)])
        for ids in tokenizations:
            assert tok.decode(ids) == data
            m = json_grammar.matcher()
            for i, t in enumerate(ids):
                assert m.accept_token(t), f"rejected token {i} {tok.token_bytes[t]!r} of {doc!r}"
            assert m.is_accepting(), doc
            assert m.accept_token(tok.eos_ids[0])


def test_invalid_documents_rejected(json_grammar: corral.CompiledGrammar) -> None:
    for doc in INVALID:
        with pytest.raises(json.JSONDecodeError):
            json.loads(doc)
        m = json_grammar.matcher()
        assert not (m.accept_bytes(doc.encode()) and m.is_accepting()), doc


def test_random_walks_parse(json_grammar: corral.CompiledGrammar) -> None:
    rng = random.Random(11)
    for _ in range(12):
        out, _ = random_walk(json_grammar, rng, max_steps=40, eos_weight=0.3)
        json.loads(out.decode("utf-8"))


def test_mask_equals_parser_on_sampled_tokens(json_grammar: corral.CompiledGrammar) -> None:
    tok = json_grammar.tokenizer
    rng = random.Random(3)
    doc = VALID[0]
    m = json_grammar.matcher()
    sample = rng.sample(range(tok.vocab_size), 1500)
    ids = tok.encode(doc)
    for k, t in enumerate(ids):
        if k % 4 == 0:
            # every allowed token plus a random sample of the rest
            mask = corral.allocate_bitmask(1, tok)
            m.fill_next_token_bitmask(mask, 0)
            allowed = corral.allowed_tokens(mask[0], tok)
            mask_matches_accept(m, tok, sample=sorted(set(sample) | set(allowed[:3000])))
        assert m.accept_token(t)


def test_special_tokens_never_allowed(llama32: corral.Tokenizer) -> None:
    g = corral.compile_json(llama32)
    m = g.matcher()
    assert m.accept_bytes(b'{"text": "')
    mask = corral.allocate_bitmask(1, llama32)
    m.fill_next_token_bitmask(mask, 0)
    allowed = set(corral.allowed_tokens(mask[0], llama32))
    assert not (allowed & set(llama32.special_ids))
    assert not (allowed & set(llama32.eos_ids))
    eot = llama32.ids_of("<|eot_id|>")[0]
    assert not m.accept_token(eot)
    assert len(allowed) > 100_000  # inside a string nearly everything is allowed
