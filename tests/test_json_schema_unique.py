"""``uniqueItems`` enforced in the mask (unique groups, cpp/unique.hpp), against ``jsonschema``.

For arrays whose items come from a small finite set (enum/const scalars and objects, booleans,
null, bounded integers): hand-written instances — distinct ones and near misses that repeat an
item in another spelling (``[1, 1.0]``, ``["a", "\\u0061"]``, an object with ``2`` then ``2.0``)
— are accepted exactly when ``jsonschema`` accepts them; random walks under the mask on SmolLM2
and Llama 3.2 produce only arrays ``jsonschema`` accepts, with the mask equal to the parser in
both directions along them; the report says the keyword is enforced (nothing left to
``validate``); unsatisfiable counts are a SchemaError at compile; other item sets stay in the
report. Artifacts and snapshots keep the construct; a bundled model generates distinct items.
"""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest
from helpers import mask_matches_accept, random_walk

import corral

pytestmark = pytest.mark.real_tokenizer

# (name, schema, instances as JSON text: distinct items and near misses together; jsonschema
# decides which is which)
CASES: list[tuple[str, Any, list[str]]] = [
    (
        "enum of scalars",
        {"type": "array", "items": {"enum": [1, 2, 3, "a", None, True]}, "uniqueItems": True},
        [
            "[]",
            "[1]",
            "[1, 2, 3]",
            "[3, 1]",
            '[1, "a", null, true]',
            "[1, 1.0]",
            "[1, 1e0]",
            "[1.0, 2, 1]",
            '["a", "\\u0061"]',
            '["\\u0061", 2]',
            "[2, 2]",
            "[null, null]",
            "[true, 1]",
            "[true, true]",
        ],
    ),
    (
        "enum objects",
        {
            "type": "array",
            "items": {"enum": [{"a": 1, "b": 2}, {"a": 2}, {"a": 1}]},
            "uniqueItems": True,
        },
        [
            '[{"a": 1, "b": 2}, {"a": 2}]',
            '[{"a": 1}, {"a": 1, "b": 2}]',
            '[{"a": 1, "b": 2}, {"a": 1, "b": 2}]',
            '[{"a": 1, "b": 2}, {"a": 1.0, "b": 2.0}]',
            '[{"a": 2}, {"a": 2.0}]',
            '[{"a": 1}, {"a": 2}, {"a": 1}]',
        ],
    ),
    (
        "enum objects listed in two key orders",
        {
            "type": "array",
            "items": {"enum": [{"a": 1, "b": 2}, {"b": 2, "a": 1}, {"c": 3}]},
            "uniqueItems": True,
        },
        [
            '[{"b": 2, "a": 1}, {"c": 3}]',
            '[{"c": 3}, {"a": 1, "b": 2}]',
            '[{"a": 1, "b": 2}, {"b": 2, "a": 1}]',
            '[{"b": 2, "a": 1}, {"c": 3}, {"a": 1, "b": 2.0}]',
        ],
    ),
    (
        "const items",
        {"type": "array", "items": {"const": "x"}, "uniqueItems": True},
        ['["x"]', "[]", '["x", "x"]', '["x", "\\u0078"]'],
    ),
    (
        "booleans and null",
        {"type": "array", "items": {"type": ["boolean", "null"]}, "uniqueItems": True},
        ["[true, false, null]", "[false]", "[true, true]", "[null, false, null]"],
    ),
    (
        "bounded integers with counts",
        {
            "type": "array",
            "items": {"type": "integer", "minimum": 0, "maximum": 12},
            "uniqueItems": True,
            "minItems": 2,
            "maxItems": 4,
        },
        ["[0, 12]", "[3, 1, 2, 11]", "[1]", "[1, 2, 3, 4, 5]", "[5, 5]", "[10, 1, 10]", "[7, 8, 7, 9]"],
    ),
    (
        "nested in an object",
        {
            "type": "object",
            "properties": {
                "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "uniqueItems": True},
            },
            "required": ["tags"],
            "additionalProperties": False,
        },
        [
            '{"tags": ["red", "blue"]}',
            '{"tags": []}',
            '{"tags": ["red", "red"]}',
            '{"tags": ["blue", "green", "blue"]}',
        ],
    ),
    (
        "enum with JSON-equal entries",
        {"type": "array", "items": {"enum": [1, 1.0, 2]}, "uniqueItems": True},
        ["[1, 2]", "[2, 1.0]", "[1, 1.0]", "[1.0, 1]", "[2, 2.0]"],
    ),
    (
        "booleans, null and bounded integers",
        {
            "type": "array",
            "items": {"type": ["boolean", "null", "integer"], "minimum": 0, "maximum": 3},
            "uniqueItems": True,
        },
        [
            "[true, 1, null, 0]",
            "[0, false]",
            "[1, true]",
            "[3, 2, 1, 0, true, false, null]",
            "[1, 1]",
            "[null, 0, null]",
            "[false, 0, false]",
            "[true, true]",
            "[4]",
        ],
    ),
    (
        "numbers with an integer step",  # (integers, in any number spelling)
        {
            "type": "array",
            "items": {"type": "number", "minimum": 0, "maximum": 100, "multipleOf": 10},
            "uniqueItems": True,
        },
        ["[10, 20.0]", "[100, 0, 50.0]", "[10, 10.0]", "[10, 10.00]", "[15]", "[20.0, 20]", "[110]"],
    ),
    (
        "prefixItems of one schema, items false",  # (positions that share a schema: one group)
        {
            "type": "array",
            "prefixItems": [{"type": "boolean"}, {"type": "boolean"}],
            "items": False,
            "uniqueItems": True,
        },
        ["[true, false]", "[false]", "[]", "[true, true]", "[false, false]", "[true, false, true]", "[1]"],
    ),
    (
        "prefixItems and items of one schema",
        {
            "type": "array",
            "prefixItems": [{"enum": [1, 2, 3]}],
            "items": {"enum": [1, 2, 3]},
            "uniqueItems": True,
        },
        ["[3, 1, 2]", "[2]", "[3, 3]", "[1, 2, 1]", "[4]"],
    ),
    (
        "anyOf of finite branches",
        {
            "type": "array",
            "items": {"anyOf": [{"enum": ["a", "b"]}, {"type": "boolean"}, {"const": {"k": 1}}]},
            "uniqueItems": True,
        },
        [
            '["a", true, {"k": 1}, false, "b"]',
            '[{"k": 1}, "a"]',
            '["a", "\\u0061"]',
            '[{"k": 1}, {"k": 1.0}]',
            "[false, false]",
            '["c"]',
        ],
    ),
    (
        "oneOf of overlapping enums",  # (3 matches both branches: no value of the items)
        {"type": "array", "items": {"oneOf": [{"enum": [1, 2, 3]}, {"enum": [3, 4]}]}, "uniqueItems": True},
        ["[1, 2, 4]", "[4, 1]", "[3]", "[1, 3]", "[4, 4]", "[2, 1, 2]"],
    ),
    (
        "allOf with a not beside an enum",
        {
            "type": "array",
            "items": {
                "allOf": [{"type": "integer", "minimum": 0, "maximum": 9}, {"not": {"const": 5}}],
                "not": {"enum": [7, 8]},
            },
            "uniqueItems": True,
        },
        ["[0, 9, 6]", "[1]", "[5]", "[7, 1]", "[9, 9]", "[2, 3, 2]"],
    ),
]


