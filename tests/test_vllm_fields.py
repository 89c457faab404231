"""vLLM's constraint fields translated into corral's arguments (corral.compile.vllm_fields): every
field kind, the whitespace_pattern mapping and its refusals, unknown keys, two constraints. No
vLLM needed: the translation is plain data in, plain data out (and a ConstraintSpec from it)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from corral.compile import ConstraintSpec, spec_from_args
from corral.compile.vllm_fields import (
    GUIDED_FIELDS,
    VLLMFieldError,
    constraint_args,
    guided_fields,
    whitespace_option,
)

CODE = {
    "type": "object",
    "properties": {"code": {"type": "integer", "minimum": 100, "maximum": 999}},
    "required": ["code"],
}
TAG = {
    "type": "structural_tag",
    "structures": [{"begin": "<f>", "schema": {"type": "object"}, "end": "</f>"}],
    "triggers": ["<f>"],
}


def _spec(fields: dict[str, Any], **kw: Any) -> ConstraintSpec:
    args = constraint_args(fields, **kw)
    assert args is not None
    spec = spec_from_args(args)
    assert spec is not None
    return spec


# ---------------------------------------------------------------------- every kind


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ({"json": CODE}, "json_schema"),
        ({"json": json.dumps(CODE)}, "json_schema"),  # vLLM accepts the schema as JSON text
        ({"regex": "[0-9]{3}"}, "regex"),
        ({"choice": ["yes", "no"]}, "choices"),
        ({"grammar": 'root ::= "a" | "b"'}, "grammar"),
        ({"json_object": True}, "json_object"),
        ({"structural_tag": TAG}, "structural_tag"),
        ({"structural_tag": json.dumps(TAG)}, "structural_tag"),
    ],
)
def test_every_field_kind_becomes_its_spec(fields: dict[str, Any], kind: str) -> None:
    assert _spec(fields).kind == kind


def test_values_reach_the_spec_unchanged() -> None:
    assert _spec({"json": json.dumps(CODE)}).schema == CODE
    assert _spec({"regex": "[0-9]{3}"}).payload == "[0-9]{3}"
    assert _spec({"choice": ["yes", "no"]}).payload == ("yes", "no")
    assert _spec({"choice": '["a", "b"]'}).payload == ("a", "b")  # a list as JSON text
    assert _spec({"choice": "only"}).payload == ("only",)


def test_no_constraint_is_none_and_false_values_do_not_count() -> None:
    assert constraint_args({}) is None
    assert constraint_args({"json": None, "json_object": False, "_backend": "xgrammar"}) is None
    assert constraint_args({"json_object": False, "regex": "a"}) == {"regex": "a"}


def test_guided_fields_are_renamed_and_none_left_out() -> None:
    body = {"guided_json": CODE, "guided_regex": None, "guided_whitespace_pattern": "", "model": "m"}
    assert guided_fields(body) == {"json": CODE, "whitespace_pattern": ""}
    assert set(GUIDED_FIELDS.values()) <= {
        "json", "regex", "choice", "grammar", "json_object", "structural_tag", "whitespace_pattern"
    }  # fmt: skip


# ---------------------------------------------------------------------- options


def test_json_options_map_onto_schema_options() -> None:
    args = constraint_args(
        {"json": CODE, "disable_any_whitespace": True, "disable_additional_properties": True}
    )
    assert args is not None and args["schema_options"] == {
        "whitespace": "compact",
        "extra_properties": "schema",
    }
    spec = spec_from_args(args)
    assert spec is not None and spec.options["whitespace"] == "compact"


@pytest.mark.parametrize(
    ("pattern", "options"),
    [
        ("", {"whitespace": "compact"}),
        ("()", {"whitespace": "compact"}),
        ("[ \t\n\r]{0}", {"whitespace": "compact"}),
        ("[ \t\n\r]{0,0}", {"whitespace": "compact"}),
        (r"[ \t\n\r]*", {"whitespace": "flexible"}),
        ("[ \t\n\r]*", {"whitespace": "flexible"}),  # the characters themselves
        (r"[\n\t\r ]{0,4}", {"whitespace": "flexible", "max_whitespace": 4}),
        (r"[\s]{0,2}", {"whitespace": "flexible", "max_whitespace": 2}),
        (r"\s*", {"whitespace": "flexible"}),  # \s holds more than JSON's four: wider is fine
        (r"\s?", {"whitespace": "flexible", "max_whitespace": 1}),
        (r"[ \t\n\r]{0,}", {"whitespace": "flexible"}),
        (r"[ \t\n\r]{,3}", {"whitespace": "flexible", "max_whitespace": 3}),
        (r"\s{0,9999}", {"whitespace": "flexible", "max_whitespace": 256}),  # corral's cap
        # A narrower class: corral cannot limit runs to some characters, so it writes none,
        # which the pattern allows (zero repetitions).
        ("[ ]*", {"whitespace": "compact"}),
        (" *", {"whitespace": "compact"}),
        (r"[\n ]{0,20}", {"whitespace": "compact"}),
        ("[ ]?", {"whitespace": "compact"}),  # outlines' default
    ],
)
def test_whitespace_pattern_mapping(pattern: str, options: dict[str, Any]) -> None:
    assert whitespace_option(pattern) == options


def _ws_matches(pattern: str, options: dict[str, Any]) -> bool:
    """Whether every whitespace run corral allows under ``options`` matches ``pattern``."""
    if options["whitespace"] == "compact":
        return re.fullmatch(pattern, "") is not None
    n = options.get("max_whitespace", 16)
    return all(re.fullmatch(pattern, c * k) for c in " \t\n\r" for k in range(n + 1))


@pytest.mark.parametrize(
    "pattern", ["", "[ ]*", r"[ \t\n\r]*", r"[\n\t\r ]{0,4}", r"\s?", "[ ]?", r"\s{0,3}"]
)
def test_what_corral_allows_matches_the_pattern(pattern: str) -> None:
    assert _ws_matches(pattern, whitespace_option(pattern))


@pytest.mark.parametrize(
    "pattern",
    [
        r"[ \t\n\r]+",  # requires whitespace
        r"\s{1,3}",
        r"\s{2}",
        r"[ ,]*",  # allows a comma: not whitespace
        r"\n\s*",  # a structure, not a class
        "x*",
        r"[\f ]*",
    ],
)
def test_whitespace_pattern_corral_cannot_follow_is_refused(pattern: str) -> None:
    with pytest.raises(VLLMFieldError) as e:
        whitespace_option(pattern, "guided_whitespace_pattern")
    assert e.value.field == "guided_whitespace_pattern"
    assert pattern in str(e.value) or repr(pattern) in str(e.value)


def test_whitespace_pattern_must_be_a_string() -> None:
    with pytest.raises(VLLMFieldError, match="must be a string"):
        whitespace_option(3)
    assert whitespace_option(None) == {}


def test_whitespace_pattern_on_a_json_constraint() -> None:
    args = constraint_args({"json": CODE, "whitespace_pattern": r"[ \t\n\r]{0,2}"})
    assert args is not None and args["schema_options"] == {"whitespace": "flexible", "max_whitespace": 2}
    # disable_any_whitespace and a pattern that allows none agree; one that allows some does not
    args = constraint_args({"json": CODE, "disable_any_whitespace": True, "whitespace_pattern": ""})
    assert args is not None and args["schema_options"] == {"whitespace": "compact"}
    with pytest.raises(VLLMFieldError, match="disagree") as e:
        constraint_args({"json": CODE, "disable_any_whitespace": True, "whitespace_pattern": r"\s*"})
    assert e.value.field == "structured_outputs.whitespace_pattern"


@pytest.mark.parametrize("kind", [{"regex": "a+"}, {"choice": ["a"]}, {"grammar": 'root ::= "a"'}])
def test_json_options_on_a_non_json_constraint_are_refused(kind: dict[str, Any]) -> None:
    with pytest.raises(VLLMFieldError, match="do not apply") as e:
        constraint_args({**kind, "whitespace_pattern": ""})
    assert e.value.field == "structured_outputs.whitespace_pattern"


def test_options_without_a_constraint_are_refused() -> None:
    with pytest.raises(VLLMFieldError, match="without a constraint") as e:
        constraint_args({"disable_any_whitespace": True})
    assert e.value.field == "structured_outputs.disable_any_whitespace"
    with pytest.raises(VLLMFieldError) as e:
        constraint_args({"whitespace_pattern": ""}, names={"whitespace_pattern": "guided_whitespace_pattern"})
    assert e.value.field == "guided_whitespace_pattern"


def test_option_flags_must_be_booleans() -> None:
    with pytest.raises(VLLMFieldError, match="boolean") as e:
        constraint_args({"json": CODE, "disable_any_whitespace": "false"})
    assert e.value.field == "structured_outputs.disable_any_whitespace"


# ---------------------------------------------------------------------- refusals


def test_unknown_keys_are_refused_by_name() -> None:
    with pytest.raises(VLLMFieldError, match="unknown field") as e:
        constraint_args({"jsn": CODE})
    assert e.value.field == "structured_outputs.jsn"
    with pytest.raises(VLLMFieldError) as e:
        constraint_args({"json": CODE, "whitespace": "compact"}, where="so")
    assert e.value.field == "so.whitespace"
    # engine choices are not constraints: accepted
    assert constraint_args({"json": CODE, "_backend": "xgrammar", "_backend_was_auto": True}) == {
        "json_schema": CODE
    }


def test_two_constraints_are_refused_naming_both() -> None:
    with pytest.raises(VLLMFieldError) as e:
        constraint_args({"json": CODE, "regex": "a"})
    assert "structured_outputs.json" in str(e.value) and "structured_outputs.regex" in str(e.value)
    assert e.value.field == "structured_outputs.regex"
    names = {"json": "guided_json", "choice": "guided_choice"}
    with pytest.raises(VLLMFieldError) as e:
        constraint_args({"json": CODE, "choice": ["a"]}, names=names)
    assert "guided_json" in str(e.value) and "guided_choice" in str(e.value)
    assert e.value.field == "guided_choice"


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"json": "{not json"}, "structured_outputs.json", "not valid JSON"),
        ({"structural_tag": "<tag>"}, "structured_outputs.structural_tag", "not valid JSON"),
        ({"choice": "[1,"}, "structured_outputs.choice", "not valid JSON"),
        ({"json_object": "yes"}, "structured_outputs.json_object", "must be true"),
        ({"json": "[" * 2000 + "]" * 2000}, "structured_outputs.json", "depth"),
    ],
)
def test_bad_values_are_refused_by_name(fields: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(VLLMFieldError, match=message) as e:
        constraint_args(fields)
    assert e.value.field == field


def test_bad_values_spec_from_args_refuses() -> None:
    """What constraint_args passes on unchecked (a regex's syntax, a schema's meaning) fails when
    the spec is built or compiled, as for every other host."""
    args = constraint_args({"regex": 7})
    assert args == {"regex": 7}
    with pytest.raises(TypeError):
        spec_from_args(args)
