"""Matcher snapshots: ``Matcher.snapshot()`` and ``CompiledGrammar.restore(snapshot)``.

A matcher restored from a snapshot continues with masks, forced bytes, completions and
acceptance identical to the original's at every later step of seeded random walks, and rolls
back as far (regex corpus, JSON Schemas, GBNF, JSON mode; SmolLM2 and Llama 3.2 vocabularies),
whether it is restored on the same grammar, a fresh compile, an artifact loaded with
``from_bytes``, or in another process. Snapshots for another tokenizer, grammar or binding are
refused with their reasons; truncated and bit-flipped snapshots never crash, hang or restore.
"""

from __future__ import annotations

import json
import random
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
from helpers import byte_tokenizer
from regex_corpus import CORPUS

import corral
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
]

SLOT_GRAMMAR = 'root ::= "{\\"cc\\": " ${cc:json} ", \\"id\\": \\"" ${id} "\\"}"'
SLOT_VALUES = {"cc": ["CC-104", "CC-109", 'quote"d'], "id": ["a1", "b22"]}


def _reseal(data: bytearray | bytes) -> bytes:
    """Recompute the checksum field (CRC-32 of bytes 16..end, at offset 12) after an edit."""
    out = bytearray(data)
    out[12:16] = struct.pack("<I", zlib.crc32(bytes(out[16:])))
    return bytes(out)


def _state(m: corral.Matcher, row: np.ndarray) -> tuple[bytes, bool, bool, bytes, bytes]:
    m.fill_next_token_bitmask(row, 0)
    try:
        completion = m.shortest_completion()
    except corral.LimitExceeded as e:
        completion = str(e).encode()
    return row.tobytes(), m.is_accepting(), m.is_terminated(), m.forced_bytes(), completion


def _walk(m: corral.Matcher, tok: corral.Tokenizer, rng: random.Random, steps: int) -> list[int]:
    """Advance `m` by up to `steps` tokens chosen from its masks; returns the tokens."""
    row = corral.allocate_bitmask(1, tok)
    taken: list[int] = []
    for _ in range(steps):
        m.fill_next_token_bitmask(row, 0)
        ids = corral.allowed_tokens(row[0], tok)
        if not ids or m.is_terminated():
            break
        t = rng.choice(ids)
        assert m.accept_token(t)
        taken.append(t)
    return taken


def _continue_identically(
    a: corral.Matcher, b: corral.Matcher, tok: corral.Tokenizer, rng: random.Random, steps: int
) -> None:
    """Drive a and b with the same tokens, comparing every observable at every step, then roll
    both back by the same random amounts (past the snapshot point too) and compare again."""
    ra, rb = corral.allocate_bitmask(1, tok), corral.allocate_bitmask(1, tok)
    for step in range(steps):
        sa, sb = _state(a, ra), _state(b, rb)
        assert sa == sb, f"step {step} after restore: states differ"
        assert a.num_steps == b.num_steps
        ids = corral.allowed_tokens(ra[0], tok)
        if not ids or a.is_terminated():
            break
        t = rng.choice(ids)
        assert a.accept_token(t) and b.accept_token(t)
    for _ in range(3):
        if a.num_steps == 0:
            break
        n = rng.randint(1, a.num_steps)
        a.rollback(n)
        b.rollback(n)
        assert _state(a, ra) == _state(b, rb), f"after rollback({n})"


def _check(g: corral.CompiledGrammar, targets: list[corral.CompiledGrammar], seeds: int, steps: int) -> None:
    tok = g.tokenizer
    for seed in range(seeds):
        rng = random.Random(seed)
        m = g.matcher()
        _walk(m, tok, rng, rng.randrange(steps))
        snap = m.snapshot()
        for h in targets:
            r = h.restore(snap)
            assert r.snapshot() == snap  # canonical: the restored matcher writes the same bytes
            _continue_identically(m.copy(), r, tok, random.Random(seed + 1000), steps)


def test_regex_corpus(smollm2: corral.Tokenizer) -> None:
    for pattern in CORPUS:
        g = corral.compile_regex(pattern, smollm2)
        _check(g, [g, CompiledGrammar.from_bytes(g.to_bytes(), smollm2)], seeds=2, steps=12)


@pytest.mark.parametrize("vocab", ["smollm2", "llama32"])
def test_schemas_grammars_and_json_mode(vocab: str, request: pytest.FixtureRequest) -> None:
    tok: corral.Tokenizer = request.getfixturevalue(vocab)
    builders = [lambda s=s: corral.compile_json_schema(s, tok) for s in SCHEMAS]
    builders += [lambda t=t: corral.compile_grammar(t, tok) for t in GRAMMARS]
    builders.append(lambda: corral.compile_json(tok))
    for build in builders:
        g = build()
        fresh = build()
        loaded = CompiledGrammar.from_bytes(g.to_bytes(), tok)
        _check(g, [g, fresh, loaded], seeds=3, steps=25)


