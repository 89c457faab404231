"""Slots: a skeleton compiled once, values bound per request (``${name}``, ``${name:json}``,
JSON Schema ``x-corral-slot``).

Exactness is checked against an oracle that knows nothing about the engine: the grammars here
have finite languages, so a token is allowed after a prefix iff prefix + token bytes is a prefix
of some valid output (every token of the real vocabulary is checked at every step), and EOS iff
the prefix is itself valid."""

from __future__ import annotations

import json
import pickle
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from helpers import allowed, byte_tokenizer, bytes_index, random_tokenization

import corral
from corral.engine import SlotError

pytestmark = pytest.mark.real_tokenizer

# Values chosen to stress the boundaries: prefixes of each other, common words (real tokens
# such as `"yes` or `no"` span the quotes), escapes, non-ASCII, the empty string.
TRICKY = [
    "CC-1",
    "CC-10",
    "CC-104",
    "CC-109",
    "yes",
    "no",
    "the",
    "and",
    "é",
    "naïve café",
    'a"b',
    "tab\there",
    "back\\slash",
    "ctl\x01",
    "😀 ok",
    "",
    "x" * 30,
]
SCHEMA = {
    "type": "object",
    "properties": {
        "cost_center": {"type": "string", "x-corral-slot": "cost_center", "description": "bound per request"},
        "tag": {"type": "string", "x-corral-slot": "tag"},
    },
    "required": ["cost_center"],
}


def outputs(ccs: list[str], tags: list[str]) -> set[bytes]:
    """Every valid output of SCHEMA in compact layout with the given slot values."""
    out = set()
    for c in ccs:
        base = '{"cost_center":' + json.dumps(c, ensure_ascii=False)
        out.add((base + "}").encode())
        for t in tags:
            out.add((base + ',"tag":' + json.dumps(t, ensure_ascii=False) + "}").encode())
    return out


class Oracle:
    """The allowed tokens after a prefix, from the set of valid outputs alone."""

    def __init__(self, tok: corral.Tokenizer, valid: set[bytes]) -> None:
        self.tok = tok
        self.valid = valid
        self.prefixes = {o[:i] for o in valid for i in range(len(o) + 1)}
        self.tokens = [(i, b) for i, b in enumerate(tok.token_bytes) if b and i not in tok.special_ids]

    def allowed(self, prefix: bytes) -> set[int]:
        p = self.prefixes
        out = {i for i, b in self.tokens if prefix + b in p}
        if prefix in self.valid:
            out |= set(self.tok.eos_ids)
        return out


def mask_ids(m: corral.Matcher, tok: corral.Tokenizer) -> set[int]:
    return set(allowed(m, tok))


@pytest.fixture(params=["smollm2", "llama32"])
def tok(request: pytest.FixtureRequest) -> corral.Tokenizer:
    return request.getfixturevalue(request.param)


@pytest.fixture
def skeleton(tok: corral.Tokenizer) -> corral.JsonSchemaGrammar:
    # Canonical escapes: keys have one spelling, as the oracle assumes.
    return corral.compile_json_schema(SCHEMA, tok, whitespace="compact", escapes="canonical")


# -- exactness ---------------------------------------------------------------------------------


def test_masks_equal_the_oracle_along_random_tokenizations(tok: corral.Tokenizer, skeleton) -> None:
    tags = ["a", "ab", "abc"]
    g = skeleton.bind({"cost_center": TRICKY, "tag": tags})
    valid = outputs(TRICKY, tags)
    oracle = Oracle(tok, valid)
    index = bytes_index(tok)
    rng = random.Random(5)
    for text in sorted(valid)[::3]:
        ids = random_tokenization(text, index, rng)
        m = g.matcher()
        prefix = b""
        for t in ids:
            assert mask_ids(m, tok) == oracle.allowed(prefix), prefix
            assert m.accept_token(t)
            prefix += tok.token_bytes[t]
        assert mask_ids(m, tok) == oracle.allowed(prefix)
        assert m.accept_token(tok.eos_ids[0]) and m.is_terminated()


def test_random_walks_produce_only_bound_values(tok: corral.Tokenizer, skeleton) -> None:
    tags = ["red", "green"]
    g = skeleton.bind({"cost_center": TRICKY, "tag": tags})
    valid = outputs(TRICKY, tags)
    oracle = Oracle(tok, valid)
    rng = random.Random(11)
    seen = set()
    for _ in range(30):
        m = g.matcher()
        out = b""
        while not m.is_terminated():
            ids = mask_ids(m, tok)
            assert ids == oracle.allowed(out)  # both directions, every token of the vocabulary
            t = rng.choice(sorted(ids))
            assert m.accept_token(t)
            if t not in tok.eos_ids:
                out += tok.token_bytes[t]
        assert out in valid
        seen.add(json.loads(out)["cost_center"])
        assert g.validate(out)
    assert len(seen) > 5


