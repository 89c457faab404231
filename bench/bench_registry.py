"""Registry benchmark: what naming a constraint costs a request, what publishing a version costs,
and a PUT from source (compile) against a PUT of a signed artifact (load and verify).

What is measured (one process, the SmolLM2 vocabulary)
-------------------------------------------------------
* **lookup**: resolving ``name`` (latest) and ``name@v`` (pinned) with ``N`` live versions — the
  work a request by name adds to the request path;
* **publish**: one copy-on-write swap of the live table with ``N`` versions (what every PUT and
  DELETE does under the registry's lock);
* **PUT**: ``ConstraintRegistry.put`` of synthetic schemas (``--branches`` anyOf object branches
  with distinct integer bounds), from source (conversion + compile, each into a fresh cache) vs
  from the same constraint's signed ``.corral`` (signature check + load), minimum of
  ``--repeat`` runs, with the ratio (above 1: the artifact is faster).

Run: ``python bench/bench_registry.py`` (needs the ``cryptography`` package for signing).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import corral
from corral import _native, models
from corral.compile import CompileCache, ConstraintSpec, compile_constraint
from corral.compile.artifact import dumps
from corral.compile.signing import write_keypair
from corral.server.constraint_files import Source, source_from_body
from corral.server.registry import ConstraintRegistry


def _schema(branches: int) -> dict[str, Any]:
    return {
        "anyOf": [
            {
                "type": "object",
                "properties": {
                    f"k{i}_{j}": {"type": "integer", "minimum": i, "maximum": i * 100 + j} for j in range(4)
                },
                "required": [f"k{i}_0"],
            }
            for i in range(branches)
        ]
    }


def _lookup_and_publish(tok: corral.Tokenizer, n: int) -> tuple[float, float, float]:
    reg = ConstraintRegistry(tok, CompileCache(1 << 26))

    def done(spec: ConstraintSpec, source: Source) -> Future[Any]:
        f: Future[Any] = Future()
        f.set_result(None)
        return f

    reg._compile = done  # type: ignore[method-assign]  # the table alone: no compiles

    async def fill() -> None:
        for i in range(n):
            await reg.put(f"n{i % 100}", i // 100 + 1, Source("regex", f"a{i}"))

    asyncio.run(fill())
    reps = 5000
    t = time.perf_counter()
    for _ in range(reps):
        reg["n7"]
    latest = (time.perf_counter() - t) / reps
    t = time.perf_counter()
    for _ in range(reps):
        reg["n7@1"]
    pinned = (time.perf_counter() - t) / reps
    t = time.perf_counter()
    for _ in range(50):
        with reg._lock:
            reg._swap([])
    return latest, pinned, (time.perf_counter() - t) / 50


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--versions", type=int, nargs="+", default=[100, 1000, 4000])
    ap.add_argument("--branches", type=int, nargs="+", default=[10, 50, 150])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    tok = corral.Tokenizer.from_gguf(models.smollm2_gguf_path())

    print("| live versions | lookup latest (us) | lookup pinned (us) | publish (ms) |")
    print("| ---: | ---: | ---: | ---: |")
    for n in args.versions:
        latest, pinned, publish = _lookup_and_publish(tok, n)
        print(f"| {n:,} | {latest * 1e6:.1f} | {pinned * 1e6:.1f} | {publish * 1e3:.2f} |")

    key = write_keypair(Path(tempfile.mkdtemp()) / "k")[0]
    pub = [Path(str(key) + ".pub")]
    print("\n| schema | PUT from source (ms) | PUT of signed artifact (ms) | ratio | artifact bytes |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for b in args.branches:
        schema = _schema(b)
        spec = ConstraintSpec.json_schema(schema, {"strict": False})
        data = dumps(compile_constraint(spec, tok, cache=CompileCache(1 << 28)), signing_key=key)
        src_t, art_t = [], []
        for _ in range(args.repeat):
            reg = ConstraintRegistry(tok, CompileCache(1 << 28), trusted_keys=pub)
            _native.clear_engine_caches()  # a first compile in a fresh process, as an artifact replaces
            t = time.perf_counter()
            asyncio.run(reg.put("s", 1, source_from_body({"schema": schema})))
            src_t.append(time.perf_counter() - t)
            reg = ConstraintRegistry(tok, CompileCache(1 << 28), trusted_keys=pub)
            t = time.perf_counter()
            asyncio.run(reg.put("s", 1, reg.load_artifact(data)))
            art_t.append(time.perf_counter() - t)
        s, a = min(src_t), min(art_t)
        print(f"| anyOf x {b} | {s * 1e3:.1f} | {a * 1e3:.1f} | {s / a:.1f}x | {len(data):,} |")


if __name__ == "__main__":
    main()
