"""Shared mask entries (equivalent DFA states share one walk of the short tokens; see
cpp/compiled_grammar.hpp) and the per-vocabulary pool (cpp/mask_pool.hpp) give exactly the
masks of the plain whole-trie walk, on the real vocabularies, at every step of random walks
through counted strings — compared in both
directions (equal bitmask rows), with the plain path forced by ``mask_share_min_states``.
Allowed and refused tokens are also spot-checked against ``accept_token``."""

from __future__ import annotations

import random

import numpy as np
import pytest

import corral

PLAIN = {"mask_share_min_states": 2**32 - 1}  # every state walks the whole trie
SHARED = {"mask_share_min_states": 1}  # share wherever possible (default: terminals >= 64 states)

SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "a": {"type": "string", "minLength": 1, "maxLength": 255},
            "b": {"type": "string", "pattern": "^[0-9a-zA-Z_-]{1,255}$"},
            "c": {"type": "string", "format": "date-time"},
        },
    },
    {"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 40}, "maxItems": 4},
]
REGEXES = [r"[^\x00-\x1f]{1,120}", r"[A-Za-z0-9_]{3,60}( [a-z]{1,30}){0,2}"]


@pytest.fixture(scope="module", params=["smollm2", "llama32", "gemma3"])
def vocab(request: pytest.FixtureRequest) -> corral.Tokenizer:
    return request.getfixturevalue(request.param)


def _compare_walks(
    fast: corral.CompiledGrammar, plain: corral.CompiledGrammar, seed: int, steps: int
) -> None:
    tok = fast.tokenizer
    lengths = np.array([len(b) for b in tok.token_bytes])
    rng = random.Random(seed)
    a_mask = corral.allocate_bitmask(1, tok)
    b_mask = corral.allocate_bitmask(1, tok)
    for _walk in range(2):
        a, b = fast.matcher(), plain.matcher()
        for step in range(steps):
            a.fill_next_token_bitmask(a_mask, 0)
            b.fill_next_token_bitmask(b_mask, 0)
            assert np.array_equal(a_mask, b_mask), f"walk {_walk} step {step}: shared and plain masks differ"
            ids = np.asarray(corral.allowed_tokens(a_mask[0], tok))
            ids = ids[~np.isin(ids, list(tok.eos_ids))]
            if ids.size == 0:
                break
            # Spot checks against accept_token: allowed tokens are accepted, refused ones are not.
            refused = [t for t in rng.sample(range(len(tok.token_bytes)), 40) if t not in set(ids.tolist())]
            for t in [int(x) for x in rng.sample(list(ids), min(20, ids.size))]:
                assert a.copy().accept_token(t), t
            for t in refused[:20]:
                assert not a.copy().accept_token(t), t
            # Long tokens often, so walks reach the ends of counted strings and the long part.
            if rng.random() < 0.4:
                longest = ids[lengths[ids] == lengths[ids].max()]
                pick = int(longest[rng.randrange(longest.size)])
            else:
                pick = int(ids[rng.randrange(ids.size)])
            assert a.accept_token(pick) and b.accept_token(pick)


@pytest.mark.real_tokenizer
@pytest.mark.slow
@pytest.mark.parametrize("k", range(len(SCHEMAS)))
@pytest.mark.parametrize("extra", ["schema", "spec"])
def test_shared_masks_equal_plain_masks_json(vocab: corral.Tokenizer, k: int, extra: str) -> None:
    fast = corral.compile_json_schema(SCHEMAS[k], vocab, extra_properties=extra, **SHARED)
    plain = corral.compile_json_schema(SCHEMAS[k], vocab, extra_properties=extra, **PLAIN)
    _compare_walks(fast, plain, seed=k, steps=45)
    # Shared within the grammar, or computed by an earlier grammar with the same automata and
    # found in the vocabulary's pool; the plain path does neither.
    stats, ref = fast.cache_stats(), plain.cache_stats()
    assert stats["shared_entries"] + stats["pool_hits"] > 0
    assert ref["shared_entries"] == 0 and ref["pool_hits"] == 0


@pytest.mark.real_tokenizer
@pytest.mark.slow
@pytest.mark.parametrize("pattern", REGEXES)
def test_shared_masks_equal_plain_masks_regex(vocab: corral.Tokenizer, pattern: str) -> None:
    fast = corral.compile_regex(pattern, vocab, **SHARED)
    plain = corral.compile_regex(pattern, vocab, **PLAIN)
    _compare_walks(fast, plain, seed=7, steps=40)
    assert fast.cache_stats()["shared_entries"] > 0
    # A second compile reads the first one's entries from the pool, with the same masks.
    again = corral.compile_regex(pattern, vocab)
    _compare_walks(again, plain, seed=7, steps=20)
    assert again.cache_stats()["pool_hits"] > 0


def test_share_limit_default() -> None:
    assert corral.DEFAULT_LIMITS["mask_share_min_states"] == 64


PRODUCT_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": "^[a-z][a-z0-9_-]*$", "minLength": 3, "maxLength": 48},
        "note": {"type": "string", "maxLength": 64, "not": {"const": "x"}},
    },
    "required": ["id"],
}


@pytest.mark.real_tokenizer
@pytest.mark.slow
def test_memoised_automata_give_the_masks_of_a_cold_compile(vocab: corral.Tokenizer) -> None:
    """The process-wide automaton memo (cpp/automaton_memo.hpp): a compile whose terminal DFAs
    and pattern products come from the memo (the converter's probe built the product, and an
    earlier compile of the schema the rest) masks exactly like a compile from an empty memo."""
    from corral import _native

    _native.clear_engine_caches()
    cold = corral.compile_json_schema(PRODUCT_SCHEMA, vocab, **PLAIN)
    hits0 = _native.automaton_memo_stats()["hits"]
    warm = corral.compile_json_schema(PRODUCT_SCHEMA, vocab, **PLAIN)
    assert _native.automaton_memo_stats()["hits"] > hits0
    _compare_walks(warm, cold, seed=3, steps=40)