def test_every_value_is_reachable_in_every_tokenization(tok: corral.Tokenizer, skeleton) -> None:
    g = skeleton.bind({"cost_center": TRICKY, "tag": ["t"]})
    index = bytes_index(tok)
    rng = random.Random(3)
    for value in TRICKY:
        text = ('{"cost_center":' + json.dumps(value, ensure_ascii=False) + "}").encode()
        tokenizations = [random_tokenization(text, index, rng) for _ in range(4)]
        if tok.has_encoder:
            tokenizations.append(tok.encode(text.decode()))
        for ids in tokenizations:
            m = g.matcher()
            for t in ids:
                assert t in mask_ids(m, tok), (value, tok.token_bytes[t])
                assert m.accept_token(t)
            assert m.is_accepting(), value


def test_token_spanning_the_slot_end_is_exact() -> None:
    # A vocabulary where one token holds a whole value plus the separator after it.
    tok = byte_tokenizer([b'"CC-104",', b"CC-10", b'"CC', b'4"}', b'9"', b'"tag":"a'])
    g = corral.compile_json_schema(SCHEMA, tok, whitespace="compact", escapes="canonical").bind(
        {"cost_center": ["CC-104", "CC-109"], "tag": ["a", "ab"]}
    )
    oracle = Oracle(tok, outputs(["CC-104", "CC-109"], ["a", "ab"]))
    m = g.matcher()
    assert m.accept_bytes(b'{"cost_center":')
    ids = mask_ids(m, tok)
    assert ids == oracle.allowed(b'{"cost_center":')
    span = tok.token_bytes.index(b'"CC-104",')
    assert span in ids
    assert m.accept_token(span)
    assert mask_ids(m, tok) == oracle.allowed(b'{"cost_center":"CC-104",')


# -- sharing, concurrency ------------------------------------------------------------------------


def test_skeleton_is_compiled_once_and_shared(llama32: corral.Tokenizer) -> None:
    skeleton = corral.compile_json_schema(SCHEMA, llama32, whitespace="compact")
    assert skeleton.needs_binding and skeleton.slot_names == ["cost_center", "tag"]
    with pytest.raises(SlotError, match="not bound"):
        skeleton.matcher()
    text = b'{"cost_center":"CC-104","tag":"a"}'
    ids = random_tokenization(text, bytes_index(llama32), random.Random(0))

    def run(g: corral.JsonSchemaGrammar) -> None:
        m = g.matcher()
        for t in ids:
            allowed(m, llama32)
            assert m.accept_token(t)
        assert m.is_accepting()

    first = skeleton.bind({"cost_center": ["CC-104", "CC-109"], "tag": ["a"]})
    run(first)
    before = skeleton.cache_stats()
    assert before["entries"] > 0 and first.cache_stats()["entries"] > 0
    # Another request, other values: nothing outside the slots is computed again.
    for k in range(20):
        g = skeleton.bind({"cost_center": ["CC-104", f"CC-{k}"], "tag": ["a", "b"]})
        assert g.skeleton is skeleton and g.schema is skeleton.schema
        run(g)
    after = skeleton.cache_stats()
    assert after["misses"] == before["misses"] and after["entries"] == before["entries"]
    assert after["hits"] > before["hits"]
    assert after["bindings"] == 21


def test_two_bindings_used_concurrently_stay_apart(llama32: corral.Tokenizer) -> None:
    skeleton = corral.compile_json_schema(SCHEMA, llama32, whitespace="compact")
    values = {
        "a": [f"A-{i}" for i in range(40)] + ["shared"],
        "b": [f"B-{i}" for i in range(40)] + ["shared", "é"],
    }
    barrier = threading.Barrier(2)

    def worker(name: str) -> list[str]:
        g = skeleton.bind({"cost_center": values[name], "tag": [name]})
        barrier.wait()
        rng = random.Random(name)
        out = []
        for _ in range(25):
            m = g.matcher()
            text = b""
            while not m.is_terminated():
                ids = allowed(m, llama32)
                t = rng.choice(ids)
                assert m.accept_token(t)
                if t not in llama32.eos_ids:
                    text += llama32.token_bytes[t]
            value = json.loads(text)
            assert value.get("tag", name) == name
            out.append(value["cost_center"])
        return out

    with ThreadPoolExecutor(2) as pool:
        results = dict(zip("ab", pool.map(worker, "ab"), strict=True))
    for name, got in results.items():
        assert set(got) <= set(values[name])
        assert len(set(got)) > 3


