"""How much of a JSON Schema compile is spent in trial calls into the engine (probes).

The schema converter asks the engine about regexes before it writes them: every ``pattern`` is
checked (``_check_regex``) and every string product (pattern & format & length) is probed for its
automaton size (``grammar.probe.dfa_states``). This script compiles a seeded sample of the
jsonschemabench schemas with corral against the Llama 3.2 tokenizer and reports, per schema and
in total, the time inside those calls as a share of the whole compile (conversion + engine).

    python bench/bench_probe_share.py                 # 40 schemas per set
    python bench/bench_probe_share.py --per-set 10
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import corral
import corral.grammar.probe as probe_mod
from corral import models

SETS = ["Github_trivial", "Github_easy", "Github_medium", "Glaiveai2K", "Snowplow"]


def _wrap(holder: object, name: str, acc: dict[str, float]) -> None:
    fn = getattr(holder, name)

    def timed(*a: object, **k: object) -> object:
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            acc[name] = acc.get(name, 0.0) + time.perf_counter() - t0

    if hasattr(fn, "cache_clear"):  # keep the memo observable: clear it per schema
        timed.cache_clear = fn.cache_clear  # type: ignore[attr-defined]
    setattr(holder, name, timed)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/jsonschemabench"
    )
    ap.add_argument("--per-set", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    tok = corral.Tokenizer.from_file(models.llama32_tokenizer_path())
    import corral.schema as schema_mod

    acc: dict[str, float] = {}
    raw_probe = probe_mod.dfa_states
    _wrap(probe_mod, "dfa_states", acc)
    _wrap(schema_mod, "_check_regex", acc)  # compile_json_schema looks it up at call time
    rng = random.Random(args.seed)
    total = crossing = 0.0
    shares = []
    n = 0
    for name in SETS:
        files = sorted((args.data / name).glob("*.json"))
        for f in rng.sample(files, min(args.per_set, len(files))):
            try:
                schema = json.loads(f.read_text())
            except ValueError:
                continue
            schema = (
                schema.get("schema", schema) if isinstance(schema, dict) and "schema" in schema else schema
            )
            if hasattr(raw_probe, "cache_clear"):
                raw_probe.cache_clear()
            before = sum(acc.values())
            t0 = time.perf_counter()
            try:
                corral.compile_json_schema(schema, tok)
            except corral.CorralError:
                continue
            dt = time.perf_counter() - t0
            dc = sum(acc.values()) - before
            total += dt
            crossing += dc
            shares.append(dc / dt if dt else 0.0)
            n += 1
    print(f"schemas compiled: {n}")
    print(
        f"total compile s: {total:.3f}; in probe/check calls: {crossing:.3f} ({100 * crossing / total:.1f}%)"
    )
    for k, v in sorted(acc.items()):
        print(f"  {k}: {v:.3f} s")
    if shares:
        q = statistics.quantiles(shares, n=10)
        p50, p90, top = 100 * statistics.median(shares), 100 * q[-1], 100 * max(shares)
        print(f"per-schema share p50 {p50:.1f}%  p90 {p90:.1f}%  max {top:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
