"""The server under faults: a full server says when to retry, deadlines (the body's ``timeout``,
the OpenAI client's own timeout) end requests and free their rows, an internal error in one
request is a 500 with its request id and touches no other, and SIGTERM finishes what is in
flight and exits 0. After each fault ``/health`` and a normal request succeed.

A real server process on loopback (SmolLM2, llama.cpp backend), driven by the official
``openai`` client where it applies."""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from server_helpers import Server, httpx, start_server

from corral import models

pytestmark = [pytest.mark.real_tokenizer, pytest.mark.slow]

openai = pytest.importorskip("openai")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("llama_cpp")

MODEL = "SmolLM2-135M-Instruct"
LONG = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 400, "temperature": 0}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    try:
        models.smollm2_gguf_path()
    except models.ModelNotFoundError as e:  # pragma: no cover - CI installs it
        pytest.skip(str(e))
    srv = start_server(
        tmp_path_factory.mktemp("faults"), "--backend", "llama.cpp", "--max-batch", "2", "--max-queue", "1"
    )
    yield srv
    srv.stop()


def _normal_request_works(server: Server) -> None:
    server.healthy()
    out = server.client.completions.create(model=MODEL, prompt="Say hi:", max_tokens=4, temperature=0)
    assert out.choices[0].text is not None and out.usage is not None and out.usage.completion_tokens >= 1


def _rows_freed(server: Server, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        h = server.healthy()
        if h["active_rows"] == 0 and h["inflight"] == 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"rows not freed: {server.healthy()}")


def test_a_full_server_says_when_to_retry(server: Server) -> None:
    def call(_: int) -> httpx.Response:
        return server.http.post("/v1/completions", json={**LONG, "max_tokens": 40})

    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(call, range(8)))  # 2 decoding + 1 queued are admitted
    full = [r for r in replies if r.status_code == 429]
    assert full and all(r.status_code in (200, 429) for r in replies)
    for r in full:
        assert r.headers["retry-after"] == "1"
        assert r.json()["error"]["code"] == "too_many_requests"
        assert r.json()["error"]["type"] == "rate_limit_error"
    _rows_freed(server)
    _normal_request_works(server)


def test_the_body_timeout_ends_the_request_with_504(server: Server) -> None:
    timeouts = server.metric("corral_errors_total")
    t0 = time.monotonic()
    r = server.http.post("/v1/completions", json={**LONG, "timeout": 0.5})
    assert time.monotonic() - t0 < 5
    assert r.status_code == 504, r.text
    err = r.json()["error"]
    assert (err["code"], err["type"]) == ("timeout", "timeout_error")
    assert "deadline" in err["message"]
    assert server.metric("corral_errors_total") > timeouts
    _rows_freed(server)
    _normal_request_works(server)


def test_the_openai_clients_timeout_is_honoured(server: Server) -> None:
    client = openai.OpenAI(api_key="unused", base_url=server.url + "/v1", max_retries=0, timeout=0.8)
    # The client gives up first (its own timer; the server waits 0.5 s more) — on a loaded
    # machine the client's timer can fire late, and then the server's 504 arrives first.
    with pytest.raises((openai.APITimeoutError, openai.InternalServerError)) as e:
        client.completions.create(**LONG)
    if isinstance(e.value, openai.InternalServerError):
        assert e.value.status_code == 504 and "deadline" in str(e.value)
    # The server read the client's x-stainless-read-timeout: nobody waits past it, so the rows
    # are freed right after, not 400 tokens later.
    _rows_freed(server, within=5.0)
    _normal_request_works(server)


def test_a_stream_past_its_deadline_ends_with_an_error_event(server: Server) -> None:
    body = {**LONG, "stream": True, "timeout": 0.8}
    events = []
    with server.http.stream("POST", "/v1/completions", json=body) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: "):
                events.append(line[6:])
    assert events[-1] == "[DONE]"
    assert json.loads(events[-2])["error"]["code"] == "timeout"
    _rows_freed(server)
    _normal_request_works(server)


def test_a_body_that_does_not_arrive_in_time_is_a_408(tmp_path: Path) -> None:
    """A client that sends its headers and then trickles the body (slowloris): the server
    answers 408 once the request deadline passes, instead of holding the connection open."""
    import socket

    # (long enough for the normal request afterwards on a busy machine)
    srv = start_server(tmp_path, "--backend", "llama.cpp", "--request-timeout", "20")
    try:
        host, port = srv.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            head = (
                "POST /v1/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                "content-length: 1000\r\n\r\n"
            )
            t0 = time.monotonic()
            sock.sendall(head.encode() + b'{"model": ')  # ... and the rest never comes
            reply = b""
            while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
                data = sock.recv(65536)
                if not data:
                    break
                reply += data
            waited = time.monotonic() - t0
        status_line, _, rest = reply.partition(b"\r\n")
        assert status_line.split()[1] == b"408", reply[:300]
        assert 19 < waited < 60, waited  # at the deadline, not at once and not never
        err = json.loads(rest.partition(b"\r\n\r\n")[2])["error"]
        assert err["code"] == "timeout" and "reading the body" in err["message"]
        assert 'status="408"' in srv.metrics()
        _normal_request_works(srv)
    finally:
        srv.stop()