def test_batch_fill_mixes_bindings_and_plain_grammars(smollm2: corral.Tokenizer) -> None:
    skeleton = corral.compile_json_schema(SCHEMA, smollm2, whitespace="compact")
    gs = [skeleton.bind({"cost_center": [f"V{k}-{i}" for i in range(30)], "tag": ["t"]}) for k in range(4)]
    ms = [g.matcher() for g in gs] + [corral.compile_json(smollm2).matcher()]
    for m in ms[:4]:
        assert m.accept_bytes(b'{"cost_center":"V')
    batch = corral.allocate_bitmask(len(ms), smollm2)
    corral.fill_next_token_bitmasks(ms, batch, threads=2)
    for i, m in enumerate(ms):
        single = corral.allocate_bitmask(1, smollm2)
        m.fill_next_token_bitmask(single, 0)
        assert np.array_equal(single[0], batch[i])
    # Each binding's next digit is its own.
    digit = {k: smollm2.token_bytes.index(str(k).encode()) for k in range(4)}
    for k in range(4):
        row = set(corral.allowed_tokens(batch[k], smollm2))
        assert digit[k] in row and all(digit[j] not in row for j in range(4) if j != k)


# -- grammar syntax, raw slots ---------------------------------------------------------------------


def test_raw_slot_in_a_grammar(smollm2: corral.Tokenizer) -> None:
    skeleton = corral.compile_grammar('root ::= "code: " ${code} ("," ${code})* "\\n"', smollm2)
    assert "${code}" in skeleton.grammar_text
    g = skeleton.bind({"code": ["A1", "A12", "B7", "ß"]})
    m = g.matcher()
    assert m.accept_string("code: A12,ß,A1\n") and m.is_accepting()
    m = g.matcher()
    assert not m.accept_string("code: A2")
    assert m.accept_string("code: A") and m.shortest_completion() == b"1\n"
    valid_next = {smollm2.token_bytes[t] for t in allowed(m, smollm2)}
    assert b"1" in valid_next and b"2" not in valid_next and b"7" not in valid_next
    with pytest.raises(SlotError, match="empty value"):
        skeleton.bind({"code": ["A", ""]})


@pytest.mark.parametrize(
    "text",
    ["root ::= ${}", "root ::= ${a:yaml}", "root ::= $a", "root ::= /x/ & ${a}", "root ::= ${a"],
)
def test_bad_slot_syntax(text: str) -> None:
    with pytest.raises(corral.CompileError):
        corral.compile_grammar(text, byte_tokenizer())


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "slots, match",
    [
        ({"cost_center": [], "tag": ["a"]}, "no values"),
        ({"cost_center": ["x", "x"], "tag": ["a"]}, "duplicate value 'x'"),
        ({"cost_center": ["x"]}, "slot 'tag' is not bound"),
        ({"cost_center": ["x"], "tag": ["a"], "other": ["b"]}, "unknown slot 'other'"),
        ({"cost_center": "x", "tag": ["a"]}, "list of strings"),
        ({"cost_center": ["x", 3], "tag": ["a"]}, "3 \\(int\\) is not a str"),
        ({"cost_center": [None], "tag": ["a"]}, "not a str"),
        ({"cost_center": ["\ud800"], "tag": ["a"]}, "not valid UTF-8"),
        (["cost_center"], "mapping"),
    ],
)
def test_bind_errors(slots, match) -> None:
    skeleton = corral.compile_json_schema(SCHEMA, byte_tokenizer())
    with pytest.raises(SlotError, match=match) as e:
        skeleton.bind(slots)
    assert isinstance(e.value, corral.CorralError) and not isinstance(e.value, corral.CompileError)


def test_binding_a_binding_and_limits() -> None:
    tok = byte_tokenizer()
    g = corral.compile_json_schema(SCHEMA, tok).bind({"cost_center": ["x"], "tag": ["y"]})
    with pytest.raises(SlotError, match="already a binding"):
        g.bind({"cost_center": ["x"], "tag": ["y"]})
    small = corral.compile_json_schema(SCHEMA, tok, max_slot_values=3, max_slot_bytes=40)
    with pytest.raises(corral.LimitExceeded) as e:
        small.bind({"cost_center": ["1", "2", "3", "4"], "tag": ["y"]})
    assert e.value.limit == "max_slot_values"
    with pytest.raises(corral.LimitExceeded) as e:
        small.bind({"cost_center": ["x" * 50], "tag": ["y"]})
    assert e.value.limit == "max_slot_bytes"
    states = corral.compile_json_schema(SCHEMA, tok, escapes="canonical", max_dfa_states=40)
    with pytest.raises(corral.LimitExceeded) as e:
        states.bind({"cost_center": [f"{i:04x}-{i * 7919:06x}" for i in range(200)], "tag": ["y"]})
    assert e.value.limit == "max_dfa_states"
    err = SlotError("slot 'x': no values", "x")
    again = pickle.loads(pickle.dumps(err))
    assert again.slot == "x" and str(again) == str(err)


