"""Soak/load run of ``corral serve`` on loopback: many concurrent clients for a bounded time over a
mix of cached, new, slot and deliberately bad requests.

    python bench/bench_soak.py --clients 32 --seconds 600
    python bench/bench_soak.py --clients 128 --seconds 600 --backend llama.cpp
    python bench/bench_soak.py --distinct --clients 16 --seconds 300 --cache-mb 16

``--distinct``: every request carries a schema no other request has (objects with their own
property names, types, bounds and enums), so each is a cache miss and a conversion: the compile
cache evicts (``--cache-mb`` small) and the converter process is recycled. Printed besides: the
RSS of the server and of its converter processes sampled over the run (start, each tenth of the
run, end), the evictions, and the growth over the second half of the run (the figure that shows
whether memory is bounded once the cache is full).

Prints requests served, replies by status, p50/p99 latency per kind, the server's RSS at the
start (after warm-up), its peak and at the end, and checks every 200 reply: its content must
validate against the request's schema (or the regex), so a lost or corrupted reply is counted.
Targets: zero 5xx on well-formed requests, zero lost or corrupted replies, bounded RSS growth.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

try:  # the openai client's HTTP library: httpx, or its successor httpx2
    import httpx
except ImportError:  # pragma: no cover
    import httpx2 as httpx  # type: ignore[no-redef]
import jsonschema

MODEL = "SmolLM2-135M-Instruct"
CACHED = [
    {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"]},
    {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}},
        "required": ["n"],
    },
    {"enum": ["red", "green", "blue"]},
]
SLOT = {"type": "object", "properties": {"cc": {"type": "string", "x-corral-slot": "cc"}}, "required": ["cc"]}


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tree_rss_kb(pid: int) -> tuple[int, int]:
    """(RSS of `pid`, summed RSS of its descendants: the converter and compile processes)."""
    kids, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            children = [
                int(c)
                for t in Path(f"/proc/{p}/task").iterdir()
                for c in (t / "children").read_text().split()
            ]
        except OSError:
            continue
        for c in children:
            try:
                kids += _rss_kb(c)
            except OSError:
                continue
            stack.append(c)
    return _rss_kb(pid), kids


def _distinct_schema(rng: random.Random, i: int) -> dict:
    """A schema of its own for request `i`: 1-4 properties with names, types and bounds drawn
    from `rng` and tagged with `i` (so no two requests share a cache entry)."""
    props: dict[str, object] = {}
    for j in range(rng.randint(1, 4)):
        kind = rng.choice(("int", "str", "enum", "bool", "arr"))
        name = f"k{i}_{j}"
        if kind == "int":
            lo = rng.randrange(100)
            props[name] = {"type": "integer", "minimum": lo, "maximum": lo + rng.randrange(1, 1000)}
        elif kind == "str":
            props[name] = {"type": "string", "maxLength": rng.randint(1, 12)}
        elif kind == "enum":
            props[name] = {"enum": [f"e{i}-{x}" for x in range(rng.randint(2, 6))]}
        elif kind == "bool":
            props[name] = {"type": "boolean"}
        else:
            props[name] = {"type": "array", "items": {"type": "integer"}, "maxItems": rng.randint(1, 3)}
    return {"type": "object", "properties": props, "required": list(props)[:1]}


def _request(rng: random.Random, i: int, distinct: bool = False) -> tuple[str, dict, object]:
    """(kind, body, checker): checker(content) is True for a correct reply."""
    msgs = [{"role": "user", "content": "Answer in JSON."}]
    r = rng.random()
    if distinct:
        schema = _distinct_schema(rng, i)
        fmt = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}
        body = {"model": MODEL, "messages": msgs, "max_tokens": 40, "temperature": 0, "response_format": fmt}
        # (room for the shortest completion, else a 400) and a reply cut at max_tokens is
        # checked only when it parses.
        check = jsonschema.Draft202012Validator(schema)
        return "distinct", body, lambda c: _valid_or_cut(check, c)
    if r < 0.45:
        schema = rng.choice(CACHED)
        kind = "cached"
    elif r < 0.65:
        schema = {"type": "object", "properties": {"tag": {"enum": [f"t{i}", f"u{i}"]}}, "required": ["tag"]}
        kind = "new"
    elif r < 0.8:
        values = [f"CC-{rng.randrange(1000)}" for _ in range(3)]
        body = {"model": MODEL, "messages": msgs, "max_tokens": 24, "temperature": 0,
                "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": SLOT}},
                "corral_slots": {"cc": values}}  # fmt: skip
        return "slot", body, lambda c: json.loads(c)["cc"] in values
    elif r < 0.9:
        contradictory = {"type": "integer", "minimum": 5, "maximum": 1}
        fmt = {"type": "json_schema", "json_schema": {"name": "s", "schema": contradictory}}
        body = {"model": MODEL, "messages": msgs, "max_tokens": 8, "response_format": fmt}
        return "bad", body, None
    else:
        body = {"model": MODEL, "prompt": "Code:", "max_tokens": 12, "regex": "[A-Z]{3}-[0-9]{2}"}
        return "regex", body, lambda c: re.fullmatch("[A-Z]{3}-[0-9]{2}", c) is not None
    fmt = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}
    body = {"model": MODEL, "messages": msgs, "max_tokens": 24, "temperature": 0, "response_format": fmt}
    check = jsonschema.Draft202012Validator(schema)
    return kind, body, lambda c: check.is_valid(json.loads(c))


def _valid_or_cut(check: jsonschema.Draft202012Validator, content: str) -> bool:
    try:
        value = json.loads(content)
    except ValueError:
        return True  # cut at max_tokens (the budget is not this mode's subject)
    return bool(check.is_valid(value))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--backend", default="llama.cpp")
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--max-queue", type=int, default=64)
    ap.add_argument("--distinct", action="store_true", help="every request a schema of its own")
    ap.add_argument("--cache-mb", type=int, default=256, help="the server's --cache-mb")
    args = ap.parse_args()
    port = _port()
    log = open(f"/tmp/corral-soak-{port}.log", "wb")  # noqa: SIM115
    cmd = [sys.executable, "-m", "corral", "serve", "--backend", args.backend, "--port", str(port),
           "--max-batch", str(args.max_batch), "--max-queue", str(args.max_queue),
           "--cache-mb", str(args.cache_mb)]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, HF_HUB_OFFLINE="1")
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        if proc.poll() is not None:
            sys.exit(f"the server exited with {proc.returncode}; see {log.name}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.25)
    http = httpx.Client(base_url=url, timeout=120, limits=httpx.Limits(max_connections=args.clients + 4))
    for schema in CACHED:  # warm-up: the cached schemas compiled once
        fmt = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}
        warm = {
            "model": MODEL,
            "messages": [{"role": "user", "content": "Hi"}],
            "max_tokens": 4,
            "response_format": fmt,
        }
        http.post("/v1/chat/completions", json=warm)
    rss_start = peak = _rss_kb(proc.pid)
    t_start = time.monotonic()
    timeline: list[tuple[float, int, int]] = [(0.0, *_tree_rss_kb(proc.pid))]
    statuses: Counter[tuple[str, int]] = Counter()
    latency: dict[tuple[str, int], list[float]] = defaultdict(list)
    corrupted: list[str] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + args.seconds
    counter = iter(range(10**9))

    def client(seed: int) -> None:
        rng = random.Random(seed)
        while time.monotonic() < stop_at:
            i = next(counter)
            kind, body, check = _request(rng, i, args.distinct)
            path = "/v1/completions" if "prompt" in body else "/v1/chat/completions"
            t0 = time.perf_counter()
            try:
                r = http.post(path, json=body)
                status = r.status_code
            except httpx.HTTPError as e:
                with lock:
                    corrupted.append(f"{kind}: transport error {e!r}")
                continue
            dt = time.perf_counter() - t0
            bad = None
            if status == 200 and check is not None:
                try:
                    c = r.json()["choices"][0]
                    content = c["message"]["content"] if "message" in c else c["text"]
                    if not check(content):
                        bad = f"{kind}: invalid reply {content!r}"
                except (ValueError, KeyError, TypeError) as e:
                    bad = f"{kind}: unreadable reply {e!r}"
            with lock:
                statuses[(kind, status)] += 1
                latency[(kind, status)].append(dt)
                if bad:
                    corrupted.append(bad)
            if status == 429:
                time.sleep(float(r.headers.get("retry-after", "1")))

    def sampler() -> None:
        nonlocal peak
        next_mark = t_start + args.seconds / 10
        while time.monotonic() < stop_at:
            peak = max(peak, _rss_kb(proc.pid))
            if time.monotonic() >= next_mark:
                timeline.append((time.monotonic() - t_start, *_tree_rss_kb(proc.pid)))
                next_mark += args.seconds / 10
            time.sleep(1)

    threads = [threading.Thread(target=client, args=(s,)) for s in range(args.clients)]
    threads.append(threading.Thread(target=sampler))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(2)
    rss_end = _rss_kb(proc.pid)
    timeline.append((time.monotonic() - t_start, *_tree_rss_kb(proc.pid)))
    health = http.get("/health").json()
    metrics = http.get("/metrics").text
    evictions = sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("corral_compile_cache_evictions_total")
    )
    total = sum(statuses.values())
    print(f"{args.clients} clients, {args.seconds:.0f} s, backend {args.backend}: {total} requests")
    print("| kind | status | count | p50 s | p99 s |")
    print("| --- | --- | --- | --- | --- |")
    for (kind, status), n in sorted(statuses.items()):
        lat = sorted(latency[(kind, status)])
        p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
        print(f"| {kind} | {status} | {n} | {statistics.median(lat):.2f} | {p99:.2f} |")
    five = sum(n for (k, s), n in statuses.items() if s >= 500 and k != "bad")
    print(f"5xx on well-formed requests: {five}; lost or corrupted replies: {len(corrupted)}")
    for c in corrupted[:10]:
        print("  ", c)
    mib = {k: v / 1024 for k, v in (("start", rss_start), ("peak", peak), ("end", rss_end))}
    print(
        f"server RSS: start {mib['start']:.0f} MiB, peak {mib['peak']:.0f} MiB, end {mib['end']:.0f} MiB "
        f"(growth {mib['end'] - mib['start']:+.0f} MiB); after: {health}"
    )
    print(f"compile-cache evictions: {evictions:.0f}")
    print("RSS over the run (s: server MiB + converter/compile processes MiB):")
    print("  " + "  ".join(f"{t:.0f}s: {a / 1024:.0f}+{b / 1024:.0f}" for t, a, b in timeline))
    half = min(timeline, key=lambda x: abs(x[0] - timeline[-1][0] / 2))
    grow = (timeline[-1][1] + timeline[-1][2] - half[1] - half[2]) / 1024
    print(f"growth over the second half of the run (server + children): {grow:+.0f} MiB")
    proc.terminate()  # graceful: in-flight requests finish first (--shutdown-timeout)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        print("the server did not exit within 120 s of SIGTERM; killed")


if __name__ == "__main__":
    main()