def _accepts(g: corral.CompiledGrammar, tok: corral.Tokenizer, text: str) -> bool:
    m = g.matcher()
    return all(m.accept_token(t) for t in tok.encode(text)) and m.is_accepting()


@pytest.mark.parametrize(("name", "schema", "instances"), CASES, ids=[c[0] for c in CASES])
def test_enforced_exactly_against_jsonschema(
    name: str, schema: Any, instances: list[str], llama32: corral.Tokenizer
) -> None:
    g = corral.compile_json_schema(schema, llama32)
    assert not g.report.post_checks, f"{name}: {g.report}"
    assert any(e.keyword == "uniqueItems" and e.status == "enforced" for e in g.report.entries)
    validator = jsonschema.Draft202012Validator(schema)
    kinds = {validator.is_valid(json.loads(x)) for x in instances}
    assert kinds == {True, False}, f"{name}: the instances must include valid ones and near misses"
    for text in instances:
        want = validator.is_valid(json.loads(text))
        assert _accepts(g, llama32, text) == want, (name, text)
        compact = json.dumps(json.loads(text), separators=(",", ":"))
        assert _accepts(g, llama32, compact) == want, (name, compact)


@pytest.mark.slow
@pytest.mark.parametrize("tokenizer", ["smollm2", "llama32"])
@pytest.mark.parametrize(("name", "schema", "instances"), CASES, ids=[c[0] for c in CASES])
def test_random_walks_produce_distinct_items(
    name: str, schema: Any, instances: list[str], tokenizer: str, request: pytest.FixtureRequest
) -> None:
    tok: corral.Tokenizer = request.getfixturevalue(tokenizer)
    g = corral.compile_json_schema(schema, tok)
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(f"{name}/{tokenizer}")
    for _ in range(10):
        out, _ = random_walk(g, rng, max_steps=30, eos_weight=0.1)
        value = json.loads(out.decode("utf-8"))
        assert validator.is_valid(value), (name, out)
    # Both directions along a walk: a token's bit is set iff the parser accepts it (sampled).
    m = g.matcher()
    mask = corral.allocate_bitmask(1, tok)
    for _ in range(12):
        mask_matches_accept(m, tok, sample=rng.sample(range(tok.width), 1500) + list(range(256)))
        m.fill_next_token_bitmask(mask, 0)
        ids = [i for i in corral.allowed_tokens(mask[0], tok) if i not in tok.eos_ids]
        if not ids:
            break
        assert m.accept_token(rng.choice(ids))


