"""vLLM's OpenAI server under a head-of-line load: time to first token of requests on a cached
schema while other requests bring schemas the server has never seen, with corral as vLLM's
structured-output backend, with vLLM's default backend (XGrammar) and with ``guidance``
(llguidance), one server after the other in one run.

``--rounds`` rounds; in each, every backend in turn (a fresh server), two phases:

* **control**: ``--clients`` concurrent clients; half the requests use cached schema A, half
  cached schema B (both compiled before the first phase);
* **new**: the same load, but the B half sends a real-world schema the server has not seen
  (Kubernetes and SchemaStore objects from JSONSchemaBench's MaskBench data, each sent once).

Printed: the cached (A) requests' time to first token, p50 / p95, in each phase, the ratio
new / control of the p95 (target for corral: <= 1.2, and never above the default backend's),
output tokens per second over both phases, and how many new schemas each backend refused (a
400) or failed (an error in the stream: corral admits a schema whose check takes longer than
``CORRAL_VLLM_CHECK_MS`` and fails it in the engine). Wall-clock times on a shared machine:
compare ratios, run it twice.

    python bench/bench_vllm_serve.py --data /path/to/jsonschemabench   # in the vLLM environment
    python bench/bench_vllm_serve.py --backends corral,xgrammar --clients 8 --rounds 2

``--data`` is a checkout of github.com/guidance-ai/jsonschemabench (its ``maskbench/data``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

SCHEMA_A = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 30},
        "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "email": {"type": "string", "maxLength": 40},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
SCHEMA_B = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 30}, "unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}


def load_real_schemas(data: Path, limit: int, seed: int) -> list[dict[str, Any]]:
    """Kubernetes and SchemaStore schemas from MaskBench's data (objects only), shuffled."""
    root = data / "maskbench" / "data" if (data / "maskbench").is_dir() else data
    files = sorted(
        p for p in root.glob("*.json") if p.name.startswith(("Kubernetes---", "JsonSchemaStore---"))
    )
    if not files:
        raise SystemExit(
            f"no Kubernetes/JsonSchemaStore schemas under {root} (give --data a jsonschemabench checkout)"
        )
    random.Random(seed).shuffle(files)
    out = []
    for p in files:
        doc = json.loads(p.read_text())
        schema = doc.get("schema", doc)
        if isinstance(schema, dict) and schema.get("type") in (None, "object"):
            out.append(schema)
        if len(out) >= limit:
            break
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, model_dir: str, backend: str, dtype: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        cmd = [
            sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            "--model", model_dir, "--served-model-name", "m", "--host", "127.0.0.1",
            "--port", str(self.port), "--enforce-eager", "--max-model-len", "2048",
            "--dtype", dtype, "--structured-outputs-config", json.dumps({"backend": backend}),
        ]  # fmt: skip
        self.log = tempfile.NamedTemporaryFile("w+", suffix=f"-{backend}.log", delete=False)
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2")}
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"{backend}: the server exited; log: {self.log.name}")
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(1)
        raise SystemExit(f"{backend}: the server did not start in 300 s; log: {self.log.name}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def request(self, schema: dict[str, Any], prompt: str, max_tokens: int) -> tuple[float | None, int, str]:
        """(time to first token or None, output tokens, error) of one streamed chat request."""
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
            "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
        }
        req = urllib.request.Request(
            self.base + "/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        t0 = time.perf_counter()
        ttft = None
        tokens = 0
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                for raw in r:
                    line = raw.decode().strip()
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    chunk = json.loads(line[6:])
                    if chunk.get("error"):  # a request that failed after its stream began
                        return ttft, tokens, f"stream error: {str(chunk['error'])[:100]}"
                    if chunk.get("usage"):
                        tokens = int(chunk["usage"].get("completion_tokens", 0))
                    for c in chunk.get("choices", []):
                        if ttft is None and c.get("delta", {}).get("content"):
                            ttft = time.perf_counter() - t0
                        if c.get("finish_reason") == "error":
                            return ttft, tokens, "finish_reason error"
        except urllib.error.HTTPError as e:
            return None, 0, f"HTTP {e.code}: {e.read().decode(errors='replace')[:120]}"
        except OSError as e:
            return None, 0, f"{type(e).__name__}: {e}"
        return ttft, tokens, ""


def phase(
    server: Server, clients: int, per_client: int, b_schemas: list[dict[str, Any]], max_tokens: int
) -> dict[str, Any]:
    """One phase: each client alternates A and B requests; returns A's TTFTs, tokens, errors."""
    lock = threading.Lock()
    a_ttft: list[float] = []
    errors: list[str] = []
    tokens = [0]
    b_iter = iter(b_schemas)

    def client(k: int) -> None:
        for j in range(per_client):
            use_a = (j + k) % 2 == 0
            if use_a:
                schema, prompt = SCHEMA_A, "Extract the person as JSON: John Smith, 42, john@example.com."
            else:
                with lock:
                    schema = next(b_iter)
                prompt = "Fill in a plausible example of this object as JSON."
            ttft, n, err = server.request(schema, prompt, max_tokens)
            with lock:
                tokens[0] += n
                if use_a and ttft is not None:
                    a_ttft.append(ttft)
                if err:
                    errors.append(("A: " if use_a else "B: ") + err)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"a_ttft": a_ttft, "tokens": tokens[0], "wall": time.perf_counter() - t0, "errors": errors}


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("JSONSCHEMABENCH", "jsonschemabench")))
    ap.add_argument("--backends", default="corral,xgrammar,guidance")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--per-client", type=int, default=6, help="requests per client per phase")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument(
        "--model-dir", default=None, help="HF model dir (default: the bundled SmolLM2, converted)"
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from corral.backends.loading import _converted_gguf
    from corral.models import smollm2_gguf_path

    model_dir = args.model_dir or str(_converted_gguf(smollm2_gguf_path(), True))
    per_phase_b = args.clients * args.per_client // 2 + args.clients
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    real = load_real_schemas(args.data, per_phase_b * args.rounds, args.seed)
    print(
        f"{len(real)} real-world schemas (Kubernetes, SchemaStore); {args.clients} clients, "
        f"{args.per_client} requests each per phase, {args.rounds} rounds, max_tokens {args.max_tokens}"
    )
    acc: dict[str, dict[str, dict[str, Any]]] = {
        b: {ph: {"a_ttft": [], "tokens": 0, "wall": 0.0, "errors": []} for ph in ("control", "new")}
        for b in backends
    }
    # Interleaved: each round runs every backend in turn (a fresh server each: nothing cached but
    # schemas A and B), so a slow stretch of a shared machine falls on all of them.
    for r in range(args.rounds):
        # Every backend gets the same never-seen schemas in the same round.
        fresh = real[r * per_phase_b : (r + 1) * per_phase_b]
        for backend in backends:
            server = Server(model_dir, backend, args.dtype)
            try:
                for s in (SCHEMA_A, SCHEMA_B):  # cached before measuring
                    server.request(s, "Example as JSON.", 8)
                for name, bs in (("control", [SCHEMA_B] * per_phase_b), ("new", fresh)):
                    res = phase(server, args.clients, args.per_client, bs, args.max_tokens)
                    into = acc[backend][name]
                    for k in ("a_ttft", "errors"):
                        into[k] += res[k]
                    into["tokens"] += res["tokens"]
                    into["wall"] += res["wall"]
                    print(
                        f"  round {r + 1} {backend} {name}: A p95 {pct(res['a_ttft'], 0.95) * 1000:.0f} ms, "
                        f"{len(res['errors'])} errors",
                        flush=True,
                    )
            finally:
                server.stop()
    rows = []
    for backend in backends:
        control, new = acc[backend]["control"], acc[backend]["new"]
        c95, n95 = pct(control["a_ttft"], 0.95), pct(new["a_ttft"], 0.95)
        refused = sum(e.startswith("B: ") for e in new["errors"])
        rows.append({
            "backend": backend,
            "control p50": pct(control["a_ttft"], 0.5) * 1000, "control p95": c95 * 1000,
            "new p50": pct(new["a_ttft"], 0.5) * 1000, "new p95": n95 * 1000,
            "ratio": n95 / c95 if c95 == c95 and c95 > 0 else float("nan"),
            "tok/s": (control["tokens"] + new["tokens"]) / max(1e-9, control["wall"] + new["wall"]),
            "new schemas failed": f"{refused}/{per_phase_b * args.rounds}",
            "A errors": sum(e.startswith("A: ") for e in control["errors"] + new["errors"]),
            "first error": next((e for e in new["errors"] if e.startswith("B: ")), "")[:90],
        })  # fmt: skip
    cols = [
        "backend",
        "control p50",
        "control p95",
        "new p50",
        "new p95",
        "ratio",
        "tok/s",
        "new schemas failed",
        "A errors",
    ]
    print("\n| " + " | ".join(cols) + " |\n|" + " --- |" * len(cols))
    for row in rows:
        cells = [
            f"{row[c]:.0f}"
            if isinstance(row[c], float) and c != "ratio"
            else (f"{row[c]:.2f}" if c == "ratio" else str(row[c]))
            for c in cols
        ]
        print("| " + " | ".join(cells) + " |")
    ref = next((r for r in rows if r["backend"] == "xgrammar"), None)
    for row in rows:
        if row["first error"]:
            print(f"{row['backend']}: first new-schema failure: {row['first error']}")
        if ref is not None and row is not ref:
            print(f"{row['backend']}: new-phase p95 / xgrammar's = {row['new p95'] / ref['new p95']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
