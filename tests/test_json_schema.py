"""JSON Schema constraints: for each schema of a hand-written table, valid instances are accepted
(compact and spaced), near-miss invalid instances are rejected by the grammar (or, for keywords
the report lists as checked after decoding, by ``validate``), and random walks under the mask with
a real tokenizer always produce JSON that ``jsonschema`` validates."""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest
from helpers import byte_tokenizer, random_walk

import corral

TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["value"],
        }
    },
    "$ref": "#/$defs/node",
}
LINKED = {
    "definitions": {
        "list": {
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "properties": {
                        "head": {"type": "string", "maxLength": 3},
                        "tail": {"$ref": "#/definitions/list"},
                    },
                    "required": ["head", "tail"],
                },
            ]
        }
    },
    "$ref": "#/definitions/list",
}

# (schema, valid instances, invalid instances rejected by the grammar itself)
CASES: list[tuple[Any, list[Any], list[Any]]] = [
    ({"type": "integer"}, [0, -7, 123456789012345678901234567890], [1.5, "1", True, None]),
    ({"type": "number"}, [0, -1.5, 3e10, 2.5e-3], ["x", [], {}]),
    ({"type": "string"}, ["", "héllo", 'a"b\\c\n', "😀"], [1, None]),
    ({"type": "boolean"}, [True, False], [0, "true"]),
    ({"type": "null"}, [None], [0, False]),
    ({"type": ["string", "null"]}, ["x", None], [1]),
    ({"type": "integer", "minimum": 1, "maximum": 100}, [1, 50, 100], [0, 101, -1, 1000]),
    ({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}, [1, 9], [0, 10]),
    ({"type": "number", "minimum": -1.5, "maximum": 2.25}, [-1.5, 0, 2.25, 1.125], [-1.6, 2.26, 3]),
    ({"type": "number", "maximum": 100}, [100, 99.99, -5], [100.5, 101, 100.0001]),
    ({"type": "number", "exclusiveMinimum": 0}, [0.001, 5], [0, -0.5]),
    ({"minimum": 1.1}, [1.1, 2, "any string", None, [0]], [0.6, 1]),
    ({"maxLength": 2}, ["ab", "é", 12345, None], ["abc"]),
    ({"type": "string", "minLength": 2, "maxLength": 4}, ["ab", "abcd", "😀😀"], ["a", "abcde", ""]),
    ({"type": "string", "pattern": "^[a-z]+$"}, ["abc"], ["Abc", "ab1", ""]),
    ({"type": "string", "pattern": "[0-9]{3}"}, ["x123y", "000"], ["12", "ab"]),
    ({"type": "string", "pattern": "^(cat|dog)s?$"}, ["cat", "dogs"], ["cow", "cats!"]),
    (
        {"type": "string", "format": "date"},
        ["2024-02-29", "1999-12-31"],
        ["2024-13-01", "24-01-01", "2024-1-1"],
    ),
    (
        {"type": "string", "format": "uuid"},
        ["123e4567-e89b-12d3-a456-426614174000"],
        ["123e4567e89b12d3a456426614174000"],
    ),
    ({"type": "string", "format": "ipv4"}, ["192.168.0.1", "0.0.0.0"], ["256.1.1.1", "1.2.3"]),
    ({"type": "string", "format": "email"}, ["a.b@example.com"], ["no-at-sign", "@example.com"]),
    (
        {"type": "string", "format": "date-time"},
        ["2024-05-06T07:08:09Z", "2024-05-06T07:08:09.5+02:00"],
        ["2024-05-06 07:08:09", "2024-05-06T25:00:00Z"],
    ),
    ({"enum": ["red", "green", 3, None, True]}, ["red", "green", 3, None, True], ["blue", 4, False, "Red"]),
    ({"const": {"a": [1, "x"]}}, [{"a": [1, "x"]}], [{"a": [1]}, {"a": [1, "y"]}]),
    ({"const": 1}, [1, 1.0], [2, "1"]),
    ({"enum": [1, "1"], "type": "string"}, ["1"], [1]),
    ({"type": "array", "items": {"type": "integer"}}, [[], [1, 2, 3]], [[1, "a"], {}, [1.5]]),
    ({"type": "array", "minItems": 2, "maxItems": 3}, [[1, 2], ["a", None, {}]], [[1], [1, 2, 3, 4]]),
    (
        {"type": "array", "items": {"type": "integer"}, "maxItems": 1000},
        [list(range(1000)), []],
        [list(range(1001))],
    ),
    (
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
        [["a", 1], ["a"], []],
        [["a", 1, 2], [1, "a"]],
    ),
    (
        {"type": "array", "prefixItems": [{"const": "x"}], "items": {"type": "boolean"}, "minItems": 2},
        [["x", True], ["x", False, True]],
        [["x"], ["x", 1], ["y", True]],
    ),
    (
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "array",
            "items": [{"type": "integer"}],
            "additionalItems": False,
        },
        [[1], []],
        [[1, 2]],
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
            "required": ["a"],
        },
        [{"a": 1}, {"a": 1, "b": "x"}],
        [{"b": "x"}, {"a": "1"}, {"a": 1, "c": 2}, {}],
    ),
    (
        {
            "type": "object",
            "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}, "z": {"type": "integer"}},
        },
        [{}, {"x": 1}, {"y": 2}, {"z": 3}, {"x": 1, "z": 3}, {"x": 1, "y": 2, "z": 3}],
        [{"w": 1}, {"x": "1"}],
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "additionalProperties": {"type": "string"},
        },
        [{"a": 1, "b": "x"}, {"zz": "y"}],
        [{"b": 1}, {"a": "x"}],
    ),
    ({"type": "object", "additionalProperties": True}, [{}, {"k": [1, {"z": None}]}], [[], "x"]),
    (
        {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
        [{}, {"a": 1}],
        [{"b": 1}, {"a": 1, "b": 2}],
    ),
    (
        {"type": "object", "required": ["id"], "properties": {"id": {"type": "string", "format": "uuid"}}},
        [{"id": "123e4567-e89b-12d3-a456-426614174000"}],
        [{"id": "nope"}, {}],
    ),
    (
        {"anyOf": [{"type": "integer", "maximum": 5}, {"type": "string", "maxLength": 1}]},
        [5, "a", -3],
        [6, "ab", None],
    ),
    ({"oneOf": [{"type": "integer"}, {"type": "boolean"}]}, [1, True], ["x"]),
    ({"allOf": [{"type": "integer"}, {"minimum": 3}, {"maximum": 5}]}, [3, 4, 5], [2, 6, 4.5]),
    (
        {
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {"type": "boolean"}}, "required": ["b"]},
            ]
        },
        [{"a": 1, "b": True}],
        [{"a": 1}, {"b": True}],
    ),
    (
        TREE,
        [{"value": 1}, {"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]}],
        [{"children": []}, {"value": 1, "children": [{"value": "x"}]}],
    ),
    (
        LINKED,
        [None, {"head": "a", "tail": None}, {"head": "abc", "tail": {"head": "b", "tail": None}}],
        [{"head": "a"}, {"head": "abcd", "tail": None}],
    ),
    (
        {
            "$defs": {"pos": {"type": "integer", "minimum": 0}},
            "type": "array",
            "items": {"$ref": "#/$defs/pos"},
        },
        [[0, 1, 2]],
        [[-1]],
    ),
    (
        {
            "type": "object",
            "properties": {"café": {"type": "string"}, "a/b": {"type": "integer"}},
            "required": ["café"],
        },
        [{"café": "x"}, {"café": "", "a/b": 3}],
        [{"cafe": "x"}],
    ),
    ({"type": "string", "enum": ["naïve", "日本"]}, ["naïve", "日本"], ["naive"]),
    (
        {
            "type": "object",
            "properties": {
                "meta": True,
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            },
        },
        [{"meta": {"x": [1]}, "tags": ["a"]}],
        [{"tags": ["a", "b", "c"]}],
    ),
    ({"type": ["integer", "null"]}, [None, 3], ["x", 1.5]),
    (True, [1, "x", None, {"a": [1]}], []),
    (
        {"type": "integer", "minimum": -1000000000000, "maximum": 1000000000000},
        [-1000000000000, 0, 999999999999],
        [1000000000001],
    ),
    (
        {
            "type": "array",
            "items": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
        },
        [[[[1]], [[2, 3], []]]],
        [[[1]]],
    ),
    (
        {
            "type": "object",
            "properties": {"kind": {"const": "circle"}, "r": {"type": "number", "minimum": 0}},
            "required": ["kind", "r"],
        },
        [{"kind": "circle", "r": 1.5}],
        [{"kind": "square", "r": 1}, {"kind": "circle", "r": -1}],
    ),
    ({"type": "string", "format": "hostname"}, ["example.com", "a-b.c"], ["-bad.com", "a..b"]),
    ({"type": "string", "format": "time"}, ["12:34:56Z", "23:59:59+01:00"], ["24:00:00Z", "12:34"]),
    ({"type": "string", "format": "duration"}, ["P1D", "PT1H30M", "P1W"], ["P", "1D", "PT"]),
    ({"type": "string", "format": "ipv6"}, ["::1", "2001:db8::ff00:42:8329"], ["2001:db8:::1", "12345::"]),
    (
        {"type": "string", "format": "uri"},
        ["https://example.com/a?b=c#d", "urn:isbn:0451450523"],
        ["not a uri", "//x"],
    ),
    ({"type": "integer", "enum": [1, 2, 3], "minimum": 2}, [2, 3], [1, 4]),
    (
        {"type": "array", "uniqueItems": True, "items": {"type": "integer"}, "maxItems": 3},
        [[1, 2]],
        [[1, 2, 3, 4]],
    ),
    ({"type": "integer", "multipleOf": 3, "maximum": 10}, [3, 9], [11]),
]

POST_CHECKED = [
    ({"type": "array", "uniqueItems": True}, [1, 1]),
    ({"type": "number", "multipleOf": 0.1}, 0.35),  # validators divide in floating point
    ({"oneOf": [{"type": "integer"}, {"multipleOf": 3}]}, 6),  # "not a multiple of 3" has no schema
    ({"type": "string", "pattern": "^a", "maxLength": 300}, "a" * 301),  # above the counted cap
    (
        {
            "type": "object",
            "propertyNames": {"anyOf": [{"maxLength": 2}, {"pattern": "^x"}]},
            "additionalProperties": True,
        },
        {"abc": 1},
    ),
]


def make_validator(schema: Any) -> Any:
    """The reference validator for a schema's draft, with that draft's format checkers."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


@pytest.fixture(scope="module")
def tok() -> corral.Tokenizer:
    return byte_tokenizer()


def _accepts(g: corral.JsonSchemaGrammar, text: str) -> bool:
    m = g.matcher()
    return m.accept_bytes(text.encode()) and m.is_accepting()


def test_table_has_sixty_schemas() -> None:
    assert len(CASES) >= 60


@pytest.mark.parametrize(("schema", "valid", "invalid"), CASES, ids=[f"s{i}" for i in range(len(CASES))])
def test_schema_cases(schema: Any, valid: list[Any], invalid: list[Any], tok: corral.Tokenizer) -> None:
    flexible = corral.compile_json_schema(schema, tok)
    compact = corral.compile_json_schema(schema, tok, whitespace="compact")
    validator = make_validator(schema)
    for v in valid:
        assert validator.is_valid(v), f"test bug: {v!r} is not valid"
        for text in (json.dumps(v), json.dumps(v, ensure_ascii=False), json.dumps(v, indent=1)):
            assert _accepts(flexible, text), f"rejected valid {text!r}\n{flexible.grammar_source}"
        compact_text = json.dumps(v, separators=(",", ":"), ensure_ascii=False)
        assert _accepts(compact, compact_text), f"compact rejected {compact_text!r}"
        spaced = json.dumps(v, indent=1, ensure_ascii=False)
        assert spaced == compact_text or not _accepts(compact, spaced), f"compact accepted {spaced!r}"
    for v in invalid:
        text = json.dumps(v)
        if not validator.is_valid(v):
            assert not _accepts(flexible, text) or flexible.report.post_checks, f"accepted invalid {text!r}"


@pytest.mark.parametrize(("schema", "bad"), POST_CHECKED)
def test_post_checked_keywords_are_reported_and_validated(
    schema: Any, bad: Any, tok: corral.Tokenizer
) -> None:
    g = corral.compile_json_schema(schema, tok)
    assert g.report.post_checks, str(g.report)
    with pytest.raises(corral.OutputValidationError):
        g.validate(json.dumps(bad))
    with pytest.raises(corral.UnsupportedSchemaError):
        corral.compile_json_schema(schema, tok, strict=True)


@pytest.mark.parametrize(
    ("schema", "pointer", "needle"),
    [
        ({"type": "integer", "minimum": 5, "maximum": 1}, "#", "allow no value"),
        ({"type": "string", "minLength": 5, "maxLength": 1}, "#/minLength", "minLength 5 > maxLength 1"),
        ({"$ref": "#/$defs/missing"}, "#/$ref", "points to nothing"),
        ({"$ref": "https://example.com/s.json"}, "#/$ref", "remote"),
        ({"type": "object", "required": ["a"], "additionalProperties": False}, "#/required", "forbidden"),
        ({"type": "integer", "enum": ["a", "b"]}, "#/enum", "no enum/const value"),
        ({"type": "strin"}, "#/type", "unknown type"),
        ({"type": "array", "minItems": 3, "maxItems": 2}, "#/minItems", "minItems 3 > maxItems 2"),
        (
            {"properties": {"a": {"pattern": "(?<=x)y", "type": "string"}}},
            "#/properties/a/pattern",
            "pattern",
        ),
        (False, "#", "allows no value"),
        ({"allOf": [{"type": "string"}, {"type": "integer"}]}, "#/allOf/1", "nothing in common"),
    ],
)
def test_bad_schemas_name_the_pointer(schema: Any, pointer: str, needle: str, tok: corral.Tokenizer) -> None:
    with pytest.raises(corral.SchemaError) as ei:
        corral.compile_json_schema(schema, tok)
    assert ei.value.pointer == pointer, str(ei.value)
    assert needle in str(ei.value)


@pytest.mark.real_tokenizer
@pytest.mark.parametrize("index", range(0, len(CASES), 3))
def test_random_walks_validate(index: int, llama32: corral.Tokenizer) -> None:
    schema = CASES[index][0]
    g = corral.compile_json_schema(schema, llama32)
    validator = make_validator(schema)
    rng = random.Random(index)
    for _ in range(3):
        out, _ = random_walk(g, rng, max_steps=25, eos_weight=0.3)
        value = json.loads(out.decode())
        if not g.report.post_checks:
            assert validator.is_valid(value), (schema, out)


def test_large_array_bounds_compile_fast(tok: corral.Tokenizer) -> None:
    import time

    t0 = time.process_time()  # CPU time (every thread of this process): load does not fail it
    g = corral.compile_json_schema(
        {"type": "array", "items": {"type": "string", "maxLength": 20}, "minItems": 1, "maxItems": 1000}, tok
    )
    assert time.process_time() - t0 < 2.0
    assert _accepts(g, json.dumps(["ab"] * 1000))
    assert not _accepts(g, json.dumps(["ab"] * 1001))
    assert not _accepts(g, "[]")


@pytest.mark.parametrize(
    ("schema", "text", "first_bad"),
    [
        ({"type": "string"}, '"a\x01b"', 2),  # raw control character
        ({"type": "integer"}, "01", 1),  # leading zero
        ({"type": "integer"}, "-0", 1),  # -0 is never generated for integers
        ({"type": "number", "maximum": 1e308}, "1e400", 1),  # bounded numbers have no exponent
        ({"type": "integer", "maximum": 100}, "101", 2),  # off by one
        ({"type": "object", "properties": {"a": {"type": "integer"}}}, '{"a":1,"a":2}', 6),  # duplicate key
        ({"type": "object", "properties": {"a": {}}, "additionalProperties": True}, '{"a":1,"a":2}', 9),
        ({"type": "object", "properties": {"a": {}}, "required": ["a"]}, "{}", 1),  # missing required
        ({"enum": ["red", "green"]}, '"blue"', 1),  # wrong enum value
        ({"type": "array", "maxItems": 1}, "[1,2]", 2),
    ],
)
def test_near_misses_rejected_at_the_first_wrong_byte(
    schema: Any, text: str, first_bad: int, tok: corral.Tokenizer
) -> None:
    g = corral.compile_json_schema(schema, tok, whitespace="compact")
    m = g.matcher()
    data = text.encode()
    for i, b in enumerate(data):
        if not m.accept_token(b):
            assert i == first_bad, f"{text!r}: rejected at byte {i}, expected {first_bad}"
            return
    pytest.fail(f"{text!r} was accepted (complete: {m.is_accepting()})")


def test_disjoint_one_of_is_enforced_by_the_grammar(tok: corral.Tokenizer) -> None:
    by_type = corral.compile_json_schema({"oneOf": [{"type": "integer"}, {"type": "string"}]}, tok)
    assert not by_type.report.post_checks
    tagged = corral.compile_json_schema(
        {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}},
                    "required": ["kind"],
                },
                {"type": "object", "properties": {"kind": {"enum": ["b", "c"]}}, "required": ["kind"]},
            ]
        },
        tok,
    )
    assert not tagged.report.post_checks
    assert _accepts(tagged, '{"kind": "a", "x": 1}') and _accepts(tagged, '{"kind": "c"}')
    # Overlapping branches whose complements have schemas: exactly-one is enforced too.
    overlapping = corral.compile_json_schema({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, tok)
    assert not overlapping.report.post_checks
    assert _accepts(overlapping, "-1") and _accepts(overlapping, "0.5") and not _accepts(overlapping, "5")
    overlapping = corral.compile_json_schema({"oneOf": [{"type": "integer"}, {"multipleOf": 3}]}, tok)
    assert overlapping.report.post_checks


def test_recursion_through_all_of_and_ref_siblings(tok: corral.Tokenizer) -> None:
    schema = {
        "definitions": {
            "item": {
                "type": "object",
                "properties": {
                    "v": {"type": "integer"},
                    "kids": {"type": "array", "items": {"allOf": [{"$ref": "#/definitions/item"}]}},
                    "next": {"$ref": "#/definitions/item", "description": "annotation only"},
                    "also": {"$ref": "#/definitions/item", "required": ["v"]},
                },
            }
        },
        "$ref": "#/definitions/item",
    }
    g = corral.compile_json_schema(schema, tok)
    doc = {"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}], "next": {"also": {"v": 4}}}
    assert _accepts(g, json.dumps(doc))
    assert not _accepts(g, json.dumps({"also": {"kids": []}}))  # "also" requires v


def test_optional_property_that_allows_nothing_is_never_generated(tok: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "object", "enum": ["x"]}}},
        tok,
    )
    assert _accepts(g, '{"a": 1}')
    assert not _accepts(g, '{"b": "x"}')
    with pytest.raises(corral.SchemaError):
        corral.compile_json_schema({"type": "object", "properties": {"b": False}, "required": ["b"]}, tok)


@pytest.mark.parametrize(
    ("pattern", "good", "bad"),
    [
        (r"(^\d{4}(-\d{2})?$)|(^\d{2}x)", ["2024", "2024-05", "12x", "12xyz"], ["x2024", "2024-", "1x"]),
        (r"^(a|b$)", ["a", "abc", "b"], ["xb", "ba", "c"]),
        (r"(?P<year>^[0-9]{4})", ["2024", "2024-extra"], ["x2024"]),
    ],
)
def test_anchors_inside_groups(pattern: str, good: list[str], bad: list[str], tok: corral.Tokenizer) -> None:
    import re

    g = corral.compile_json_schema({"type": "string", "pattern": pattern}, tok)
    for s in good:
        assert re.search(pattern, s) and _accepts(g, json.dumps(s)), s
    for s in bad:
        assert not re.search(pattern, s) and not _accepts(g, json.dumps(s)), s


def test_unknown_keywords_are_annotations_in_merges(tok: corral.Tokenizer) -> None:
    schema = {"allOf": [{"type": "integer", "help": "a"}, {"maximum": 3, "help": "b"}]}
    g = corral.compile_json_schema(schema, tok)
    assert _accepts(g, "3") and not _accepts(g, "4")


def test_regressions_from_the_jsonschemabench_sweep(tok: corral.Tokenizer) -> None:
    # A oneOf told apart by a property enum is not exclusive when the branches also match
    # non-objects: both branches match 5, so exactly-one must exclude it (enforced through each
    # branch's complement).
    g = corral.compile_json_schema(
        {
            "oneOf": [
                {"properties": {"t": {"enum": ["a"]}}, "required": ["t"]},
                {"properties": {"t": {"enum": ["b"]}}, "required": ["t"]},
            ]
        },
        tok,
    )
    assert not g.report.post_checks, str(g.report)
    assert not _accepts(g, "5") and not _accepts(g, '"x"')
    assert _accepts(g, '{"t": "a"}') and _accepts(g, '{"t": "b"}') and not _accepts(g, '{"t": "c"}')
    # Under an integer type, enum numbers are spelled as integers (draft-04 rejects 1.0).
    d4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer", "enum": [0, 1]}
    g = corral.compile_json_schema(d4, tok)
    assert _accepts(g, "1") and not _accepts(g, "1.0")
    # A required name allowed by patternProperties is generated with that schema.
    g = corral.compile_json_schema(
        {
            "type": "object",
            "required": ["x1"],
            "additionalProperties": False,
            "patternProperties": {"^x[0-9]$": {"type": "integer"}},
        },
        tok,
    )
    assert _accepts(g, '{"x1": 5}') and not _accepts(g, '{"x1": "a"}')
    # \\w in a JSON Schema pattern is ASCII (ECMA-262): compact automata for bounded counts.
    g = corral.compile_json_schema({"type": "string", "pattern": r"^[\+\w-]{5,96}$"}, tok)
    assert _accepts(g, '"ab_c-1"') and not _accepts(g, '"abc"')
    # An impossible oneOf branch is dropped, not fatal.
    g = corral.compile_json_schema(
        {
            "oneOf": [
                {"type": "integer"},
                {"type": "object", "required": ["k"], "additionalProperties": False},
            ]
        },
        tok,
    )
    assert _accepts(g, "3")


@pytest.mark.parametrize("index", range(len(CASES)))
def test_pretty_layout_is_json_dumps_indent(index: int, tok: corral.Tokenizer) -> None:
    schema, valid, _ = CASES[index]
    g = corral.compile_json_schema(schema, tok, whitespace="pretty", indent=2)
    for v in valid:
        text = json.dumps(v, indent=2, ensure_ascii=False)
        assert _accepts(g, text), f"pretty rejected {text!r}"


def test_pretty_layout_rejects_other_layouts(tok: corral.Tokenizer) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}
    g = corral.compile_json_schema(schema, tok, whitespace="pretty", indent=4)
    v = {"a": [1, 2]}
    assert _accepts(g, json.dumps(v, indent=4)) and _accepts(g, "{}") and _accepts(g, '{\n    "a": []\n}')
    for other in (json.dumps(v), json.dumps(v, indent=2), json.dumps(v, indent=4) + "\n", "{\n}"):
        assert not _accepts(g, other), other


def test_pretty_recursion_is_exact(tok: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(TREE, tok, whitespace="pretty", indent=1)
    node: dict[str, Any] = {"value": 0}
    for i in range(1, 40):  # deeper than the pretty depth cap: the rest is laid out flexibly
        node = {"value": i, "children": [node]}
    assert _accepts(g, json.dumps(node, indent=1))
    assert not _accepts(g, json.dumps({"value": 1, "children": [{"value": 2}]}, indent=3))


def test_wide_objects_convert_without_deep_recursion(tok: corral.Tokenizer) -> None:
    """An object with thousands of declared properties is one state per member in the member
    automaton; building it must not recurse once per member (it raised RecursionError at about
    1,000 properties)."""
    import sys

    n = 3000
    assert n > sys.getrecursionlimit()
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(n)}}
    schema["additionalProperties"] = False
    g = corral.compile_json_schema(schema, tok, whitespace="compact")
    m = g.matcher()
    assert m.accept_bytes(b'{"p0":1,"p2999":5}') and m.is_accepting()
    assert not g.matcher().accept_bytes(b'{"p2999":5,"p0":1}')  # declared order, as generated


def test_subschema_without_values_reached_twice_stays_impossible() -> None:
    # The second $ref to a schema no value satisfies used to get the first attempt's reserved
    # (empty) rule back, so the whole grammar accepted the empty output.
    never = {"type": "object", "minProperties": 2, "additionalProperties": False, "properties": {"a": {}}}
    schema = {
        "$defs": {"n": never},
        "anyOf": [{"$ref": "#/$defs/n"}, {"$ref": "#/$defs/n"}, {"type": "integer"}],
    }
    g = corral.compile_json_schema(schema, byte_tokenizer())
    assert _accepts(g, "5")
    assert not _accepts(g, "")
    assert not _accepts(g, '{"a": 1}')
