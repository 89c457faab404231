"""Keywords the grammar enforces by counting: multipleOf, minProperties/maxProperties,
dependentRequired/dependentSchemas/dependencies, contains/minContains/maxContains, and
if/then/else on a discriminator. For each: valid instances are accepted, invalid ones are
rejected by the grammar (exhaustively over small domains, against ``jsonschema``), near misses
at the first wrong byte, random walks with a real tokenizer validate, and the report says
truthfully what is enforced and what is checked after decoding."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import jsonschema
import pytest
from helpers import byte_tokenizer, random_walk

import corral


@pytest.fixture(scope="module")
def tok() -> corral.Tokenizer:
    return byte_tokenizer()


def validator(schema: Any) -> Any:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)


def accepts(g: corral.JsonSchemaGrammar, text: str) -> bool:
    m = g.matcher()
    return m.accept_bytes(text.encode()) and m.is_accepting()


def statuses(g: corral.JsonSchemaGrammar) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for e in g.report.entries:
        out.setdefault(e.keyword, set()).add(e.status)
    return out


def assert_exact(schema: Any, instances: list[Any], tok: corral.Tokenizer, **opts: Any) -> None:
    """The grammar accepts exactly the valid instances (compact and spaced spellings).
    Undeclared properties follow the spec default unless `opts` say otherwise."""
    opts.setdefault("extra_properties", "spec")
    g = corral.compile_json_schema(schema, tok, **opts)
    assert not g.report.post_checks, str(g.report)
    v = validator(schema)
    for inst in instances:
        ok = v.is_valid(inst)
        for text in (json.dumps(inst), json.dumps(inst, separators=(",", ":"))):
            assert accepts(g, text) == ok, f"{schema}: {text} valid={ok}\n{g.grammar_source}"


# -- multipleOf ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer", "multipleOf": 3},
        {"type": "integer", "multipleOf": 7, "minimum": -30, "maximum": 45},
        {"type": "integer", "multipleOf": 4, "exclusiveMinimum": -9, "exclusiveMaximum": 80},
        {"type": "integer", "multipleOf": 25, "minimum": 12},
        {"type": "integer", "multipleOf": 6, "maximum": -5.5},
        {"type": "number", "multipleOf": 5, "minimum": 0.5, "maximum": 101},
        {"multipleOf": 2},
    ],
)
def test_integer_multiple_of_is_exact(schema: Any, tok: corral.Tokenizer) -> None:
    rng = random.Random(1)
    values = list(range(-130, 131)) + [rng.randrange(-(10**12), 10**12) for _ in range(150)]
    g = corral.compile_json_schema(schema, tok)
    assert statuses(g)["multipleOf"] == {"enforced"}, str(g.report)
    assert_exact(schema, values, tok)
    # Other spellings of integers are never generated (so the validator sees exact integers).
    for text in ("6.0", "6e0", "-0", "06"):
        assert not accepts(g, text)


def test_multiple_of_under_number_type_generates_integer_spellings(tok: corral.Tokenizer) -> None:
    g = corral.compile_json_schema({"type": "number", "multipleOf": 3}, tok)
    entry = next(e for e in g.report.entries if e.keyword == "multipleOf")
    assert entry.status == "enforced" and "integer" in entry.detail
    assert accepts(g, "-12") and not accepts(g, "12.0") and not accepts(g, "13")
    # Typeless: non-numbers are untouched.
    g = corral.compile_json_schema({"multipleOf": 3}, tok)
    assert accepts(g, '"x"') and accepts(g, "[1]") and accepts(g, "9") and not accepts(g, "10")


def test_decimal_multiple_of_is_generated_exactly_and_still_checked(tok: corral.Tokenizer) -> None:
    from decimal import Decimal

    schema = {"type": "number", "multipleOf": 0.25}
    g = corral.compile_json_schema(schema, tok)
    assert statuses(g)["multipleOf"] == {"checked after decoding"}  # float division in validators
    for text in ("0.25", "-1.5", "3", "2.750", "0", "-0.0", "100.00"):
        assert accepts(g, text), text
    for text in ("0.2", "1.26", "2.7501", "1e2", "0.125"):
        assert not accepts(g, text), text
    rng = random.Random(2)
    for _ in range(300):
        text = f"{rng.randrange(-500, 500) / rng.choice([1, 10, 100, 1000]):.{rng.randrange(0, 5)}f}"
        assert accepts(g, text) == (Decimal(text) % Decimal("0.25") == 0), text
    # With bounds a decimal step is checked after decoding; the bounds stay enforced.
    g = corral.compile_json_schema({"type": "number", "multipleOf": 0.5, "maximum": 3}, tok)
    assert statuses(g)["multipleOf"] == {"checked after decoding"}
    assert statuses(g)["maximum"] == {"enforced"} and not accepts(g, "3.5")
    # An integer type with a decimal step: the integer multiples (here of 3).
    g = corral.compile_json_schema({"type": "integer", "multipleOf": 1.5}, tok)
    assert accepts(g, "9") and not accepts(g, "10")


def test_multiple_of_contradictions_and_limits(tok: corral.Tokenizer) -> None:
    with pytest.raises(corral.SchemaError) as ei:
        corral.compile_json_schema({"type": "integer", "multipleOf": 10, "minimum": 1, "maximum": 9}, tok)
    assert ei.value.pointer == "#/multipleOf"
    with pytest.raises(corral.SchemaError) as ei:
        corral.compile_json_schema({"type": "integer", "multipleOf": 0}, tok)
    assert ei.value.pointer == "#/multipleOf"
    # A step too large for the state cap: bounds enforced, the multiple checked after decoding.
    g = corral.compile_json_schema({"type": "integer", "multipleOf": 99991, "maximum": 10**15}, tok)
    assert statuses(g)["multipleOf"] == {"checked after decoding"}
    with pytest.raises(corral.UnsupportedSchemaError):
        corral.compile_json_schema(
            {"type": "integer", "multipleOf": 99991, "maximum": 10**15}, tok, strict=True
        )
    # allOf of two integer steps: their least common multiple.
    assert_exact({"allOf": [{"multipleOf": 4}, {"multipleOf": 6}]}, list(range(-30, 40)), tok)


# -- minProperties / maxProperties ------------------------------------------------------------

KEYS = ["a", "b", "c", "x"]


def _objects(names: list[str]) -> list[dict[str, int]]:
    """Every object over `names` (in that order), values 1."""
    out = []
    for r in range(len(names) + 1):
        for combo in itertools.combinations(names, r):
            out.append({n: 1 for n in combo})
    return out


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "minProperties": 2},
        {"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "maxProperties": 1},
        {
            "type": "object",
            "properties": {"a": {}, "b": {}, "c": {}},
            "required": ["b"],
            "minProperties": 2,
            "maxProperties": 2,
        },
        {"minProperties": 1, "maxProperties": 2, "additionalProperties": True},
    ],
)
def test_property_counts_are_exact(schema: Any, tok: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(schema, tok)
    for key in ("minProperties", "maxProperties"):
        if key in schema:
            assert statuses(g)[key] == {"enforced"}, str(g.report)
    assert_exact(schema, _objects(KEYS) + [{"a": 1, "b": 2, "y": 3, "z": 4, "w": 5}, 3, "s"], tok)
    for indent in (2, None):
        pretty = corral.compile_json_schema(
            schema, tok, whitespace="pretty", indent=indent or 2, extra_properties="spec"
        )
        for inst in _objects(KEYS):
            if validator(schema).is_valid(inst):
                assert accepts(pretty, json.dumps(inst, indent=2)), inst


def test_extra_properties_counted_for_min_properties_have_distinct_keys(tok: corral.Tokenizer) -> None:
    # A repeated key counts once in the parsed object: the extras that minProperties needs get
    # keys that cannot repeat (lengths differ modulo the number needed, longer than any declared
    # name); extras beyond that are free.
    schema = {"type": "object", "properties": {"a": {}}, "minProperties": 3, "additionalProperties": True}
    g = corral.compile_json_schema(schema, tok, whitespace="compact")
    assert not accepts(g, '{"xx":0,"xx":0}') and not accepts(g, '{"a":0,"xx":0,"\\u0078x":0}')
    assert accepts(g, '{"a":0,"xx":0,"yyy":0}') and accepts(g, '{"xx":0,"yyy":0,"zzzz":0,"xx":1}')
    assert not g.report.post_checks
    schema = {
        "type": "object",
        "properties": {"a": {}, "b": {}},
        "additionalProperties": {"type": "integer"},
        "minProperties": 3,
        "maxProperties": 4,
    }
    g = corral.compile_json_schema(schema, tok)
    v = validator(schema)
    for inst in _objects(["a", "b", "cc", "ddd", "e"]):
        if accepts(g, json.dumps(inst)):
            assert v.is_valid(inst), inst
    for inst in ({"a": 1, "cc": 1, "ddd": 1}, {"a": 1, "b": 1, "c": 1}, {"b": 1, "cc": 2, "ddd": 3, "e": 4}):
        assert v.is_valid(inst) and accepts(g, json.dumps(inst)), inst


def test_many_needed_extra_properties_fall_back_to_post_check(tok: corral.Tokenizer) -> None:
    g = corral.compile_json_schema({"type": "object", "minProperties": 12, "additionalProperties": True}, tok)
    assert statuses(g)["minProperties"] == {"checked after decoding"}
    assert accepts(g, json.dumps({f"k{i}": i for i in range(12)}))


def test_min_properties_without_additional_properties_in_schema_mode(tok: corral.Tokenizer) -> None:
    # extra_properties="schema" generates no undeclared property unless needed to reach the count.
    g = corral.compile_json_schema({"type": "object", "minProperties": 1}, tok)
    assert not g.report.post_checks
    assert accepts(g, '{"k": [1]}') and not accepts(g, "{}")
    g = corral.compile_json_schema({"type": "object", "properties": {"a": {}}, "minProperties": 1}, tok)
    assert accepts(g, '{"a": 1}') and not accepts(g, '{"k": 1}') and not accepts(g, "{}")


@pytest.mark.parametrize(
    ("schema", "pointer", "needle"),
    [
        ({"type": "object", "minProperties": 3, "maxProperties": 2}, "#/minProperties", "minProperties 3 >"),
        (
            {"type": "object", "properties": {"a": {}}, "additionalProperties": False, "minProperties": 2},
            "#/minProperties",
            "at most 1",
        ),
        (
            {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a", "b"], "maxProperties": 1},
            "#/maxProperties",
            "2 required",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {}},
                "required": ["a"],
                "additionalProperties": False,
                "dependentRequired": {"a": ["zz"]},
            },
            "#/required",
            "dependency",
        ),
        (
            {"type": "array", "contains": {"const": 1}, "minContains": 3, "maxContains": 2},
            "#/minContains",
            ">",
        ),
        (
            {"type": "array", "contains": {"const": 1}, "minContains": 3, "maxItems": 2},
            "#/minContains",
            "maxItems",
        ),
    ],
)
def test_contradictions_name_the_pointer(
    schema: Any, pointer: str, needle: str, tok: corral.Tokenizer
) -> None:
    with pytest.raises(corral.SchemaError) as ei:
        corral.compile_json_schema(schema, tok)
    assert ei.value.pointer == pointer, str(ei.value)
    assert needle in str(ei.value)


def test_impossible_object_leaves_other_types(tok: corral.Tokenizer) -> None:
    g = corral.compile_json_schema({"minProperties": 2, "additionalProperties": False}, tok)
    assert accepts(g, '"s"') and accepts(g, "1") and not accepts(g, "{}")
    # minContains defaults to 1, so no array has at most 0 matches.
    g = corral.compile_json_schema({"contains": {"type": "null"}, "maxContains": 0}, tok)
    assert accepts(g, "{}") and not accepts(g, "[]") and not accepts(g, "[1]")


def test_property_count_state_cap_falls_back_to_post_check(tok: corral.Tokenizer) -> None:
    props = {f"p{i}": {"type": "integer"} for i in range(60)}
    schema = {"type": "object", "properties": props, "minProperties": 1, "maxProperties": 200}
    g = corral.compile_json_schema(schema, tok)
    assert statuses(g)["minProperties"] == {"enforced"}  # maxProperties cannot bind: 60 < 200
    schema = {"type": "object", "properties": props, "maxProperties": 59, "minProperties": 58}
    assert_exact(schema, [{f"p{i}": i for i in range(n)} for n in (57, 58, 59, 60)], tok)
    big = {f"p{i}": {"type": "integer"} for i in range(300)}
    g = corral.compile_json_schema({"type": "object", "properties": big, "maxProperties": 150}, tok)
    assert statuses(g)["maxProperties"] == {"checked after decoding"}
    assert accepts(g, json.dumps({"p0": 1, "p299": 2}))


# -- dependencies --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "dependentRequired": {"a": ["c"]}},
        {"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "dependentRequired": {"c": ["a", "b"]}},
        {
            "type": "object",
            "properties": {"a": {}, "b": {}, "c": {}},
            "dependentRequired": {"a": ["b"], "b": ["a"], "c": ["a"]},
            "maxProperties": 2,
        },
        {
            "type": "object",
            "properties": {"a": {}, "b": {}, "c": {}},
            "required": ["b"],
            "dependentRequired": {"b": ["c"]},
        },
        {
            "type": "object",
            "properties": {"a": {}, "b": {}, "c": {}},
            "dependentSchemas": {"a": {"required": ["b"], "properties": {"b": True}}, "c": False},
        },
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"a": {}, "b": {}, "c": {}},
            "dependencies": {"b": ["c"], "a": {"required": ["c"]}},
        },
    ],
)
def test_dependencies_are_exact(schema: Any, tok: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(schema, tok)
    for key in ("dependentRequired", "dependentSchemas", "dependencies"):
        if key in schema:
            assert statuses(g)[key] == {"enforced"}, str(g.report)
    assert_exact(schema, _objects(["a", "b", "c", "x"]) + [[], 2], tok)


@pytest.mark.parametrize(
    ("schema", "order"),
    [
        (
            {"type": "object", "additionalProperties": True, "dependentRequired": {"x": ["a"]}},
            ["a", "x", "b", "c"],
        ),
        (
            {"dependentRequired": {"a": ["c", "x"]}, "additionalProperties": {"type": "integer"}},
            ["c", "x", "a", "b"],
        ),
    ],
)
def test_undeclared_dependency_names_are_tracked(
    schema: Any, order: list[str], tok: corral.Tokenizer
) -> None:
    # Names a dependency mentions become declared properties (targets first, then the key, then
    # any other additional property), so their presence is tracked.
    assert_exact(schema, _objects(order) + [[], 2], tok)


def test_dependency_near_miss_rejected_at_the_first_wrong_byte(tok: corral.Tokenizer) -> None:
    schema = {"type": "object", "properties": {"a": {}, "b": {}}, "dependentRequired": {"a": ["b"]}}
    g = corral.compile_json_schema(schema, tok, whitespace="compact")
    m = g.matcher()
    text = b'{"a":1}'
    for i, b in enumerate(text):
        if not m.accept_token(b):
            assert i == 6, i  # "}" where ',"b"' must follow
            return
    pytest.fail("accepted")


def test_dependent_schemas_beyond_names_are_checked_after(tok: corral.Tokenizer) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {}, "b": {"type": "integer"}},
        "dependentSchemas": {"a": {"required": ["b"], "properties": {"b": {"minimum": 5}}}},
    }
    g = corral.compile_json_schema(schema, tok)
    entry = next(e for e in g.report.entries if e.keyword == "dependentSchemas")
    assert entry.status == "checked after decoding" and "required" in entry.detail
    assert not accepts(g, '{"a": 1}')  # the required part is still enforced
    assert accepts(g, '{"a": 1, "b": 7}')
    with pytest.raises(corral.OutputValidationError):
        g.validate('{"a": 1, "b": 2}')


def test_dependency_state_cap_falls_back_to_post_check(tok: corral.Tokenizer) -> None:
    names = [f"k{i}" for i in range(40)]
    schema = {
        "type": "object",
        "properties": {n: {} for n in names},
        "dependentRequired": {n: [names[-1 - i]] for i, n in enumerate(names[:20])},
        "maxProperties": 30,
    }
    g = corral.compile_json_schema(schema, tok)
    assert statuses(g)["dependentRequired"] == {"checked after decoding"}
    assert statuses(g)["maxProperties"] == {"enforced"}


# -- contains ------------------------------------------------------------------------------------


def _arrays(alphabet: list[Any], max_len: int) -> list[list[Any]]:
    out: list[list[Any]] = []
    for n in range(max_len + 1):
        out += [list(p) for p in itertools.product(alphabet, repeat=n)]
    return out


ARRAYS = _arrays([1, 2, "a", None], 4)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "contains": {"const": 1}},
        {"type": "array", "contains": {"type": "string"}, "minContains": 2},
        {"type": "array", "contains": {"minimum": 2}, "minContains": 2, "maxItems": 3},
        {"type": "array", "contains": {"const": 1}, "maxContains": 1},
        {"type": "array", "contains": {"const": 1}, "minContains": 0, "maxContains": 1, "minItems": 2},
        {"type": "array", "contains": {"enum": [1, "a"]}, "minContains": 2, "maxContains": 3},
        {"type": "array", "contains": {"type": "null"}, "minContains": 0, "maxContains": 0},
        {"type": "array", "contains": {"type": "integer"}, "items": {"type": ["integer", "null"]}},
        {"type": "array", "prefixItems": [{"type": "string"}], "contains": {"const": 2}, "maxContains": 1},
        {"type": "array", "prefixItems": [{}, {}], "items": False, "contains": {"const": "a"}},
        {"contains": {"const": 2}, "maxContains": 2},
        {"type": "array", "contains": True, "maxContains": 2},
        {"type": "array", "contains": {"type": ["string", "number"]}, "maxContains": 1},
        {"type": "array", "contains": {"multipleOf": 2}, "minContains": 1, "maxContains": 1},
    ],
)
def test_contains_is_exact(schema: Any, tok: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(schema, tok)
    for key in ("contains", "minContains", "maxContains"):
        if key in schema:
            assert statuses(g)[key] == {"enforced"}, str(g.report)
    assert_exact(schema, [*ARRAYS, [1.5, 1], [2.5, 1.5], "x", {}], tok)
    pretty = corral.compile_json_schema(schema, tok, whitespace="pretty")
    v = validator(schema)
    for inst in ARRAYS[:80]:
        assert accepts(pretty, json.dumps(inst, indent=2)) == v.is_valid(inst), inst


def test_contains_that_cannot_be_split_keeps_max_contains_post_checked(tok: corral.Tokenizer) -> None:
    # "Not a multiple of 0.5" has no exact schema (validators divide by a decimal step in
    # floating point): maxContains is left to validate().
    schema = {"type": "array", "contains": {"multipleOf": 0.5}, "minContains": 1, "maxContains": 1}
    g = corral.compile_json_schema(schema, tok)
    st = statuses(g)
    assert st["maxContains"] == {"checked after decoding"}
    assert accepts(g, "[1.5]")
    for over in ("[1.5, 3]", "[0.25, 0.75]"):  # two matches, none
        with pytest.raises(corral.OutputValidationError):
            g.validate(over)
    # Bounds have a complement (numbers outside them, non-numbers): maxContains is enforced.
    schema = {"type": "array", "contains": {"minimum": 2, "maximum": 8}, "minContains": 1, "maxContains": 1}
    g = corral.compile_json_schema(schema, tok)
    assert statuses(g)["maxContains"] == {"enforced"}
    assert accepts(g, "[3]") and accepts(g, "[1, 3, 9]")
    assert not accepts(g, "[3, 4]") and not accepts(g, '[1, 3, "x"]') and not accepts(g, "[1, 0]")
    # A contains schema that is itself checked after decoding: contains is too.
    g = corral.compile_json_schema({"type": "array", "contains": {"type": "array", "uniqueItems": True}}, tok)
    assert statuses(g)["contains"] == {"checked after decoding"}


def test_contains_with_draft07_ignores_min_contains(tok: corral.Tokenizer) -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "contains": {"const": 1},
        "minContains": 0,
    }
    g = corral.compile_json_schema(schema, tok)
    assert not accepts(g, "[2]") and accepts(g, "[2, 1]")  # draft-07: contains needs one match
    assert statuses(g)["minContains"] == {"ignored"}


def test_contains_near_miss_rejected_at_the_first_wrong_byte(tok: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(
        {"type": "array", "contains": {"const": 1}, "maxContains": 1, "maxItems": 3},
        tok,
        whitespace="compact",
    )
    m = g.matcher()
    text = b"[1,2,1]"
    for i, b in enumerate(text):
        if not m.accept_token(b):
            assert i == 6, i  # "]" after a second 1 (which could have begun 10, 12, ...)
            return
    pytest.fail("accepted")


def test_all_of_with_two_contains_keeps_one_enforced(tok: corral.Tokenizer) -> None:
    schema = {"allOf": [{"contains": {"const": 1}}, {"contains": {"const": 2}, "minContains": 0}]}
    g = corral.compile_json_schema(schema, tok)
    assert "checked after decoding" in statuses(g)["contains"]
    assert accepts(g, "[1, 3]")  # the second group is left to validate()
    assert not accepts(g, "[2]")  # the first is enforced


# -- if / then / else ------------------------------------------------------------------------------

SHAPES = {
    "type": "object",
    "properties": {
        "kind": {"enum": ["circle", "square"]},
        "r": {"type": "integer"},
        "side": {"type": "integer"},
    },
    "required": ["kind"],
    "if": {"properties": {"kind": {"const": "circle"}}, "required": ["kind"]},
    "then": {"required": ["r"]},
    "else": {"required": ["side"]},
}


def test_if_then_else_on_a_discriminator_is_enforced(tok: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(SHAPES, tok)
    assert not g.report.post_checks, str(g.report)
    insts = [
        {"kind": k, **extra}
        for k in ("circle", "square", "oval")
        for extra in ({}, {"r": 1}, {"side": 2}, {"r": 1, "side": 2})
    ]
    assert_exact(SHAPES, insts, tok)


def test_if_that_is_not_a_discriminator_stays_post_checked(tok: corral.Tokenizer) -> None:
    # "Not a multiple of 0.5" has no exact schema: the condition cannot be negated.
    schema = {"if": {"multipleOf": 0.5}, "then": {"minimum": 10}}
    g = corral.compile_json_schema(schema, tok)
    assert statuses(g)["if"] == {"checked after decoding"}
    with pytest.raises(corral.OutputValidationError):
        g.validate("3")
    # An integer step negates to the fractions and the other integers: enforced.
    schema = {"if": {"multipleOf": 3}, "then": {"minimum": 10}}
    g = corral.compile_json_schema(schema, tok)
    assert statuses(g)["if"] == {"enforced"}
    assert_exact(schema, [-3, 0, 1, 2.5, 3, 4, 9, 10, 12, 13, 15, "x", None], tok)
    # Two bounds negate to two intervals (and the non-numbers): enforced.
    schema = {"if": {"minimum": 3, "maximum": 5}, "then": {"multipleOf": 2}}
    g = corral.compile_json_schema(schema, tok)
    assert statuses(g)["if"] == {"enforced"}
    assert_exact(schema, [2, 3, 4, 5, 6, 7, "x", None], tok)


def test_if_with_one_bound_or_a_type_is_enforced(tok: corral.Tokenizer) -> None:
    schema = {"if": {"exclusiveMaximum": 0}, "then": {"minimum": -10}, "else": {"multipleOf": 2}}
    assert_exact(schema, [*range(-15, 15), -0.5, -10.5, 2.5, "x", None, [1]], tok)
    schema = {"if": {"type": "string"}, "then": {"maxLength": 2}, "else": {"type": "integer"}}
    assert_exact(schema, ["", "ab", "abc", 1, 1.5, None, [1]], tok)
    schema = {"if": True, "then": {"const": 1}, "else": {"const": 2}}
    assert_exact(schema, [1, 2, 3], tok)
    schema = {"if": False, "then": {"const": 1}, "else": {"const": 2}}
    assert_exact(schema, [1, 2, 3], tok)
    # then/else without if, or in another allOf part, constrain nothing.
    schema = {
        "allOf": [{"if": {"exclusiveMaximum": 0}}, {"then": {"minimum": -10}}, {"else": {"multipleOf": 2}}]
    }
    assert_exact(schema, [-100, 3, 4, "x"], tok)


# -- random walks with a real tokenizer ---------------------------------------------------------------

WALKED = [
    {"type": "integer", "multipleOf": 7, "minimum": -100, "maximum": 1000},
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {}},
        "minProperties": 1,
        "maxProperties": 3,
        "additionalProperties": {"type": "boolean"},
    },
    {
        "type": "object",
        "properties": {"a": {}, "b": {}, "c": {}},
        "dependentRequired": {"a": ["c"], "b": ["a"]},
    },
    {
        "type": "array",
        "items": {"type": "integer", "maximum": 3},
        "contains": {"const": 1},
        "minContains": 2,
        "maxContains": 3,
    },
    {"type": "array", "contains": {"type": "string"}, "maxItems": 4},
    SHAPES,
]


@pytest.mark.real_tokenizer
@pytest.mark.parametrize("index", range(len(WALKED)))
def test_random_walks_validate(index: int, llama32: corral.Tokenizer) -> None:
    schema = WALKED[index]
    g = corral.compile_json_schema(schema, llama32)
    assert not g.report.post_checks, str(g.report)
    v = validator(schema)
    rng = random.Random(index)
    for _ in range(6):
        out, _ = random_walk(g, rng, max_steps=30, eos_weight=0.3)
        value = json.loads(out.decode())
        assert v.is_valid(value), (schema, out)


# -- strings: length with pattern / format (one product automaton) ----------------------------------


def _spelled(value: str, rng: random.Random) -> str:
    """A JSON string literal for `value`, some characters as \\u escapes."""
    out = []
    for ch in value:
        if ch in '"\\' or ord(ch) < 0x20 or rng.random() < 0.25:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _format_validator(schema: Any) -> Any:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


STRING_SCHEMAS = [
    {"type": "string", "pattern": "^[a-c]+$", "maxLength": 3},
    {"type": "string", "pattern": "b", "minLength": 2, "maxLength": 4},
    {"type": "string", "pattern": "^a|c$", "minLength": 3},
    {"type": "string", "format": "ipv4", "maxLength": 8},
    {"type": "string", "format": "date", "pattern": "-0[1-3]-"},
    {"type": "string", "format": "ipv4", "pattern": "^1", "minLength": 8, "maxLength": 9},
    {"pattern": "^[ab]*$", "maxLength": 2, "minLength": 1},
]


@pytest.mark.parametrize("schema", STRING_SCHEMAS)
def test_length_pattern_and_format_together_are_exact(schema: Any, tok: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(schema, tok)
    assert not g.report.post_checks, str(g.report)
    v = _format_validator(schema)
    rng = random.Random(json.dumps(schema))
    values = ["", "a", "ab", "abc", "abcd", "cab", "bb", "aé", "a\nb", "1.2.3.4", "10.0.0.1", "1.2.3.40"]
    values += ["2024-02-29", "2023-02-29", "2024-04-05", "2024-01-31", "192.168.0.1", "1.1.1.1"]
    values += ["".join(rng.choice("abc1.0-") for _ in range(rng.randint(0, 6))) for _ in range(150)]
    for value in values:
        ok = v.is_valid(value)
        for text in (json.dumps(value), json.dumps(value, ensure_ascii=False), _spelled(value, rng)):
            assert json.loads(text) == value
            assert accepts(g, text) == ok, (schema, text, ok)
    assert accepts(g, "12") == v.is_valid(12)  # other types are untouched


def test_long_lengths_are_counted_exactly(tok: corral.Tokenizer) -> None:
    for schema in (
        {"type": "string", "maxLength": 200},
        {"type": "string", "minLength": 100},
        {"type": "string", "pattern": "^[a-z_]+$", "maxLength": 256},
    ):
        g = corral.compile_json_schema(schema, tok)
        assert not g.report.post_checks, str(g.report)
        v = validator(schema)
        for n in (0, 99, 100, 101, 199, 200, 201, 256, 257):
            for value in ("x" * n, "x" * (n - 1) + "é" if n else "", "A" * n):
                assert accepts(g, json.dumps(value)) == v.is_valid(value), (schema, n, value[-3:])
    # Above the cap the length is checked after decoding, the pattern still enforced.
    g = corral.compile_json_schema({"type": "string", "pattern": "^a", "maxLength": 300}, tok)
    entry = next(e for e in g.report.entries if e.keyword == "minLength/maxLength")
    assert entry.status == "checked after decoding" and "256" in entry.detail
    assert accepts(g, json.dumps("a" * 301)) and not accepts(g, '"b"')


def test_length_product_over_the_state_budget_falls_back(tok: corral.Tokenizer) -> None:
    # An e-mail address (label counts) times 254 characters: too many states to count.
    g = corral.compile_json_schema({"type": "string", "format": "email", "maxLength": 254}, tok)
    st = statuses(g)
    assert st["minLength/maxLength"] == {"checked after decoding"} and st["format"] == {"enforced"}
    assert accepts(g, '"a@b.co"') and not accepts(g, '"not an email"')
    with pytest.raises(corral.UnsupportedSchemaError):
        corral.compile_json_schema({"type": "string", "format": "email", "maxLength": 254}, tok, strict=True)


def test_contradictory_pattern_and_length_leave_other_types(tok: corral.Tokenizer) -> None:
    g = corral.compile_json_schema({"pattern": "^a{5}$", "maxLength": 3}, tok)
    assert not accepts(g, '"aaaaa"') and not accepts(g, '"aaa"') and accepts(g, "3")
    with pytest.raises(corral.SchemaError) as ei:
        corral.compile_json_schema({"type": "string", "pattern": "^a{5}$", "maxLength": 3}, tok)
    assert ei.value.pointer == "#"


def test_string_near_miss_rejected_at_the_first_wrong_byte(tok: corral.Tokenizer) -> None:
    g = corral.compile_json_schema({"type": "string", "pattern": "^[a-z]+$", "maxLength": 3}, tok)
    m = g.matcher()
    for i, b in enumerate(b'"abcd"'):
        if not m.accept_token(b):
            assert i == 4, i  # the fourth letter
            return
    pytest.fail("accepted")


# -- propertyNames / patternProperties --------------------------------------------------------------

NAMES = ["a", "b", "ab", "abc", "x1", "x12", "xy", "é", "id", "", "A_b"]
VALUES = [1, "s", None, -2]


def _keyed(schema: Any, seed: int, max_keys: int = 3) -> list[dict[str, Any]]:
    """Objects of up to `max_keys` NAMES with varied values, declared names first in schema
    order (the order the grammar generates members in)."""
    rng = random.Random(seed)
    declared = list(schema.get("properties", {}))
    names = declared + [n for n in NAMES if n not in declared]
    out: list[dict[str, Any]] = []
    for r in range(max_keys + 1):
        for combo in itertools.combinations(names, r):
            out.append({k: rng.choice(VALUES) for k in combo})
    return rng.sample(out, min(len(out), 700))


OBJECT_SCHEMAS = [
    {"type": "object", "propertyNames": {"pattern": "^[a-z]+$", "maxLength": 2}},
    {"type": "object", "propertyNames": {"maxLength": 1}, "additionalProperties": {"type": "integer"}},
    {"type": "object", "properties": {"abc": {}, "a": {}}, "propertyNames": {"maxLength": 2}},
    {"type": "object", "propertyNames": {"pattern": "^x", "minLength": 2}, "maxProperties": 2},
    {"type": "object", "propertyNames": False},
    {"type": "object", "propertyNames": {"type": "number"}},
    {"type": "object", "patternProperties": {"^a": {"type": "integer"}}},
    {
        "type": "object",
        "patternProperties": {"^a": {"type": "integer"}, "b$": {"minimum": 0}},
        "additionalProperties": {"type": "string"},
    },
    {
        "type": "object",
        "patternProperties": {"^x[0-9]+$": {"type": "integer"}},
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {"ab": {"type": "number"}, "b": {"type": "string"}},
        "patternProperties": {"^a": {"type": "integer"}},
        "additionalProperties": False,
    },
    {
        "type": "object",
        "patternProperties": {"\\w": {"type": "integer"}},
        "additionalProperties": {"type": "null"},
    },
    {
        "type": "object",
        "patternProperties": {"^a": {"type": "integer"}, "1": {"type": ["integer", "string"]}},
        "propertyNames": {"maxLength": 2},
        "additionalProperties": {"type": "null"},
        "minProperties": 1,
    },
    {
        "allOf": [
            {"patternProperties": {"^a": {"type": "integer"}}},
            {"additionalProperties": {"type": "string"}},
        ]
    },
    {
        "allOf": [
            {"patternProperties": {"^a": {"type": "integer"}}},
            {"patternProperties": {"b$": {"type": "null"}}},
        ]
    },
]


@pytest.mark.parametrize("index", range(len(OBJECT_SCHEMAS)))
def test_property_names_and_pattern_properties_are_exact(index: int, tok: corral.Tokenizer) -> None:
    schema = OBJECT_SCHEMAS[index]
    g = corral.compile_json_schema(schema, tok, extra_properties="spec")
    for key in ("propertyNames", "patternProperties"):
        if key in schema:
            assert statuses(g)[key] == {"enforced"}, str(g.report)
    assert_exact(schema, [*_keyed(schema, index), [], "x"], tok)


def test_declared_names_that_fail_property_names(tok: corral.Tokenizer) -> None:
    schema = {
        "type": "object",
        "properties": {"long_name": {"type": "integer"}, "ok": {"type": "integer"}},
        "propertyNames": {"maxLength": 3},
    }
    g = corral.compile_json_schema(schema, tok)
    assert accepts(g, '{"ok": 1}') and not accepts(g, '{"long_name": 1}')
    with pytest.raises(corral.SchemaError) as ei:
        corral.compile_json_schema({**schema, "required": ["long_name"]}, tok)
    assert ei.value.pointer == "#/required" and "propertyNames" in str(ei.value)


def test_property_names_enum_makes_members_that_never_repeat(tok: corral.Tokenizer) -> None:
    schema = {"type": "object", "propertyNames": {"enum": ["a", "b", "c"]}, "additionalProperties": True}
    g = corral.compile_json_schema(schema, tok, whitespace="compact")
    assert not g.report.post_checks, str(g.report)
    assert accepts(g, '{"a":1,"c":[]}') and accepts(g, "{}")
    for text in ('{"a":1,"a":2}', '{"a":1,"d":2}', '{"c":1,"c":2}'):
        assert not accepts(g, text), text


def test_property_names_near_miss_rejected_at_the_first_wrong_byte(tok: corral.Tokenizer) -> None:
    schema = {"type": "object", "propertyNames": {"maxLength": 2}, "additionalProperties": True}
    g = corral.compile_json_schema(schema, tok, whitespace="compact")
    m = g.matcher()
    for i, b in enumerate(b'{"abc":1}'):
        if not m.accept_token(b):
            assert i == 4, i  # the third character of the key
            return
    pytest.fail("accepted")


def test_pattern_properties_fall_back_to_post_check(tok: corral.Tokenizer) -> None:
    # Five unanchored patterns with five schemas: one key can match all five at once, more than
    # max_key_patterns=4 (the key classes would be every subset).
    many = {"type": "object", "patternProperties": {c: {"multipleOf": i + 2} for i, c in enumerate("abcde")}}
    g = corral.compile_json_schema(many, tok, extra_properties="spec")
    assert statuses(g)["patternProperties"] == {"checked after decoding"}
    assert "at once" in str(g.report)
    with pytest.raises(corral.OutputValidationError):
        g.validate('{"a": 3}')
    g = corral.compile_json_schema(
        {"type": "object", "propertyNames": {"anyOf": [{"const": "a"}, {"maxLength": 0}]}}, tok
    )
    assert statuses(g)["propertyNames"] == {"checked after decoding"}


def test_pattern_properties_in_schema_mode(tok: corral.Tokenizer) -> None:
    # Keys that match a pattern are declared by the schema: generated in "schema" mode too;
    # other undeclared keys only when additionalProperties allows them.
    schema = {"type": "object", "patternProperties": {"^x_": {"type": "integer"}}}
    g = corral.compile_json_schema(schema, tok)
    assert accepts(g, '{"x_a": 1, "x_b": 2}') and not accepts(g, '{"x_a": "s"}')
    assert not accepts(g, '{"y": 1}')


# -- exclusive bounds and float parsing ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "good", "bad"),
    [
        (
            {"type": "number", "exclusiveMinimum": 0},
            ["0.5", "1", "0." + "0" * 300 + "1"],
            ["1e-400", "0", "-0"],
        ),
        ({"type": "number", "exclusiveMaximum": 0}, ["-0.5", "-3"], ["-1e-400", "-0." + "0" * 400 + "1"]),
        ({"type": "number", "exclusiveMinimum": 5}, ["5.000000000000001", "6"], ["5.0000000000000000001"]),
        ({"type": "number", "exclusiveMaximum": 0.1}, ["0.09999999999999999"], ["0.09999999999999999999"]),
        ({"exclusiveMinimum": 0, "maximum": 1}, ["1", "0.25"], ["1e-400", "0." + "0" * 330 + "1"]),
    ],
)
def test_exclusive_bounds_hold_after_float_parsing(
    schema: Any, good: list[str], bad: list[str], tok: corral.Tokenizer
) -> None:
    # Validators parse fractions and exponents into floats: 1e-400 is 0.0 and
    # 5.0000000000000000001 is 5.0, which exclusive bounds reject.
    g = corral.compile_json_schema(schema, tok)
    v = validator(schema)
    for text in good:
        assert v.is_valid(json.loads(text)) and accepts(g, text), text
    for text in bad:
        assert not v.is_valid(json.loads(text)) and not accepts(g, text), text
    rng = random.Random(0)
    for _ in range(200):  # nothing under the mask fails the validator
        out, _ = random_walk(g, rng, max_steps=30, eos_weight=0.1)
        assert v.is_valid(json.loads(out)), out


# -- random walks with a real tokenizer (new keywords) ---------------------------------------------

WALKED_KEYS = [
    {"type": "string", "pattern": "^[a-z][a-z0-9_]*$", "maxLength": 12, "minLength": 3},
    {"type": "string", "format": "date", "pattern": "^20"},
    {"type": "string", "maxLength": 100},
    {
        "type": "object",
        "properties": {"id": {"type": "integer"}},
        "propertyNames": {"pattern": "^[a-z_]+$", "maxLength": 8},
        "additionalProperties": {"type": "boolean"},
    },
    {
        "type": "object",
        "patternProperties": {"^n_": {"type": "integer"}, "^s_": {"type": "string", "maxLength": 4}},
        "additionalProperties": False,
        "minProperties": 1,
    },
    {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
]


@pytest.mark.real_tokenizer
@pytest.mark.parametrize("index", range(len(WALKED_KEYS)))
def test_random_walks_validate_new_keywords(index: int, llama32: corral.Tokenizer) -> None:
    schema = WALKED_KEYS[index]
    g = corral.compile_json_schema(schema, llama32)
    assert not g.report.post_checks, str(g.report)
    v = _format_validator(schema)
    rng = random.Random(index)
    for _ in range(8):
        out, _ = random_walk(g, rng, max_steps=40, eos_weight=0.3)
        assert v.is_valid(json.loads(out.decode())), (schema, out)
