"""Ticket routing before and after contextual calibration, with and without temperature scaling.

    python bench/quality/calibration.py                       # both presets, 90 tickets
    python bench/quality/calibration.py --models smollm2-135m --tickets 30

The labels are scored once per model (``corral.classification.score_labels``: the 90 tickets
plus the content-free texts, through the same prompt as ``corral.classify``); every variant is
then computed from those scores, so the rows differ only in calibration:
- raw: ``softmax(logprob)``;
- contextual: divided by the prior on content-free inputs (``classify(calibrate=True)``);
- + temperature: ``T`` fitted by ``temperature_for`` with two-fold cross-validation (fit on the
  even-numbered tickets, score the odd ones, and the other way round), so no ticket is scored
  with a temperature fitted on itself.

With ``--extra`` two more ways of scoring are measured against direct scoring, each raw and
with contextual calibration (no temperature):
- label orders: the legend listed in the 3 cyclic orders of the labels, probabilities averaged
  (``classify(label_orders=3)``);
- reasoning: the model first writes one line of reasoning (at most 48 tokens, greedy), then the
  labels are scored after it (``classify(reasoning=True)``).

Reports accuracy, expected calibration error (10 equal-width confidence bins) and how often each
label is predicted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import data  # noqa: E402
from run import DESCRIPTIONS  # noqa: E402

import corral  # noqa: E402
from corral.classification import (  # noqa: E402
    CONTENT_FREE_TEXTS,
    DEFAULT_INSTRUCTIONS,
    DEFAULT_TEMPLATE,
    REASONING_NOTE,
    REASONING_TOKENS,
    _answer_prefix,
    content_free_prior,
    rationales_for,
    results_from_scores,
    score_labels,
    temperature_for,
)
from corral.generation.scoring import calibrated_probs  # noqa: E402


def ece(probs: np.ndarray, gold: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error of the top label's probability."""
    conf = probs.max(axis=1)
    right = probs.argmax(axis=1) == gold
    edges = np.linspace(0.0, 1.0, bins + 1)
    total = 0.0
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        sel = (conf > lo) & (conf <= hi)
        if sel.any():
            total += sel.mean() * abs(right[sel].mean() - conf[sel].mean())
    return float(total)


def probabilities(scores: np.ndarray, t: float, prior: np.ndarray | None) -> np.ndarray:
    rs = results_from_scores(scores, data.LABELS, temperature=t, prior=prior)
    return np.array([[r.probabilities[x] for x in data.LABELS] for r in rs])


def variants(scores: np.ndarray, cf: np.ndarray, gold: np.ndarray) -> dict[str, np.ndarray]:
    out = {
        "raw": probabilities(scores, 1.0, None),
        "contextual": probabilities(scores, 1.0, content_free_prior(cf)),
    }
    for calibrated in (False, True):
        name = ("contextual" if calibrated else "raw") + " + temperature (2-fold)"
        probs = np.zeros_like(scores)
        for fit, use in ((slice(0, None, 2), slice(1, None, 2)), (slice(1, None, 2), slice(0, None, 2))):
            t = temperature_for(scores[fit], list(gold[fit]), cf_scores=cf if calibrated else None)
            prior = content_free_prior(cf, t) if calibrated else None
            probs[use] = probabilities(scores[use], t, prior)
        out[name] = probs
    return out


def extra_variants(
    model: Any, texts: list[str], n: int, direct: np.ndarray, reasoning: bool = True
) -> dict[str, np.ndarray]:
    """Label-order averaging and reasoning-then-score, raw and contextual (see the module doc);
    ``direct``: the scores in the labels' own order (the first rotation, already computed)."""
    labels = data.LABELS
    out: dict[str, np.ndarray] = {}
    t0 = time.perf_counter()
    raw = np.zeros((n, len(labels)))
    ctx = np.zeros((n, len(labels)))
    for k in range(len(labels)):
        order = [*labels[k:], *labels[:k]]
        sc = (
            direct
            if k == 0
            else score_labels(model, texts, labels, descriptions=DESCRIPTIONS, legend_order=order)
        )
        raw += calibrated_probs(sc[:n], 1.0, None) / len(labels)
        ctx += calibrated_probs(sc[:n], 1.0, content_free_prior(sc[n:])) / len(labels)
    out["label orders x3"] = raw
    out["label orders x3 + contextual"] = ctx
    print(f"<!-- label orders scored in {time.perf_counter() - t0:.1f} s -->", flush=True)
    if not reasoning:
        return out
    t0 = time.perf_counter()
    template = DEFAULT_TEMPLATE + REASONING_NOTE
    opts = {"template": template, "instructions": DEFAULT_INSTRUCTIONS, "descriptions": DESCRIPTIONS}
    why = rationales_for(model, texts, labels, REASONING_TOKENS, **opts)
    sc = score_labels(model, texts, labels, answer_prefixes=[_answer_prefix(w) for w in why], **opts)
    out["reasoning, then scored"] = calibrated_probs(sc[:n], 1.0, None)
    out["reasoning, then scored + contextual"] = calibrated_probs(sc[:n], 1.0, content_free_prior(sc[n:]))
    print(f"<!-- reasoning: {time.perf_counter() - t0:.1f} s; e.g. {why[0]!r} -->", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="smollm2-135m,qwen2.5-coder-0.5b")
    ap.add_argument("--tickets", type=int, default=90)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--extra", action="store_true", help="also label orders and reasoning mode")
    ap.add_argument("--no-reasoning", action="store_true", help="with --extra: label orders only")
    args = ap.parse_args()
    tickets = data.routing_tickets()[: args.tickets]
    gold = np.array([data.LABELS.index(g) for _, g in tickets])
    print("| model | calibration | accuracy | ECE | predicted billing / technical / account |")
    print("| --- | --- | --- | --- | --- |")
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        model: Any = corral.load_model(name, threads=args.threads)
        t0 = time.perf_counter()
        texts = [t for t, _ in tickets] + list(CONTENT_FREE_TEXTS)
        all_scores = score_labels(model, texts, data.LABELS, descriptions=DESCRIPTIONS)
        wall = time.perf_counter() - t0
        scores, cf = all_scores[: len(tickets)], all_scores[len(tickets) :]
        prior = content_free_prior(cf)
        print(f"<!-- {name}: scored in {wall:.1f} s; content-free prior {np.round(prior, 3).tolist()} -->")
        for label, probs in variants(scores, cf, gold).items():
            pred = probs.argmax(axis=1)
            counts = " / ".join(str(int((pred == i).sum())) for i in range(len(data.LABELS)))
            acc = (pred == gold).mean()
            print(f"| {name} | {label} | {acc:.1%} | {ece(probs, gold):.3f} | {counts} |", flush=True)
        if args.extra:
            for label, probs in extra_variants(
                model, texts, len(tickets), all_scores, not args.no_reasoning
            ).items():
                pred = probs.argmax(axis=1)
                counts = " / ".join(str(int((pred == i).sum())) for i in range(len(data.LABELS)))
                acc = (pred == gold).mean()
                print(f"| {name} | {label} | {acc:.1%} | {ece(probs, gold):.3f} | {counts} |", flush=True)
        del model
    return 0


if __name__ == "__main__":
    sys.exit(main())
