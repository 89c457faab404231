"""``corral serve`` end to end: a real server process on loopback with the real SmolLM2 model,
driven by the official ``openai`` client (and raw HTTP for the malformed cases).

One server is started for the module (``--threads 1``; the model loads once, ~5 s).
"""

from __future__ import annotations

import json
import re
import statistics
import threading
import time
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from generation_cases import PERSON
from host_cases import TOOLS
from server_helpers import Server, start_server

from corral import models

pytestmark = [pytest.mark.real_tokenizer, pytest.mark.slow]

openai = pytest.importorskip("openai")
try:  # the openai client's HTTP library: httpx, or its successor httpx2 in newer releases
    import httpx
except ImportError:
    httpx = pytest.importorskip("httpx2")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("torch")
pytest.importorskip("transformers")

MODEL = "SmolLM2-135M-Instruct"

WORD = {
    "type": "object",
    "properties": {"word": {"type": "string", "maxLength": 40}},
    "required": ["word"],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    try:
        models.smollm2_gguf_path()
    except models.ModelNotFoundError as e:  # pragma: no cover - CI installs it
        pytest.skip(str(e))
    tmp = tmp_path_factory.mktemp("server")
    schemas = tmp / "schemas"
    schemas.mkdir()
    (schemas / "person.json").write_text(json.dumps(PERSON))
    (schemas / "word.json").write_text(json.dumps({"name": "word", "schema": WORD, "strict": True}))
    srv = start_server(
        tmp,
        "--backend",
        "transformers",
        "--schema-dir",
        str(schemas),
        "--max-batch",
        "8",
        "--max-queue",
        "4",
        "--max-body-mb",
        "1",
    )
    yield srv
    srv.stop()


def _chat(server: Server, content: str, **kw: Any) -> Any:
    kw.setdefault("temperature", 0)
    return server.client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": content}], **kw
    )


def _schema_format(schema: Any, name: str = "out") -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


# ---------------------------------------------------------------------- structured output


def test_models_and_health(server: Server) -> None:
    ids = [m.id for m in server.client.models.list().data]
    assert ids == [MODEL]
    assert server.healthy()["model"] == MODEL


def test_json_schema_response_format(server: Server) -> None:
    prompts = [
        "Extract the person as JSON: John Smith is 42 years old.",
        "Extract the person as JSON: Mary, aged 7.",
    ]
    for p in prompts:
        r = _chat(server, p, response_format=_schema_format(PERSON), max_tokens=40)
        value = json.loads(r.choices[0].message.content)
        jsonschema.validate(value, PERSON)
        assert r.choices[0].finish_reason == "stop"
        assert r.usage.completion_tokens > 0 and r.usage.prompt_tokens > 0
    # json_object mode: any object; sampled with a seed.
    r = _chat(server, "A JSON object about a cat.", response_format={"type": "json_object"}, max_tokens=30,
              temperature=0.8, seed=3)  # fmt: skip
    assert isinstance(json.loads(r.choices[0].message.content), dict)


def test_pydantic_parse_helper(server: Server) -> None:
    pydantic = pytest.importorskip("pydantic")

    class Person(pydantic.BaseModel):
        name: str = pydantic.Field(max_length=20)
        age: int = pydantic.Field(ge=0, le=120)

    r = server.client.chat.completions.parse(
        model=MODEL,
        messages=[{"role": "user", "content": "Extract the person as JSON: Mary, aged 7."}],
        response_format=Person,
        temperature=0,
        max_tokens=40,
    )
    assert isinstance(r.choices[0].message.parsed, Person)


def test_registered_schema_by_name_is_precompiled(server: Server) -> None:
    hits = server.metric("corral_compile_cache_hits_total")
    r = server.http.post(
        "/v1/chat/completions",
        json={
            "model": MODEL,
            "messages": [{"role": "user", "content": "Extract the person as JSON: Ann, 30."}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "person"}},
            "temperature": 0,
            "max_tokens": 40,
        },
    )
    assert r.status_code == 200, r.text
    assert r.headers["x-corral-cache"] == "hit"
    jsonschema.validate(json.loads(r.json()["choices"][0]["message"]["content"]), PERSON)
    assert server.metric("corral_compile_cache_hits_total") == hits + 1


# ---------------------------------------------------------------------- tools


