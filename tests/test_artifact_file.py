"""The ``.corral`` file (:mod:`corral.compile.artifact`): a whole compiled constraint saved and
loaded without compiling, optionally signed.

Round trips give masks identical to a fresh compile at every step of seeded random walks
(schemas, regexes, grammars, choices, JSON mode, a think block, a tool call; SmolLM2 and Llama
3.2), read outputs back the same way, and keep the compile-cache key; slots bind on a loaded
skeleton. Every refusal has its own ``reason``; mutated files (every-prefix truncation, bit
flips with and without a recomputed hash, hostile length fields) are refused with a corral error
or, where nothing vouches for the bytes, load a well-formed constraint — never a crash or hang,
and never a load of a signed file that was modified.
"""

from __future__ import annotations

import hashlib
import random
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import byte_tokenizer
from regex_corpus import CORPUS

import corral
from corral.compile import ConstraintSpec, compile_constraint, spec_from_args
from corral.compile import artifact as af

pytest.importorskip("cryptography")  # the test extra has it; signing is what half the file tests
from corral.compile import signing  # noqa: E402

SCHEMAS: list[object] = [
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "multipleOf": 3},
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
        },
        "required": ["name"],
    },
    {
        "$defs": {
            "n": {"type": "object", "properties": {"k": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}
        },
        "$ref": "#/$defs/n",
    },
    {"anyOf": [{"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"}, {"type": "boolean"}, {"const": 12.5}]},
]
GRAMMARS = [
    'root ::= "(" list? ")"\nlist ::= item ("," item)*\nitem ::= [a-z]+ | root',
    'root ::= expr\nexpr ::= term (("+" | "-") term)*\nterm ::= [0-9]+ | "(" expr ")"',
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def _specs() -> list[ConstraintSpec]:
    specs = [ConstraintSpec.json_schema(s) for s in SCHEMAS]
    specs += [ConstraintSpec.regex(p) for p in CORPUS[::7]]
    specs += [ConstraintSpec.grammar(g) for g in GRAMMARS]
    specs += [
        ConstraintSpec.choices(["yes", "no", "maybe"]),
        ConstraintSpec.json_value(),
        ConstraintSpec.json_schema({"type": "string", "maxLength": 8}).with_thinking(16),
        ConstraintSpec.tool_calls(TOOLS, "required"),
    ]
    return specs


def _same_walks(a: corral.CompiledGrammar, b: corral.CompiledGrammar, seeds: int, steps: int) -> None:
    tok = a.tokenizer
    ra, rb = corral.allocate_bitmask(1, tok), corral.allocate_bitmask(1, tok)
    for seed in range(seeds):
        rng = random.Random(seed)
        ma, mb = a.matcher(), b.matcher()
        for step in range(steps):
            ma.fill_next_token_bitmask(ra, 0)
            mb.fill_next_token_bitmask(rb, 0)
            assert np.array_equal(ra, rb), f"seed {seed} step {step}: masks differ"
            assert ma.is_accepting() == mb.is_accepting()
            ids = corral.allowed_tokens(ra[0], tok)
            if not ids or ma.is_terminated():
                break
            t = rng.choice(ids)
            assert ma.accept_token(t) and mb.accept_token(t)
        assert ma.shortest_completion() == mb.shortest_completion()


def _check_same(c: corral.Constraint, d: corral.Constraint) -> None:
    """The loaded constraint ``d`` is ``c``: same spec and key, grammar type, schema, report, the
    same nested readers, and the same masks on random walks."""
    tok = c.grammar.tokenizer
    assert d.spec == c.spec and d.spec.key(tok.hash) == c.spec.key(tok.hash)
    assert type(d.grammar) is type(c.grammar) and d.grammar.source == c.grammar.source
    assert d.grammar.grammar_text == c.grammar.grammar_text
    assert d.think == c.think and d.source_len == c.source_len
    if isinstance(c.grammar, corral.JsonSchemaGrammar):
        assert isinstance(d.grammar, corral.JsonSchemaGrammar)
        assert d.grammar.schema == c.grammar.schema and d.grammar.report == c.grammar.report
        assert d.grammar.grammar_source == c.grammar.grammar_source
    assert (d.answer is None) == (c.answer is None) and len(d.readers) == len(c.readers)
    if c.answer is not None:
        assert d.answer is not None
        _check_same(c.answer, d.answer)
    _same_walks(c.grammar, d.grammar, seeds=3, steps=20)


@pytest.mark.parametrize("vocab", ["smollm2", "llama32"])
def test_round_trip_masks_identical(vocab: str, request: pytest.FixtureRequest) -> None:
    tok: corral.Tokenizer = request.getfixturevalue(vocab)
    for spec in _specs():
        c = compile_constraint(spec, tok)
        for compress in (True, False):
            data = af.dumps(c, compress=compress)
            d = af.loads(data, tok)
            _check_same(c, d)
            assert af.dumps(d, compress=compress) == data  # canonical: a loaded one writes the same bytes


def test_loaded_constraint_reads_outputs_like_a_compiled_one(smollm2: corral.Tokenizer) -> None:
    c = compile_constraint(ConstraintSpec.json_schema(SCHEMAS[0]), smollm2)
    d = af.loads(af.dumps(c), smollm2)
    for text in ('{"name": "ann", "age": 6}', '{"name": "ann", "age": 7}', "nope"):
        assert d.read(text) == c.read(text)
    assert d.read('{"name": "ann", "age": 7}')[1] is not None  # 7 is not a multiple of 3
    t = compile_constraint(ConstraintSpec.tool_calls(TOOLS, "required"), smollm2)
    reply = af.loads(af.dumps(t), smollm2).read_tools(
        '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
    )
    assert reply.error is None and reply.calls[0].arguments == {"city": "Oslo"}
    two = [*TOOLS, {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}}]
    named = compile_constraint(spec_from_args({"tools": two, "tool_choice": "now"}), smollm2)
    back = af.loads(af.dumps(named), smollm2)
    assert [(t.name, t.index) for t in back.tools] == [(t.name, t.index) for t in named.tools] == [("now", 1)]
    th = compile_constraint(ConstraintSpec.json_schema({"type": "string"}).with_thinking(8), smollm2)
    text = f'{th.think.open.text}hm{th.think.close.text}"ok"'  # type: ignore[union-attr]
    assert af.loads(af.dumps(th), smollm2).read(text) == ("ok", None)