def test_duplicates_are_masked_and_completions_stay_distinct(llama32: corral.Tokenizer) -> None:
    schema = {
        "type": "array",
        "items": {"enum": ["red", "green", "blue"]},
        "uniqueItems": True,
        "minItems": 3,
    }
    g = corral.compile_json_schema(schema, llama32)
    m = g.matcher()
    assert m.accept_bytes(b'["red", ')
    # No token that starts "red" again is allowed, the other values are.
    mask = corral.allocate_bitmask(1, llama32)
    m.fill_next_token_bitmask(mask, 0)
    allowed = {llama32.token_bytes[i] for i in corral.allowed_tokens(mask[0], llama32)}
    assert not any(b.startswith(b'"r') or b == b'"red' for b in allowed)
    assert b'"' in allowed and any(b.startswith(b'"g') or b.startswith(b'"b') for b in allowed)
    assert not m.copy().accept_bytes(b'"red"')
    # The shortest completion adds the missing distinct values (never a repeat).
    rest = m.shortest_completion()
    value = json.loads(b'["red", ' + rest)
    assert sorted(value) == ["blue", "green", "red"]
    # After three items (all there are), neither a separator nor a fourth item can come.
    full = g.matcher()
    assert full.accept_bytes(b'["blue","red","green"')
    assert not full.copy().accept_bytes(b",")
    assert full.accept_bytes(b"]") and full.is_accepting()


