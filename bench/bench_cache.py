"""Persistent compile cache benchmark: compiling a constraint vs loading it from a cache directory.

What is measured
----------------
Per schema of a seeded sample from each jsonschemabench set (``../shared/data/jsonschemabench``,
or ``--data``), Llama 3.2 tokenizer, in one process run, along the path every host takes
(``corral.compile.compile_constraint`` with a :class:`~corral.compile.CompileCache`):

* **compile**: a cache miss with no directory — schema conversion plus engine compile, with the
  engine's process-wide automaton memos cleared first (what a fresh process pays);
* **disk hit**: a fresh memory cache over the directory the compile was written to — open and
  read the entry, check its envelope (SHA-256), parse the ``.corral`` artifact, load the engine
  bytes; as a restarted server or a new vLLM worker pays it (the file is in the OS page cache:
  a cold disk adds its read time);
* **disk hit, zlib**: the same with a compressed artifact body (``ArtifactCodec(compress=True)``),
  to show whether compression pays for a cache;
* **of which artifact**: ``corral.compile.artifact.loads`` alone on the same bytes, in memory
  (what is left of a disk hit is the file read, the envelope check and the cache bookkeeping);
* **write**: the atomic write of the entry after the compile (temp file, fsync, rename);
* **bytes**: entry sizes, uncompressed and zlib.

Each time is the minimum of ``--repeat`` runs. The table prints p50 / p90 / max per set and over
all schemas, and compile / disk-hit ratios of the percentiles (above 1: the cache is faster).

How to run
----------
    nice python bench/bench_cache.py                  # 20 schemas per set
    nice python bench/bench_cache.py --per-set 0      # every schema
    nice python bench/bench_cache.py --per-set 10 --largest 3
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_json_schema import DEFAULT_DATA, SETS, sample_files  # noqa: E402


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def _fmt3(xs: list[float]) -> str:
    return f"{_pct(xs, 50):>7.2f} {_pct(xs, 90):>7.2f} {max(xs):>8.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--per-set", type=int, default=20)
    ap.add_argument("--largest", type=int, default=0, help="also each set's K largest schema files")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", type=Path, help="write per-schema records here")
    args = ap.parse_args()

    import corral
    from corral import _native, models
    from corral.compile import CompileCache, ConstraintSpec, artifact, compile_constraint
    from corral.compile.disk_cache import ArtifactCodec, DiskCache

    tok = corral.Tokenizer.from_file(models.llama32_tokenizer_path())
    _ = tok.core  # the native vocabulary (its trie) is built once, outside the timings
    sets = [s for s in args.sets.split(",") if s]
    files = sample_files(args.data, sets, args.per_set, args.seed)
    if args.largest > 0:
        have = set(files)
        for s in sets:
            big = sorted((args.data / s).glob("*.json"), key=lambda p: p.stat().st_size)[-args.largest :]
            files += [(s, f) for f in big if (s, f) not in have]
    root = Path(tempfile.mkdtemp(prefix="corral-bench-cache-"))
    plain, packed = DiskCache(root / "plain", ArtifactCodec()), DiskCache(root / "zlib", ArtifactCodec(True))
    recs: list[dict[str, Any]] = []
    failed = 0
    for set_name, path in files:
        try:
            spec = ConstraintSpec.json_schema(json.loads(path.read_text()))
            key = spec.key(tok.hash)
            t_compile = float("inf")
            for _ in range(args.repeat):
                _native.clear_engine_caches()
                t0 = time.perf_counter()
                c = compile_constraint(spec, tok, cache=CompileCache(1 << 30))
                t_compile = min(t_compile, time.perf_counter() - t0)
        except (corral.CorralError, ValueError, RecursionError):
            failed += 1
            continue
        rec: dict[str, Any] = {"set": set_name, "file": path.name, "compile_s": t_compile}
        disks = (("plain", plain), ("zlib", packed))
        stored = True
        for name, disk in disks:
            t0 = time.perf_counter()
            stored = stored and disk.store(key, tok, c)
            rec[f"write_{name}_s"] = time.perf_counter() - t0
            if stored:
                rec[f"bytes_{name}"] = disk.path(key, tok).stat().st_size
        if not stored:  # larger than the bound: not expected with 1 GiB
            failed += 1
            continue
        for i in range(args.repeat):  # the two codecs alternate, so neither always goes first
            for name, disk in disks if i % 2 == 0 else disks[::-1]:
                fresh = CompileCache(1 << 30, disk=disk)
                t0 = time.perf_counter()
                loaded = compile_constraint(spec, tok, cache=fresh)
                t = time.perf_counter() - t0
                rec[f"hit_{name}_s"] = min(t, rec.get(f"hit_{name}_s", t))
                assert fresh.stats()["loads"] == 1 and fresh.stats()["compiles"] == 0
                assert loaded.grammar.grammar_text == c.grammar.grammar_text
        data = artifact.dumps(c, compress=False)
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            artifact.loads(data, tok)
            best = min(best, time.perf_counter() - t0)
        rec["artifact_loads_s"] = best
        recs.append(rec)
    if args.json:
        args.json.write_text(json.dumps(recs, indent=1))
    print(f"tokenizer: Llama 3.2 ({tok.vocab_size} tokens); schemas: {len(recs)}, not compiled: {failed}")
    print(f"times: min of {args.repeat} runs, ms; compile = convert + engine compile, engine memos cleared")
    hdr = (
        f"{'set':<15}{'n':>4} | {'compile p50/p90/max':>24} | {'disk hit p50/p90/max':>24} | "
        f"{'ratio p50/p90':>13} | {'artifact p50/p90':>16} | {'hit zlib p50/p90':>16} | {'write p50':>9} | "
        f"{'KiB p50/p90 (zlib p50/p90)':>27}"
    )
    print(hdr)
    print("-" * len(hdr))
    for name in [*sets, "all"]:
        rs = [r for r in recs if name in ("all", r["set"])]
        if not rs:
            continue
        c = [r["compile_s"] * 1e3 for r in rs]
        h = [r["hit_plain_s"] * 1e3 for r in rs]
        z = [r["hit_zlib_s"] * 1e3 for r in rs]
        w = [r["write_plain_s"] * 1e3 for r in rs]
        a = [r["artifact_loads_s"] * 1e3 for r in rs]
        b = [r["bytes_plain"] / 1024 for r in rs]
        bz = [r["bytes_zlib"] / 1024 for r in rs]
        print(
            f"{name:<15}{len(rs):>4} | {_fmt3(c)} | {_fmt3(h)} | "
            f"{_pct(c, 50) / _pct(h, 50):>6.1f} {_pct(c, 90) / _pct(h, 90):>6.1f} | "
            f"{_pct(a, 50):>7.2f} {_pct(a, 90):>8.2f} | "
            f"{_pct(z, 50):>7.2f} {_pct(z, 90):>8.2f} | {_pct(w, 50):>9.2f} | "
            f"{_pct(b, 50):>6.1f} {_pct(b, 90):>6.1f} ({_pct(bz, 50):>5.1f} {_pct(bz, 90):>6.1f})"
        )
    for d in (plain, packed):
        for p in d.directory.glob("*"):
            p.unlink()
        d.directory.rmdir()
    root.rmdir()


if __name__ == "__main__":
    main()