@pytest.mark.parametrize("bad", [-1, 0, "soon", True])
def test_a_bad_timeout_is_a_400(server: Server, bad: Any) -> None:
    r = server.http.post("/v1/completions", json={**LONG, "max_tokens": 2, "timeout": bad})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "timeout"


def test_an_internal_error_is_a_500_with_its_request_id(caplog: pytest.LogCaptureFixture) -> None:
    """In-process (the fault is injected into one request); the other requests are served."""
    from starlette.testclient import TestClient

    import corral
    from corral.server import ServerConfig, create_server

    backend = corral.load_model(backend="llama.cpp", threads=1)
    srv: Any = create_server(backend, ServerConfig(model_name=MODEL))
    render = srv._render

    def faulty(req: Any) -> Any:
        if "BOOM" in str(req.prompts):
            raise RuntimeError("injected fault")
        return render(req)

    srv._render = faulty
    with TestClient(srv.app) as http, caplog.at_level(logging.INFO, logger="corral.server"):
        bad = http.post("/v1/completions", json={"model": MODEL, "prompt": "BOOM", "max_tokens": 3})
        assert bad.status_code == 500
        err = bad.json()["error"]
        assert err["type"] == "server_error" and err["request_id"] == bad.headers["x-request-id"]
        assert "injected fault" not in err["message"] or err["code"] == "internal_error"
        records = [
            r for r in caplog.records if getattr(r, "fields", {}).get("request_id") == err["request_id"]
        ]
        assert len(records) == 1 and records[0].exc_info is not None  # logged once, with its traceback
        ok = http.post("/v1/completions", json={"model": MODEL, "prompt": "Say hi:", "max_tokens": 3})
        assert ok.status_code == 200 and ok.json()["choices"][0]["text"] is not None
        assert http.get("/health").json()["status"] == "ok"


def test_sigterm_finishes_in_flight_requests_and_exits_0(tmp_path: Path) -> None:
    srv = start_server(tmp_path, "--backend", "llama.cpp", "--shutdown-timeout", "20")
    body = {
        "model": MODEL,
        "prompt": "List three colours:",
        "max_tokens": 24,
        "temperature": 0,
        "stream": True,
    }
    events: list[str] = []
    first = threading.Event()

    def stream() -> None:
        with (
            httpx.Client(base_url=srv.url, timeout=60) as c,
            c.stream("POST", "/v1/completions", json=body) as r,
        ):
            for line in r.iter_lines():
                if line.startswith("data: "):
                    events.append(line[6:])
                    first.set()

    t = threading.Thread(target=stream)
    t.start()
    assert first.wait(30)
    srv.proc.send_signal(signal.SIGTERM)
    t.join(60)
    assert events[-1] == "[DONE]"  # the request in flight was finished, not dropped
    assert srv.proc.wait(timeout=30) == 0
    with pytest.raises(httpx.HTTPError):  # and nothing new is admitted
        httpx.get(srv.url + "/health", timeout=2)


def test_a_body_nested_thousands_deep_is_a_400(server: Server) -> None:
    nested = "[" * 50_000 + "]" * 50_000
    deep = '{"model": "' + MODEL + '", "prompt": "x", "max_tokens": 2, "user": ' + nested + "}"
    r = server.http.post("/v1/completions", content=deep, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text  # not a RecursionError turned into a 500
    err = r.json()["error"]
    assert err["code"] == "invalid_json" and "max_body_depth" in err["message"]
    _normal_request_works(server)


def test_json_outputs_nested_too_deep_are_reported_not_raised() -> None:
    import corral
    from corral.compile import ConstraintSpec, compile_constraint

    tok = corral.Tokenizer.from_tokens([bytes([i]) for i in range(256)] + [b""], eos_ids=[256])
    c = compile_constraint(ConstraintSpec.json_value(), tok)
    value, error = c.read("[" * 5000 + "]" * 5000)
    assert value is None and error is not None and "max_output_depth" in error
    assert c.read("[[1]]") == ([[1]], None)


def test_a_request_giving_up_does_not_cancel_a_compile_others_wait_for(monkeypatch: Any) -> None:
    """Two requests wait on one shared compile future; the first gives up (deadline): the
    second still gets the constraint and the shared future is not cancelled."""
    import asyncio
    from concurrent.futures import Future
    from types import SimpleNamespace

    from corral.server import app as app_module

    shared: Future[Any] = Future()
    monkeypatch.setattr(app_module, "compile_constraint_async", lambda *a, **k: (shared, False))
    fake = SimpleNamespace(
        _configured=lambda spec: spec,
        tokenizer=SimpleNamespace(hash="vocab"),
        cache=SimpleNamespace(loaded_from_disk=lambda key: False),
        converter=None,
        _api_error=None,
    )
    spec = SimpleNamespace(key=lambda tokenizer_hash: "key")

    async def scenario() -> Any:
        impatient = asyncio.ensure_future(app_module.CorralServer._constraint(fake, spec))  # type: ignore[arg-type]
        patient = asyncio.ensure_future(app_module.CorralServer._constraint(fake, spec))  # type: ignore[arg-type]
        await asyncio.sleep(0.01)
        impatient.cancel()
        await asyncio.sleep(0.01)
        assert not shared.cancelled()
        shared.set_result("the constraint")
        constraint, source, _ = await patient
        return constraint, source

    assert asyncio.run(scenario()) == ("the constraint", "miss")
