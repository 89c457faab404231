"""Artifact benchmark (engine layer): compiling a grammar vs loading its engine artifact.

What is measured
----------------
Per schema of a seeded sample from each jsonschemabench set (``../shared/data/jsonschemabench``,
or ``--data``), Llama 3.2 tokenizer, in one process run:

* **compile**: the engine compile, grammar text -> ``CompiledGrammar`` (``corral.compile_grammar``
  on the converter's output; the JSON Schema conversion itself is not counted), with the
  engine's process-wide automaton memos cleared first (``_native.clear_engine_caches``): the
  first compile of that grammar in a fresh process, which is what an artifact replaces;
* **load**: ``CompiledGrammar.from_bytes(artifact, tokenizer)``;
* **bytes**: the artifact's size (``to_bytes()``);
* **first mask**: ``matcher()`` + the first ``fill_next_token_bitmask`` on the loaded grammar,
  measured before anything else touched this schema's automata, and then on the compiled one,
  which finds the loaded grammar's entries in the per-vocabulary mask pool (identical automata
  share entries) — so the second column shows what the pool saves, not a cost of loading. The
  pool stays warm across schemas, as in a serving process.

Each time is the minimum of ``--repeat`` runs. The table prints p50 / p90 / max per set and over
all schemas, and compile / load ratios of the percentiles (above 1: loading is faster).
``--largest K`` adds each set's K largest schema files (by bytes) to the sample; the file
table's "largest" row is those files alone (the target: load p90 at least 10x below compile p90).

A second table measures the whole ``.corral`` file (:mod:`corral.compile.artifact`) against the
whole compile it replaces:

* **compile**: ``compile_spec(ConstraintSpec.json_schema(schema), tok)`` — conversion plus the
  engine compile, with the engine memos cleared (the spec has ``corral generate``'s defaults);
* **load**: ``artifact.loads(file, tok)`` of the zlib-compressed file, and of the same file
  written uncompressed (``compress=False``): what compression costs at load time;
* **KiB**: the file's size, compressed and not.

How to run
----------
    nice python bench/bench_artifact.py                     # 30 schemas per set
    nice python bench/bench_artifact.py --per-set 0         # every schema
    nice python bench/bench_artifact.py --per-set 20 --largest 5
"""

from __future__ import annotations

import argparse
import json
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


