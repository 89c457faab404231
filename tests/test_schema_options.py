"""SchemaOptions budgets and the conversion time limit: defaults, validation, and the documented
effect of each budget (a keyword moves from "enforced" to "checked after decoding", or the
conversion stops with LimitExceeded naming where it was)."""

from __future__ import annotations

import dataclasses
import pickle
import re
from typing import Any

import pytest
from helpers import byte_tokenizer

import corral
from corral.errors import LimitExceeded
from corral.grammar.json_schema import SchemaOptions, SchemaReport, schema_to_grammar

DEFAULT_BUDGETS = {
    "max_product_states": 6000,
    "max_product_states_total": 60000,
    "max_counted_length": 256,
    "max_key_patterns": 4,
    "max_named_keys": 16,
    "max_machine_states": 5000,
    "max_unique_items": 256,
    "pretty_max_depth": 32,
    "max_schema_depth": 128,
    "max_convert_ms": 5000,
}


def statuses(report: SchemaReport) -> dict[tuple[str, str], str]:
    return {(e.pointer, e.keyword): e.status for e in report.entries}


def convert(schema: Any, **options: Any) -> tuple[str, SchemaReport]:
    return schema_to_grammar(schema, SchemaOptions(**options))


def test_budget_defaults_and_names() -> None:
    opts = SchemaOptions()
    assert {name: getattr(opts, name) for name in DEFAULT_BUDGETS} == DEFAULT_BUDGETS
    assert set(SchemaOptions.budget_names()) == set(DEFAULT_BUDGETS)
    # Every budget is documented in the class docstring.
    for name in DEFAULT_BUDGETS:
        assert f"{name} : int" in (SchemaOptions.__doc__ or ""), name


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("max_product_states", 0),
        ("max_product_states", "6000"),
        ("max_product_states_total", -1),
        ("max_counted_length", -1),
        ("max_counted_length", 2.5),
        ("max_key_patterns", 13),
        ("max_key_patterns", True),
        ("max_named_keys", -3),
        ("max_machine_states", 0),
        ("max_unique_items", -1),
        ("max_unique_items", 4097),
        ("pretty_max_depth", 5000),
        ("max_schema_depth", 0),
        ("max_schema_depth", 513),
        ("max_convert_ms", 0),
        ("max_convert_ms", 1.5),
        ("max_convert_ms", False),
    ],
)
def test_bad_budget_is_a_clear_error(name: str, bad: Any) -> None:
    with pytest.raises(ValueError, match=rf"^{name} must be"):
        SchemaOptions(**{name: bad})


def test_no_time_limit_is_allowed() -> None:
    assert SchemaOptions(max_convert_ms=None).max_convert_ms is None
    text, _ = convert({"type": "integer"}, max_convert_ms=None)
    assert text.startswith("root ::= ")


def test_defaults_give_the_same_grammar_as_explicit_defaults() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 40}},
        "patternProperties": {"^x-": {"type": "integer", "multipleOf": 7, "minimum": 0, "maximum": 1000}},
        "minProperties": 1,
    }
    assert convert(schema) == convert(schema, **DEFAULT_BUDGETS)


def test_product_state_budget_moves_the_length_to_post_check() -> None:
    schema = {"type": "string", "pattern": "^[a-z]+$", "maxLength": 40}
    _, report = convert(schema)
    assert statuses(report).get(("#/maxLength", "minLength/maxLength")) is None
    assert not report.post_checks
    text, report = convert(schema, max_product_states=5)
    assert statuses(report)[("#/maxLength", "minLength/maxLength")] == "checked after decoding"
    assert "&" not in text  # no product automaton written
    with pytest.raises(corral.UnsupportedSchemaError, match="minLength/maxLength"):
        convert(schema, max_product_states=5, strict=True)


def test_product_total_budget_is_for_the_whole_schema() -> None:
    string = {"type": "string", "pattern": "^[a-z]+$", "maxLength": 40}
    schema = {"type": "array", "prefixItems": [string, {**string, "maxLength": 41}], "items": False}
    _, report = convert(schema)
    assert not report.post_checks
    # Each product is about 290 states: one fits under a total of 400, the two together do not,
    # so the second string's length is checked after decoding.
    _, one = convert(string, max_product_states_total=400)
    assert not one.post_checks
    _, report = convert(schema, max_product_states_total=400)
    checked = [e.pointer for e in report.checked_after()]
    assert checked == ["#/prefixItems/1/maxLength"], str(report)


def test_counted_length_budget() -> None:
    schema = {"type": "string", "maxLength": 10}
    text, report = convert(schema)
    assert not report.post_checks and "{0,10}" in text
    text, report = convert(schema, max_counted_length=8)
    assert statuses(report)[("#/maxLength", "minLength/maxLength")] == "checked after decoding"
    assert "bounds above 8 characters" in str(report)
    assert "{0,10}" not in text


def test_key_pattern_budget() -> None:
    schema = {
        "type": "object",
        "patternProperties": {"^a": {"type": "integer"}, "b$": {"minimum": 0}},
        "additionalProperties": False,
    }
    _, report = convert(schema)
    assert statuses(report)[("#/patternProperties", "patternProperties")] == "enforced"
    _, report = convert(schema, max_key_patterns=1)
    assert statuses(report)[("#/patternProperties", "patternProperties")] == "checked after decoding"
    assert "more than 1 patterns" in str(report)


