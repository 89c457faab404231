"""Load test for ``corral serve``: 1, 8 and 32 concurrent clients on loopback.

Each client sends streamed chat requests, a mix of cached schemas (a few fixed ones, compiled
once), new schemas (a fresh enum each time, so a cache miss and a compile) and dynamic-slot
requests (one cached skeleton with ``x-corral-slot``, a fresh set of 1,000 values bound per
request: never a compile), and records time
to first token (first SSE content), total latency and output tokens. Per level it prints
throughput (requests/s and output tokens/s), TTFT p50/p99, latency p50/p99, compile p50/p95 (the
server's ``x-corral-compile-seconds`` on misses) and the cache hit rate. Bounded: at most
``--requests`` requests and ``--seconds`` per level.

    python bench/bench_server.py                      # starts its own server (transformers)
    python bench/bench_server.py --url http://127.0.0.1:8000 --levels 1,8
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import subprocess
import sys
import threading
import time
from typing import Any

try:
    import httpx
except ImportError:  # newer openai releases ship httpx2
    import httpx2 as httpx  # type: ignore[no-redef]

CACHED = [
    {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    },
    {
        "type": "object",
        "properties": {"label": {"enum": ["positive", "negative", "neutral"]}},
        "required": ["label"],
    },
    {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 20},
            "country": {"type": "string", "maxLength": 20},
        },
        "required": ["city", "country"],
    },
]
SLOTTED = {
    "type": "object",
    "properties": {"cost_center": {"type": "string", "x-corral-slot": "cost_center"}},
    "required": ["cost_center"],
}
SLOT_PROMPT = "Which cost center pays for the team lunch? Answer as JSON."
PROMPTS = [
    "Extract the person as JSON: John Smith is 42 years old.",
    "Classify the sentiment of 'I love this phone' as JSON.",
    "Where is the Eiffel Tower? Answer as JSON.",
]


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def one_request(
    client: Any, model: str, i: int, new_ratio: float, slot_ratio: float, rng: random.Random
) -> dict[str, Any]:
    k = i % len(CACHED)
    prompt = PROMPTS[k]
    extra: dict[str, Any] = {}
    roll = rng.random()
    if roll < new_ratio:  # a schema the server has never seen: a compile
        values = [f"v{rng.randrange(10**9)}" for _ in range(rng.randrange(5, 40))]
        schema: Any = {"type": "object", "properties": {"code": {"enum": values}}, "required": ["code"]}
    elif roll < new_ratio + slot_ratio:  # the cached skeleton, 1,000 fresh values bound
        schema, prompt = SLOTTED, SLOT_PROMPT
        base = rng.randrange(10**6)
        extra = {"corral_slots": {"cost_center": [f"CC-{base + j}" for j in range(1000)]}}
    else:
        schema = CACHED[k]
    body = {
        **extra,
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
        "max_tokens": 48,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    return stream_chat(client, body)


def stream_chat(client: Any, body: dict[str, Any]) -> dict[str, Any]:
    """One streamed chat request: status, latency, time to first token, completion tokens and the
    server's cache headers (with ``error``, the body's start, when the status is not 200)."""
    t0 = time.perf_counter()
    ttft = None
    tokens = 0
    with client.stream("POST", "/v1/chat/completions", json=body) as r:
        if r.status_code != 200:
            r.read()
            return {"status": r.status_code, "latency": time.perf_counter() - t0, "error": r.text[:200]}
        cache = r.headers.get("x-corral-cache")
        compile_s = float(r.headers.get("x-corral-compile-seconds", "0"))
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            for c in chunk.get("choices", []):
                if ttft is None and c.get("delta", {}).get("content"):
                    ttft = time.perf_counter() - t0
    return {
        "status": 200,
        "latency": time.perf_counter() - t0,
        "ttft": ttft,
        "tokens": tokens,
        "cache": cache,
        "compile": compile_s,
    }


def run_level(
    url: str, model: str, clients: int, requests: int, seconds: float, new_ratio: float, slot_ratio: float
) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    lock = threading.Lock()
    counter = iter(range(requests))
    deadline = time.perf_counter() + seconds

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        with httpx.Client(base_url=url, timeout=300) as client:
            while time.perf_counter() < deadline:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                r = one_request(client, model, i, new_ratio, slot_ratio, rng)
                with lock:
                    results.append(r)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(s,)) for s in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ok = [r for r in results if r["status"] == 200]
    misses = [r for r in ok if r["cache"] == "miss"]
    return {
        "clients": clients,
        "requests": len(ok),
        "errors": len(results) - len(ok),
        "req_s": len(ok) / wall,
        "tok_s": sum(r["tokens"] for r in ok) / wall,
        "ttft_p50": pct([r["ttft"] for r in ok if r["ttft"] is not None], 50),
        "ttft_p99": pct([r["ttft"] for r in ok if r["ttft"] is not None], 99),
        "lat_p50": pct([r["latency"] for r in ok], 50),
        "lat_p99": pct([r["latency"] for r in ok], 99),
        "compile_p50": pct([r["compile"] for r in misses], 50),
        "compile_p95": pct([r["compile"] for r in misses], 95),
        "hit_rate": (len(ok) - len(misses)) / len(ok) if ok else float("nan"),
    }


def start_server(backend: str, threads: int) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "corral", "serve", "--backend", backend, "--threads", str(threads)]
    cmd += ["--port", str(port), "--max-batch", "32", "--max-queue", "64", "--log-level", "warning"]
    proc = subprocess.Popen(cmd)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(proc, url, 120)
    return proc, url


def wait_healthy(proc: subprocess.Popen[bytes], url: str, seconds: float) -> None:
    """Wait for the server at ``url`` to answer /health (SystemExit, the server killed, if it
    exits or does not answer within ``seconds``)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit("server did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="a running server (default: start one)")
    ap.add_argument("--backend", default="transformers")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--levels", default="1,8,32")
    ap.add_argument("--requests", type=int, default=64, help="most requests per level")
    ap.add_argument("--seconds", type=float, default=60, help="most seconds per level")
    ap.add_argument("--new-ratio", type=float, default=0.25, help="share of requests with a new schema")
    ap.add_argument("--slot-ratio", type=float, default=0.25, help="share of dynamic-slot requests")
    args = ap.parse_args()
    proc = None
    url = args.url
    if url is None:
        proc, url = start_server(args.backend, args.threads)
    try:
        model = httpx.get(url + "/v1/models").json()["data"][0]["id"]
        # Warm the cached schemas (their first compile is not what this measures).
        with httpx.Client(base_url=url, timeout=300) as c:
            for i in range(len(CACHED)):
                one_request(c, model, i, 0.0, 0.0, random.Random(0))
            one_request(c, model, 0, 0.0, 1.0, random.Random(0))  # the slot skeleton
        head = (
            "clients  reqs  err   req/s   tok/s  TTFT p50/p99 (s)  lat p50/p99 (s)  compile p50/p95 (ms)  hit"
        )
        print(head)
        for level in [int(x) for x in args.levels.split(",")]:
            r = run_level(url, model, level, args.requests, args.seconds, args.new_ratio, args.slot_ratio)
            print(
                f"{r['clients']:>7} {r['requests']:>5} {r['errors']:>4} {r['req_s']:>7.2f} {r['tok_s']:>7.1f}"
                f"  {r['ttft_p50']:>6.3f}/{r['ttft_p99']:<7.3f}  {r['lat_p50']:>6.2f}/{r['lat_p99']:<7.2f}"
                f"  {1000 * r['compile_p50']:>8.1f}/{1000 * r['compile_p95']:<8.1f}  {r['hit_rate']:.2f}",
                flush=True,
            )
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()
