"""Masks built from the vocabulary's counted-string summary (cpp/count_summary.hpp: the short
part of a counted-string position near its ``maxLength`` or before its ``minLength`` derived
from an earlier walk with bitset operations) equal the plain whole-trie walk on the real
vocabularies, at every step of seeded random walks that run to the ends of counted strings —
equal bitmask rows, so both directions — with the plain path forced by
``mask_share_min_states``. Allowed and refused tokens are also spot-checked against
``accept_token``, and the summary path is shown to have served some of the masks."""

from __future__ import annotations

import random

import numpy as np
import pytest
from helpers import twin_walk_step

import corral

PLAIN = {"mask_share_min_states": 2**32 - 1}  # every state walks the whole trie
SHARED = {"mask_share_min_states": 1}

# Lengths unique to this module, so the vocabulary's pool (shared with other tests' grammars)
# holds none of these automata and the summary path is what serves them.
SCHEMAS = [
    {"type": "string", "minLength": 5, "maxLength": 37},
    {"type": "string", "pattern": "^[0-9a-zA-Z_-]{3,29}$"},
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 2, "maxLength": 23},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 19}, "maxItems": 3},
        },
        "required": ["name", "tags"],
    },
]


@pytest.fixture(scope="module", params=["smollm2", "llama32", "gemma3"])
def vocab(request: pytest.FixtureRequest) -> corral.Tokenizer:
    return request.getfixturevalue(request.param)


def _walk(fast: corral.CompiledGrammar, plain: corral.CompiledGrammar, seed: int, walks: int) -> int:
    """Random walks comparing the two grammars' masks at every step; returns the steps."""
    tok = fast.tokenizer
    lengths = np.array([len(b) for b in tok.token_bytes])
    rng = random.Random(seed)
    a_mask = corral.allocate_bitmask(1, tok)
    b_mask = corral.allocate_bitmask(1, tok)
    steps = 0
    for w in range(walks):
        a, b = fast.matcher(), plain.matcher()
        for step in range(120):
            a.fill_next_token_bitmask(a_mask, 0)
            b.fill_next_token_bitmask(b_mask, 0)
            steps += 1
            assert np.array_equal(a_mask, b_mask), f"walk {w} step {step}: summary and plain masks differ"
            ids = np.asarray(corral.allowed_tokens(a_mask[0], tok))
            ids = ids[~np.isin(ids, list(tok.eos_ids))]
            if ids.size == 0:
                break
            # Mostly short tokens, so a walk visits the positions right before a maxLength one
            # by one (each is a separate state the summary serves); long ones now and then.
            twin_walk_step(a, b, tok, ids, rng, lengths <= 2, 0.8, checks=10)
    return steps


@pytest.mark.real_tokenizer
@pytest.mark.slow
def test_summary_masks_equal_plain_masks(vocab: corral.Tokenizer) -> None:
    derived = 0
    for k, schema in enumerate(SCHEMAS):
        fast = corral.compile_json_schema(schema, vocab, extra_properties="spec", **SHARED)
        plain = corral.compile_json_schema(schema, vocab, extra_properties="spec", **PLAIN)
        assert _walk(fast, plain, seed=100 + k, walks=3) > 0
        derived += fast.cache_stats()["summary_entries"]
        assert plain.cache_stats()["summary_entries"] == 0
    assert derived > 0


@pytest.mark.real_tokenizer
@pytest.mark.slow
def test_summary_masks_equal_plain_masks_regex(vocab: corral.Tokenizer) -> None:
    # A regex, not a schema: the relation is proven on the automaton, whatever produced it.
    pattern = r'"[a-z ]{2,31}"( [0-9]{1,3})?'
    fast = corral.compile_regex(pattern, vocab, **SHARED)
    plain = corral.compile_regex(pattern, vocab, **PLAIN)
    _walk(fast, plain, seed=9, walks=3)
    assert fast.cache_stats()["summary_entries"] > 0
