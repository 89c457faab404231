"""The mask walk's fast paths give exactly the reference walk's masks.

A frontier of several elements is walked through product states (cpp/product_walk.hpp: one
interned tuple of the elements' states per trie node instead of stepping every element), and a
broad frontier close to one walked before is derived from that walk, walking only where the two
differ (cpp/delta_walk.cpp), and a walk of a frontier with a string-interior element skips the
subtrees of tokens that can only continue a string (cpp/interior_summary.hpp); the reference walk
steps each element on its own and is forced per grammar by
``mask_share_min_states`` at its maximum, or process-wide by ``_native.set_mask_fast_paths``.
On the real vocabularies (SmolLM2, Llama 3.2, Gemma 3), at every step of seeded random walks,
the two grammars' bitmask rows must be equal (so both directions: nothing allowed that the
reference refuses, nothing refused that it allows); allowed and refused tokens are also
spot-checked against ``accept_token``. The schemas put several broad automata in one frontier:
``property_order="any"`` objects with many optional keys and undeclared keys (declared keys beside
"none of the declared keys"), ``anyOf`` of differently constrained strings, and schema-order
objects with many keys (the frontier after ``{"``)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from helpers import twin_walk_step

import corral
from corral import _native

REFERENCE = {"mask_share_min_states": 2**32 - 1}  # every frontier walked the reference way

# Property names unique to this module, so the vocabulary's pool (shared with other tests'
# grammars) holds none of these automata.
_TYPES = [
    {"type": "string"},
    {"type": "integer"},
    {"type": "boolean"},
    {"type": "array", "items": {"type": "number"}},
]
SCHEMAS = [
    # Many optional keys in any order, undeclared keys allowed: each seen-key set a new frontier.
    (
        {
            "type": "object",
            "properties": {f"pw_{i}": _TYPES[i % 4] for i in range(12)},
            "required": ["pw_0", "pw_5"],
        },
        "any",
    ),
    # Strings of several shapes at once: every anyOf branch is a broad element of one frontier.
    (
        {
            "type": "object",
            "properties": {
                "pwv": {
                    "anyOf": [
                        {"type": "string", "maxLength": 20},
                        {"type": "string", "pattern": "^[a-z0-9_-]{2,30}$"},
                        {"type": "string", "format": "date"},
                        {"type": "string", "minLength": 3},
                    ]
                },
                "pwn": {
                    "type": "object",
                    "properties": {f"pwsub{i}": {"type": "integer"} for i in range(6)},
                    "required": ["pwsub2"],
                },
                "pwk": {"enum": ["alpha", "beta", "gamma"]},
            },
        },
        "any",
    ),
    # Schema order with many keys: the frontier after `{"` holds every key's automaton.
    (
        {
            "type": "object",
            "properties": {f"pwq{i}x": _TYPES[(i + 1) % 4] for i in range(24)},
        },
        "schema",
    ),
]


@pytest.fixture(scope="module", params=["smollm2", "llama32", "gemma3"])
def vocab(request: pytest.FixtureRequest) -> corral.Tokenizer:
    return request.getfixturevalue(request.param)


def _walk(fast: corral.CompiledGrammar, ref: corral.CompiledGrammar, seed: int, walks: int) -> int:
    """Random walks comparing the two grammars' masks at every step; returns the steps."""
    tok = fast.tokenizer
    structural = np.array([any(c in b for c in b'":,{}') for b in tok.token_bytes])
    rng = random.Random(seed)
    a_mask = corral.allocate_bitmask(1, tok)
    b_mask = corral.allocate_bitmask(1, tok)
    eos = list(tok.eos_ids)
    steps = 0
    for w in range(walks):
        a, b = fast.matcher(), ref.matcher()
        for step in range(100):
            a.fill_next_token_bitmask(a_mask, 0)
            b.fill_next_token_bitmask(b_mask, 0)
            steps += 1
            assert np.array_equal(a_mask, b_mask), f"walk {w} step {step}: fast and reference masks differ"
            ids = np.asarray(corral.allowed_tokens(a_mask[0], tok))
            ids = ids[~np.isin(ids, eos)]
            if ids.size == 0:
                break
            # Mostly tokens with structure in them, so a walk closes keys and values and visits
            # many frontiers; any allowed token now and then (undeclared keys, long values).
            twin_walk_step(a, b, tok, ids, rng, structural, 0.6, checks=8)
    return steps


