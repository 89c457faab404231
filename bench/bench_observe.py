"""What corral's observability costs: the mask kernel's allowed-token count (vLLM's mask-density
metric, always on), and a request through the server's decode loop with tracing off, with no
provider, and recorded by the OpenTelemetry SDK (in-memory exporter).

    python bench/bench_observe.py [--rows 8] [--steps 200] [--requests 6]

Prints each figure and the ratio to its baseline, measured in the same run (the machine is
shared and noisy: compare ratios, not absolute times).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from corral.compile import ConstraintSpec, compile_constraint
from corral.models import smollm2_gguf_path
from corral.runtime.kernel import MaskKernel, MaskRow
from corral.tokenizer import Tokenizer

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 30}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}


def _kernel(rows: int, steps: int) -> None:
    tok = Tokenizer.from_gguf(smollm2_gguf_path())
    grammar = compile_constraint(ConstraintSpec.json_schema(SCHEMA), tok).grammar
    kernel = MaskKernel(tok, threads=1)
    start = tok.encode('{"name": "')
    matchers = []
    for _ in range(rows):
        m = grammar.matcher()
        for t in start:
            m.accept_token(t)
        matchers.append(m)
    logits = np.zeros((rows, tok.width), dtype=np.float32)

    def run(count: bool) -> float:
        times = []
        for _ in range(steps):
            logits[:] = 0
            allowed: list[int] | None = [] if count else None
            t0 = time.perf_counter()
            kernel.mask(logits, [MaskRow(i, matchers[i]) for i in range(rows)], allowed)
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    run(False)
    base, counted = [], []
    for _ in range(3):  # interleaved, so drift hits both
        base.append(run(False))
        counted.append(run(True))
    b, c = min(base), min(counted)
    print(
        f"mask kernel, {rows} rows x {tok.width} tokens: {b * 1e3:.3f} ms/step without the count, "
        f"{c * 1e3:.3f} ms/step with it: x{c / b:.3f} (+{(c - b) * 1e6:.0f} us)"
    )


def _server(requests: int) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from starlette.testclient import TestClient

    import corral
    from corral.server import ServerConfig, create_server
    from corral.telemetry import tracing

    backend = corral.load_model(backend="transformers", verbose=False, threads=1)
    srv = create_server(backend, ServerConfig(model_name="m"))
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "Describe a person."}],
        "max_tokens": 48,
        "temperature": 0,
        "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}},
    }
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    results: dict[str, list[float]] = {"off": [], "traced": []}
    with TestClient(srv.app) as http:
        http.post("/v1/chat/completions", json=body)  # compile + warm-up
        for _ in range(requests):  # interleaved
            for mode in ("off", "traced"):
                tracing.set_tracer_provider(provider if mode == "traced" else None)
                t0 = time.perf_counter()
                r = http.post("/v1/chat/completions", json=body)
                results[mode].append(time.perf_counter() - t0)
                assert r.status_code == 200
    tracing.set_tracer_provider(None)
    off, on = statistics.median(results["off"]), statistics.median(results["traced"])
    spans = len(exporter.get_finished_spans())
    print(
        f"server request (48 tokens, schema): {off * 1e3:.1f} ms untraced, {on * 1e3:.1f} ms traced "
        f"(SDK, in-memory, {spans} spans): x{on / off:.3f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--requests", type=int, default=6)
    args = ap.parse_args()
    _kernel(args.rows, args.steps)
    _server(args.requests)


if __name__ == "__main__":
    main()
