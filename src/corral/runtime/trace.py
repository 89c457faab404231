"""Per-step records of a decode: what the model wanted, what the mask allowed, what was chosen.

What OpenAI ``logprobs`` / ``top_logprobs``, the playground and the quality metrics read. A
:class:`StepTrace` is opt-in per row (building one costs a log-softmax and a top-k over the
vocabulary per step); the cheap always-on counters (masked steps, allowed tokens) live on the
decode loop's row output instead.

Invariants:
* Log-probabilities are computed at temperature 1 from the model's logits: ``logprob`` and
  ``top`` over the *masked, renormalised* distribution (disallowed tokens have probability 0, so
  the allowed ones sum to 1), ``removed`` over the *unmasked* one (what the model would have
  given the tokens the mask took away). Sampling settings (temperature, top-k/p) do not change
  them — as OpenAI reports the model's distribution, not the sampler's.
* Every logprob is <= 0 and finite; ``top`` is sorted by logprob, descending.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["StepRecord", "StepTrace", "logits_row", "record_step", "MAX_TOP_K"]

#: The most alternatives a trace keeps per step (OpenAI's ``top_logprobs`` allows 20).
MAX_TOP_K = 20


@dataclass
class StepRecord:
    """One sampled step of one row.

    Attributes
    ----------
    token : int
        The token chosen at this step (possibly an EOS that ends the row).
    logprob : float
        Its log-probability under the masked, renormalised distribution.
    allowed : int
        How many tokens the mask allowed (the whole vocabulary for free generation).
    top : list of (token, logprob)
        The ``top_k`` most likely allowed tokens, masked distribution.
    removed : list of (token, logprob)
        The ``top_k`` most likely tokens the mask *forbade*, with their unmasked logprobs.
    forced : list of int
        Tokens jump-ahead appended right after ``token`` without a forward pass of their own.
    """

    token: int
    logprob: float
    allowed: int
    top: list[tuple[int, float]] = field(default_factory=list)
    removed: list[tuple[int, float]] = field(default_factory=list)
    forced: list[int] = field(default_factory=list)


@dataclass
class StepTrace:
    """The step records of one row (set ``top_k`` for how many alternatives to keep).

    ``leading`` holds the tokens forced before the first forward pass (a constraint's fixed
    opening); every output token is either in ``leading``, a step's ``token`` or a step's
    ``forced`` (or, for a row cut short by its budget, the shortest completion appended at the
    end, listed in ``tail``).
    """

    top_k: int = 0
    leading: list[int] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    tail: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0 <= self.top_k <= MAX_TOP_K:
            raise ValueError(f"top_k must be in 0..{MAX_TOP_K}, got {self.top_k}")


def logits_row(logits: Any, i: int) -> np.ndarray:
    """Row ``i`` of a ``(rows, width)`` torch tensor or numpy array, as a float64 numpy copy."""
    row = logits[i]
    if not isinstance(row, np.ndarray):  # torch, on any device
        row = row.detach().float().cpu().numpy()
    return np.array(row, dtype=np.float64)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    finite = np.isfinite(x)
    top = x[finite].max()
    out = np.full_like(x, -np.inf)
    shifted = x[finite] - top
    out[finite] = shifted - np.log(np.exp(shifted).sum())
    return out


def _top(lp: np.ndarray, k: int, among: np.ndarray | None = None) -> list[tuple[int, float]]:
    if k <= 0:
        return []
    cand = np.flatnonzero(among) if among is not None else np.flatnonzero(np.isfinite(lp))
    if cand.size == 0:
        return []
    vals = lp[cand]
    if cand.size > k:
        part = np.argpartition(-vals, k - 1)[:k]
        cand, vals = cand[part], vals[part]
    order = np.argsort(-vals, kind="stable")
    return [(int(cand[j]), float(vals[j])) for j in order]


def record_step(raw: np.ndarray, masked: np.ndarray, token: int, allowed: int, top_k: int) -> StepRecord:
    """The record of one step from the row's logits before (``raw``) and after (``masked``,
    disallowed entries ``-inf``) the mask, and the chosen ``token``."""
    lp = _log_softmax(masked)
    removed: list[tuple[int, float]] = []
    if top_k > 0:
        gone = np.isinf(masked) & np.isfinite(raw)
        if gone.any():
            removed = _top(_log_softmax(raw), top_k, gone)
    chosen = float(lp[token]) if np.isfinite(lp[token]) else float("-inf")
    top = _top(lp, top_k)
    return StepRecord(token=int(token), logprob=chosen, allowed=int(allowed), top=top, removed=removed)