@pytest.mark.real_tokenizer
@pytest.mark.slow
@pytest.mark.parametrize("interior", [False, True], ids=["no-interior-skip", "interior-skip"])
def test_fast_masks_equal_reference_masks(vocab: corral.Tokenizer, interior: bool) -> None:
    # Without the interior skip (cpp/interior_summary.hpp) the broad frontiers take the delta
    # walk; with it, those with a string-interior element skip the clean subtrees instead.
    product = delta = skipped = 0
    _native.set_interior_skip(interior)
    try:
        for k, (base, order) in enumerate(SCHEMAS):
            # Names of this run's own, so the vocabulary's pool holds none of its automata.
            schema = json.loads(json.dumps(base).replace('"pw', f'"{"i" if interior else "n"}pw'))
            opts = {"extra_properties": "spec", "property_order": order}
            fast = corral.compile_json_schema(schema, vocab, **opts)
            ref = corral.compile_json_schema(schema, vocab, **opts, **REFERENCE)
            assert _walk(fast, ref, seed=400 + k, walks=3) > 0
            stats = fast.cache_stats()
            product += stats["product_walks"]
            delta += stats["delta_entries"]
            skipped += stats["interior_walks"]
            r = ref.cache_stats()
            assert r["product_walks"] == r["delta_entries"] == r["interior_walks"] == 0
    finally:
        _native.set_interior_skip(True)
    assert product > 0  # the product walk was taken
    if interior:
        assert skipped > 0
    else:
        assert delta > 0 and skipped == 0


@pytest.mark.real_tokenizer
def test_permuted_instance_token_by_token(llama32: corral.Tokenizer) -> None:
    # Along a real any-order instance (keys out of schema order, an undeclared key first): every
    # token of it is allowed, and the masks equal the reference walk's.
    schema, _ = SCHEMAS[0]
    opts = {"extra_properties": "spec", "property_order": "any"}
    fast = corral.compile_json_schema(schema, llama32, **opts)
    ref = corral.compile_json_schema(schema, llama32, **opts, **REFERENCE)
    text = '{"$schema": "urn:x", "pw_5": 7, "pw_3": [1.5, 2], "pw_0": "a b", "pw_2": true}'
    a, b = fast.matcher(), ref.matcher()
    a_mask = corral.allocate_bitmask(1, llama32)
    b_mask = corral.allocate_bitmask(1, llama32)
    for t in llama32.encode(text):
        a.fill_next_token_bitmask(a_mask, 0)
        b.fill_next_token_bitmask(b_mask, 0)
        assert np.array_equal(a_mask, b_mask)
        assert t in set(corral.allowed_tokens(a_mask[0], llama32))
        assert a.accept_token(t) and b.accept_token(t)
    assert a.is_accepting()
    assert fast.cache_stats()["product_walks"] > 0


@pytest.mark.real_tokenizer
def test_process_switch_forces_the_reference_walk(smollm2: corral.Tokenizer) -> None:
    # With the switch off, a grammar of default limits walks every frontier element by element
    # (no product walk counted), and its masks equal a fast grammar's.
    schema = {"type": "object", "properties": {f"pwz{i}": {"type": "string"} for i in range(8)}}
    _native.set_mask_fast_paths(False)
    try:
        off = corral.compile_json_schema(schema, smollm2, extra_properties="spec")
        assert _walk(off, off, seed=7, walks=1) > 0  # entries computed while the switch is off
        assert off.cache_stats()["product_walks"] == 0
    finally:
        _native.set_mask_fast_paths(True)
    fast = corral.compile_json_schema(schema, smollm2, extra_properties="spec", max_mask_memo_mb=0)
    off_again = corral.compile_json_schema(schema, smollm2, extra_properties="spec", **REFERENCE)
    assert _walk(fast, off_again, seed=8, walks=2) > 0


@pytest.mark.real_tokenizer
def test_undeclared_key_branches_skip_the_interior_together(llama32: corral.Tokenizer) -> None:
    # Many long declared names: "none of the declared keys" is too big for one terminal (its
    # automaton over the lowering's cap) and is lowered as one per first character (each with
    # its quotes). No branch alone keeps every string inside alive, their union does, so the key
    # positions' walks skip the clean subtrees (cpp/interior_summary.hpp,
    # jointly_interior_universal); the masks must still equal the reference walk's at every
    # step, and every token of a valid instance must be allowed.
    rng = random.Random(5)
    names = sorted({"".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(20)) for _ in range(40)})
    schema = {"type": "object", "properties": {n: {"type": "integer"} for n in names}, "required": [names[3]]}
    opts = {"extra_properties": "spec", "property_order": "any"}
    fast = corral.compile_json_schema(schema, llama32, **opts)
    ref = corral.compile_json_schema(schema, llama32, **opts, **REFERENCE)
    assert "alt_" in fast.grammar_text  # the complement was lowered as several terminals
    a, b = fast.matcher(), ref.matcher()
    a_mask = corral.allocate_bitmask(1, llama32)
    b_mask = corral.allocate_bitmask(1, llama32)
    text = json.dumps({"zeta_other": [1, "x"], names[3]: 4, names[7][:9]: 1, names[0]: 7, "": None})
    for i, t in enumerate(llama32.encode(text)):
        a.fill_next_token_bitmask(a_mask, 0)
        b.fill_next_token_bitmask(b_mask, 0)
        assert np.array_equal(a_mask, b_mask), f"token {i}: fast and reference masks differ"
        assert t in set(corral.allowed_tokens(a_mask[0], llama32))
        if i == 0:
            before = fast.cache_stats()["interior_walks"]
        if i == 1:  # the mask after `{"`: a key position
            assert fast.cache_stats()["interior_walks"] > before
        assert a.accept_token(t) and b.accept_token(t)
    assert a.is_accepting()
    assert _walk(fast, ref, seed=77, walks=2) > 0