def test_slots_bind_on_a_loaded_skeleton(smollm2: corral.Tokenizer, tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"cc": {"type": "string", "x-corral-slot": "cost_center"}},
        "required": ["cc"],
    }
    c = compile_constraint(ConstraintSpec.json_schema(schema), smollm2)
    path = corral.save_artifact(c, tmp_path / "s.corral")
    d = corral.load_artifact(path, smollm2)
    assert d.slot_names == ["cost_center"] and d.grammar.needs_binding
    values = {"cost_center": ["CC-104", "CC-109"]}
    _same_walks(c.bind(values).grammar, d.bind(values).grammar, seeds=4, steps=30)
    assert d.bind(values).read('{\n  "cc": "CC-109"\n}') == ({"cc": "CC-109"}, None)
    assert d.bind(values).read('{"cc": "CC-200"}')[1] is not None
    with pytest.raises(corral.SlotError):
        af.dumps(c.bind(values))  # a binding's values are per request: save the skeleton


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, Path]:
    d = tmp_path_factory.mktemp("keys")
    a, a_pub, _ = signing.write_keypair(d / "a")
    b, b_pub, _ = signing.write_keypair(d / "b")
    return a, a_pub, b, b_pub


def _reason(data: bytes, tok: corral.Tokenizer, **kw: object) -> str:
    with pytest.raises(corral.ArtifactError) as e:
        af.loads(data, tok, **kw)  # type: ignore[arg-type]
    assert e.value.code == "artifact_error" and str(e.value)
    return e.value.reason


def _reseal(data: bytes, end: int | None = None) -> bytes:
    """Recompute the content hash after an edit (unsigned file: the hash is the last 32 bytes)."""
    body = data[: (len(data) if end is None else end) - 32]
    return body + hashlib.sha256(body).digest()