def _first_mask(g: Any, tok: Any) -> float:
    import corral

    mask = corral.allocate_bitmask(1, tok)
    t0 = time.perf_counter()
    g.matcher().fill_next_token_bitmask(mask, 0)
    return time.perf_counter() - t0


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--per-set", type=int, default=30)
    ap.add_argument("--largest", type=int, default=0, help="also each set's K largest schema files")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", type=Path, help="write per-schema records here")
    args = ap.parse_args()

    import corral
    from corral import _native, models
    from corral.compile import ConstraintSpec, artifact
    from corral.compile.build import compile_spec
    from corral.compile.converter import convert_schema
    from corral.engine import CompiledGrammar

    tok = corral.Tokenizer.from_file(models.llama32_tokenizer_path())
    _ = tok.core  # the native vocabulary (its trie) is built once, outside the timings
    sets = [s for s in args.sets.split(",") if s]
    files = sample_files(args.data, sets, args.per_set, args.seed)
    largest: set[tuple[str, Path]] = set()  # each set's K largest files (the "largest" rows)
    if args.largest > 0:
        have = set(files)
        for s in sets:
            big = sorted((args.data / s).glob("*.json"), key=lambda p: p.stat().st_size)[-args.largest :]
            largest |= {(s, f) for f in big}
            files += [(s, f) for f in big if (s, f) not in have]
    recs: list[dict[str, Any]] = []
    failed = 0
    for set_name, path in files:
        try:
            text, _report = convert_schema(json.loads(path.read_text()), {})

            def compile_cold(text: str = text) -> Any:
                _native.clear_engine_caches()
                return corral.compile_grammar(text, tok)

            t_compile, g = _best(compile_cold, args.repeat)
        except (corral.CorralError, ValueError, RecursionError):
            failed += 1
            continue
        data = g.to_bytes()
        t_load, h = _best(lambda data=data: CompiledGrammar.from_bytes(data, tok), args.repeat)
        assert h.grammar_text == g.grammar_text
        spec = ConstraintSpec.json_schema(json.loads(path.read_text()))

        def compile_whole(spec: Any = spec) -> Any:
            _native.clear_engine_caches()
            return compile_spec(spec, tok)

        try:
            t_whole, c = _best(compile_whole, args.repeat)
        except (corral.CorralError, ValueError, RecursionError):
            failed += 1
            continue
        packed, raw = artifact.dumps(c), artifact.dumps(c, compress=False)
        t_file, d = _best(lambda packed=packed: artifact.loads(packed, tok), args.repeat)
        t_raw, _ = _best(lambda raw=raw: artifact.loads(raw, tok), args.repeat)
        assert d.grammar.grammar_text == c.grammar.grammar_text
        recs.append(
            {
                "set": set_name,
                "file": path.name,
                "largest": (set_name, path) in largest,
                "compile_s": t_compile,
                "load_s": t_load,
                "bytes": len(data),
                "first_mask_loaded_s": _first_mask(h, tok),
                "first_mask_compiled_s": _first_mask(g, tok),
                "whole_compile_s": t_whole,
                "file_load_s": t_file,
                "file_load_raw_s": t_raw,
                "file_bytes": len(packed),
                "file_bytes_raw": len(raw),
            }
        )
    if args.json:
        args.json.write_text(json.dumps(recs, indent=1))
    print(f"tokenizer: Llama 3.2 ({tok.vocab_size} tokens); schemas: {len(recs)}, not compiled: {failed}")
    print(f"times: min of {args.repeat} runs; compile = engine compile with cleared engine memos")
    hdr = (
        f"{'set':<15}{'n':>4} | {'compile ms p50/p90/max':>24} | {'load ms p50/p90/max':>22} | "
        f"{'ratio p50/p90':>13} | {'KiB p50/p90/max':>18} | {'1st mask ms p50 load/then compiled':>35}"
    )
    print(hdr)
    print("-" * len(hdr))
    for name in [*sets, "all"]:
        rs = [r for r in recs if name in ("all", r["set"])]
        if not rs:
            continue
        c = [r["compile_s"] * 1e3 for r in rs]
        ld = [r["load_s"] * 1e3 for r in rs]
        b = [r["bytes"] / 1024 for r in rs]
        fl = [r["first_mask_loaded_s"] * 1e3 for r in rs]
        fc = [r["first_mask_compiled_s"] * 1e3 for r in rs]
        print(
            f"{name:<15}{len(rs):>4} | {_pct(c, 50):>7.2f} {_pct(c, 90):>7.2f} {max(c):>8.2f} | "
            f"{_pct(ld, 50):>6.3f} {_pct(ld, 90):>6.3f} {max(ld):>8.3f} | "
            f"{_pct(c, 50) / _pct(ld, 50):>6.1f} {_pct(c, 90) / _pct(ld, 90):>6.1f} | "
            f"{_pct(b, 50):>5.1f} {_pct(b, 90):>5.1f} {max(b):>6.1f} | "
            f"{_pct(fl, 50):>17.3f} {_pct(fc, 50):>17.3f}"
        )

    _file_table(recs, sets)


def _file_table(recs: list[dict[str, Any]], sets: list[str]) -> None:
    """The .corral file against the whole compile, per set."""
    print()
    print("whole constraint: compile (conversion + engine, cleared memos) vs .corral file load")
    hdr = (
        f"{'set':<15}{'n':>4} | {'compile ms p50/p90/max':>24} | {'load ms p50/p90/max (zlib)':>27} | "
        f"{'ratio p50/p90':>13} | {'raw load p50/p90':>16} | {'KiB zlib p50/p90':>16} | "
        f"{'KiB raw p50/p90':>15}"
    )
    print(hdr)
    print("-" * len(hdr))
    for name in [*sets, "all", "largest"]:
        rs = [r for r in recs if name in ("all", r["set"]) or (name == "largest" and r["largest"])]
        if not rs:
            continue
        c = [r["whole_compile_s"] * 1e3 for r in rs]
        ld = [r["file_load_s"] * 1e3 for r in rs]
        raw = [r["file_load_raw_s"] * 1e3 for r in rs]
        b = [r["file_bytes"] / 1024 for r in rs]
        braw = [r["file_bytes_raw"] / 1024 for r in rs]
        print(
            f"{name:<15}{len(rs):>4} | {_pct(c, 50):>7.2f} {_pct(c, 90):>7.2f} {max(c):>8.2f} | "
            f"{_pct(ld, 50):>8.3f} {_pct(ld, 90):>8.3f} {max(ld):>9.3f} | "
            f"{_pct(c, 50) / _pct(ld, 50):>6.1f} {_pct(c, 90) / _pct(ld, 90):>6.1f} | "
            f"{_pct(raw, 50):>7.3f} {_pct(raw, 90):>8.3f} | "
            f"{_pct(b, 50):>7.1f} {_pct(b, 90):>8.1f} | {_pct(braw, 50):>6.1f} {_pct(braw, 90):>8.1f}"
        )


if __name__ == "__main__":
    main()
