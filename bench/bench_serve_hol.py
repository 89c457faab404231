"""Head-of-line benchmark for ``corral serve``: do new schemas slow down the cached requests?

Starts ``corral serve`` (SmolLM2-135M, llama.cpp) in a subprocess and runs ``--clients``
concurrent streaming clients; half of them always send requests on one cached schema A. The
other half, per phase:

* **b**: one small cached schema B (the comparison the issue first reported);
* **cached**: the real-world schemas in ``REAL``, as already compiled: the same prompts, outputs
  and decoding work as the next phase, without its compiles — the control;
* **new**: the same real-world schemas, each request's copy made new to the cache by a unique
  ``description`` (the content hash changes, the whole conversion and engine compile still run).

The real schemas are JSONSchemaBench Github_medium files: Kubernetes objects and the larger
SchemaStore-like documents (a dashboard, a flow definition, a table schema, a package manifest, a
VA form). Every client sends one request per ``--period`` seconds, staggered, so each phase
offers the same load (a reply that takes longer only delays that client's next request). The
phases alternate (``--rounds`` of each) so that other work on a shared machine falls on all of
them. Printed per phase: the cached A requests' time to first token (first SSE content)
p50/p95/max over every round, their output tokens/s, the other half's requests and compile
seconds on misses (``x-corral-compile-seconds``), and the server's CPU seconds per wall second
(its own process + its schema-converter processes); then the head-of-line ratio, TTFT p95 of the
new phase over the cached phase (target <= 1.3), and new over b.

    python bench/bench_serve_hol.py                        # about 5 min on 2 cores
    python bench/bench_serve_hol.py --rounds 4 --seconds 20 --json out.json

Data: ``../shared/data/jsonschemabench`` next to the repository (``--data``); not committed.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_server import stream_chat, wait_healthy  # noqa: E402

try:
    import httpx
except ImportError:  # newer openai releases ship httpx2
    import httpx2 as httpx  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "jsonschemabench"

# Github_medium files: Kubernetes objects (apiVersion/kind/metadata/spec) and the larger
# SchemaStore-style documents (a dashboard, a flow definition, a table schema, a package manifest,
# a VA form). Each compiles on SmolLM2's vocabulary; together their compiles take ~0.1-1 s each here.
REAL = [
    "o66688",
    "o72521",
    "o1707",
    "o87934",
    "o68600",
    "o68601",
    "o68597",
    "o9907",
    "o70035",
    "o9802",
    "o9914",
    "o89986",
    "o35868",
    "o71550",
    "o32020",
    "o82255",
]

SCHEMA_A = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 24}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
PROMPT_A = "Extract the person as JSON: John Smith is 42 years old and lives in Leeds."
SCHEMA_B = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 24},
        "country": {"type": "string", "maxLength": 24},
    },
    "required": ["city", "country"],
}
PROMPT_B = "Where is the Eiffel Tower? Answer as JSON with the city and the country."
PROMPT_NEW = "Write one example JSON document for this schema."


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def load_real(data: Path) -> list[dict[str, Any]]:
    out = []
    for name in REAL:
        path = data / "Github_medium" / f"{name}.json"
        if not path.exists():
            raise SystemExit(f"{path} not found: point --data at the jsonschemabench directory")
        out.append(json.loads(path.read_text()))
    return out


class NewSchemas:
    """Real schemas in rotation, each copy made new to the cache by a unique description."""

    def __init__(self, schemas: list[dict[str, Any]]) -> None:
        self.schemas = schemas
        self.n = 0
        self.lock = threading.Lock()
        self.nonce = f"{os.getpid()}-{time.time_ns()}"

    def next(self, fresh: bool) -> dict[str, Any]:
        """The next schema in rotation: as it was warmed up (cached), or made new (``fresh``)."""
        with self.lock:
            i = self.n
            self.n += 1
        if not fresh:
            return self.schemas[i % len(self.schemas)]
        schema = copy.deepcopy(self.schemas[i % len(self.schemas)])
        desc = schema.get("description")
        schema["description"] = f"{desc if isinstance(desc, str) else ''} [bench {self.nonce}-{i}]"
        return schema


def request(client: Any, model: str, schema: Any, prompt: str, max_tokens: int) -> dict[str, Any]:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    return stream_chat(client, body)


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(CPU seconds of process ``pid``, of its child processes now alive): /proc, Linux only."""
    tick = os.sysconf("SC_CLK_TCK")

    def one(p: int) -> float:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / tick

    children = 0.0
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        kids = []
    for k in kids:
        children += one(int(k))
    return one(pid), children


