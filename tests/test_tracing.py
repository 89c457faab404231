"""OpenTelemetry traces through the real server: a ``CorralServer`` on loopback (uvicorn in a
thread, real HTTP, SmolLM2 under transformers) with the SDK's in-memory exporter behind
``corral.telemetry.tracing.set_tracer_provider``.

Checked: the span tree (request → compile, bind, prefill, decode, validate), the parent taken from
a W3C ``traceparent``, the attributes (every one documented in ``ATTRIBUTES``), sampled decode
step events, error status on a refused request; and, in a subprocess where ``opentelemetry``
cannot be imported, that the server and the library work unchanged.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import pytest
from server_helpers import httpx, serve_in_thread

import corral
from corral import models
from corral.telemetry import tracing

pytestmark = [pytest.mark.real_tokenizer, pytest.mark.slow]

pytest.importorskip("opentelemetry.sdk.trace")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("transformers")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

MODEL = "smollm2"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
WORD = {"type": "object", "properties": {"word": {"type": "string", "maxLength": 12}}, "required": ["word"]}
SLOTTED = {
    "type": "object",
    "properties": {"team": {"type": "string", "x-corral-slot": "team"}},
    "required": ["team"],
}


@pytest.fixture(scope="module")
def traced() -> Iterator[tuple[httpx.Client, InMemorySpanExporter]]:
    try:
        models.smollm2_gguf_path()
    except models.ModelNotFoundError as e:  # pragma: no cover - CI installs it
        pytest.skip(str(e))
    from corral.server import ServerConfig, create_server

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.set_tracer_provider(provider)
    backend = corral.load_model(backend="transformers", verbose=False, threads=1)
    app = create_server(backend, ServerConfig(model_name=MODEL, compile_workers=1)).app
    try:
        with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=120) as http:
            yield http, exporter
    finally:
        tracing.set_tracer_provider(None)


def _chat(http: httpx.Client, schema: Any = None, headers: dict[str, str] | None = None, **kw: Any) -> Any:
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Name one fruit."}],
        "max_tokens": 40,
        "temperature": 0,
        **kw,
    }
    if schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}
    return http.post("/v1/chat/completions", json=body, headers=headers or {})


def _spans(exporter: InMemorySpanExporter, rid: str) -> dict[str, list[ReadableSpan]]:
    """The finished spans of one request (its request span's trace), by name."""
    deadline = time.monotonic() + 10
    while True:
        spans = list(exporter.get_finished_spans())
        roots = [
            s for s in spans if s.name == "corral.request" and s.attributes.get("corral.request.id") == rid
        ]
        if roots or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(roots) == 1, [s.name for s in spans]
    root = roots[0]
    out: dict[str, list[ReadableSpan]] = {}
    for s in spans:
        if s.context.trace_id == root.context.trace_id and (
            s is root or (s.parent is not None and s.parent.span_id == root.context.span_id)
        ):
            out.setdefault(s.name, []).append(s)
    return out


def _documented(spans: dict[str, list[ReadableSpan]]) -> None:
    for name, group in spans.items():
        assert name in tracing.SPANS, name
        for s in group:
            undocumented = set(s.attributes) - set(tracing.ATTRIBUTES)
            for ev in s.events:
                undocumented |= set(ev.attributes) - set(tracing.ATTRIBUTES)
            assert not undocumented, (name, undocumented)


def test_a_schema_request_is_one_tree_under_the_callers_traceparent(traced: Any) -> None:
    http, exporter = traced
    r = _chat(http, WORD, {"traceparent": TRACEPARENT})
    assert r.status_code == 200, r.text
    json.loads(r.json()["choices"][0]["message"]["content"])
    spans = _spans(exporter, r.headers["x-request-id"])
    assert sorted(spans) == [
        "corral.constraint.compile",
        "corral.decode",
        "corral.prefill",
        "corral.request",
        "corral.validate",
    ]
    root = spans["corral.request"][0]
    # The caller's trace continues: same trace id, parent = the caller's span id.
    assert format(root.context.trace_id, "032x") == TRACE_ID
    assert root.parent is not None and format(root.parent.span_id, "016x") == PARENT_ID
    assert root.parent.is_remote
    assert root.attributes["corral.endpoint"] == "chat"
    assert root.attributes["http.response.status_code"] == 200
    assert root.attributes["corral.completion_tokens"] == r.json()["usage"]["completion_tokens"]
    assert 0 < root.attributes["corral.forced_tokens"] < root.attributes["corral.completion_tokens"]
    compile_span = spans["corral.constraint.compile"][0]
    a = compile_span.attributes
    assert a["corral.constraint.kind"] == "json_schema"
    assert a["corral.cache.hit"] is False and a["corral.compile.background"] is True
    assert len(a["corral.constraint.key"]) == 16 and int(a["corral.constraint.key"], 16) >= 0
    assert a["corral.compile.wait_s"] > 0
    # Children lie inside the request, in pipeline order.
    pre, dec, val = spans["corral.prefill"][0], spans["corral.decode"][0], spans["corral.validate"][0]
    assert root.start_time <= compile_span.start_time <= compile_span.end_time <= pre.start_time
    assert pre.end_time <= dec.start_time + 1000 and dec.end_time <= val.start_time + 1000
    assert val.end_time <= root.end_time
    assert val.attributes["corral.validation.ok"] is True
    # Sampled step events: tokens per step add up to what the decode span reports.
    steps = [e for e in dec.events if e.name == "corral.decode.step"]
    assert steps and [e.attributes["corral.step"] for e in steps] == list(range(1, len(steps) + 1))
    assert (
        sum(e.attributes["corral.step.tokens"] for e in steps) <= dec.attributes["corral.completion_tokens"]
    )
    assert all(e.attributes["corral.step.mask_s"] >= 0 for e in steps)
    _documented(spans)


def test_the_same_schema_again_is_a_cache_hit_and_a_new_root_without_traceparent(traced: Any) -> None:
    http, exporter = traced
    first = _chat(http, WORD)
    r = _chat(http, WORD)
    assert r.status_code == 200
    spans = _spans(exporter, r.headers["x-request-id"])
    root = spans["corral.request"][0]
    assert root.parent is None
    a = spans["corral.constraint.compile"][0].attributes
    assert a["corral.cache.hit"] is True and a["corral.compile.background"] is False
    earlier = _spans(exporter, first.headers["x-request-id"])["corral.constraint.compile"][0]
    assert earlier.attributes["corral.constraint.key"] == a["corral.constraint.key"]
    other = _chat(http, {**WORD, "properties": {"word": {"type": "string", "maxLength": 11}}})
    changed = _spans(exporter, other.headers["x-request-id"])["corral.constraint.compile"][0]
    assert changed.attributes["corral.constraint.key"] != a["corral.constraint.key"]
    assert changed.attributes["corral.cache.hit"] is False


def test_slot_binding_gets_its_span(traced: Any) -> None:
    http, exporter = traced
    r = _chat(http, SLOTTED, corral_slots={"team": ["billing", "search"]})
    assert r.status_code == 200, r.text
    assert json.loads(r.json()["choices"][0]["message"]["content"])["team"] in ("billing", "search")
    spans = _spans(exporter, r.headers["x-request-id"])
    bind = spans["corral.constraint.bind"][0]
    assert list(bind.attributes["corral.slots"]) == ["team"]
    _documented(spans)


def test_a_streamed_reply_is_traced_and_validated_too(traced: Any) -> None:
    http, exporter = traced
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Name one fruit."}],
        "max_tokens": 40,
        "temperature": 0,
        "stream": True,
        "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": WORD}},
    }
    with http.stream("POST", "/v1/chat/completions", json=body, headers={"traceparent": TRACEPARENT}) as r:
        assert r.status_code == 200
        rid = r.headers["x-request-id"]
        lines = [x for x in r.iter_lines() if x.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    spans = _spans(exporter, rid)
    assert {"corral.decode", "corral.prefill", "corral.validate"} <= set(spans)
    assert spans["corral.validate"][0].attributes["corral.validation.ok"] is True
    assert format(spans["corral.request"][0].parent.span_id, "016x") == PARENT_ID  # type: ignore[union-attr]


def test_a_refused_constraint_ends_its_span_with_the_error(traced: Any) -> None:
    http, exporter = traced
    r = _chat(http, {"type": "object", "properties": {"a": {"type": 5}}})
    assert r.status_code == 400
    spans = _spans(exporter, r.headers["x-request-id"])
    assert sorted(spans) == ["corral.request"]
    root = spans["corral.request"][0]
    assert root.status.status_code == StatusCode.ERROR
    assert root.attributes["corral.error.code"] == r.json()["error"]["code"]
    assert root.attributes["http.response.status_code"] == 400
    _documented(spans)


def test_without_a_provider_nothing_records() -> None:
    tracing.set_tracer_provider(None)  # the global provider: the API's default, non-recording
    assert tracing.tracing_available()
    assert tracing.start("corral.request") is None
    assert not tracing.recording(None)
    tracing.record("corral.decode", None, 0.0, 1.0)  # no parent: nothing, no error


_HIDDEN = textwrap.dedent(
    """
    import importlib.abc, sys

    class _Hide(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ImportError(f"No module named {name!r} (hidden by the test)")
            return None

    sys.meta_path.insert(0, _Hide())
    """
)

_SCRIPT = textwrap.dedent(
    """
    import json
    from starlette.testclient import TestClient
    import corral
    from corral.telemetry import tracing
    from corral.server import ServerConfig, create_server

    def main():
        assert not tracing.tracing_available()
        backend = corral.load_model(backend="transformers", verbose=False, threads=1)
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        r = corral.generate(backend, "A number:", schema=schema, max_new_tokens=12)
        assert isinstance(r.value["n"], int), r.text
        srv = create_server(backend, ServerConfig(model_name="m"))
        body = {"model": "m", "messages": [{"role": "user", "content": "A number"}], "max_tokens": 12,
                "temperature": 0, "response_format": {"type": "json_schema",
                "json_schema": {"name": "n", "schema": schema}}}
        with TestClient(srv.app) as http:
            tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
            resp = http.post("/v1/chat/completions", json=body, headers={"traceparent": tp})
            assert resp.status_code == 200, resp.text
            value = json.loads(resp.json()["choices"][0]["message"]["content"])
            metrics = http.get("/metrics").text
        assert "opentelemetry" not in " ".join(__import__("sys").modules)
        print(json.dumps({"value": value, "waits": "corral_compile_wait_seconds_count" in metrics}))

    if __name__ == "__main__":
        main()
    """
)


def test_server_and_library_work_unchanged_without_opentelemetry(tmp_path: Any) -> None:
    try:
        models.smollm2_gguf_path()
    except models.ModelNotFoundError as e:  # pragma: no cover - CI installs it
        pytest.skip(str(e))
    (tmp_path / "sitecustomize.py").write_text(_HIDDEN)
    script = tmp_path / "no_otel.py"
    script.write_text(_SCRIPT)
    import os

    env = dict(os.environ, PYTHONPATH=str(tmp_path), HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert isinstance(out["value"]["n"], int) and out["waits"] is True


def test_the_readme_lists_every_span_attribute_and_quality_metric() -> None:
    from pathlib import Path

    from corral.telemetry.quality import DEFS

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    names = [*tracing.SPANS, *tracing.ATTRIBUTES, *(d.name for d in DEFS)]
    missing = [n for n in names if f"`{n}" not in readme]
    assert missing == []