def _check_call(call: Any) -> dict[str, Any]:
    tool = next(t for t in TOOLS if t["function"]["name"] == call.function.name)
    args: dict[str, Any] = json.loads(call.function.arguments)
    jsonschema.validate(args, tool["function"]["parameters"])
    return args


def test_tools_required_and_named(server: Server) -> None:
    r = _chat(server, "What is the weather in Paris?", tools=TOOLS, tool_choice="required", max_tokens=60)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id
    _check_call(call)
    r = _chat(
        server,
        "What is 2 plus 3?",
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "add"}},
        max_tokens=40,
    )
    (call,) = r.choices[0].message.tool_calls
    assert call.function.name == "add"
    _check_call(call)


def test_tools_auto_is_text_or_a_valid_call(server: Server) -> None:
    for prompt in ("Hello! How are you today?", "What is the weather in Rome, in celsius?"):
        r = _chat(server, prompt, tools=TOOLS, tool_choice="auto", max_tokens=40)
        msg = r.choices[0].message
        if msg.tool_calls:
            _check_call(msg.tool_calls[0])
        else:
            assert msg.content and not msg.content.startswith("{")


def test_tool_call_streams_as_argument_deltas(server: Server) -> None:
    """As OpenAI streams calls: one delta with the id and name, then argument pieces."""
    stream = _chat(
        server, "Weather in Oslo?", tools=TOOLS, tool_choice="required", max_tokens=60, stream=True
    )
    calls = [tc for ch in stream for tc in (ch.choices[0].delta.tool_calls or []) if ch.choices]
    heads = [tc for tc in calls if tc.id]
    assert len(heads) == 1 and len(calls) > 2 and {tc.index for tc in calls} == {0}
    args = "".join(tc.function.arguments or "" for tc in calls)
    heads[0].function.arguments = args
    _check_call(heads[0])


# ---------------------------------------------------------------------- streaming, completions


def test_streaming_deltas_equal_the_final_text(server: Server) -> None:
    kw: dict[str, Any] = {"response_format": _schema_format(PERSON), "max_tokens": 40}
    prompt = "Extract the person as JSON: Bob Stone is 51."
    final = _chat(server, prompt, **kw).choices[0].message.content
    stream = _chat(server, prompt, stream=True, stream_options={"include_usage": True}, **kw)
    deltas, finish, usage = [], None, None
    for ch in stream:
        if ch.usage is not None:
            usage = ch.usage
        for c in ch.choices:
            if c.delta.content:
                deltas.append(c.delta.content)
            finish = c.finish_reason or finish
    assert len(deltas) > 1 and "".join(deltas) == final
    assert finish == "stop" and usage is not None and usage.completion_tokens > 0


def test_completions_with_corral_extensions(server: Server) -> None:
    c = server.client.completions

    def one(**extra: Any) -> Any:
        return c.create(
            model=MODEL, prompt="Q: Name a fruit.\nA:", max_tokens=20, temperature=0, extra_body=extra
        )

    assert re.fullmatch(r"[A-Z][a-z]{2,9}", one(regex=r"[A-Z][a-z]{2,9}").choices[0].text)
    assert one(choices=["apple", "banana", "cherry"]).choices[0].text in {"apple", "banana", "cherry"}
    text = one(grammar='root ::= "fruit: " [a-z]{3,10}').choices[0].text
    assert re.fullmatch(r"fruit: [a-z]{3,10}", text)
    jsonschema.validate(json.loads(one(json_schema=WORD).choices[0].text), WORD)
    # n sampled rows of one seeded request: each valid, and the same seed repeats them.
    kw: dict[str, Any] = {"model": MODEL, "prompt": "A colour:", "max_tokens": 8, "n": 3, "temperature": 1.2}
    a = c.create(seed=7, extra_body={"regex": "[a-z]{3,8}"}, **kw)
    b = c.create(seed=7, extra_body={"regex": "[a-z]{3,8}"}, **kw)
    assert [x.index for x in a.choices] == [0, 1, 2]
    assert all(re.fullmatch("[a-z]{3,8}", x.text) for x in a.choices)
    assert [x.text for x in a.choices] == [x.text for x in b.choices]


# ---------------------------------------------------------------------- concurrency


