"""``not``, ``oneOf`` exclusivity and ``patternProperties`` enforced by the mask, against
``jsonschema`` on a real tokenizer (Llama 3.2).

Both directions, per schema: random walks under the mask (tokens drawn uniformly from the
allowed set, finished by the shortest completion) produce only instances ``jsonschema`` accepts,
and hand-written instances are accepted exactly when ``jsonschema`` accepts them — the valid
ones and the near misses (values matching ``not``, matching two ``oneOf`` branches, keys
matching several patterns). The report must say every keyword is enforced, so nothing is left
to ``validate``. Adversarial schemas (a ``not`` of a huge enum, 50 patterns, deep nesting)
compile within a bound or fall back to the report, which ``validate`` then honours.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

import jsonschema
import pytest
from helpers import accepts_text, random_walk

import corral
from corral.grammar.json_schema import schema_to_grammar
from corral.schema import schema_grammar

pytestmark = pytest.mark.real_tokenizer

# (name, schema, instances: valid ones and near misses together; jsonschema decides which is which)
CASES: list[tuple[str, Any, list[Any]]] = [
    ("not const", {"type": "integer", "not": {"const": 3}}, [2, 4, -3, 3, 3.0]),
    (
        "not enum of strings",
        {"type": "string", "maxLength": 8, "not": {"enum": ["red", "green"]}},
        ["blue", "re", "redd", "", "red", "green", "gr\u00e9en"],
    ),
    (
        "not pattern",
        {"type": "string", "maxLength": 6, "not": {"pattern": "^[0-9]+$"}},
        ["a1", "12a", "", "123", "0", "١٢"],  # (Arabic-Indic digits match \d in Python: [0-9] not)
    ),
    ("not type", {"not": {"type": ["string", "object", "array"]}}, [1, None, True, 2.5, "x", {}, []]),
    ("not integer", {"not": {"type": "integer"}}, [1.5, -0.25, "x", None, 1, 0, 2.0, -7]),
    (
        "not bounds",
        {"type": "number", "not": {"minimum": 0, "maximum": 10}},
        [-1, 10.5, 11, -0.001, 0, 5, 10, 10.0],
    ),
    (
        "not a discriminator",
        {
            "type": "object",
            "properties": {"kind": {"enum": ["a", "b"]}, "n": {"type": "integer", "maximum": 99}},
            "additionalProperties": False,
            "not": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
        },
        [{"kind": "b"}, {}, {"n": 3}, {"kind": "a"}, {"kind": "a", "n": 1}],
    ),
    (
        "not anyOf",
        {"not": {"anyOf": [{"type": "string"}, {"not": {"type": "null"}}]}},
        [None, "s", 1, {}, [None]],
    ),
    (
        "not on array items",
        {"type": "array", "maxItems": 3, "not": {"items": {"type": "string"}}},
        [[1], ["a", 2], [], ["a"], ["a", "b"]],
    ),
    (
        "not multipleOf",
        {"type": "integer", "not": {"multipleOf": 3}},
        [1, 2, -1, -4, 10, 0, 3, -3, 6, 9.0, 300],
    ),
    (
        "not multipleOf on numbers, bounded",
        {"type": "number", "minimum": -5, "maximum": 20, "not": {"multipleOf": 4}},
        [1, 2.5, -0.75, 19, -5, 0, 4, 8.0, -4, 20, 21, -6],
    ),
    (
        "not multipleOf beside a multipleOf",
        {"type": "integer", "multipleOf": 2, "not": {"multipleOf": 3}},
        [2, 4, -8, 10, 0, 6, -12, 3, 5],
    ),
    (
        "not multipleOf 1 (the non-integers)",
        {"not": {"multipleOf": 1}},
        [0.5, -1.25, 3.0001, 1, 0, -7, 2.0, "x", None],
    ),
    (
        "not prefixItems",
        {"type": "array", "maxItems": 3, "not": {"prefixItems": [{"type": "integer"}, {"const": "a"}]}},
        [["x"], [1, "b"], [1, 2, 3], [1.5], [], [1], [1, "a"], [2, "a", None]],
    ),
    (
        "not prefixItems with a false position",
        {"type": "array", "maxItems": 2, "not": {"prefixItems": [True, False]}},
        [[1, 2], [None, "x"], [], [1]],
    ),
    (
        "not additionalProperties false: some key",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "maxProperties": 3,
            "not": {"additionalProperties": False},
        },
        [{"a": 1}, {"b": "x"}, {"a": 2, "c": None}, {}, {"a": "s"}],
    ),
    (
        "not additionalProperties false: an undeclared key",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
            "maxProperties": 3,
            "not": {"properties": {"a": True, "b": True}, "additionalProperties": False},
        },
        [
            {"c": 1},
            {"a": 1, "c": None},
            {"b": "x", "z": []},
            {"a": 1, "b": "y", "q": 0},
            {},
            {"a": 1},
            {"a": 1, "b": "x"},
        ],
    ),
    (
        "not additionalProperties beside its properties' own violators",
        {
            "type": "object",
            "maxProperties": 2,
            "not": {"properties": {"a": {"type": "integer"}}, "additionalProperties": {"not": {}}},
        },
        [{"a": "s"}, {"b": 1}, {"a": 1, "b": 2}, {"a": 1}, {}],
    ),
    (
        "oneOf of two multipleOf",
        {"oneOf": [{"type": "integer", "multipleOf": 2}, {"type": "integer", "multipleOf": 3}]},
        [2, 3, 4, 9, -2, 6, 0, 12, 1, 5],
    ),
    (
        "oneOf of an enum and a multipleOf",  # (the enum filtered by the integer complement)
        {"oneOf": [{"enum": [3, 4, 6, 7.5, "x"]}, {"type": "integer", "multipleOf": 3, "maximum": 30}]},
        [4, 7.5, "x", 9, 30, 3, 6, 33, 5],
    ),
    (
        "oneOf overlapping bounds",
        {"oneOf": [{"type": "number", "minimum": 0}, {"type": "number", "maximum": 10}]},
        [-5, 11, 10.5, 0, 5, 10, "x"],
    ),
    (
        "oneOf integer or minimum",
        {"oneOf": [{"type": "integer"}, {"minimum": 2}]},
        [1, 2.5, -3, "x", 2, 3, 7.0],
    ),
    (
        "oneOf strings",
        {"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "maxLength": 2}]},
        ["abc", "b", "xy", "a", "ab", "xyz", ""],
    ),
    (
        "oneOf objects",
        {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"a": {"type": "string", "maxLength": 4}},
                    "required": ["a"],
                },
                {"type": "object", "properties": {"b": {"type": "boolean"}}, "required": ["b"]},
            ],
            "maxProperties": 3,
        },
        [{"a": "x"}, {"b": True}, {"a": "x", "b": 1}, {"a": "x", "b": True}, {}, {"b": False, "a": 2}],
    ),
    (
        "oneOf with a not inside",
        {"oneOf": [{"not": {"type": "string"}}, {"type": "string", "maxLength": 1}, {"type": "null"}]},
        [1, "a", True, None, "ab", []],
    ),
    (
        "50 patternProperties",
        {
            "type": "object",
            "patternProperties": {f"^f{i:02d}_": {"type": "integer", "minimum": i} for i in range(50)},
            "additionalProperties": False,
            "maxProperties": 3,
        },
        [{"f03_x": 3}, {"f10_": 12, "f49_q": 49}, {}, {"f03_x": 2}, {"g": 1}, {"f10_": "s"}, {"f4_": 1}],
    ),
    (
        "overlapping patternProperties",
        {
            "type": "object",
            "patternProperties": {"^a": {"type": "integer"}, "b$": {"minimum": 0}, "c": {"maximum": 10}},
            "additionalProperties": {"type": "string", "maxLength": 3},
            "maxProperties": 3,
        },
        [{"ab": 1}, {"abc": 5}, {"z": "s"}, {"cb": 3.5}, {"ab": -1}, {"abc": 11}, {"z": 1}, {"a": "s"}],
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "schema", "instances"), CASES, ids=[c[0] for c in CASES])
def test_enforced_exactly_against_jsonschema(
    name: str, schema: Any, instances: list[Any], llama32: corral.Tokenizer
) -> None:
    g = corral.compile_json_schema(schema, llama32, extra_properties="spec")
    assert not g.report.post_checks, f"{name}: {g.report}"
    validator = jsonschema.Draft202012Validator(schema)
    kinds = {validator.is_valid(x) for x in instances}
    assert kinds == {True, False}, f"{name}: the instances must include valid ones and near misses"
    for inst in instances:
        for text in (json.dumps(inst, ensure_ascii=False), json.dumps(inst, separators=(",", ":"))):
            assert accepts_text(g, llama32, text) == validator.is_valid(inst), (name, text)
    rng = random.Random(name)
    for _ in range(8):
        out, _ = random_walk(g, rng, max_steps=24)
        value = json.loads(out.decode("utf-8"))
        assert validator.is_valid(value), (name, out)


# (name, schema, instances) for ``not`` of a ``format``: jsonschema treats a format as an
# annotation unless given a format checker, so these are judged with its own checkers.
FORMAT_CASES: list[tuple[str, Any, list[Any]]] = [
    (
        "not format date",
        {"type": "string", "maxLength": 12, "not": {"format": "date"}},
        ["2024-02-30", "2023-02-29", "hello", "", "2024-1-31", "2024-01-31x", "2024-01-31", "2024-02-29"],
    ),
    (
        "not format ipv4 beside other types",
        {"not": {"format": "ipv4", "type": "string"}, "maxLength": 15},
        ["256.1.1.1", "1.2.3", "01.2.3.4", "1.2.3.4.5", 7, None, "10.0.0.1", "255.255.255.255", "0.0.0.0"],
    ),
    (
        "oneOf of two formats",  # (exclusivity: a string that is both is neither branch alone)
        {
            "oneOf": [
                {"type": "string", "format": "ipv4"},
                {"type": "string", "maxLength": 7, "pattern": "^[0-9.]+$"},
            ]
        },
        ["10.0.0.1", "1.2", "192.168.100.100", "1.2.3.4", "abc", "1234567890"],
    ),
]


@pytest.mark.parametrize(("name", "schema", "instances"), FORMAT_CASES, ids=[c[0] for c in FORMAT_CASES])
def test_not_format_against_a_format_checker(
    name: str, schema: Any, instances: list[Any], llama32: corral.Tokenizer
) -> None:
    g = corral.compile_json_schema(schema, llama32, extra_properties="spec")
    assert not g.report.post_checks, f"{name}: {g.report}"
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    kinds = {validator.is_valid(x) for x in instances}
    assert kinds == {True, False}, f"{name}: the instances must include valid ones and near misses"
    for inst in instances:
        text = json.dumps(inst)
        want = validator.is_valid(inst)
        assert accepts_text(g, llama32, text) == want, (name, text)
        if want:  # validate() agrees (it checks the formats with the grammar's regexes)
            assert g.validate(text) == inst
        else:
            with pytest.raises(corral.OutputValidationError):
                g.validate(text)
    rng = random.Random(name)
    for _ in range(6):
        out, _ = random_walk(g, rng, max_steps=20)
        assert validator.is_valid(json.loads(out.decode("utf-8"))), (name, out)


def test_not_additional_properties_unexpressible_stays_in_the_report(llama32: corral.Tokenizer) -> None:
    # "Some undeclared key whose value fails S" (S not false), beside patternProperties, or with
    # too many declared names: checked after decoding, and validate() holds.
    for schema, bad in (
        ({"type": "object", "not": {"additionalProperties": {"type": "string"}}}, '{"a": "x"}'),
        (
            {"type": "object", "not": {"patternProperties": {"^x": True}, "additionalProperties": False}},
            '{"x": 1}',
        ),
        (
            {
                "type": "object",
                "not": {"properties": {c: True for c in "abcdef"}, "additionalProperties": False},
            },
            '{"a": 1}',
        ),
    ):
        g = corral.compile_json_schema(schema, llama32, extra_properties="spec")
        assert [e.keyword for e in g.report.checked_after()] == ["not"], schema
        assert accepts_text(g, llama32, bad)
        with pytest.raises(corral.OutputValidationError):
            g.validate(bad)
    # An unknown format under not stays with validate too.
    g = corral.compile_json_schema({"type": "string", "not": {"format": "no-such-format"}}, llama32)
    assert [e.keyword for e in g.report.checked_after()] == ["not"]


def test_unexpressible_complements_stay_in_the_report(llama32: corral.Tokenizer) -> None:
    # "Not a multiple of 0.5" (validators divide by a decimal step in floating point), not of a
    # two-branch oneOf: checked after decoding, and validate() rejects what the grammar let through.
    g = corral.compile_json_schema({"type": "number", "not": {"multipleOf": 0.5}}, llama32)
    assert [e.keyword for e in g.report.checked_after()] == ["not"]
    assert accepts_text(g, llama32, "1.5")
    with pytest.raises(corral.OutputValidationError):
        g.validate("1.5")
    overlap = {"oneOf": [{"type": "number", "multipleOf": 0.5}, {"type": "integer", "multipleOf": 3}]}
    g = corral.compile_json_schema(overlap, llama32)
    assert "oneOf" in [e.keyword for e in g.report.checked_after()]
    with pytest.raises(corral.OutputValidationError):
        g.validate("6")
    assert g.validate("4") == 4
    with pytest.raises(corral.UnsupportedSchemaError):
        corral.compile_json_schema({"type": "number", "not": {"multipleOf": 0.5}}, llama32, strict=True)


def test_not_multiple_of_past_the_state_budget_stays_in_the_report(llama32: corral.Tokenizer) -> None:
    # Residues mod a large step need too many automaton states: reported, and validate() holds.
    schema = {"type": "integer", "maximum": 10**30, "not": {"multipleOf": 1000003}}
    g = corral.compile_json_schema(schema, llama32)
    assert "not" in [e.keyword for e in g.report.checked_after()]
    with pytest.raises(corral.OutputValidationError):
        g.validate(str(1000003 * 7))
    assert g.validate("1000004") == 1000004


def _nested_not(depth: int) -> Any:
    schema: Any = {"type": "string", "maxLength": 3}
    for _ in range(depth):
        schema = {"not": schema}
    return schema


ADVERSARIAL: list[tuple[str, Any, Any, set[str]]] = [
    # (name, schema, a value the schema forbids, keywords that may fall back to the report)
    (
        "not of a huge enum",
        {"type": "string", "not": {"enum": [f"v{i}" for i in range(30000)]}},
        "v7",
        {"not"},
    ),
    (
        "50 overlapping patterns",
        {
            "type": "object",
            "patternProperties": {f"{chr(97 + i % 26)}{i}": {"minimum": i} for i in range(50)},
        },
        {"a0b1": -1},
        {"patternProperties"},
    ),
    ("40 nested nots", _nested_not(40), "abcd", set()),
    ("41 nested nots", _nested_not(41), "ab", set()),
    ("30 overlapping oneOf branches", {"oneOf": [{"minimum": i} for i in range(30)]}, 40, {"oneOf"}),
    (
        "nested not / oneOf",
        {"not": {"oneOf": [{"not": {"oneOf": [{"minimum": 1}, {"maximum": 5}]}}, {"type": "string"}]}},
        3,  # (3 matches both inner branches, so the first outer one alone)
        {"not"},
    ),
]


@pytest.mark.parametrize(("name", "schema", "bad", "fallback"), ADVERSARIAL, ids=[c[0] for c in ADVERSARIAL])
def test_adversarial_schemas_compile_bounded(
    name: str, schema: Any, bad: Any, fallback: set[str], llama32: corral.Tokenizer
) -> None:
    t0 = time.process_time()  # CPU time (every thread of this process): load does not fail it
    g = corral.compile_json_schema(schema, llama32, extra_properties="spec")
    # An enumeration of subsets or a hang would take far longer.
    assert time.process_time() - t0 < 20, name
    assert not jsonschema.Draft202012Validator(schema).is_valid(bad)
    post = {e.keyword for e in g.report.checked_after()}
    assert post <= fallback, (name, g.report)
    if post:
        with pytest.raises(corral.OutputValidationError):
            g.validate(json.dumps(bad))
    else:
        assert not accepts_text(g, llama32, json.dumps(bad)), name


def test_complements_follow_the_draft(llama32: corral.Tokenizer) -> None:
    # Draft-04 has no const: its "not" of a const forbids every value there, so the grammar must
    # not write "everything but 3"; left to validate(), which reads the draft.
    d4 = {"$schema": "http://json-schema.org/draft-04/schema#", "not": {"const": 3}}
    g = corral.compile_json_schema(d4, llama32)
    assert [e.keyword for e in g.report.checked_after()] == ["not"]
    with pytest.raises(corral.OutputValidationError):
        g.validate("4")
    # Before 2019-09 the siblings of a $ref are ignored: no complement is written for them.
    d7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"num": {"type": "number"}},
        "not": {"$ref": "#/definitions/num", "minimum": 5},
    }
    g = corral.compile_json_schema(d7, llama32)
    assert [e.keyword for e in g.report.checked_after()] == ["not"]
    with pytest.raises(corral.OutputValidationError):
        g.validate("3")
    # A $ref alone is followed.
    ref = {"$defs": {"s": {"type": "string"}}, "not": {"$ref": "#/$defs/s"}}
    g = corral.compile_json_schema(ref, llama32)
    assert not g.report.post_checks
    assert accepts_text(g, llama32, "3") and not accepts_text(g, llama32, '"x"')


def test_malformed_or_unsupported_under_not(llama32: corral.Tokenizer) -> None:
    # A malformed keyword is a clear error naming where it is (never a TypeError)...
    with pytest.raises(corral.SchemaError) as e:
        corral.compile_json_schema({"enum": [1, 2], "not": {"minimum": "x"}}, llama32)
    assert e.value.pointer == "#/not"
    # ...and a pattern the engine cannot compile leaves not to validate().
    g = corral.compile_json_schema({"type": "string", "not": {"pattern": "(?<=a)b"}}, llama32)
    assert [e.keyword for e in g.report.checked_after()] == ["not"]
    with pytest.raises(corral.OutputValidationError):
        g.validate('"ab"')


def test_two_one_ofs_under_all_of_keep_exactly_one_checked(llama32: corral.Tokenizer) -> None:
    """``allOf`` of two ``oneOf``s is distributed into an ``anyOf`` of the pairs, which loses each
    oneOf's exactly-one: it must stay in the report (found by the schema fuzz test: the second
    oneOf below matches ``null`` twice, so no value is valid, yet the grammar allowed ``null``)."""
    schema = {"allOf": [{"oneOf": [{"type": "null"}]}, {"oneOf": [{"type": "null"}, {"type": "null"}]}]}
    g = corral.compile_json_schema(schema, llama32)
    m = g.matcher()
    assert m.accept_bytes(b"null") and not jsonschema.Draft202012Validator(schema).is_valid(None)
    assert g.report.post_checks and "oneOf: checked after decoding" in str(g.report)
    overlap = {
        "allOf": [
            {"oneOf": [{"type": "integer"}, {"minimum": 0}]},
            {"oneOf": [{"type": "integer"}, {"type": "null"}]},
        ]
    }
    h = corral.compile_json_schema(overlap, llama32)
    assert h.report.post_checks, "3 matches both branches of the first oneOf"


@pytest.mark.parametrize(
    "schema",
    [
        # Found by the schema fuzz test: refused as "matches no string at all" (the distributed
        # pair was conjoined with the oneOf it came from, which converted to itself).
        {"allOf": [{"oneOf": [{"oneOf": [{"type": "null"}]}]}, {"oneOf": [{"type": "null"}]}]},
        # The pairs of the two oneOfs replaced the first part's own anyOf: null passed the mask.
        {
            "allOf": [
                {
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                    "oneOf": [{"type": ["integer", "null"]}],
                },
                {"oneOf": [{"type": ["null", "integer"]}]},
            ]
        },
        {
            "allOf": [
                {"anyOf": [{"type": "string"}, {"minimum": 5}]},
                {"oneOf": [{"type": "integer"}]},
                {"oneOf": [{"maximum": 10}]},
            ]
        },
    ],
)
def test_all_of_of_single_branch_one_ofs_is_exact(llama32: corral.Tokenizer, schema: Any) -> None:
    """``allOf`` of one-branch ``oneOf``s (and an ``anyOf`` beside them) is a plain conjunction:
    compiled exactly, nothing left to ``validate``, accepted exactly where jsonschema accepts."""
    g = corral.compile_json_schema(schema, llama32)
    assert not g.report.post_checks, str(g.report)
    validator = jsonschema.Draft202012Validator(schema)
    for value in [None, 0, 3, 7, 12, -1, 2.5, "a", "", True, [], {}]:
        m = g.matcher()
        text = json.dumps(value).encode()
        accepted = m.accept_bytes(text) and m.is_accepting()
        assert accepted == validator.is_valid(value), (value, str(g.report))


def test_nested_unsatisfiable_one_of_under_all_of_compiles(llama32: corral.Tokenizer) -> None:
    """Found by the schema fuzz test: the inner oneOf matches null twice (so it allows nothing)
    and the allOf distributes it again at every level; each level's list of keywords checked
    after decoding grew by one, so no level repeated an earlier one and the conversion nested
    until max_schema_depth. The list is a set now: the schema compiles, null passes, and the
    exactly-one stays checked after decoding."""
    schema = {
        "allOf": [
            {"anyOf": [{"oneOf": [{"type": "null"}]}]},
            {"oneOf": [{"type": "null"}, {"oneOf": [{"type": "null"}, {"type": "null"}]}]},
        ]
    }
    g = corral.compile_json_schema(schema, llama32)
    assert "oneOf" in [e.keyword for e in g.report.checked_after()]
    m = g.matcher()
    assert m.accept_bytes(b"null") and m.is_accepting()
    assert jsonschema.Draft202012Validator(schema).is_valid(None)
    assert g.validate("null") is None
    for bad in (b"1", b'"x"', b"{}"):
        m = g.matcher()
        assert not (m.accept_bytes(bad) and m.is_accepting()), bad


def test_one_of_no_value_names_the_users_one_of(llama32: corral.Tokenizer) -> None:
    """All four keys required, and oneOf of subsets of them: every object matches all three
    branches, so no value is valid (jsonschemabench Glaiveai2K/calculate_area_8db9d7ff). The error
    names the user's oneOf, not the anyOf the exclusivity rewrite made of it."""
    dims = {
        "type": "object",
        "properties": {k: {"type": "number"} for k in ("base", "height", "radius", "side")},
        "required": ["radius", "side", "base", "height"],
        "oneOf": [{"required": ["radius"]}, {"required": ["side"]}, {"required": ["base", "height"]}],
    }
    schema = {"type": "object", "properties": {"dimensions": dims}, "required": ["dimensions"]}
    with pytest.raises(corral.SchemaError) as e:
        corral.compile_json_schema(schema, llama32, extra_properties="spec")
    assert e.value.pointer == "#/properties/dimensions/oneOf"
    assert "exactly one branch of oneOf" in str(e.value)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "items": {"allOf": [{"type": "null"}, {"type": "boolean"}]}},
        {"type": "array", "items": {"allOf": [{"type": "null"}, {"type": "boolean"}]}, "maxItems": 0},
        {"type": "array", "prefixItems": [{"type": "integer"}], "items": {"not": {}}},
    ],
)
def test_items_no_value_satisfies_end_the_array(llama32: corral.Tokenizer, schema: Any) -> None:
    """Found by the schema fuzz test: an ``items`` schema no value satisfies refused the whole
    schema, yet arrays that stop before it (``[]``, ``[1]`` after prefixItems) are valid. The
    array ends there now, as with ``items: false``."""
    g = corral.compile_json_schema(schema, llama32)
    validator = jsonschema.Draft202012Validator(schema)
    for value in [[], [1], [1, 2], [None], [True], [1, None], None, {}]:
        m = g.matcher()
        accepted = m.accept_bytes(json.dumps(value).encode()) and m.is_accepting()
        assert accepted == validator.is_valid(value), value