def test_bindings_restore_on_the_same_values(smollm2: corral.Tokenizer) -> None:
    g = corral.compile_grammar(SLOT_GRAMMAR, smollm2)
    loaded = CompiledGrammar.from_bytes(g.to_bytes(), smollm2)
    _check(g.bind(SLOT_VALUES), [g.bind(SLOT_VALUES), loaded.bind(SLOT_VALUES)], seeds=4, steps=30)
    snap = g.bind(SLOT_VALUES).matcher().snapshot()
    with pytest.raises(corral.ArtifactError, match="another binding") as e:
        g.bind({**SLOT_VALUES, "id": ["a1", "c3"]}).restore(snap)
    assert e.value.reason == "wrong_binding"
    with pytest.raises(corral.ArtifactError) as e:
        g.restore(snap)  # the skeleton itself
    assert e.value.reason == "wrong_binding"


def test_terminated_and_named_tokens(llama32: corral.Tokenizer) -> None:
    g = corral.compile_grammar('root ::= "ok" <|eot_id|> "!"? | "no"', llama32)
    m = g.matcher()
    assert m.accept_bytes(b"ok") and m.accept_token(128009)
    r = g.restore(m.snapshot())
    assert r.num_steps == 2 and r.accept_bytes(b"!") and r.is_accepting()
    assert r.accept_token(llama32.eos_ids[0]) and r.is_terminated()
    t = CompiledGrammar.from_bytes(g.to_bytes(), llama32).restore(r.snapshot())
    assert t.is_terminated() and t.num_steps == 4
    t.rollback(3)  # back to just "ok"
    assert t.num_steps == 1 and not t.is_accepting() and t.accept_token(128009)


_CHILD = r"""
import json, random, sys
import numpy as np
import corral
from corral.engine import CompiledGrammar

args = json.loads(open(sys.argv[1]).read())
tok = corral.Tokenizer.from_gguf(args["tokenizer"])
kind = args["kind"]
g = corral.compile_json_schema(args["schema"], tok) if kind == "fresh" else CompiledGrammar.from_bytes(
    open(args["artifact"], "rb").read(), tok)
m = g.restore(open(args["snapshot"], "rb").read())
row = corral.allocate_bitmask(1, tok)
out = []
for t in args["tokens"] + [None]:
    m.fill_next_token_bitmask(row, 0)
    out.append([row.tobytes().hex(), m.is_accepting(), m.forced_bytes().hex()])
    if t is not None:
        assert m.accept_token(t)
m.rollback(args["rollback"])
m.fill_next_token_bitmask(row, 0)
out.append([row.tobytes().hex(), m.is_accepting(), m.forced_bytes().hex()])
print(json.dumps(out))
"""