def test_named_keys_budget() -> None:
    schema = {"type": "object", "propertyNames": {"enum": ["a", "b", "c"]}, "additionalProperties": True}
    # Within the budget the names are declared members: each key at most once, in order.
    text, _ = convert(schema)
    tok = byte_tokenizer()
    g = corral.compile_grammar(text, tok)
    assert g.matcher().accept_string('{"a":1,"b":2}')
    repeated = g.matcher()
    assert not (repeated.accept_string('{"a":1,"a":2}') and repeated.is_accepting())
    # Over it the names are one class of extra keys, which may repeat.
    text, _ = convert(schema, max_named_keys=2)
    m = corral.compile_grammar(text, tok).matcher()
    assert m.accept_string('{"a":1,"a":2}') and m.is_accepting()


def test_machine_state_budget() -> None:
    schema = {"type": "integer", "multipleOf": 7, "minimum": -1000, "maximum": 1000}
    _, report = convert(schema)
    assert statuses(report)[("#/multipleOf", "multipleOf")] == "enforced"
    _, report = convert(schema, max_machine_states=2)
    assert statuses(report)[("#/multipleOf", "multipleOf")] == "checked after decoding"
    counted = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(6)}}
    _, report = convert({**counted, "minProperties": 2, "maxProperties": 4})
    assert statuses(report)[("#/minProperties", "minProperties")] == "enforced"
    _, report = convert({**counted, "minProperties": 2, "maxProperties": 4}, max_machine_states=3)
    assert statuses(report)[("#/minProperties", "minProperties")] == "checked after decoding"


def test_pretty_depth_budget() -> None:
    schema = {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}
    exact, _ = convert(schema, whitespace="pretty")
    assert "ws-deep" in exact.split("\n", 3)[2]  # the rule is always defined in pretty mode
    body = exact.split("\n", 3)[3]
    assert "ws-deep" not in body
    shallow, _ = convert(schema, whitespace="pretty", pretty_max_depth=1)
    assert "ws-deep" in shallow.split("\n", 3)[3]
    tok = byte_tokenizer()
    loose = "[\n  [1,   2]\n]"
    assert not corral.compile_grammar(exact, tok).matcher().accept_string(loose)
    m = corral.compile_grammar(shallow, tok).matcher()
    assert m.accept_string(loose) and m.is_accepting()


def wide_schema(n: int) -> dict[str, Any]:
    """n object properties, each with its own nested array of objects (no two share a rule body
    until they are built), so conversion visits ~4n subschemas."""
    return {
        "type": "object",
        "properties": {
            f"p{i}": {
                "type": "array",
                "items": {"type": "object", "properties": {f"q{i}": {"type": "integer", "minimum": i}}},
            }
            for i in range(n)
        },
    }


def test_time_limit_raises_limit_exceeded_naming_the_pointer() -> None:
    text, _ = convert(wide_schema(500), max_convert_ms=None)  # it converts without a limit
    assert "q499" in text
    # ~0.5 s to convert, ten times the limit however warm the converter's memos are (the range
    # regexes of its minimums, say, from an earlier conversion).
    schema = wide_schema(3000)
    with pytest.raises(LimitExceeded) as info:
        convert(schema, max_convert_ms=50)  # past the depth check of the document (~10 ms)
    e = info.value
    assert e.limit == "max_convert_ms" and e.limit_value == 50 and e.given >= 50
    assert "max_convert_ms=50 ms" in e.message
    where = re.search(r"it was at (#\S*)", e.message)
    assert where is not None, e.message
    assert where.group(1).startswith("#/properties/p"), e.message
    # The error round-trips (it may cross a process boundary in the server).
    again = pickle.loads(pickle.dumps(e))
    assert (again.limit, again.given, again.limit_value, again.message) == (
        e.limit,
        e.given,
        e.limit_value,
        e.message,
    )


def test_time_limit_counts_allof_merges() -> None:
    # A long allOf is merged part by part without building rules (quadratic here: each merge
    # copies the properties so far): the limit still applies there, part by part.
    parts = [{"properties": {f"k{i}": {"type": "integer"}}} for i in range(1500)]
    schema = {"type": "object", "properties": {"x": {"allOf": parts}}}
    with pytest.raises(LimitExceeded, match=r"it was at #/properties/x/allOf/\d+$"):
        convert(schema, max_convert_ms=300)  # (~2 s in all; the document's depth check ~20 ms)


def test_default_time_limit_does_not_trip_on_a_normal_schema() -> None:
    text, _ = convert(wide_schema(50))
    assert "p49" in text
    assert dataclasses.replace(SchemaOptions(), max_convert_ms=10).max_convert_ms == 10


def test_compile_json_schema_takes_budgets_and_limits_by_name() -> None:
    import corral

    tok = corral.Tokenizer.from_tokens(
        [bytes([b]) for b in range(256)] + [b"<eos>"], special_ids=[256], eos_ids=[256]
    )
    schema = {"type": "string", "pattern": "^[a-z]+$", "maxLength": 40}
    g = corral.compile_json_schema(schema, tok, max_counted_length=8, max_dfa_states=5000)
    assert [e.keyword for e in g.report.checked_after()] == ["minLength/maxLength"]
    with pytest.raises(TypeError, match="unknown limit"):
        corral.compile_json_schema(schema, tok, max_nonsense=3)