def test_items_no_value_satisfies_with_min_items_is_refused(llama32: corral.Tokenizer) -> None:
    """…and with minItems past the prefix no array is valid: refused, naming the items schema."""
    schema = {"type": "array", "items": {"allOf": [{"type": "null"}, {"type": "boolean"}]}, "minItems": 1}
    with pytest.raises(corral.SchemaError) as e:
        corral.compile_json_schema(schema, llama32)
    assert e.value.pointer.startswith("#/items")


def test_schema_whose_grammar_matches_nothing_is_a_schema_error(llama32: corral.Tokenizer) -> None:
    """Found by the schema fuzz test: an allOf of oneOfs none of whose pairs any value satisfies
    converted to rules that each referred back to themselves, and the engine's 'matches no
    string at all' (a CompileError) reached the user. The converter now sees that no branch
    allows a value; and a converted grammar the engine still finds empty is a SchemaError
    saying no value satisfies the schema, as for other empty schemas."""
    n = {"type": "null"}
    schema = {"allOf": [{"anyOf": [{"oneOf": [n, n]}]}, {"oneOf": [{"oneOf": [n, n]}]}]}
    with pytest.raises(corral.SchemaError) as e:
        corral.compile_json_schema(schema, llama32)
    assert "allows any value" in str(e.value)
    assert not jsonschema.Draft202012Validator(schema).is_valid(None)
    # The engine-side guard, on a converted text whose only rule is itself.
    text, report = schema_to_grammar({"type": "null"})
    with pytest.raises(corral.SchemaError) as e:
        schema_grammar({"type": "null"}, "root ::= loop\nloop ::= loop\n", report, llama32)
    assert "no value satisfies this schema" in str(e.value)
    assert e.value.pointer == "#"