def test_across_processes(smollm2: corral.Tokenizer, tmp_path: Path) -> None:
    """Snapshot here; restore in a subprocess on a fresh compile and on a loaded artifact; the
    child's masks at every later step (and after a rollback past the snapshot) equal ours."""
    from corral import models

    schema = SCHEMAS[0]
    g = corral.compile_json_schema(schema, smollm2)
    rng = random.Random(5)
    m = g.matcher()
    _walk(m, smollm2, rng, 9)
    (tmp_path / "snap").write_bytes(m.snapshot())
    (tmp_path / "art").write_bytes(g.to_bytes())
    original = m.copy()
    tokens = _walk(m, smollm2, rng, 15)
    rollback = len(tokens) + 4  # past the snapshot point
    row = corral.allocate_bitmask(1, smollm2)
    expected = []
    for t in [*tokens, None]:
        original.fill_next_token_bitmask(row, 0)
        expected.append([row.tobytes().hex(), original.is_accepting(), original.forced_bytes().hex()])
        if t is not None:
            assert original.accept_token(t)
    original.rollback(rollback)
    original.fill_next_token_bitmask(row, 0)
    expected.append([row.tobytes().hex(), original.is_accepting(), original.forced_bytes().hex()])
    (tmp_path / "child.py").write_text(_CHILD)
    for kind in ("fresh", "artifact"):
        args = {
            "tokenizer": str(models.smollm2_gguf_path()),
            "kind": kind,
            "schema": schema,
            "artifact": str(tmp_path / "art"),
            "snapshot": str(tmp_path / "snap"),
            "tokens": tokens,
            "rollback": rollback,
        }
        (tmp_path / "args.json").write_text(json.dumps(args))
        proc = subprocess.run(
            [sys.executable, str(tmp_path / "child.py"), str(tmp_path / "args.json")],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == expected, kind


def _reason(g: corral.CompiledGrammar, data: bytes) -> str:
    with pytest.raises(corral.ArtifactError) as e:
        g.restore(data)
    assert e.value.code == "artifact_error"
    return e.value.reason


def test_refusals_have_distinct_reasons(smollm2: corral.Tokenizer, llama32: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(SCHEMAS[0], smollm2)
    m = g.matcher()
    assert m.accept_bytes(b'{"name": "x')
    snap = m.snapshot()
    assert _reason(corral.compile_json_schema(SCHEMAS[0], llama32), snap) == "wrong_vocabulary"
    with pytest.raises(corral.ArtifactError, match="another grammar") as e:
        corral.compile_json_schema(SCHEMAS[1], smollm2).restore(snap)
    assert e.value.reason == "wrong_grammar"
    assert _reason(g, b"") == "bad_magic"
    assert _reason(g, g.to_bytes()) == "bad_magic"  # an artifact is not a snapshot
    newer = bytearray(snap)
    newer[8:12] = struct.pack("<I", 2)
    assert _reason(g, bytes(newer)) == "unsupported_version"
    engine = corral._native.artifact_versions()["engine_version"].encode()
    assert snap[73 : 73 + len(engine)] == engine
    other = bytearray(snap)
    other[73] ^= 0x20
    assert _reason(g, bytes(other)) == "corrupt"  # the checksum catches it first
    assert _reason(g, _reseal(other)) == "engine_version"
    assert _reason(g, snap + b"\0") == "corrupt"
    forged = bytearray(snap)
    forged[-18] = ord("\n")  # the last recorded byte: a raw newline inside a JSON string
    with pytest.raises(corral.ArtifactError, match="not accepted by the grammar") as e:
        g.restore(_reseal(forged))
    assert e.value.reason == "corrupt"
    # Limits are not part of the grammar's identity; a replay that exceeds them says so.
    roomy = CompiledGrammar.from_bytes(g.to_bytes(), smollm2, max_items_per_set=1000)
    assert roomy.restore(snap).num_steps == 1
    tight = CompiledGrammar.from_bytes(g.to_bytes(), smollm2, max_items_per_set=3)
    assert _reason(tight, snap) == "limit"
    broken = tight.matcher()
    assert not broken.accept_bytes(b'{"name": "x') and broken.error
    with pytest.raises(corral.ArtifactError) as e:
        broken.snapshot()
    assert e.value.reason == "matcher_error"
    with pytest.raises(TypeError):
        g.restore("not bytes")  # type: ignore[arg-type]


def _restores(g: corral.CompiledGrammar, data: bytes) -> bool:
    """Restore or refuse; a matcher that restores is in a state the grammar reaches."""
    try:
        m = g.restore(data)
    except corral.ArtifactError:
        return False
    if not m.is_terminated():
        try:
            rest = m.shortest_completion()
        except corral.LimitExceeded:  # the completion needs a named token, not bytes
            return True
        assert m.accept_bytes(rest) and m.is_accepting()
    return True


def test_truncation_at_every_prefix() -> None:
    tok = byte_tokenizer([b"ab", b"c)", b"(("])
    g = corral.compile_grammar('root ::= "(" [a-c]* root? ")" | "x"', tok)
    m = g.matcher()
    for piece in (b"(", b"ab", b"((", b"c)", b")"):
        assert m.accept_bytes(piece)
    snap = m.snapshot()
    for n in range(len(snap)):
        assert not _restores(g, snap[:n]), n
        if n >= 72:  # the same prefix with a header that claims it and a valid checksum
            cut = bytearray(snap[:n])
            cut[16:24] = struct.pack("<Q", n)
            assert _reason(g, _reseal(cut)) == "corrupt"


def test_bit_flips_never_crash_hang_or_restore() -> None:
    tok = byte_tokenizer([b"ab", b'":', b'{"'])
    sources = [
        corral.compile_grammar(GRAMMARS[0], tok),
        corral.compile_regex(r"(ab|c){1,4}[x-z]+", tok),
        corral.compile_grammar('root ::= "k=" ${k} <|special|> "."', tok).bind({"k": ["ab", "c"]}),
    ]
    rng = random.Random(1)
    start = time.monotonic()
    mutations = unsealed = sealed_refused = 0
    for g in sources:
        m = g.matcher()
        _walk(m, tok, random.Random(3), 8)
        good = m.snapshot()
        for _ in range(500):
            bad = bytearray(good)
            for _ in range(rng.randint(1, 3)):
                bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
            if bytes(bad) == good:  # two flips that cancel out
                continue
            unsealed += _restores(g, bytes(bad))
            sealed_refused += not _restores(g, _reseal(bad))
            odd = bytearray(good)
            odd[rng.randrange(72, len(odd))] = rng.randrange(256)
            _restores(g, _reseal(odd))
            mutations += 3
    assert mutations >= 4000
    assert unsealed == 0  # the checksum or the magic catches every unsealed flip
    assert sealed_refused > 500  # and the strict reader or the replay most sealed ones
    assert time.monotonic() - start < 120