def test_unsatisfiable_counts_are_a_schema_error(llama32: corral.Tokenizer) -> None:
    with pytest.raises(corral.SchemaError) as e:
        corral.compile_json_schema(
            {"type": "array", "items": {"enum": [1, 2]}, "minItems": 3, "uniqueItems": True}, llama32
        )
    assert "distinct" in str(e.value)
    with pytest.raises(corral.SchemaError):
        corral.compile_json_schema(
            {"type": "array", "items": {"type": "boolean"}, "minItems": 3, "uniqueItems": True}, llama32
        )
    # maxItems above the number of values: bounded by the values (no error, all three fit).
    g = corral.compile_json_schema(
        {"type": "array", "items": {"enum": [1, 2, 3]}, "maxItems": 10, "uniqueItems": True}, llama32
    )
    assert _accepts(g, llama32, "[3, 2, 1]") and not _accepts(g, llama32, "[3, 2, 1, 3]")


def test_other_item_sets_stay_in_the_report(llama32: corral.Tokenizer) -> None:
    for schema in (
        # (strings with maxLength are distinct groups: test_json_schema_distinct_bounded.py)
        {"type": "array", "items": {"type": "string", "format": "ipv6"}, "uniqueItems": True},
        {"type": "array", "items": {"type": ["number", "string"]}, "uniqueItems": True},
        {"type": "array", "items": {"enum": list(range(33))}, "uniqueItems": True},  # past the cap
        {"type": "array", "prefixItems": [{"const": 1}], "items": {"enum": [1, 2]}, "uniqueItems": True},
        # (integers between bounds too far apart to list, -1e300..1e300, are counted by the
        # engine: test_json_schema_distinct_numbers.py)
        # Positions under different schemas (1 and true are equal for Python, not for JSON).
        {
            "type": "array",
            "prefixItems": [{"const": 1}, {"const": True}],
            "items": False,
            "uniqueItems": True,
        },
        # A branch with infinitely many values (free strings beside null), a number type.
        {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "null"}]}, "uniqueItems": True},
        {
            "type": "array",
            "items": {"type": ["number", "null"], "maximum": 3, "minimum": 0},
            "uniqueItems": True,
        },
    ):
        g = corral.compile_json_schema(schema, llama32)
        assert [e.keyword for e in g.report.checked_after()] == ["uniqueItems"], schema
        with pytest.raises(corral.OutputValidationError):
            g.validate("[1, 1]" if "string" not in json.dumps(schema) else '["a", "a"]')
        with pytest.raises(corral.UnsupportedSchemaError):
            corral.compile_json_schema(schema, llama32, strict=True)
    # Trivially enforced: false, or at most one item.
    for schema in (
        {"type": "array", "items": {"type": "string"}, "uniqueItems": False},
        {"type": "array", "items": {"type": "string"}, "maxItems": 1, "uniqueItems": True},
    ):
        g = corral.compile_json_schema(schema, llama32)
        assert not g.report.post_checks, schema
    with pytest.raises(corral.SchemaError):
        corral.compile_json_schema({"type": "array", "uniqueItems": "yes"}, llama32)


def test_malformed_item_keywords_are_named(llama32: corral.Tokenizer) -> None:
    # A bad multipleOf beside bounded integers is the plain path's error, at the keyword.
    for step in (0, True, "2"):
        items = {"type": "integer", "minimum": 0, "maximum": 5, "multipleOf": step}
        with pytest.raises(corral.SchemaError) as e:
            corral.compile_json_schema({"type": "array", "items": items, "uniqueItems": True}, llama32)
        assert e.value.pointer == "#/items/multipleOf", step


