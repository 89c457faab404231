"""Each tool-call format end to end through ``corral serve`` with the official ``openai`` client:
``tools``, ``tool_choice`` in all four forms, ``parallel_tool_calls`` true/false, streaming,
tool results fed back, ``auto`` with a ``response_format``, on SmolLM2-135M (json format: its
template declares no tools; hermes forced by name) and on Qwen2.5-Coder-0.5B (hermes, as its
chat template declares; json forced by name). Every returned call names a declared tool and its
arguments validate. llama.cpp backend (the fast one here); Qwen cases are few and short.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from host_cases import TOOLS
from server_helpers import Server, start_server

from corral import models

pytestmark = [pytest.mark.real_tokenizer, pytest.mark.slow]

openai = pytest.importorskip("openai")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("llama_cpp")

PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ANSWER = {
    "type": "object",
    "properties": {"answer": {"type": "string", "maxLength": 40}},
    "required": ["answer"],
    "additionalProperties": False,
}


def _start(tmp: Any, model: str) -> Server:
    return start_server(tmp, "--model", model, "--backend", "llama.cpp", "--model-name", "m", startup_s=240)


@pytest.fixture(scope="module")
def smol(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    try:
        models.smollm2_gguf_path()
    except models.ModelNotFoundError as e:  # pragma: no cover - CI installs it
        pytest.skip(str(e))
    srv = _start(tmp_path_factory.mktemp("smol"), "smollm2-135m")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    from corral.backends.presets import model_path

    try:
        model_path("qwen2.5-coder-0.5b")
    except models.ModelNotFoundError as e:  # pragma: no cover - CI installs it
        pytest.skip(str(e))
    srv = _start(tmp_path_factory.mktemp("qwen"), "qwen2.5-coder-0.5b")
    yield srv
    srv.stop()


def _chat(server: Server, content: Any, **kw: Any) -> Any:
    kw.setdefault("temperature", 0)
    kw.setdefault("max_tokens", 60)
    messages = [{"role": "user", "content": content}] if isinstance(content, str) else content
    return server.client.chat.completions.create(model="m", messages=messages, tools=TOOLS, **kw)


def _valid(calls: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every call names a declared tool, has an id, and its arguments validate."""
    out = []
    for c in calls:
        assert c.type == "function" and c.id and c.function.name in PARAMS, c
        args = json.loads(c.function.arguments)
        jsonschema.validate(args, PARAMS[c.function.name])
        out.append((c.function.name, args))
    return out


def _streamed(server: Server, content: str, **kw: Any) -> tuple[str, list[tuple[str, dict[str, Any]]], str]:
    """(content, calls, finish_reason) rebuilt from a stream's deltas."""
    text, finish = "", ""
    heads: dict[int, str] = {}
    args: dict[int, str] = {}
    for ch in _chat(server, content, stream=True, **kw):
        for c in ch.choices:
            text += c.delta.content or ""
            for tc in c.delta.tool_calls or []:
                if tc.id:
                    assert tc.index not in heads and tc.function.name in PARAMS
                    heads[tc.index] = tc.function.name
                args[tc.index] = args.get(tc.index, "") + (tc.function.arguments or "")
            finish = c.finish_reason or finish
    assert sorted(heads) == list(range(len(heads))) and set(args) == set(heads)
    calls = [(heads[k], json.loads(args[k])) for k in sorted(heads)]
    for name, a in calls:
        jsonschema.validate(a, PARAMS[name])
    return text, calls, finish