def _parallel(fns: list[Any]) -> list[Any]:
    out: list[Any] = [None] * len(fns)

    def run(i: int) -> None:
        try:
            out[i] = fns[i]()
        except Exception as e:  # collected and checked by the caller
            out[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_concurrent_requests_are_batched_and_exact(server: Server) -> None:
    prompts = [
        "Extract the person as JSON: John Smith is 42 years old.",
        "Extract the person as JSON: Mary, aged 7.",
        "Extract the person as JSON: Ana Lima, 33.",
        "Extract the person as JSON: Old Tom is 90.",
    ]
    kw: dict[str, Any] = {"response_format": _schema_format(PERSON), "max_tokens": 40}
    solo = [_chat(server, p, **kw).choices[0].message.content for p in prompts]
    rows_before = server.metric("corral_batch_rows_sum")
    steps_before = server.metric("corral_batch_rows_count")
    together = _parallel([lambda p=p: _chat(server, p, **kw) for p in prompts])
    # Greedy decoding in a shared batch (rows joining mid-flight, left-padded caches merged)
    # gives exactly what each request gets alone.
    assert [r.choices[0].message.content for r in together] == solo
    rows = server.metric("corral_batch_rows_sum") - rows_before
    steps = server.metric("corral_batch_rows_count") - steps_before
    assert rows / steps > 1.5, (rows, steps)  # rows were decoded together, not one after another


SLOTTED = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "maxLength": 20},
        "cost_center": {"type": "string", "x-corral-slot": "cost_center"},
    },
    "required": ["summary", "cost_center"],
    "additionalProperties": False,
}


def test_dynamic_slots_bind_per_request_without_recompiling(server: Server) -> None:
    """Two concurrent requests with different value sets each produce only their own values,
    and the skeleton is compiled once (one cache miss, hits for every later value set)."""
    prompt = "Book this expense to a cost center as JSON: team lunch with the sales team."
    sets = [[f"CC-{i:03d}" for i in range(100, 140)], ["OPS-7", "OPS-9", "FIN-1"]]
    kw: dict[str, Any] = {"response_format": _schema_format(SLOTTED, "expense"), "max_tokens": 48}
    misses_before = server.metric("corral_compile_cache_misses_total")
    hits_before = server.metric("corral_compile_cache_hits_total")
    replies = _parallel(
        [
            lambda v=v: _chat(server, prompt, extra_body={"corral_slots": {"cost_center": v}}, **kw)
            for v in sets
        ]
    )
    for values, r in zip(sets, replies, strict=True):
        out = json.loads(r.choices[0].message.content)
        assert out["cost_center"] in values, (out, values)
    # Three more value sets, sampled: still only their own values; still one compile.
    for seed in range(3):
        values = [f"X{seed}-{j}" for j in range(5)]
        r = _chat(
            server,
            prompt,
            extra_body={"corral_slots": {"cost_center": values}},
            seed=seed,
            temperature=1.0,
            **kw,
        )
        assert json.loads(r.choices[0].message.content)["cost_center"] in values
    assert server.metric("corral_compile_cache_misses_total") - misses_before == 1
    assert server.metric("corral_compile_cache_hits_total") - hits_before >= 4
    assert server.metric("corral_slot_bind_seconds_count") >= 5
    # Bad slot input: missing values, values for a schema without slots, a duplicate value.
    code, reply = _post(
        server, "/v1/chat/completions", _chat_body(response_format=_schema_format(SLOTTED, "expense"))
    )
    assert code == 400 and reply["error"]["code"] == "missing_slots", reply
    body = _chat_body(response_format=_schema_format(PERSON), corral_slots={"cost_center": ["a"]})
    code, reply = _post(server, "/v1/chat/completions", body)
    assert code == 400 and reply["error"]["code"] == "invalid_slots", reply
    body = _chat_body(
        response_format=_schema_format(SLOTTED, "expense"), corral_slots={"cost_center": ["a", "a"]}
    )
    code, reply = _post(server, "/v1/chat/completions", body)
    assert code == 400 and reply["error"]["code"] == "invalid_slots", reply
    assert reply["error"]["param"] == "corral_slots", reply
    server.healthy()


def _expensive_schema() -> dict[str, Any]:
    """Compiles in about a second here: 400 object branches with distinct integer bounds."""
    return {
        "anyOf": [
            {
                "type": "object",
                "properties": {
                    f"k{i}_{j}": {"type": "integer", "minimum": i, "maximum": i * 1000 + j} for j in range(10)
                },
                "required": [f"k{i}_0"],
            }
            for i in range(400)
        ]
    }