def test_artifact_and_snapshot_keep_the_construct(llama32: corral.Tokenizer) -> None:
    schema = {
        "type": "array",
        "items": {"enum": [1, 2, 3, 4]},
        "uniqueItems": True,
        "minItems": 2,
        "maxItems": 3,
    }
    g = corral.compile_json_schema(schema, llama32)
    loaded = corral.CompiledGrammar.from_bytes(g.to_bytes(), llama32)
    m, n = g.matcher(), loaded.matcher()
    prefix = llama32.encode("[4, 2, ")
    for t in prefix:
        assert m.accept_token(t) and n.accept_token(t)
    mask_a, mask_b = corral.allocate_bitmask(1, llama32), corral.allocate_bitmask(1, llama32)
    m.fill_next_token_bitmask(mask_a, 0)
    n.fill_next_token_bitmask(mask_b, 0)
    assert (mask_a == mask_b).all()
    # A snapshot restores the seen items: 4 and 2 stay forbidden, and the third item ends it.
    r = loaded.restore(m.snapshot())
    for mm in (m, r):
        assert not mm.copy().accept_bytes(b"4") and not mm.copy().accept_bytes(b"2")
        c = mm.copy()
        assert c.accept_bytes(b"1") and not c.copy().accept_bytes(b",") and c.accept_bytes(b"]")
        assert c.is_accepting()


def test_the_report_entry_carries_the_cap(llama32: corral.Tokenizer) -> None:
    """A distinct array closed at ``max_unique_items`` says so in a field (``capped_at``, what
    lint's W210 reads), kept by a ``.corral`` file; an exact one has no cap."""
    from corral.compile import ConstraintSpec, compile_constraint
    from corral.compile import artifact as af

    strings = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}

    def entry(g: object) -> corral.ReportEntry:
        assert isinstance(g, corral.JsonSchemaGrammar)
        (e,) = [e for e in g.report.entries if e.keyword == "uniqueItems"]
        return e

    assert entry(corral.compile_json_schema(strings, llama32, max_unique_items=3)).capped_at == 3
    assert entry(corral.compile_json_schema(strings, llama32)).capped_at == 256
    for exact in ({**strings, "maxItems": 3}, CASES[0][1]):
        assert entry(corral.compile_json_schema(exact, llama32, max_unique_items=3)).capped_at is None
    spec = ConstraintSpec.json_schema(strings, {"max_unique_items": 3})
    c = compile_constraint(spec, llama32)
    loaded = af.loads(af.dumps(c), llama32)
    assert entry(loaded.grammar).capped_at == 3 and loaded.grammar.report == c.grammar.report  # type: ignore[attr-defined]


@pytest.mark.slow
def test_generation_writes_distinct_items(smol_model: Any) -> None:
    schema = {
        "type": "object",
        "properties": {
            "colors": {
                "type": "array",
                "items": {"enum": ["red", "green", "blue", "yellow"]},
                "uniqueItems": True,
                "minItems": 3,
            }
        },
        "required": ["colors"],
    }
    r = corral.generate(
        smol_model, "List the color red three times, as JSON.", schema=schema, max_new_tokens=60
    )
    value = json.loads(r.text)
    assert jsonschema.Draft202012Validator(schema).is_valid(value), r.text
    assert len(set(value["colors"])) == len(value["colors"]) >= 3


@pytest.mark.parametrize("whitespace", ["pretty", "compact", "flexible"])
def test_every_whitespace_mode(whitespace: str, llama32: corral.Tokenizer) -> None:
    schema = {
        "type": "object",
        "properties": {"t": {"type": "array", "items": {"enum": ["a", "b", {"x": 1}]}, "uniqueItems": True}},
        "required": ["t"],
        "additionalProperties": False,
    }
    g = corral.compile_json_schema(schema, llama32, whitespace=whitespace)
    validator = jsonschema.Draft202012Validator(schema)
    values: list[Any] = [["a", "b"], [], ["a", "a"], [{"x": 1}, "a", {"x": 1}], [{"x": 1}, "b"]]
    for v in ({"t": items} for items in values):
        if whitespace == "pretty":
            text = json.dumps(v, indent=2)
        elif whitespace == "compact":
            text = json.dumps(v, separators=(",", ":"))
        else:
            text = json.dumps(v)
        assert _accepts(g, llama32, text) == validator.is_valid(v), (whitespace, text)
