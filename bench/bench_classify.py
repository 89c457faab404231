"""Classification benchmark: ticket routing (3 labels) with SmolLM2-135M-Instruct on this CPU.

  (a) generate   free generation of up to 8 tokens per ticket, one at a time, then search the
                 text for a label (the common practice); "unparseable" = no label found
  (b) classify   corral.classify, batch size 1
  (c) classify   corral.classify, batched (--batch-size, default 16)

Printed: wall time, items per second, unparseable outputs, agreement with (a), accuracy against
the gold labels, and the speed-ups (targets: b >= 1.3x and c >= 4x faster than a).

    python bench/bench_classify.py               # 600 tickets (about 10 min on 2 cores)
    python bench/bench_classify.py --limit 90    # quicker
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tickets import LABELS, tickets  # noqa: E402

import corral  # noqa: E402

PROMPT = (
    "Classify the support ticket into exactly one of the labels: billing, technical, account.\n\n"
    "Ticket:\n{text}\n\nAnswer with the label only."
)


def find_label(text: str) -> str | None:
    """The first label mentioned in a free-text answer (case-insensitive), or None."""
    hits = [(m.start(), lab) for lab in LABELS for m in [re.search(rf"\b{lab}\b", text, re.I)] if m]
    return min(hits)[1] if hits else None


def main() -> int:
    ap = argparse.ArgumentParser(description="classification benchmark")
    ap.add_argument("--limit", type=int, default=600)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--model", default=None)
    ap.add_argument("--backend", default="transformers")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    model = corral.load_model(args.model, backend=args.backend, threads=args.threads)
    data = tickets(args.limit)
    texts = [t for t, _ in data]
    gold = [g for _, g in data]
    corral.generate(model, "warm-up", max_new_tokens=2)
    print(f"{model.describe()}; {len(data)} tickets", flush=True)

    t0 = time.perf_counter()
    gen = [find_label(corral.generate(model, PROMPT.format(text=t), max_new_tokens=8).text) for t in texts]
    wall_a = time.perf_counter() - t0
    print("  done: (a)", flush=True)
    runs = {}
    for name, bs in (
        ("(b) classify, batch 1", 1),
        (f"(c) classify, batch {args.batch_size}", args.batch_size),
    ):
        t0 = time.perf_counter()
        rs = corral.classify(model, texts, LABELS, template=PROMPT, batch_size=bs)
        runs[name] = ([r.top_label for r in rs], time.perf_counter() - t0)
        print(f"  done: {name}", flush=True)

    def acc(pred: list[str | None]) -> str:
        return f"{sum(p == g for p, g in zip(pred, gold, strict=True)) / len(gold):.1%}"

    rows = [["method", "wall s", "items/s", "unparseable", "agree with (a)", "accuracy", "speed-up"]]
    rows.append(
        [
            "(a) generate 8 tokens + search",
            f"{wall_a:.1f}",
            f"{len(texts) / wall_a:.2f}",
            str(sum(g is None for g in gen)),
            "-",
            acc(gen),
            "1.00x",
        ]
    )
    for name, (pred, wall) in runs.items():
        agree = sum(p == g for p, g in zip(pred, gen, strict=True) if g is not None)
        parsed = sum(g is not None for g in gen)
        rows.append(
            [
                name,
                f"{wall:.1f}",
                f"{len(texts) / wall:.2f}",
                "0",
                f"{agree}/{parsed}",
                acc(pred),
                f"{wall_a / wall:.2f}x",
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
