"""Engine-level compiled-grammar artifacts: ``CompiledGrammar.to_bytes`` / ``from_bytes``.

Round trips give masks identical to the freshly compiled grammar at every step of seeded
random walks (regex corpus, JSON Schemas, GBNF grammars, on the SmolLM2 and Llama 3.2
vocabularies); slots bind on a loaded skeleton; every refusal (bad magic, format and engine
version, wrong vocabulary, truncation at every prefix, random bit flips with and without a
valid checksum) is an :class:`corral.ArtifactError` with its reason, never a crash.
"""

from __future__ import annotations

import random
import struct
import time
import zlib

import numpy as np
import pytest
from helpers import byte_tokenizer
from regex_corpus import CORPUS

import corral
from corral import _native
from corral.engine import CompiledGrammar

SCHEMAS: list[dict[str, object]] = [
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer", "minimum": 0},
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
        },
        "required": ["name"],
    },
    {"type": "array", "items": {"type": "number"}, "minItems": 1},
    {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            }
        },
        "$ref": "#/$defs/node",
    },
    {"anyOf": [{"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"}, {"type": "boolean"}, {"const": 12.5}]},
]

GRAMMARS: list[str] = [
    'root ::= "(" list? ")"\nlist ::= item ("," item)*\nitem ::= [a-z]+ | root',
    'root ::= expr\nexpr ::= term (("+" | "-") term)*\nterm ::= [0-9]+ | "(" expr ")"',
    'root ::= "say: " /[a-z ]{1,20}/ "."',
]


def _reseal(data: bytearray) -> bytes:
    """Recompute the checksum field (CRC-32 of bytes 16..end, at offset 12) after an edit."""
    data[12:16] = struct.pack("<I", zlib.crc32(bytes(data[16:])))
    return bytes(data)


def _same_walks(a: corral.CompiledGrammar, b: corral.CompiledGrammar, seeds: int, steps: int) -> None:
    tok = a.tokenizer
    ma_row, mb_row = corral.allocate_bitmask(1, tok), corral.allocate_bitmask(1, tok)
    for seed in range(seeds):
        rng = random.Random(seed)
        ma, mb = a.matcher(), b.matcher()
        for step in range(steps):
            ma.fill_next_token_bitmask(ma_row, 0)
            mb.fill_next_token_bitmask(mb_row, 0)
            assert np.array_equal(ma_row, mb_row), f"seed {seed} step {step}: masks differ"
            assert ma.is_accepting() == mb.is_accepting()
            assert ma.forced_bytes() == mb.forced_bytes()
            ids = corral.allowed_tokens(ma_row[0], tok)
            if not ids or ma.is_terminated():
                break
            t = rng.choice(ids)
            assert ma.accept_token(t) and mb.accept_token(t)
        assert ma.shortest_completion() == mb.shortest_completion()


def _round_trip(g: corral.CompiledGrammar) -> corral.CompiledGrammar:
    data = g.to_bytes()
    h = CompiledGrammar.from_bytes(data, g.tokenizer)
    assert h.grammar_text == g.grammar_text
    assert h.to_bytes() == data  # canonical: the loaded grammar writes the same bytes
    return h


def test_regex_corpus_round_trip(smollm2: corral.Tokenizer) -> None:
    for pattern in CORPUS:
        g = corral.compile_regex(pattern, smollm2)
        _same_walks(g, _round_trip(g), seeds=2, steps=12)


@pytest.mark.parametrize("vocab", ["smollm2", "llama32"])
def test_schemas_and_grammars_round_trip(vocab: str, request: pytest.FixtureRequest) -> None:
    tok: corral.Tokenizer = request.getfixturevalue(vocab)
    compiled: list[corral.CompiledGrammar] = [corral.compile_json_schema(s, tok) for s in SCHEMAS]
    compiled += [corral.compile_grammar(text, tok) for text in GRAMMARS]
    compiled.append(corral.compile_json(tok))
    for g in compiled:
        h = _round_trip(g)
        assert h.source == "artifact" and h.tokenizer is tok
        _same_walks(g, h, seeds=3, steps=25)


def test_named_special_token_round_trip(llama32: corral.Tokenizer) -> None:
    g = corral.compile_grammar('root ::= "ok" <|eot_id|> | "no"', llama32)
    h = _round_trip(g)
    _same_walks(g, h, seeds=3, steps=4)
    m = h.matcher()
    assert m.accept_bytes(b"ok") and m.accept_token(128009)


def test_slots_bind_on_loaded_skeleton(smollm2: corral.Tokenizer) -> None:
    g = corral.compile_grammar('root ::= "{\\"cc\\": " ${cc:json} ", \\"id\\": \\"" ${id} "\\"}"', smollm2)
    h = _round_trip(g)
    assert h.needs_binding and h.slot_names == ["cc", "id"]
    values = {"cc": ["CC-104", "CC-109", 'quote"d'], "id": ["a1", "b22"]}
    _same_walks(g.bind(values), h.bind(values), seeds=4, steps=30)
    with pytest.raises(corral.SlotError, match="binding"):
        h.bind(values).to_bytes()