def test_a_grammar_without_slots_binds_to_itself() -> None:
    g = corral.compile_regex("a+", byte_tokenizer())
    assert g.slot_names == [] and not g.needs_binding
    assert g.bind({}) is g
    with pytest.raises(SlotError, match="no slots"):
        g.bind({"x": ["a"]})


# -- JSON Schema -------------------------------------------------------------------------------


def test_schema_report_lists_slots_and_validate_checks_values() -> None:
    schema = {
        "type": "object",
        "properties": {
            "cc": {"type": "string", "x-corral-slot": "cost_center"},
            "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}, "maxItems": 3},
            "maybe": {"type": ["string", "null"], "x-corral-slot": "cost_center"},
        },
        "required": ["cc", "tags"],
        "$defs": {"tag": {"type": "string", "x-corral-slot": "tag"}},
    }
    tok = byte_tokenizer()
    skeleton = corral.compile_json_schema(schema, tok)  # escapes="any": slots stay canonical
    assert skeleton.slots == {
        "cost_center": ["#/properties/cc", "#/properties/maybe"],
        "tag": ["#/$defs/tag"],
    }
    assert "${cost_center:json}" in skeleton.grammar_source and "slot 'tag'" in str(skeleton.report)
    g = skeleton.bind({"cost_center": ["CC-104", "CC-109"], "tag": ["x", "y", "é"]})
    assert g.slot_values == {"cost_center": ["CC-104", "CC-109"], "tag": ["x", "y", "é"]}
    good = '{"cc": "CC-109", "tags": ["é", "x"], "maybe": null}'
    assert g.matcher().accept_string(good) and g.validate(good)["cc"] == "CC-109"
    assert not g.matcher().accept_string('{"cc": "CC-104", "tags": ["\\u00e9"]')  # canonical only
    with pytest.raises(corral.OutputValidationError, match="bound to slot 'cost_center'"):
        g.validate('{"cc": "CC-1", "tags": []}')
    with pytest.raises(corral.OutputValidationError, match="bound to slot 'tag'"):
        g.validate('{"cc": "CC-104", "tags": ["z"]}')
    assert skeleton.validate('{"cc": "anything", "tags": ["z"]}')  # the skeleton knows no values
    other = skeleton.bind({"cost_center": ["CC-1"], "tag": ["z"]})
    assert other.validate('{"cc": "CC-1", "tags": ["z"]}') and other.skeleton is skeleton


@pytest.mark.parametrize(
    "schema, match",
    [
        ({"type": "string", "x-corral-slot": "a", "pattern": "^C"}, "pattern"),
        ({"type": "string", "x-corral-slot": "a", "maxLength": 3}, "maxLength"),
        ({"type": "string", "x-corral-slot": "a", "enum": ["x"]}, "enum"),
        ({"type": "string", "x-corral-slot": "not a name"}, "must be a name"),
        ({"type": "string", "x-corral-slot": 3}, "must be a name"),
        ({"type": "object", "propertyNames": {"x-corral-slot": "a"}}, "propertyNames"),
    ],
)
def test_schema_slot_errors(schema, match) -> None:
    with pytest.raises(corral.SchemaError, match=match):
        corral.compile_json_schema(schema, byte_tokenizer())


def test_pydantic_field_slot(smollm2: corral.Tokenizer) -> None:
    pydantic = pytest.importorskip("pydantic")

    class Expense(pydantic.BaseModel):
        amount: int
        cost_center: str = pydantic.Field(json_schema_extra={"x-corral-slot": "cost_center"})

    g = corral.compile_json_schema(Expense, smollm2).bind({"cost_center": ["CC-104", "CC-109"]})
    rng = random.Random(2)
    for _ in range(5):
        from helpers import random_walk

        out, _ = random_walk(g, rng, max_steps=40)
        assert g.parse(out).cost_center in ("CC-104", "CC-109")


def test_bind_is_fast(llama32: corral.Tokenizer) -> None:
    # The benchmark (bench/bench_slots.py) measures it; this only guards against a regression
    # by orders of magnitude (shared CI machines are noisy).
    skeleton = corral.compile_json_schema(SCHEMA, llama32)
    values = [f"CC-{i:05d}-{(i * 7919) % 10007:05d}" for i in range(1000)]
    best = min(_timed(lambda: skeleton.bind({"cost_center": values, "tag": ["x"]})) for _ in range(5))
    assert best < 0.02


def _timed(f) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t
