"""vLLM's request fields in ``corral serve``, end to end: each field kind constrains what the real
model writes (SmolLM2, llama.cpp, greedy) on both endpoints, or is refused by name; two
constraints are a 400 naming both; a misspelt constraint field is a 400 naming it; any other
unknown field is served and reported (``x-corral-ignored-fields``, streamed replies too, and a
log line). The protocol-level cases (every refusal rule) are in tests/test_server_fields.py.

In-process (Starlette's TestClient): the model loads once for the module."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest

from corral import models

pytestmark = [pytest.mark.real_tokenizer, pytest.mark.slow]

pytest.importorskip("starlette.testclient")  # needs httpx or its successor httpx2
pytest.importorskip("llama_cpp")

from starlette.testclient import TestClient  # noqa: E402

MODEL = "SmolLM2-135M-Instruct"
CODE = {
    "type": "object",
    "properties": {"code": {"type": "integer", "minimum": 100, "maximum": 999}},
    "required": ["code"],
    "additionalProperties": False,
}
GBNF = 'root ::= "The answer is " [0-9] [0-9]? "."'
HEADER = "x-corral-ignored-fields"


@pytest.fixture(scope="module")
def http() -> Iterator[TestClient]:
    import corral
    from corral.server import ServerConfig, create_server

    try:
        path = models.smollm2_gguf_path()
    except models.ModelNotFoundError as e:  # pragma: no cover - CI installs it
        pytest.skip(str(e))
    backend = corral.load_model(path, backend="llama.cpp", threads=1, verbose=False)
    srv: Any = create_server(backend, ServerConfig(model_name=MODEL))
    with TestClient(srv.app) as client:
        yield client


def _body(endpoint: str, **kw: Any) -> dict[str, Any]:
    kw.setdefault("max_tokens", 24)
    kw.setdefault("temperature", 0)
    if endpoint == "chat":
        return {
            "model": MODEL,
            "messages": [{"role": "user", "content": "Give me an HTTP status code."}],
            **kw,
        }
    return {"model": MODEL, "prompt": "An HTTP status code: ", **kw}


def _post(http: TestClient, endpoint: str, **kw: Any) -> Any:
    path = "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"
    return http.post(path, json=_body(endpoint, **kw))


def _text(reply: Any, endpoint: str) -> str:
    assert reply.status_code == 200, reply.text
    choice = reply.json()["choices"][0]
    return str(choice["message"]["content"] if endpoint == "chat" else choice["text"])


def _code_ok(text: str) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and set(value) == {"code"} and 100 <= value["code"] <= 999


ENDPOINTS = ["chat", "completions"]

# (fields, check of the output text): every vLLM field kind, in both spellings.
OBEYED: list[tuple[str, dict[str, Any], Any]] = [
    ("guided_json", {"guided_json": CODE}, _code_ok),
    ("guided_json as text", {"guided_json": json.dumps(CODE)}, _code_ok),
    ("structured_outputs.json", {"structured_outputs": {"json": CODE}}, _code_ok),
    ("guided_regex", {"guided_regex": "[1-5][0-9]{2}"}, lambda t: re.fullmatch("[1-5][0-9]{2}", t)),
    ("structured_outputs.regex", {"structured_outputs": {"regex": "(yes|no)!"}},
     lambda t: t in ("yes!", "no!")),
    ("guided_choice", {"guided_choice": ["200 OK", "404 Not Found"]},
     lambda t: t in ("200 OK", "404 Not Found")),
    ("structured_outputs.choice", {"structured_outputs": {"choice": ["red", "blue"]}},
     lambda t: t in ("red", "blue")),
    ("guided_grammar", {"guided_grammar": GBNF}, lambda t: re.fullmatch(r"The answer is [0-9][0-9]?\.", t)),
    ("structured_outputs.grammar", {"structured_outputs": {"grammar": GBNF}},
     lambda t: re.fullmatch(r"The answer is [0-9][0-9]?\.", t)),
    ("structured_outputs.json_object", {"structured_outputs": {"json_object": True}, "max_tokens": 60},
     lambda t: isinstance(json.loads(t), dict)),
    ("guided_whitespace_pattern", {"guided_json": CODE, "guided_whitespace_pattern": ""},
     lambda t: _code_ok(t) and not re.search(r"\s", t)),
    ("disable_any_whitespace", {"structured_outputs": {"json": CODE, "disable_any_whitespace": True}},
     lambda t: _code_ok(t) and not re.search(r"\s", t)),
    ("guided_decoding_backend", {"guided_json": CODE, "guided_decoding_backend": "xgrammar"}, _code_ok),
]  # fmt: skip


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize(("name", "fields", "check"), OBEYED, ids=[c[0] for c in OBEYED])
def test_each_vllm_field_constrains_the_output(
    http: TestClient, endpoint: str, name: str, fields: dict[str, Any], check: Any
) -> None:
    text = _text(_post(http, endpoint, **fields), endpoint)
    assert check(text), text


def test_the_schema_is_obeyed_where_the_unconstrained_model_does_not(http: TestClient) -> None:
    """The issue's case: without the field the model chats; with it, the output is the schema's."""
    free = _text(_post(http, "chat"), "chat")
    assert not _code_ok(free), free
    assert _code_ok(_text(_post(http, "chat", guided_json=CODE), "chat"))


def test_structural_tag_constrains_the_tagged_segment(http: TestClient) -> None:
    tag = {
        "type": "structural_tag",
        "structures": [{"begin": "<code>", "schema": CODE, "end": "</code>"}],
        "triggers": ["<code>"],
    }
    prompt = 'Answer with <code>{"code": 404}</code> style tags. The status for not found is <code>'
    body = {"model": MODEL, "prompt": prompt, "max_tokens": 40, "temperature": 0,
            "structured_outputs": {"structural_tag": json.dumps(tag)}}  # fmt: skip
    r = http.post("/v1/completions", json=body)
    text = _text(r, "completions")
    for segment in re.findall(r"<code>(.*?)</code>", text, re.S):
        assert _code_ok(segment), text


def test_streamed_reply_obeys_and_carries_the_ignored_header(http: TestClient) -> None:
    body = _body("chat", guided_json=CODE, stream=True, repetition_penalty=1.1)
    with http.stream("POST", "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200
        assert r.headers[HEADER] == "repetition_penalty"
        events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    text = "".join(
        json.loads(e)["choices"][0]["delta"].get("content") or ""
        for e in events[:-1]
        if json.loads(e)["choices"]
    )
    assert _code_ok(text), text


# ---------------------------------------------------------------------- refusals


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize(
    "field", ["guided_jsn", "structured_output", "guided_foo", "response_fromat", "json_shema", "guided-json"]
)
def test_a_misspelt_constraint_field_is_a_400_naming_it(http: TestClient, endpoint: str, field: str) -> None:
    r = _post(http, endpoint, **{field: CODE})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == field and field in err["message"] and err["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    ("endpoint", "fields", "names"),
    [
        ("chat", {"response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": CODE}},
                  "guided_regex": "a"}, ("response_format", "guided_regex")),
        ("chat", {"structured_outputs": {"json": CODE}, "guided_json": CODE},
         ("structured_outputs.json", "guided_json")),
        ("completions", {"regex": "[0-9]+", "structured_outputs": {"regex": "a"}},
         ("regex", "structured_outputs.regex")),
        ("completions", {"guided_json": CODE, "guided_regex": "a"}, ("guided_json", "guided_regex")),
    ],
)  # fmt: skip
def test_two_constraints_are_a_400_naming_both(
    http: TestClient, endpoint: str, fields: dict[str, Any], names: tuple[str, str]
) -> None:
    r = _post(http, endpoint, **fields)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert names[0] in err["message"] and names[1] in err["message"] and err["param"] in names


@pytest.mark.parametrize(
    ("fields", "param", "code"),
    [
        (
            {"guided_json": CODE, "guided_whitespace_pattern": "[ ]+"},
            "guided_whitespace_pattern",
            "invalid_request",
        ),
        (
            {"structured_outputs": {"json": CODE, "whitespace": ""}},
            "structured_outputs.whitespace",
            "invalid_request",
        ),
        ({"guided_json": {"type": "integer", "minimum": 5, "maximum": 1}}, "guided_json", "invalid_schema"),
        ({"structured_outputs": {"regex": "(unclosed"}}, "structured_outputs.regex", "invalid_constraint"),
        ({"guided_grammar": "root ::= missing"}, "guided_grammar", "invalid_constraint"),
        ({"allowed_token_ids": [1, 2]}, "allowed_token_ids", "unsupported_parameter"),
    ],
)
def test_a_vllm_field_corral_cannot_follow_is_a_400_naming_it(
    http: TestClient, fields: dict[str, Any], param: str, code: str
) -> None:
    r = _post(http, "chat", **fields)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and err["code"] == code, err


# ---------------------------------------------------------------------- ignored fields


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_ignored_fields_are_reported_in_a_header_and_the_log(
    http: TestClient, endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="corral.server"):
        r = _post(http, endpoint, max_tokens=3, min_p=0.1, repetition_penalty=1.2, user="u", metadata={})
    assert r.status_code == 200, r.text
    assert r.headers[HEADER] == "min_p, repetition_penalty"  # user, metadata: known, change nothing
    rid = r.headers["x-request-id"]
    lines = [
        getattr(rec, "fields", {})
        for rec in caplog.records
        if getattr(rec, "fields", {}).get("event") == "ignored_fields"
        and getattr(rec, "fields", {}).get("request_id") == rid
    ]
    assert lines and lines[0]["fields"] == ["min_p", "repetition_penalty"], lines


def test_scored_choices_carry_the_header_too(http: TestClient) -> None:
    """Greedy choices are answered whole (scored, not decoded): another path, the same header."""
    r = _post(http, "completions", guided_choice=["red", "blue"], min_p=0.1)
    assert _text(r, "completions") in ("red", "blue")
    assert r.headers[HEADER] == "min_p"


def test_no_header_when_every_field_is_known(http: TestClient) -> None:
    r = _post(http, "chat", max_tokens=3, user="u", store=False, seed=1)
    assert r.status_code == 200 and HEADER not in r.headers
