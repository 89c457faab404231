"""Choosing the next token from masked logits: greedy, temperature, top-k, top-p, seeded.

The mask is applied *before* these transforms, so temperature/top-k/top-p redistribute
probability among valid tokens only and the model's own preferences choose among them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["SamplingParams", "sample"]


@dataclass(frozen=True)
class SamplingParams:
    """How the next token is chosen.

    Attributes
    ----------
    temperature : float
        0 (the default) means greedy: the highest-scoring allowed token.
    top_p : float
        Nucleus sampling: keep the smallest set of tokens whose probability sums to ``top_p``.
    top_k : int
        Keep only the ``top_k`` most likely tokens (0 = no limit).
    seed : int or None
        Seed of the random generator (sampling only); the same seed, prompt and model give the
        same output.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None

    def __post_init__(self) -> None:
        if not (self.temperature >= 0.0):
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not (0.0 < self.top_p <= 1.0):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def make_generator(params: SamplingParams) -> Any:
    """A random generator seeded from ``params.seed`` (random seed when None): a torch CPU
    generator when torch is installed, else a numpy one (a llama.cpp-only install, whose
    logits are numpy arrays). The same seed gives the same output within one install."""
    try:
        import torch
    except ImportError:
        return np.random.default_rng(params.seed)
    g = torch.Generator(device="cpu")
    if params.seed is None:
        g.seed()
    else:
        g.manual_seed(params.seed)
    return g


def sample(logits: Any, params: SamplingParams, generator: Any = None) -> list[int]:
    """One token id per row of masked ``logits`` (a float torch tensor or numpy array
    ``(rows, width)``; numpy arrays are sampled without torch).

    Rows whose logits are all ``-inf`` cannot occur for a live matcher (it always allows at least
    one token); the caller checks that before sampling.
    """
    if isinstance(logits, np.ndarray) and not _is_torch_generator(generator):
        return _sample_numpy(logits, params, generator)
    import torch

    if isinstance(logits, np.ndarray):
        logits = torch.from_numpy(logits)
    if params.greedy:
        return [int(i) for i in torch.argmax(logits, dim=-1).tolist()]
    x = logits.float() / params.temperature
    if params.top_k > 0 and params.top_k < x.shape[-1]:
        kth = torch.topk(x, params.top_k, dim=-1).values[:, -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    probs = torch.softmax(x, dim=-1)
    if params.top_p < 1.0:
        sorted_p, order = torch.sort(probs, dim=-1, descending=True)
        # Drop a token when the mass *before* it already reaches top_p (the top token is kept).
        before = torch.cumsum(sorted_p, dim=-1) - sorted_p
        sorted_p = sorted_p.masked_fill(before >= params.top_p, 0.0)
        probs = torch.zeros_like(probs).scatter_(-1, order, sorted_p)
    # Sampling on CPU with an explicit generator keeps seeded runs reproducible.
    picked = torch.multinomial(probs.cpu(), 1, generator=generator)
    return [int(i) for i in picked[:, 0].tolist()]


def _is_torch_generator(generator: Any) -> bool:
    return generator is not None and type(generator).__module__.startswith("torch")


def _sample_numpy(logits: np.ndarray, params: SamplingParams, generator: Any) -> list[int]:
    """The torch path's transforms (temperature, top-k, top-p) in numpy, row by row."""
    x = np.asarray(logits, dtype=np.float64)
    if x.ndim == 1:
        x = x[None, :]
    if params.greedy:
        return [int(i) for i in np.argmax(x, axis=-1)]
    rng = generator if generator is not None else np.random.default_rng(params.seed)
    x = x / params.temperature
    out = []
    for row in x:
        if 0 < params.top_k < row.size:
            kth = np.partition(row, row.size - params.top_k)[row.size - params.top_k]
            row = np.where(row < kth, -np.inf, row)
        p = np.exp(row - row.max())
        p /= p.sum()
        if params.top_p < 1.0:
            order = np.argsort(-p, kind="stable")
            sp = p[order]
            before = np.cumsum(sp) - sp
            sp[before >= params.top_p] = 0.0
            p = np.zeros_like(p)
            p[order] = sp
            p /= p.sum()
        # Inverse-CDF draw: one uniform per row from the seeded generator.
        # (side="right" never lands on a zero-probability token: its cumsum equals the one before.)
        c = np.cumsum(p)
        i = int(np.searchsorted(c, rng.random() * c[-1], side="right"))
        out.append(i if i < p.size else int(np.flatnonzero(p)[-1]))
    return out
