"""Matcher snapshot benchmark: what ``Matcher.snapshot()`` and ``CompiledGrammar.restore()`` cost.

What is measured
----------------
Per schema of a seeded sample from each jsonschemabench set (``../shared/data/jsonschemabench``,
or ``--data``), Llama 3.2 tokenizer, one process run. For each output length N in ``--tokens``,
a seeded walk of up to N tokens (uniform over the mask, which makes long strings: a worst case
for the bytes; it stops early when the value is complete, so N is a cap) is decoded once, then:

* **decode**: the engine's share of generating those N tokens: N x (mask + accept_token), on a
  grammar whose mask cache and mask memo are already warm from the identical walk — the
  cheapest a decode of those tokens can be, so restore/decode is a conservative ratio;
* **replay**: a fresh matcher fed the same N token ids with ``accept_token`` (no masks): what a
  host that kept the token ids could do instead of a snapshot;
* **snapshot**: ``m.snapshot()``, and its size in bytes;
* **restore**: ``g.restore(snapshot)`` on the grammar that took it (identity already cached);
* **identity**: the first restore on a grammar freshly loaded from the artifact (the load is not
  timed) minus a warm restore: the once-per-grammar cost of hashing its artifact bytes for the
  identity check.

Each time is the minimum of ``--repeat`` runs. The table prints p50/p90 per N over all schemas
and the ratios restore/replay and restore/decode measured on the same walks (below 1: restore is
cheaper).

How to run
----------
    nice python bench/bench_snapshot.py                      # 8 schemas per set, N = 64,256,1024
    nice python bench/bench_snapshot.py --per-set 20 --tokens 32,512
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_json_schema import DEFAULT_DATA, SETS, sample_files  # noqa: E402


def _best(fn: Any, repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def _walk(g: Any, tok: Any, n: int, seed: int) -> list[int]:
    import corral

    rng = random.Random(seed)
    m = g.matcher()
    row = corral.allocate_bitmask(1, tok)
    eos = set(tok.eos_ids)
    ids: list[int] = []
    for _ in range(n):
        m.fill_next_token_bitmask(row, 0)
        allowed = [t for t in corral.allowed_tokens(row[0], tok) if t not in eos]
        if not allowed:
            break
        t = rng.choice(allowed)
        assert m.accept_token(t)
        ids.append(t)
    return ids


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--per-set", type=int, default=8)
    ap.add_argument("--tokens", default="64,256,1024")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import corral
    from corral import models
    from corral.compile.converter import convert_schema
    from corral.engine import CompiledGrammar

    tok = corral.Tokenizer.from_file(models.llama32_tokenizer_path())
    _ = tok.core
    lengths = [int(x) for x in args.tokens.split(",") if x]
    files = sample_files(args.data, [s for s in args.sets.split(",") if s], args.per_set, args.seed)
    recs: list[dict[str, Any]] = []
    for _set, path in files:
        try:
            text, _report = convert_schema(json.loads(path.read_text()), {})
            g = corral.compile_grammar(text, tok)
        except (corral.CorralError, ValueError, RecursionError):
            continue
        art = g.to_bytes()
        for n in lengths:
            ids = _walk(g, tok, n, args.seed)  # warms the mask cache for the decode timing
            row = corral.allocate_bitmask(1, tok)

            def decode(g: Any = g, ids: list[int] = ids, row: Any = row) -> Any:
                m = g.matcher()
                for t in ids:
                    m.fill_next_token_bitmask(row, 0)
                    m.accept_token(t)
                return m

            def replay(g: Any = g, ids: list[int] = ids) -> Any:
                m = g.matcher()
                for t in ids:
                    m.accept_token(t)
                return m

            t_decode, m = _best(decode, args.repeat)
            t_replay, _ = _best(replay, args.repeat)
            t_snap, snap = _best(m.snapshot, args.repeat)
            t_restore, r = _best(lambda g=g, snap=snap: g.restore(snap), args.repeat)
            assert r.snapshot() == snap
            t_first = float("inf")
            for _ in range(args.repeat):
                loaded = CompiledGrammar.from_bytes(art, tok)  # a new grammar: identity not cached
                t0 = time.perf_counter()
                loaded.restore(snap)
                t_first = min(t_first, time.perf_counter() - t0)
            recs.append(
                {
                    "n": n,
                    "steps": len(ids),
                    "decode": t_decode,
                    "replay": t_replay,
                    "snapshot": t_snap,
                    "restore": t_restore,
                    "identity": max(0.0, t_first - t_restore),
                    "bytes": len(snap),
                    "out_bytes": len(snap) - 72 - 17,
                }
            )
    schemas = len(recs) // max(1, len(lengths))
    print(f"tokenizer: Llama 3.2 ({tok.vocab_size} tokens); walks: {len(recs)} over {schemas} schemas")
    print(f"times in ms, min of {args.repeat} runs; ratios of the p50s (and p90s) measured on the same walks")
    hdr = (
        f"{'N':>5} | {'decode p50/p90':>15} | {'replay p50/p90':>15} | {'snapshot p50/p90':>16} | "
        f"{'restore p50/p90':>16} | {'restore/replay':>14} | {'restore/decode':>14} | "
        f"{'KiB p50/p90':>12} | {'identity ms p50/p90':>19}"
    )
    print(hdr)
    print("-" * len(hdr))
    for n in lengths:
        rs = [r for r in recs if r["n"] == n]
        if not rs:
            continue

        def col(key: str, rs: list[dict[str, Any]] = rs) -> list[float]:
            return [r[key] * 1e3 for r in rs]

        d, rp, s, rs_ = col("decode"), col("replay"), col("snapshot"), col("restore")
        kib = [r["bytes"] / 1024 for r in rs]
        ident = col("identity")
        print(
            f"{n:>5} | {_pct(d, 50):>7.2f} {_pct(d, 90):>7.2f} | {_pct(rp, 50):>7.2f} {_pct(rp, 90):>7.2f} | "
            f"{_pct(s, 50):>8.3f} {_pct(s, 90):>7.3f} | {_pct(rs_, 50):>8.2f} {_pct(rs_, 90):>7.2f} | "
            f"{_pct(rs_, 50) / _pct(rp, 50):>6.2f} {_pct(rs_, 90) / _pct(rp, 90):>7.2f} | "
            f"{_pct(rs_, 50) / _pct(d, 50):>6.3f} {_pct(rs_, 90) / _pct(d, 90):>7.3f} | "
            f"{_pct(kib, 50):>5.1f} {_pct(kib, 90):>6.1f} | {_pct(ident, 50):>9.2f} {_pct(ident, 90):>9.2f}"
        )


if __name__ == "__main__":
    main()