def _reason(data: bytes, tok: corral.Tokenizer) -> str:
    with pytest.raises(corral.ArtifactError) as e:
        CompiledGrammar.from_bytes(data, tok)
    assert e.value.code == "artifact_error"
    return e.value.reason


def test_refusals_have_distinct_reasons(smollm2: corral.Tokenizer, llama32: corral.Tokenizer) -> None:
    data = corral.compile_regex(r"[a-z]{1,8}@[a-z]+\.com", smollm2).to_bytes()
    assert _reason(data, llama32) == "wrong_vocabulary"
    assert _reason(b"", smollm2) == "bad_magic"
    assert _reason(b'{"type": "object"}', smollm2) == "bad_magic"
    versions = _native.artifact_versions()
    newer = bytearray(data)
    newer[8:12] = struct.pack("<I", versions["format_version"] + 1)
    assert _reason(bytes(newer), smollm2) == "unsupported_version"
    engine = versions["engine_version"].encode()
    assert data[41 : 41 + len(engine)] == engine
    other = bytearray(data)
    other[41] ^= 0x20  # "corral-engine..." -> "Corral-engine..."
    assert _reason(bytes(other), smollm2) == "corrupt"  # the checksum catches it first
    with pytest.raises(corral.ArtifactError, match="engine version 'Corral-engine") as e:
        CompiledGrammar.from_bytes(_reseal(other), smollm2)
    assert e.value.reason == "engine_version"
    assert _reason(data + b"\0", smollm2) == "corrupt"
    with pytest.raises(TypeError):
        CompiledGrammar.from_bytes("not bytes", smollm2)  # type: ignore[arg-type]


def test_limits_given_at_load_apply(smollm2: corral.Tokenizer) -> None:
    data = corral.compile_regex(r"[a-z]{1,40}", smollm2).to_bytes()
    with pytest.raises(corral.LimitExceeded) as e:
        CompiledGrammar.from_bytes(data, smollm2, max_dfa_states=10)
    assert e.value.limit == "max_dfa_states"
    assert CompiledGrammar.from_bytes(data, smollm2, max_dfa_states=100).matcher().accept_bytes(b"abc")


def test_truncation_at_every_prefix() -> None:
    tok = byte_tokenizer([b"ab", b"c)", b"(("])
    data = corral.compile_grammar('root ::= "(" [a-c]* root? ")" | "x"', tok).to_bytes()
    assert len(data) < 5000
    for n in range(len(data)):
        with pytest.raises(corral.ArtifactError) as e:
            CompiledGrammar.from_bytes(data[:n], tok)
        assert e.value.reason in ("bad_magic", "corrupt"), (n, e.value)
        if n >= 40:  # the same prefix with a header that claims it and a valid checksum
            cut = bytearray(data[:n])
            cut[16:24] = struct.pack("<Q", n)
            with pytest.raises(corral.ArtifactError, match="corrupt") as e:
                CompiledGrammar.from_bytes(_reseal(cut), tok)
            assert e.value.reason == "corrupt"


def _load_and_step(data: bytes, tok: corral.Tokenizer) -> bool:
    try:
        g = CompiledGrammar.from_bytes(data, tok)
    except (corral.ArtifactError, corral.LimitExceeded):
        return False
    m = g.matcher() if not g.needs_binding else g.bind({n: ["a"] for n in g.slot_names}).matcher()
    mask = corral.allocate_bitmask(1, tok)
    for _ in range(3):
        m.fill_next_token_bitmask(mask, 0)
        ids = corral.allowed_tokens(mask[0], tok)
        if not ids or m.is_terminated():
            break
        m.accept_token(ids[0])
    return True


def test_bit_flips_and_hostile_fields_never_crash() -> None:
    tok = byte_tokenizer([b"ab", b'":', b'{"'])
    sources = [
        corral.compile_grammar(GRAMMARS[0], tok),
        corral.compile_regex(r"(ab|c){1,4}[x-z]+", tok),
        corral.compile_grammar('root ::= "k=" ${k} <|special|>', tok),
    ]
    rng = random.Random(1)
    start = time.monotonic()
    mutations = unsealed_loads = 0
    for g in sources:
        good = g.to_bytes()
        for _ in range(600):
            bad = bytearray(good)
            for _ in range(rng.randint(1, 3)):
                bad[rng.randrange(16, len(bad))] ^= 1 << rng.randrange(8)
            if bytes(bad) == good:  # two flips that cancel out
                continue
            unsealed_loads += _load_and_step(bytes(bad), tok)
            _load_and_step(_reseal(bad), tok)
            odd = bytearray(good)
            odd[rng.randrange(40, len(odd))] = rng.randrange(256)
            _load_and_step(_reseal(odd), tok)
            mutations += 3
    assert mutations >= 4500
    assert unsealed_loads == 0  # every flip in the checksummed range is caught
    assert time.monotonic() - start < 120