def test_one_of_distributed_twice_keeps_its_values(llama32: corral.Tokenizer) -> None:
    """Found by the schema fuzz test: two oneOfs under an allOf were distributed into their
    pairs while the first oneOf stayed beside them; each pair met that oneOf again, distributed
    again, and reached the same merged schema at the same position: a rule that was only itself,
    so 'no value satisfies this schema' where 50 is valid. Now the pairs replace the oneOf (its
    exactly-one stays checked after decoding)."""
    schema = {
        "allOf": [
            {
                "oneOf": [
                    {"oneOf": [{"minimum": 2}]},
                    {"type": "object", "additionalProperties": {"type": "integer"}},
                ]
            },
            {
                "allOf": [
                    {"anyOf": [{"minimum": 2}, {"minimum": 2}]},
                    {"oneOf": [{"type": "integer", "minimum": 43, "maximum": 76}]},
                ]
            },
        ]
    }
    g = corral.compile_json_schema(schema, llama32)
    assert "oneOf" in [e.keyword for e in g.report.checked_after()]
    validator = jsonschema.Draft202012Validator(schema)
    for value in [50, 43, 76, 42, 77, 1, 3.5, {}, {"a": 1}, "x", None]:
        m = g.matcher()
        accepted = m.accept_bytes(json.dumps(value).encode()) and m.is_accepting()
        assert accepted == validator.is_valid(value), value
