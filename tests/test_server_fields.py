"""The request fields ``corral serve`` reads, at the protocol level (no model, no HTTP): vLLM's
constraint fields become the same ConstraintSpec as corral's own, two constraints are refused
naming both, a field that looks like a constraint but is not understood is refused by name, and
every other unknown field is listed as ignored (corral.server.fields)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from corral.server.errors import APIError
from corral.server.fields import CHAT_FIELDS, COMPLETION_FIELDS, check_fields, header_value
from corral.server.protocol import GenRequest, parse_chat, parse_completion

MODEL = "m"
CODE = {
    "type": "object",
    "properties": {"code": {"type": "integer", "minimum": 100, "maximum": 999}},
    "required": ["code"],
}
TAG = {
    "type": "structural_tag",
    "structures": [{"begin": "<f>", "schema": CODE, "end": "</f>"}],
    "triggers": ["<f>"],
}


def _chat(**kw: Any) -> GenRequest:
    return parse_chat(
        {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], **kw}, MODEL, set(), {}, 4
    )


def _completion(**kw: Any) -> GenRequest:
    return parse_completion({"model": MODEL, "prompt": "hi", **kw}, MODEL, set(), {}, 4)


PARSERS = {"chat": _chat, "completions": _completion}


def _refused(endpoint: str, **kw: Any) -> APIError:
    with pytest.raises(APIError) as e:
        PARSERS[endpoint](**kw)
    assert e.value.status == 400, e.value.body()
    return e.value


# ---------------------------------------------------------------------- vLLM's fields


VLLM_CASES: list[tuple[dict[str, Any], str, str]] = [
    ({"structured_outputs": {"json": CODE}}, "json_schema", "structured_outputs.json"),
    ({"structured_outputs": {"regex": "[0-9]{3}"}}, "regex", "structured_outputs.regex"),
    ({"structured_outputs": {"choice": ["yes", "no"]}}, "choices", "structured_outputs.choice"),
    ({"structured_outputs": {"grammar": 'root ::= "a"'}}, "grammar", "structured_outputs.grammar"),
    ({"structured_outputs": {"json_object": True}}, "json_object", "structured_outputs.json_object"),
    ({"structured_outputs": {"structural_tag": TAG}}, "structural_tag", "structured_outputs.structural_tag"),
    ({"guided_json": CODE}, "json_schema", "guided_json"),
    ({"guided_regex": "[0-9]{3}"}, "regex", "guided_regex"),
    ({"guided_choice": ["yes", "no"]}, "choices", "guided_choice"),
    ({"guided_grammar": 'root ::= "a"'}, "grammar", "guided_grammar"),
    ({"guided_json": CODE, "guided_decoding_backend": "xgrammar"}, "json_schema", "guided_json"),
]


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize(
    ("fields", "kind", "param"), VLLM_CASES, ids=[c[2] + str(i) for i, c in enumerate(VLLM_CASES)]
)
def test_vllm_fields_become_the_spec(endpoint: str, fields: dict[str, Any], kind: str, param: str) -> None:
    req = PARSERS[endpoint](**fields)
    assert req.spec is not None and req.spec.kind == kind
    assert req.spec.param == param  # compile errors name the field the client used


def test_vllm_json_is_the_same_constraint_as_response_format() -> None:
    ours = _chat(response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": CODE}}).spec
    for fields in ({"guided_json": CODE}, {"structured_outputs": {"json": CODE}}):
        spec = _chat(**fields).spec
        assert spec is not None and ours is not None and (spec.kind, spec.schema) == (ours.kind, ours.schema)
        # the same layout (response_format also records strict: false, corral's default)
        assert spec.options == {k: v for k, v in ours.options.items() if k != "strict"}
    assert _completion(guided_regex="a+").spec.key("t") == _completion(regex="a+").spec.key("t")  # type: ignore[union-attr]


def test_whitespace_options_reach_the_spec() -> None:
    spec = _chat(guided_json=CODE, guided_whitespace_pattern="").spec
    assert spec is not None and spec.options["whitespace"] == "compact"
    spec = _completion(structured_outputs={"json": CODE, "whitespace_pattern": r"[ \t\n\r]{0,3}"}).spec
    assert (
        spec is not None and spec.options["whitespace"] == "flexible" and spec.options["max_whitespace"] == 3
    )
    spec = _chat(structured_outputs={"json": CODE, "disable_any_whitespace": True}).spec
    assert spec is not None and spec.options["whitespace"] == "compact"


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"guided_whitespace_pattern": "[ ]+", "guided_json": CODE}, "guided_whitespace_pattern"),
        (
            {"structured_outputs": {"json": CODE, "whitespace_pattern": "x"}},
            "structured_outputs.whitespace_pattern",
        ),
        ({"guided_whitespace_pattern": ""}, "guided_whitespace_pattern"),  # no constraint to shape
        ({"structured_outputs": {"jsn": CODE}}, "structured_outputs.jsn"),
        ({"structured_outputs": {}}, "structured_outputs"),
        ({"structured_outputs": "json"}, "structured_outputs"),
        ({"guided_json": "{not json"}, "guided_json"),
        ({"guided_choice": []}, "guided_choice"),
        ({"structured_outputs": {"regex": 5}}, "structured_outputs.regex"),
    ],
)
def test_vllm_fields_corral_cannot_follow_are_refused_by_name(
    endpoint: str, fields: dict[str, Any], param: str
) -> None:
    assert _refused(endpoint, **fields).param == param


# ---------------------------------------------------------------------- two constraints


_RF = {"type": "json_schema", "json_schema": {"name": "c", "schema": CODE}}


@pytest.mark.parametrize(
    ("endpoint", "fields", "names"),
    [
        ("chat", {"response_format": _RF, "guided_regex": "a"}, ("response_format", "guided_regex")),
        ("chat", {"response_format": {"type": "json_object"}, "structured_outputs": {"json": CODE}},
         ("response_format", "structured_outputs.json")),
        ("chat", {"structured_outputs": {"json": CODE}, "guided_json": CODE},
         ("structured_outputs.json", "guided_json")),
        ("chat", {"structured_outputs": {"json": CODE, "regex": "a"}},
         ("structured_outputs.json", "structured_outputs.regex")),
        ("chat", {"guided_json": CODE, "guided_choice": ["a"]}, ("guided_json", "guided_choice")),
        ("chat", {"corral_constraint": "x", "guided_json": CODE}, ("corral_constraint", "guided_json")),
        ("completions", {"regex": "a", "structured_outputs": {"regex": "b"}},
         ("regex", "structured_outputs.regex")),
        ("completions", {"json_schema": CODE, "guided_json": CODE}, ("json_schema", "guided_json")),
        ("completions", {"choices": ["a"], "guided_grammar": 'root ::= "a"'}, ("choices", "guided_grammar")),
        ("completions", {"response_format": _RF, "guided_whitespace_pattern": ""},
         ("response_format", "guided_whitespace_pattern")),
    ],
)  # fmt: skip
def test_two_constraints_are_a_400_naming_both(
    endpoint: str, fields: dict[str, Any], names: tuple[str, str]
) -> None:
    err = _refused(endpoint, **fields)
    assert names[0] in err.message and names[1] in err.message, err.message
    assert err.param in names


def test_a_text_response_format_is_no_constraint() -> None:
    spec = _chat(response_format={"type": "text"}, guided_regex="a+").spec
    assert spec is not None and spec.kind == "regex"


def test_tools_auto_with_a_vllm_constraint() -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    spec = _chat(tools=[tool], tool_choice="auto", guided_json=CODE).spec
    assert spec is not None and spec.kind == "tools"  # a call, or an answer valid for the schema
    err = _refused("chat", tools=[tool], tool_choice="auto", guided_regex="a")
    assert err.param == "guided_regex"


# ---------------------------------------------------------------------- unknown fields


MISSPELT = [
    "guided_jsn",
    "guided_foo",
    "guided_options_request",
    "structured_output",
    "structuredOutputs",
    "response_fromat",
    "responseFormat",
    "json_shema",
    "json",
    "jsonschema",
    "regx",
    "grammer",
    "guided-json",
    "GUIDED_JSON",
    "corral_slot",
    "corral_whatever",
    "tool_choise",
    "functions",
    "function_call",
    "output_format",
    "constraint",
    "thinkng",
]


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("field", MISSPELT)
def test_a_field_that_looks_like_a_constraint_is_refused_by_name(endpoint: str, field: str) -> None:
    err = _refused(endpoint, **{field: {"type": "object"}})
    assert err.param == field and err.code == "unknown_parameter" and field in err.message


@pytest.mark.parametrize(
    ("endpoint", "field"),
    [
        ("chat", "regex"),
        ("chat", "grammar"),
        ("chat", "choices"),
        ("chat", "json_schema"),
        ("completions", "tools"),
        ("completions", "tool_choice"),
        ("completions", "tool_format"),
        ("completions", "parallel_tool_calls"),
    ],
)
def test_the_other_endpoints_constraint_fields_are_refused(endpoint: str, field: str) -> None:
    err = _refused(endpoint, **{field: "x"})
    assert err.param == field and "/v1/" in err.message


@pytest.mark.parametrize(
    "field", ["allowed_token_ids", "bad_words", "logits_processors", "vllm_xargs", "stop_token_ids"]
)
def test_vllm_output_restrictions_corral_does_not_implement_are_refused(field: str) -> None:
    err = _refused("chat", **{field: [1]})
    assert err.param == field and err.code == "unsupported_parameter"


HARMLESS = ["repetition_penalty", "min_p", "ignore_eos", "priority", "request_id", "echo", "documents",
            "reasoning_effort", "modalities", "cache_salt", "add_generation_prompt", "skip_special_tokens",
            "guided_decoding_backend", "x", "n_predict", "include_reasoning", "prompt"]  # fmt: skip


@pytest.mark.parametrize("field", HARMLESS)
def test_other_unknown_fields_are_served_and_listed(field: str) -> None:
    req = _chat(**{field: 1})
    assert req.ignored == [field]
    assert req.spec is None


def test_known_fields_are_not_listed() -> None:
    req = _chat(user="u", metadata={"a": "b"}, store=False, service_tier="auto", seed=1, top_k=3, timeout=5)
    assert req.ignored == []
    assert _completion(user="u", best_of=1, suffix="", echo=False).ignored == []
    assert _completion(messages=[], b=1, a=2).ignored == ["a", "b", "messages"]  # sorted


def test_the_refusal_comes_before_other_checks() -> None:
    """A misspelt constraint is named even when something else is wrong too (so the fix the
    client needs most is the one it reads)."""
    with pytest.raises(APIError) as e:
        parse_chat({"model": "other", "guided_jsn": {}}, MODEL, set(), {}, 4)
    assert e.value.param == "guided_jsn"


def test_header_value_is_ascii_bounded_and_comma_separated() -> None:
    assert header_value(["a", "b"]) == "a, b"
    value = header_value(["é", "x,y", "line\nbreak", "k" * 500])
    assert value.isascii() and "\n" not in value and value.count(",") == 3
    assert "%C3%A9" in value and len(value) < 300
    many = header_value([f"f{i}" for i in range(1000)])
    assert many.endswith("(968 more)") and len(many) < 400


def test_check_fields_is_the_endpoints_known_set() -> None:
    assert check_fields({"messages": [], "prompt": "x"}, "chat") == ["prompt"]
    assert check_fields({"messages": [], "prompt": "x"}, "completions") == ["messages"]


def test_every_field_the_server_reads_is_known() -> None:
    """A field the server reads but the known sets miss would be reported as ignored while it
    works: scan the modules that read bodies for the names they read."""
    src = Path(__file__).resolve().parents[1] / "src" / "corral" / "server"
    read: set[str] = set()
    for name in ("protocol.py", "logprobs.py", "deadlines.py"):
        text = (src / name).read_text()
        read |= set(re.findall(r'body(?:\.get\(|\[)"(\w+)"', text))
        read |= set(re.findall(r'(?:_number|_int)\(body, "(\w+)"', text))
        read |= set(re.findall(r'"(\w+)" in body\b', text))
    assert {"messages", "prompt", "top_k", "timeout", "corral_trace"} <= read  # the scan works
    assert read <= CHAT_FIELDS | COMPLETION_FIELDS, sorted(read - CHAT_FIELDS - COMPLETION_FIELDS)
