"""Constraint-quality metrics on ``/metrics`` of a real ``corral serve`` process (SmolLM2 under
transformers), read with ``prometheus_client``'s text parser: each counter is moved by a request
that causes it, by exactly what that request did, and the label sets stay bounded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from server_helpers import Server, serve_bundled

from corral.telemetry.quality import DEFS, DISK_EVENTS, KEYWORDS, REFUSAL_CODES

pytestmark = [pytest.mark.real_tokenizer, pytest.mark.slow]

parser = pytest.importorskip("prometheus_client.parser")
pytest.importorskip("openai")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("transformers")

MODEL = "SmolLM2-135M-Instruct"
VOCAB_WIDTH = 49152  # SmolLM2's vocabulary: the mask's width
WORD = {"type": "object", "properties": {"word": {"type": "string", "maxLength": 12}}, "required": ["word"]}
STORY = {"type": "object", "properties": {"story": {"type": "string"}}, "required": ["story"]}
# Every output violates these: two numbers equal to 1.5 are never unique (numbers with a decimal
# multipleOf stay checked after decoding; numbers between bounds, strings with finitely many
# values, or a finite item set such as one integer, are enforced in the mask, so the same array
# of them would be refused at compile time as one no value satisfies); every integer "a" is a
# multiple of 0.5, which "not" forbids (the complement of a decimal step is one the grammar
# cannot write, so it is checked after decoding; that of an integer step is enforced, and would
# make this schema one no value satisfies, refused at compile time).
NOT_UNIQUE = {
    "type": "array",
    "items": {"type": "number", "minimum": 1.5, "maximum": 1.5, "multipleOf": 0.5},
    "minItems": 2,
    "maxItems": 2,
    "uniqueItems": True,
}
FORBIDDEN = {
    "type": "object",
    "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}},
    "required": ["a"],
    "additionalProperties": False,
    "not": {"properties": {"a": {"multipleOf": 0.5}}},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve_bundled(tmp_path_factory, "quality", "--backend", "transformers")


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _scrape(server: Server) -> Samples:
    out: Samples = {}
    for family in parser.text_string_to_metric_families(server.metrics()):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def _get(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def _delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return _get(after, name, **labels) - _get(before, name, **labels)


def _post(server: Server, schema: Any = None, **kw: Any) -> tuple[int, dict[str, Any]]:
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": kw.pop("content", "Name one fruit.")}],
        "max_tokens": 40,
        "temperature": 0,
        **kw,
    }
    if schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}
    r = server.http.post("/v1/chat/completions", json=body)
    return r.status_code, r.json()


def test_every_quality_metric_is_exposed_and_parses(server: Server) -> None:
    families = {f.name: f for f in parser.text_string_to_metric_families(server.metrics())}
    for d in DEFS:
        name = d.name.removesuffix("_total") if d.kind == "counter" else d.name
        assert name in families, d.name
        assert families[name].type == d.kind


def test_compile_waits_are_counted_per_request_by_hit_or_miss(server: Server) -> None:
    before = _scrape(server)
    assert _post(server, WORD)[0] == 200
    mid = _scrape(server)
    assert _post(server, WORD)[0] == 200
    after = _scrape(server)
    assert _delta(before, mid, "corral_compile_wait_seconds_count", cache="miss") == 1
    assert _delta(before, mid, "corral_compile_wait_seconds_count", cache="hit") == 0
    assert _delta(mid, after, "corral_compile_wait_seconds_count", cache="hit") == 1
    assert _delta(mid, after, "corral_compile_wait_seconds_count", cache="miss") == 0
    assert _delta(before, mid, "corral_compile_wait_seconds_sum", cache="miss") > 0
    # An unconstrained request waits on nothing.
    assert _post(server)[0] == 200
    assert _delta(after, _scrape(server), "corral_compile_wait_seconds_count", cache="hit") == 0


def test_forced_tokens_and_their_share(server: Server) -> None:
    before = _scrape(server)
    code, reply = _post(server, WORD)
    assert code == 200
    after = _scrape(server)
    tokens = reply["usage"]["completion_tokens"]
    assert _delta(before, after, "corral_constrained_tokens_total") == tokens
    forced = _delta(before, after, "corral_forced_tokens_total")
    # {"word": "..."} in the pretty layout: the keys and punctuation are forced, the word is not.
    assert 0 < forced < tokens
    assert forced == _delta(before, after, "corral_jump_ahead_tokens_total")
    assert _delta(before, after, "corral_forced_token_share_count") == 1
    assert _delta(before, after, "corral_forced_token_share_sum") == pytest.approx(forced / tokens)
    # Mask density: one masked step per sampled token, each allowing some of the vocabulary.
    steps = _delta(before, after, "corral_masked_steps_total")
    allowed = _delta(before, after, "corral_mask_allowed_tokens_total")
    assert steps == tokens - forced
    assert steps <= allowed < steps * VOCAB_WIDTH
    assert _delta(before, after, "corral_mask_density_count") == 1
    assert _delta(before, after, "corral_mask_density_sum") == pytest.approx(allowed / (steps * VOCAB_WIDTH))
    # Unconstrained rows are not constrained tokens.
    assert _post(server, max_tokens=5)[0] == 200
    assert _delta(after, _scrape(server), "corral_constrained_tokens_total") == 0


def test_a_budget_cut_counts_a_max_tokens_truncation(server: Server) -> None:
    before = _scrape(server)
    code, reply = _post(server, STORY, content="Tell me a very long story about a dragon.", max_tokens=12)
    assert code == 200
    assert reply["choices"][0]["corral"]["truncated"] is True
    json.loads(reply["choices"][0]["message"]["content"])  # cut short, still valid
    after = _scrape(server)
    assert _delta(before, after, "corral_truncations_total", budget="max_tokens") == 1
    assert _delta(before, after, "corral_truncations_total", budget="thinking") == 0


def test_a_thinking_budget_cut_and_the_thinking_answer_split(server: Server) -> None:
    before = _scrape(server)
    code, reply = _post(
        server, WORD, content="Think it through: which fruit is the best?", max_tokens=60,
        thinking={"budget_tokens": 12},
    )  # fmt: skip
    assert code == 200, reply
    msg = reply["choices"][0]["message"]
    assert isinstance(msg.get("reasoning_content"), str)
    json.loads(msg["content"])
    after = _scrape(server)
    assert _delta(before, after, "corral_truncations_total", budget="thinking") == 1
    thinking = _delta(before, after, "corral_output_tokens_total", part="thinking")
    answer = _delta(before, after, "corral_output_tokens_total", part="answer")
    assert thinking + answer == reply["usage"]["completion_tokens"]
    assert 0 < thinking <= 12 and answer > 0


def test_validation_failures_are_counted_by_keyword(server: Server) -> None:
    before = _scrape(server)
    code, reply = _post(server, NOT_UNIQUE, content="Two numbers.")
    assert code == 200
    assert "non-unique" in reply["choices"][0]["corral"]["validation_error"], reply
    code, reply = _post(server, FORBIDDEN, content="A digit.")
    assert code == 200 and reply["choices"][0]["corral"]["validation_error"]
    after = _scrape(server)
    assert _delta(before, after, "corral_validation_failures_total", keyword="uniqueItems") == 1
    assert _delta(before, after, "corral_validation_failures_total", keyword="not") == 1
    # A valid output counts nothing.
    assert _post(server, WORD)[0] == 200
    again = _scrape(server)
    assert (
        sum(_delta(after, again, "corral_validation_failures_total", keyword=k) for k in (*KEYWORDS, "other"))
        == 0
    )


def test_refusals_are_counted_by_error_code(server: Server) -> None:
    before = _scrape(server)
    code, reply = _post(server, {"type": "object", "properties": {"a": {"type": 5}}})
    assert code == 400 and reply["error"]["code"] == "invalid_schema"
    code, reply = _post(server, {"type": "string", "minLength": 200}, max_tokens=3)
    assert code == 400 and reply["error"]["code"] == "max_tokens_too_small"
    # The request's fault, not its constraint's: not a refusal.
    code, reply = _post(server, WORD, max_tokens=10**6)
    assert code == 400 and reply["error"]["code"] == "context_length_exceeded"
    after = _scrape(server)
    assert _delta(before, after, "corral_constraint_refusals_total", code="invalid_schema") == 1
    assert _delta(before, after, "corral_constraint_refusals_total", code="max_tokens_too_small") == 1
    total = sum(
        _delta(before, after, "corral_constraint_refusals_total", code=c) for c in (*REFUSAL_CODES, "other")
    )
    assert total == 2


def test_label_values_stay_in_their_closed_sets(server: Server) -> None:
    allowed = {
        "keyword": KEYWORDS | {"other"},
        "code": REFUSAL_CODES | {"other"},
        "budget": {"max_tokens", "thinking", "other"},
        "part": {"thinking", "answer", "other"},
        "cache": {"hit", "miss"},
        "event": DISK_EVENTS | {"other"},
    }
    names = {d.name for d in DEFS}
    for (name, labels), _ in _scrape(server).items():
        base = name.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
        if base not in names and name not in names:
            continue
        for k, v in labels:
            if k != "le":
                assert v in allowed[k], (name, k, v)