def _check_choices(server: Server) -> None:
    """tool_choice in all four forms, parallel true/false, streaming = non-streaming."""
    r = _chat(server, "What is the weather in Paris?", tool_choice="required", parallel_tool_calls=False)
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls" and ch.message.content is None
    (call,) = _valid(ch.message.tool_calls)
    _, streamed, finish = _streamed(
        server, "What is the weather in Paris?", tool_choice="required", parallel_tool_calls=False
    )
    assert streamed == [call] and finish == "tool_calls"
    r = _chat(server, "What is 2 plus 3?", tool_choice={"type": "function", "function": {"name": "add"}})
    assert [n for n, _ in _valid(r.choices[0].message.tool_calls)] == ["add"]
    r = _chat(server, "Say hello.", tool_choice="none", max_tokens=12)
    assert not r.choices[0].message.tool_calls and r.choices[0].message.content
    assert r.choices[0].finish_reason in ("stop", "length")
    r = _chat(server, "Hi! How are you?", tool_choice="auto", max_tokens=24)
    msg = r.choices[0].message
    assert (msg.tool_calls and _valid(msg.tool_calls)) or msg.content
    two = "Add 2 and 3, and also get the weather in Rome in celsius."
    r = _chat(server, two, tool_choice="required", parallel_tool_calls=True, max_tokens=90)
    assert len(_valid(r.choices[0].message.tool_calls)) >= 1


def test_smollm2_json_format(smol: Server) -> None:
    _check_choices(smol)


def test_smollm2_hermes_by_name_and_results_fed_back(smol: Server) -> None:
    r = _chat(smol, "Weather in Oslo?", tool_choice="required", extra_body={"tool_format": "hermes"})
    (call,) = _valid(r.choices[0].message.tool_calls)
    r2 = _chat(
        smol,
        [
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [r.choices[0].message.tool_calls[0].model_dump()],
            },
            {"role": "tool", "tool_call_id": r.choices[0].message.tool_calls[0].id, "content": "Sunny, 21 C"},
        ],
        tool_choice="none",
        max_tokens=16,
    )
    assert r2.choices[0].message.content and not r2.choices[0].message.tool_calls
    assert call[0] == "get_weather"


@pytest.mark.parametrize("fmt", ["llama3", "mistral"])
def test_smollm2_other_formats_by_name(smol: Server, fmt: str) -> None:
    """The Llama 3 and Mistral formats by name: valid calls, streamed as the same calls."""
    kw: dict[str, Any] = {
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "extra_body": {"tool_format": fmt},
    }
    r = _chat(smol, "What is 2 plus 3?", **kw)
    calls = _valid(r.choices[0].message.tool_calls)
    assert r.choices[0].finish_reason == "tool_calls" and r.choices[0].message.content is None
    _, streamed, finish = _streamed(smol, "What is 2 plus 3?", **kw)
    assert streamed == calls and finish == "tool_calls"


def test_smollm2_auto_with_a_response_format(smol: Server) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": ANSWER}}
    for prompt in ("Say hello in one word.", "What is the weather in Rome, in celsius?"):
        r = _chat(smol, prompt, tool_choice="auto", response_format=fmt, max_tokens=50)
        msg = r.choices[0].message
        if msg.tool_calls:
            _valid(msg.tool_calls)
        else:
            jsonschema.validate(json.loads(msg.content), ANSWER)


def test_bad_tool_arguments_are_400s(smol: Server) -> None:
    with pytest.raises(openai.BadRequestError, match="tool_format"):
        _chat(smol, "x", extra_body={"tool_format": "xml"})
    with pytest.raises(openai.BadRequestError, match="parallel_tool_calls"):
        _chat(smol, "x", extra_body={"parallel_tool_calls": "yes"})
    with pytest.raises(openai.BadRequestError, match="tool_calls"):
        _chat(
            smol,
            [
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"function": {"name": "add", "arguments": "{"}}],
                }
            ],
        )