def test_compiling_a_schema_does_not_block_other_requests(server: Server) -> None:
    short: dict[str, Any] = {"response_format": _schema_format(WORD, "word"), "max_tokens": 12}
    prompt = "Give one English word as JSON."
    _chat(server, prompt, **short)  # cached from now on (and registered at start-up)
    solo = []
    for _ in range(3):
        t = time.perf_counter()
        _chat(server, prompt, **short)
        solo.append(time.perf_counter() - t)
    solo_latency = statistics.median(solo)

    slow: dict[str, Any] = {}

    def expensive() -> None:
        t = time.perf_counter()
        raw = server.client.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=[{"role": "user", "content": "Some JSON."}],
            response_format=_schema_format(_expensive_schema(), "big"),
            max_tokens=40,
            temperature=0,
        )
        slow["compile_s"] = float(raw.headers["x-corral-compile-seconds"])
        slow["cache"] = raw.headers["x-corral-cache"]
        slow["done"] = time.perf_counter()
        slow["elapsed"] = time.perf_counter() - t

    th = threading.Thread(target=expensive)
    th.start()
    time.sleep(0.15)  # let the expensive request reach its compile
    latencies, finished = [], []
    for _ in range(2):
        t = time.perf_counter()
        _chat(server, prompt, **short)
        latencies.append(time.perf_counter() - t)
        finished.append(time.perf_counter())
    th.join()
    assert slow["cache"] == "miss" and slow["compile_s"] > 0.4, slow
    # The short requests ran while the big schema compiled, at about their usual latency.
    assert finished[-1] < slow["done"], (finished, slow)
    assert max(latencies) < 2 * solo_latency + 0.1, (latencies, solo_latency, slow)


def test_too_many_concurrent_requests_get_429(server: Server) -> None:
    def call() -> int:
        r = server.http.post(
            "/v1/completions",
            json={"model": MODEL, "prompt": "Count:", "max_tokens": 6, "temperature": 0},
        )
        return int(r.status_code)

    statuses = _parallel([call] * 20)  # 8 decoding + 4 queued are allowed
    assert set(statuses) <= {200, 429}, statuses
    assert statuses.count(429) >= 1 and statuses.count(200) >= 12, statuses
    body_ok = server.healthy()
    assert body_ok["inflight"] == 0


def test_client_disconnect_mid_stream_frees_the_sequence(server: Server) -> None:
    cancelled = server.metric("corral_cancelled_total")
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Write a very long story about a dragon."}],
        "max_tokens": 400,
        "stream": True,
        "temperature": 0,
    }
    with (
        httpx.Client(base_url=server.url, timeout=60) as c,
        c.stream("POST", "/v1/chat/completions", json=body) as r,
    ):
        assert r.status_code == 200
        lines = r.iter_lines()
        got = [next(lines) for _ in range(6)]
        assert any(line.startswith("data: ") for line in got)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if server.healthy()["active_rows"] == 0 and server.metric("corral_cancelled_total") > cancelled:
            break
        time.sleep(0.1)
    assert server.healthy()["active_rows"] == 0
    assert server.metric("corral_cancelled_total") == cancelled + 1


# ---------------------------------------------------------------------- bad input


def _post(server: Server, path: str, body: Any, **kw: Any) -> tuple[int, dict[str, Any]]:
    content = body if isinstance(body, (bytes, str)) else json.dumps(body)
    r = server.http.post(path, content=content, headers={"content-type": "application/json"}, **kw)
    return r.status_code, r.json()


def _msg(content: str = "hi") -> list[dict[str, str]]:
    return [{"role": "user", "content": content}]