def run_phase(
    url: str,
    model: str,
    phase: str,
    args: argparse.Namespace,
    new: NewSchemas,
    pid: int | None,
) -> dict[str, Any]:
    """One phase of ``args.seconds``: ``clients // 2`` clients on schema A, the rest as the phase
    says (module doc). Every client sends one request per ``args.period`` seconds, the clients
    staggered evenly over the period (a reply that takes longer delays that client's next
    request): the same offered load in every phase, so a slow compile cannot lighten the new
    phase's load by holding its clients back."""
    cached: list[dict[str, Any]] = []
    other: list[dict[str, Any]] = []
    lock = threading.Lock()
    clients = args.clients
    n_a = clients // 2
    t0 = time.perf_counter()
    deadline = t0 + args.seconds

    def client(i: int) -> None:
        is_a = i < n_a
        # A and B clients interleave in time: A0, B0, A1, B1, ...
        slot = 2 * i if is_a else 2 * (i - n_a) + 1
        due = t0 + args.period * slot / clients
        with httpx.Client(base_url=url, timeout=300) as c:
            while True:
                now = time.perf_counter()
                if due > now:
                    time.sleep(due - now)
                if time.perf_counter() >= deadline:
                    return
                due += args.period
                if is_a:
                    r = request(c, model, SCHEMA_A, PROMPT_A, args.max_tokens)
                elif phase == "b":
                    r = request(c, model, SCHEMA_B, PROMPT_B, args.max_tokens)
                else:
                    r = request(c, model, new.next(fresh=phase == "new"), PROMPT_NEW, args.max_tokens)
                with lock:
                    (cached if is_a else other).append(r)

    cpu0 = cpu_seconds(pid) if pid else (0.0, 0.0)
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    cpu1 = cpu_seconds(pid) if pid else (0.0, 0.0)
    return {
        "phase": phase,
        "cached": cached,
        "other": other,
        "wall": wall,
        "t0": t0,  # perf_counter: CLOCK_MONOTONIC on Linux, comparable with the server's logs
        "cpu_server": cpu1[0] - cpu0[0],
        "cpu_children": max(0.0, cpu1[1] - cpu0[1]),  # a recycled converter restarts its count
    }


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    cached = [r for run in runs for r in run["cached"]]
    other = [r for run in runs for r in run["other"]]
    ok = [r for r in cached if r["status"] == 200 and r["ttft"] is not None]
    ttft = [r["ttft"] for r in ok]
    wall = sum(run["wall"] for run in runs)
    other_ok = [r for r in other if r["status"] == 200]
    return {
        "cached_requests": len(cached),
        "cached_errors": len(cached) - len(ok),
        "ttft_p50": pct(ttft, 50),
        "ttft_p95": pct(ttft, 95),
        "ttft_max": max(ttft) if ttft else float("nan"),
        "cached_tok_s": sum(r["tokens"] for r in ok) / wall,
        "lat_p50": pct([r["latency"] for r in ok], 50),
        "other_requests": len(other),
        "other_errors": len(other) - len(other_ok),
        "other_misses": sum(1 for r in other_ok if r["cache"] == "miss"),
        "compile_p50": pct([r["compile"] for r in other_ok if r["cache"] == "miss"], 50),
        "compile_p95": pct([r["compile"] for r in other_ok if r["cache"] == "miss"], 95),
        "cpu_server_per_s": sum(run["cpu_server"] for run in runs) / wall,
        "cpu_converter_per_s": sum(run["cpu_children"] for run in runs) / wall,
        "wall": wall,
    }


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "corral", "serve", "--model", args.model, "--backend", args.backend]
    cmd += ["--port", str(port), "--max-batch", "16", "--max-queue", "64", "--log-level", "warning"]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    cmd += args.server_arg
    proc = subprocess.Popen(cmd)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(proc, url, 180)
    return proc, url


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="a running server (default: start one)")
    ap.add_argument("--pid", type=int, help="the --url server's process id (for its CPU figures)")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--backend", default="llama.cpp")
    ap.add_argument("--threads", type=int, default=None, help="the server's forward-pass threads")
    ap.add_argument("--server-arg", action="append", default=[], help="more `corral serve` arguments")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--period", type=float, default=3.0, help="seconds between one client's requests")
    ap.add_argument("--seconds", type=float, default=30.0, help="length of one phase")
    ap.add_argument("--rounds", type=int, default=3, help="control/new phase pairs (interleaved)")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument(
        "--phases",
        default="b,cached,new",
        help="phases per round, in order: b (the other half on one small cached schema B), cached "
        "(on the real schemas, cached: the same decoding work as new), new (the real schemas, new)",
    )
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--json", type=Path, help="write the per-phase summaries here")
    args = ap.parse_args()
    new = NewSchemas(load_real(args.data))
    proc = None
    url = args.url
    if url is None:
        proc, url = start_server(args)
    pid = proc.pid if proc is not None else args.pid
    try:
        model = httpx.get(url + "/v1/models").json()["data"][0]["id"]
        with httpx.Client(base_url=url, timeout=300) as c:
            # Warm-up: the cached schemas' first compile, and one of each real schema, which
            # also shows they compile (a refusal would measure a different, cheaper path).
            for schema, prompt in ((SCHEMA_A, PROMPT_A), (SCHEMA_B, PROMPT_B)):
                r = request(c, model, schema, prompt, args.max_tokens)
                assert r["status"] == 200, r
            bad = []
            for name, schema in zip(REAL, new.schemas, strict=True):
                r = request(c, model, schema, PROMPT_NEW, args.max_tokens)
                if r["status"] != 200:
                    bad.append(f"{name}: {r['error']}")
            if bad:
                raise SystemExit("real schemas refused:\n" + "\n".join(bad))
        phases = args.phases.split(",")
        runs: dict[str, list[dict[str, Any]]] = {p: [] for p in phases}
        for i in range(args.rounds):
            for phase in phases:
                run = run_phase(url, model, phase, args, new, pid)
                runs[phase].append(run)
                ttft = [r["ttft"] for r in run["cached"] if r.get("ttft") is not None]
                print(
                    f"round {i + 1} {phase:<8} cached TTFT p50/p95 {pct(ttft, 50):.3f}/{pct(ttft, 95):.3f} s"
                    f"  others {len(run['other'])}  {run['wall']:.1f} s",
                    flush=True,
                )
        summary = {phase: summarize(r) for phase, r in runs.items()}
        print()
        print(
            "phase     cached  err  TTFT p50/p95/max (s)   tok/s  others  miss  compile p50/p95 (s)"
            "  CPU/s server+converter"
        )
        for phase, s in summary.items():
            print(
                f"{phase:<8} {s['cached_requests']:>7} {s['cached_errors']:>4}"
                f"  {s['ttft_p50']:.3f}/{s['ttft_p95']:.3f}/{s['ttft_max']:.3f}"
                f"  {s['cached_tok_s']:>6.1f} {s['other_requests']:>7} {s['other_misses']:>5}"
                f"  {s['compile_p50']:>8.3f}/{s['compile_p95']:<8.3f}"
                f"  {s['cpu_server_per_s']:.2f}+{s['cpu_converter_per_s']:.2f}"
            )
        ratios = {}
        for base in ("cached", "b"):
            if "new" in summary and base in summary:
                ratios[base] = summary["new"]["ttft_p95"] / summary[base]["ttft_p95"]
                p50 = summary["new"]["ttft_p50"] / summary[base]["ttft_p50"]
                print(f"cached TTFT p95, new / {base}: {ratios[base]:.2f}  (p50: {p50:.2f})")
        if "cached" in ratios:
            print(f"\nhead-of-line ratio (cached TTFT p95, new / cached phase): {ratios['cached']:.2f}")
        if args.json:
            windows = {p: [(r["t0"], r["t0"] + r["wall"]) for r in rs] for p, rs in runs.items()}
            out = {"summary": summary, "ratios_p95": ratios, "windows": windows}
            args.json.write_text(json.dumps(out, indent=2))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=15)


if __name__ == "__main__":
    main()