def test_qwen_hermes_format(qwen: Server) -> None:
    """Qwen's template declares Hermes tools: the server renders them through it and
    constrains the <tool_call> blocks; a tool result goes back through the template."""
    q = "What is the weather in Paris, in celsius?"
    # parallel calls off: with them on, this small model repeats the call until max_tokens
    one: dict[str, Any] = {"tool_choice": "required", "parallel_tool_calls": False, "max_tokens": 50}
    r = _chat(qwen, q, **one)
    calls = _valid(r.choices[0].message.tool_calls)
    assert calls[0][0] == "get_weather" and r.choices[0].finish_reason == "tool_calls"
    _, streamed, _ = _streamed(qwen, q, **one)
    assert streamed == calls
    # auto: the model's choice (Qwen-Coder often writes a ```json block: prose, not a call)
    msg = _chat(qwen, q, tool_choice="auto", max_tokens=50).choices[0].message
    assert (msg.tool_calls and _valid(msg.tool_calls)) or (msg.content and "<tool_call>" not in msg.content)
    r = _chat(
        qwen,
        "What is 2 plus 3?",
        tool_choice={"type": "function", "function": {"name": "add"}},
        max_tokens=30,
    )
    assert [n for n, _ in _valid(r.choices[0].message.tool_calls)] == ["add"]
    r = _chat(
        qwen,
        "Add 2 and 3, then add 4 and 5.",
        tool_choice="required",
        parallel_tool_calls=False,
        max_tokens=40,
    )
    assert len(_valid(r.choices[0].message.tool_calls)) == 1
    r2 = _chat(
        qwen,
        [
            {"role": "user", "content": "What is 2 plus 3?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [r.choices[0].message.tool_calls[0].model_dump()],
            },
            {"role": "tool", "tool_call_id": r.choices[0].message.tool_calls[0].id, "content": "5"},
        ],
        tool_choice="none",
        max_tokens=16,
    )
    assert r2.choices[0].message.content and not r2.choices[0].message.tool_calls


def test_qwen_json_by_name(qwen: Server) -> None:
    r = _chat(
        qwen, "What is 2 plus 3?", tool_choice="required", max_tokens=40, extra_body={"tool_format": "json"}
    )
    assert [n for n, _ in _valid(r.choices[0].message.tool_calls)] == ["add"]


# ---------------------------------------------------------------------- the library


def test_generate_returns_typed_calls_in_each_format() -> None:
    """corral.generate(tools=[typed function, Pydantic model]): every call is a ToolCall of a
    declared tool (a model tool's value is an instance; a function tool invokes)."""
    pydantic = pytest.importorskip("pydantic")
    import corral

    try:
        backend = corral.load_model("smollm2-135m", backend="llama.cpp", threads=1)
    except models.ModelNotFoundError as e:  # pragma: no cover - CI installs it
        pytest.skip(str(e))

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    class Weather(pydantic.BaseModel):
        """Get the weather for a city."""

        city: str = pydantic.Field(max_length=20)

    # Two formats here (every format's grammar is covered in test_tool_formats.py): calls in
    # hermes with parallel calls on, then a named call in mistral.
    r = corral.generate(
        backend,
        "What is 2 plus 3?",
        tools=[add, Weather],
        tool_choice="required",
        tool_format="hermes",
        parallel_tool_calls=True,
        max_new_tokens=60,
    )
    assert r.valid and r.tool_calls and r.text.startswith("<tool_call>"), (r.text, r.error)
    for call in r.tool_calls:
        assert call.name in ("add", "Weather")
        if call.name == "add":
            assert call.invoke() == call.arguments["a"] + call.arguments["b"]
        else:
            assert isinstance(call.value, Weather)
    one = corral.generate(
        backend,
        "Weather in Oslo?",
        tools=[add, Weather],
        tool_choice="Weather",
        tool_format="mistral",
        max_new_tokens=40,
    )
    assert one.text.startswith("[TOOL_CALLS]") and isinstance(one.value, corral.ToolCall)
    assert one.tool_calls == [one.value] and isinstance(one.value.value, Weather)
    answer = {
        "type": "object",
        "properties": {"word": {"type": "string", "maxLength": 10}},
        "required": ["word"],
    }
    r = corral.generate(backend, "Say hi as JSON.", tools=[add], schema=answer, max_new_tokens=40)
    assert r.valid and (r.tool_calls or (isinstance(r.value, dict) and "word" in r.value)), r.text