def _tool(name: str, params: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": params}}


_OBJ = {"type": "object"}
_BAD_STRING = {"type": "object", "properties": {"s": {"type": "string", "minLength": 9, "maxLength": 2}}}
_TYPO = {"type": "object", "properties": {"x": {"type": "strnig"}}}
_NAMED_G = {"type": "function", "function": {"name": "g"}}


def _chat_body(**kw: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": _msg(kw.pop("content", "hi")), **kw}


BAD_INPUT: list[tuple[str, Any, int, str]] = [
    ("malformed JSON", b'{"model": "x", "messages": [', 400, "invalid_json"),
    ("not an object", b"[1, 2]", 400, "invalid_json"),
    ("unknown model", {"model": "gpt-9", "messages": _msg()}, 404, "model_not_found"),
    ("no messages", {"model": MODEL, "messages": []}, 400, "invalid_request"),
    (
        "contradictory schema",
        _chat_body(response_format=_schema_format({"type": "integer", "minimum": 5, "maximum": 1})),
        400,
        "invalid_schema",
    ),
    (
        "unsupported schema",
        _chat_body(response_format=_schema_format({"$ref": "https://example.com/s.json"})),
        400,
        "unsupported_schema",
    ),
    ("duplicate tool names", _chat_body(tools=[_tool("f", _OBJ), _tool("f", _OBJ)]), 400, "invalid_tools"),
    ("bad tool parameters", _chat_body(tools=[_tool("f", _TYPO)]), 400, "invalid_tools"),
    (
        "contradictory tool parameters",
        _chat_body(tools=[_tool("f", _BAD_STRING)], tool_choice="required"),
        400,
        "invalid_tools",
    ),
    (
        "tool_choice names a missing tool",
        _chat_body(tools=[_tool("f", _OBJ)], tool_choice=_NAMED_G),
        400,
        "invalid_tools",
    ),
    ("too-long prompt", _chat_body(content="word " * 9000), 400, "context_length_exceeded"),
    (
        "budget below the shortest output",
        _chat_body(max_tokens=2, response_format=_schema_format(PERSON)),
        400,
        "max_tokens_too_small",
    ),
    ("bad temperature", _chat_body(temperature=7), 400, "invalid_request"),
    ("bad regex", {"model": MODEL, "prompt": "x", "regex": "(unclosed"}, 400, "invalid_constraint"),
    ("stop sequences", _chat_body(stop=["\n"]), 400, "unsupported_parameter"),
]


@pytest.mark.parametrize("case", BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_bad_input_is_reported_and_the_server_keeps_serving(server: Server, case: Any) -> None:
    _, body, status, code = case
    path = "/v1/completions" if isinstance(body, dict) and "prompt" in body else "/v1/chat/completions"
    got, reply = _post(server, path, body)
    assert got == status, reply
    err = reply["error"]
    assert err["code"] == code and err["message"] and "type" in err, reply
    if code in ("invalid_schema", "unsupported_schema"):
        assert err["param"] == "response_format.json_schema.schema" and err["pointer"].startswith("#"), err
    server.healthy()


def test_schema_errors_carry_the_json_pointer(server: Server) -> None:
    with pytest.raises(openai.BadRequestError) as e:
        _chat(server, "x", response_format=_schema_format(_BAD_STRING))
    assert e.value.status_code == 400
    assert e.value.body["pointer"] == "#/properties/s/minLength", e.value.body
    bad = [_tool("ok", _OBJ), _tool("f", _BAD_STRING)]
    code, reply = _post(server, "/v1/chat/completions", _chat_body(tools=bad, tool_choice="required"))
    assert code == 400 and reply["error"]["param"] == "tools[1].function.parameters", reply
    assert reply["error"]["pointer"] == "#/properties/s/minLength", reply


def test_oversize_body_gets_413(server: Server) -> None:
    big = {"model": MODEL, "messages": _msg("x" * (2 * 1024 * 1024))}
    code, reply = _post(server, "/v1/chat/completions", big)
    assert code == 413 and reply["error"]["code"] == "request_too_large"
    server.healthy()


# ---------------------------------------------------------------------- metrics


def test_metrics_are_exposed(server: Server) -> None:
    text = server.metrics()
    for name in (
        "corral_requests_total",
        "corral_request_duration_seconds_bucket",
        "corral_time_to_first_token_seconds_count",
        "corral_generated_tokens_total",
        "corral_compile_seconds_bucket",
        "corral_compile_cache_hits_total",
        "corral_compile_cache_misses_total",
        "corral_compile_cache_entries",
        "corral_compile_cache_bytes",
        "corral_mask_seconds_bucket",
        "corral_jump_ahead_tokens_total",
        "corral_forward_passes_total",
        "corral_errors_total",
    ):
        assert name in text, name
    assert server.metric("corral_generated_tokens_total") > 0
    assert server.metric("corral_jump_ahead_tokens_total") > 0
    assert 'corral_errors_total{kind="invalid_json"}' in text
    # Structured logs: one JSON object per line, each request with its id.
    lines = [json.loads(x) for x in server.log.read_text().splitlines() if x.startswith("{")]
    requests = [x for x in lines if x.get("event") == "request"]
    assert requests and all(re.fullmatch("[0-9a-f]{24}", x["request_id"]) for x in requests)