def test_every_refusal_has_its_reason(
    smollm2: corral.Tokenizer, llama32: corral.Tokenizer, keys: tuple[Path, Path, Path, Path]
) -> None:
    a, a_pub, b, b_pub = keys
    c = compile_constraint(ConstraintSpec.regex(r"[a-z]{1,8}@[a-z]+\.com"), smollm2)
    plain, signed = af.dumps(c), af.dumps(c, signing_key=a)
    assert af.loads(signed, smollm2, trusted_keys=[a_pub]).spec == c.spec
    assert af.inspect(signed, trusted_keys=a_pub).verified
    assert af.loads(signed, smollm2).spec == c.spec  # no trusted keys: the signature is not required
    assert _reason(plain, smollm2, trusted_keys=[a_pub]) == "unsigned"
    assert _reason(signed, smollm2, trusted_keys=[b_pub]) == "wrong_key"
    assert _reason(signed, smollm2, trusted_keys=[]) == "wrong_key"
    assert _reason(signed, llama32, trusted_keys=[a_pub]) == "wrong_vocabulary"
    assert _reason(plain, llama32) == "wrong_vocabulary"
    # modified after signing, hash recomputed: only the signature notices
    forged = bytearray(signed)
    forged[-140] ^= 1
    end = len(signed) - 100
    forged_bytes = _reseal(bytes(forged[:end])) + bytes(forged[end:])
    assert _reason(forged_bytes, smollm2, trusted_keys=[a_pub]) == "tampered"
    assert _reason(bytes(forged), smollm2) == "tampered"  # hash mismatch on a signed file
    sig = bytearray(signed)
    sig[-1] ^= 0x80
    assert _reason(bytes(sig), smollm2, trusted_keys=[a_pub]) == "tampered"
    # re-signed by someone else, their key swapped in: not trusted
    resigned = af.dumps(c, signing_key=b)
    assert _reason(resigned, smollm2, trusted_keys=[a_pub]) == "wrong_key"
    assert _reason(b"", smollm2) == "bad_magic"
    assert _reason(b'{"type": "object"}', smollm2) == "bad_magic"
    assert _reason(c.grammar.to_bytes(), smollm2) == "bad_magic"  # engine bytes are not a .corral file
    newer = bytearray(plain)
    newer[8:10] = struct.pack("<H", af.FORMAT_VERSION + 1)
    assert _reason(bytes(newer), smollm2) == "unsupported_version"
    engine = bytearray(plain)
    assert engine[13:26] == b"corral-engine"
    engine[13] = ord("C")
    assert _reason(bytes(engine), smollm2) == "corrupt"  # the hash catches it first
    assert _reason(_reseal(bytes(engine)), smollm2) == "engine_version"
    damaged = bytearray(plain)
    damaged[len(damaged) // 2] ^= 4
    assert _reason(bytes(damaged), smollm2) == "corrupt"
    assert _reason(plain + b"\0", smollm2) == "corrupt"
    with pytest.raises(TypeError):
        af.loads("text", smollm2)  # type: ignore[arg-type]


def test_refusal_messages_say_what_to_do(
    smollm2: corral.Tokenizer, keys: tuple[Path, Path, Path, Path]
) -> None:
    a, a_pub, _, b_pub = keys
    c = compile_constraint(ConstraintSpec.regex("[0-9]+"), smollm2)
    with pytest.raises(corral.ArtifactError, match=r"signed by ed25519:[0-9a-f]{16}, which is not a trusted"):
        af.loads(af.dumps(c, signing_key=a), smollm2, trusted_keys=b_pub)
    with pytest.raises(corral.ArtifactError, match="not signed"):
        af.loads(af.dumps(c), smollm2, trusted_keys=a_pub)


def _edit_meta(raw: bytes, old: bytes, new: bytes) -> bytes:
    """An uncompressed file with ``old`` replaced by ``new`` in its meta, every declared length
    kept true and the content hash recomputed: what a forger without a key can write."""
    start = raw.index(b'{"key":')
    assert old in raw[start:], old
    edited = raw.replace(old, new, 1)
    delta = len(new) - len(old)
    meta_len = struct.unpack("<I", raw[start - 4 : start])[0] + delta
    head = bytearray(edited[: start - 4])  # ... body length, raw body length | meta length, meta
    blen, rlen = struct.unpack("<II", head[-8:])
    head[-8:] = struct.pack("<II", blen + delta, rlen + delta)
    return _reseal(bytes(head) + struct.pack("<I", meta_len) + edited[start:])


def test_body_fields_are_checked_after_a_valid_hash(smollm2: corral.Tokenizer) -> None:
    """Bytes whose hash is right but whose meta lies are refused as corrupt: the spec's cache
    key, unused or shared blobs, wrong types, malformed report entries."""
    raw = af.dumps(compile_constraint(ConstraintSpec.choices(["x", "y"]), smollm2), compress=False)
    assert af.loads(_edit_meta(raw, b'"param":"choices"', b'"param":"choices"'), smollm2).kind == "choices"
    for old, new in [
        (b'"kind":"choices"', b'"kind":"regex"'),  # another kind: the key does not match
        (b'"payload":["x","y"]', b'"payload":["x","z"]'),
        (b'"blob":0', b'"blob":7'),
        (b'"source_len":', b'"source_len":"1",'),
        (b'"tool_mode":""', b'"tool_mode":0'),
    ]:
        assert _reason(_edit_meta(raw, old, new), smollm2) == "corrupt", new
    schema = compile_constraint(ConstraintSpec.json_schema(SCHEMAS[0]), smollm2)
    raw = af.dumps(schema, compress=False)
    for old, new in [
        (b'"enforced"', b'"trusted"'),
        (b'"enforced"', b"7"),
        (b'"entries":[', b'"entries":[3,'),
        (b'"slots":{}', b'"slots":{"a":[1]}'),
        (b'"grammar_source":"', b'"grammar_source":1,"x":"'),
    ]:
        assert _reason(_edit_meta(raw, old, new), smollm2) == "corrupt", new


def _refused_or_loads(data: bytes, tok: corral.Tokenizer, **kw: object) -> bool:
    """True when the bytes load (the constraint is then stepped); False when refused with a
    corral error. Anything else (a crash, another exception) fails the test."""
    try:
        c = af.loads(data, tok, **kw)  # type: ignore[arg-type]
    except (corral.ArtifactError, corral.LimitExceeded):
        return False
    g = c.grammar if not c.grammar.needs_binding else c.grammar.bind({n: ["a"] for n in c.slot_names})
    m, mask = g.matcher(), corral.allocate_bitmask(1, tok)
    for _ in range(3):
        m.fill_next_token_bitmask(mask, 0)
        ids = corral.allowed_tokens(mask[0], tok)
        if not ids or m.is_terminated():
            break
        m.accept_token(ids[0])
    c.read("ab")
    return True


def test_truncation_at_every_prefix(keys: tuple[Path, Path, Path, Path]) -> None:
    tok = byte_tokenizer([b"ab", b"c)"])
    a, a_pub, _, _ = keys
    c = compile_constraint(ConstraintSpec.grammar('root ::= "(" [a-c]* root? ")" | "x"'), tok)
    for data, sig in ((af.dumps(c, compress=False), 0), (af.dumps(c), 0), (af.dumps(c, signing_key=a), 100)):
        assert len(data) < 6000
        # a signed file cut before its signature is a valid unsigned one: trusted keys refuse it
        trusted = {"trusted_keys": [a_pub]} if sig else {}
        for n in range(len(data)):
            with pytest.raises(corral.ArtifactError) as e:
                af.loads(data[:n], tok, **trusted)  # type: ignore[arg-type]
            assert e.value.reason in ("bad_magic", "corrupt", "tampered", "unsigned"), (n, e.value)
        for n in range(40, len(data), 7):  # the prefix resealed: a hash that agrees with the cut
            if n in (len(data) - sig - 32, len(data) - 32):
                # exactly the hashed part: resealing it rebuilds the valid unsigned file; and
                # (signed) everything but the last hash, which resealing rebuilds as it was
                continue
            assert not _refused_or_loads(_reseal(data[:n] + bytes(32)), tok)


def test_mutations_never_crash_hang_or_load_when_signed(keys: tuple[Path, Path, Path, Path]) -> None:
    tok = byte_tokenizer([b"ab", b'":', b'{"'])
    a, a_pub, _, _ = keys
    constraints = [
        compile_constraint(ConstraintSpec.grammar(GRAMMARS[0]), tok),
        compile_constraint(ConstraintSpec.json_schema(SCHEMAS[0]), tok),
        compile_constraint(ConstraintSpec.grammar('root ::= "k=" ${k} "."'), tok),
    ]
    rng = random.Random(7)
    start = time.monotonic()
    cases = resealed_loads = 0
    for c in constraints:
        for compress in (False, True):
            plain = af.dumps(c, compress=compress)
            signed = af.dumps(c, signing_key=a, compress=compress)
            for _ in range(250):
                bad = bytearray(plain)
                for _ in range(rng.randint(1, 3)):
                    bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
                if bytes(bad) == plain:
                    continue
                assert not _refused_or_loads(bytes(bad), tok)  # the content hash catches every flip
                resealed_loads += _refused_or_loads(_reseal(bytes(bad)), tok)
                sbad = bytearray(signed)
                sbad[rng.randrange(len(sbad))] = rng.randrange(256)
                if bytes(sbad) != signed:
                    assert not _refused_or_loads(bytes(sbad), tok, trusted_keys=[a_pub])
                    end = len(signed) - 100
                    forged = _reseal(bytes(sbad[:end])) + bytes(sbad[end:])
                    if forged != signed:  # (a change inside the hash itself reseals to the original)
                        assert not _refused_or_loads(forged, tok, trusted_keys=[a_pub])
                cases += 4
    # hostile length fields: each u32/u8 length in the envelope set to extreme values
    plain = af.dumps(constraints[0], compress=True)
    meta_at = 12 + 1 + plain[12] + 1 + plain[13 + plain[12]]
    for at, width in [(12, 1), (13 + plain[12], 1), (meta_at, 4), (meta_at + 4, 4)]:
        for value in (0, 1, 255, 2**31, 2**32 - 1):
            if value >= 1 << (8 * width):
                continue
            bad = bytearray(plain)
            bad[at : at + width] = value.to_bytes(width, "little")
            assert not _refused_or_loads(bytes(bad), tok)
            _refused_or_loads(_reseal(bytes(bad)), tok)
            cases += 2
    assert cases >= 5000
    assert time.monotonic() - start < 180


def test_trusted_keys_in_every_form(smollm2: corral.Tokenizer, keys: tuple[Path, Path, Path, Path]) -> None:
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    a, a_pub, _, b_pub = keys
    data = af.dumps(compile_constraint(ConstraintSpec.regex("[0-9]+"), smollm2), signing_key=a.read_bytes())
    raw = signing.public_raw(a_pub)
    assert len(raw) == 32
    for trusted in (
        a_pub,
        str(a_pub),
        a_pub.read_bytes(),
        raw,
        load_pem_public_key(a_pub.read_bytes()),
        [b_pub, a_pub],
    ):
        assert af.loads(data, smollm2, trusted_keys=trusted).kind == "regex"
    with pytest.raises(ValueError, match="public key"):
        af.loads(data, smollm2, trusted_keys=[b"not a key"])
    with pytest.raises(FileExistsError):
        signing.write_keypair(a)


def test_deep_meta_is_corrupt_not_recursion_error(smollm2: corral.Tokenizer) -> None:
    """A hash-valid file whose meta nests 100,000 deep (what an unsigned forger can write) is
    refused as corrupt."""
    c = compile_constraint(ConstraintSpec.regex("[0-9]+"), smollm2)
    raw = af.dumps(c, compress=False)
    start = raw.index(b'{"key":')
    meta = raw[start : start + struct.unpack("<I", raw[start - 4 : start])[0]]
    assert _reason(_edit_meta(raw, meta, b"[" * 100_000 + b"]" * 100_000), smollm2) == "corrupt"
