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
    """A torch CPU generator seeded from ``params.seed`` (random seed when None)."""
    import torch

    g = torch.Generator(device="cpu")
    if params.seed is None:
        g.seed()
    else:
        g.manual_seed(params.seed)
    return g


def sample(logits: Any, params: SamplingParams, generator: Any = None) -> list[int]:
    """One token id per row of masked ``logits`` (a float torch tensor or numpy array
    ``(rows, width)``).

    Greedy decoding of numpy logits (the llama.cpp backend) needs no torch: importing it costs
    seconds, most of a short ``corral generate``. Sampling always runs in torch, with its seeded
    generator, so a seed gives the same draw on every backend.

    Rows whose logits are all ``-inf`` cannot occur for a live matcher (it always allows at least
    one token); the caller checks that before sampling.
    """
    if params.greedy and isinstance(logits, np.ndarray):
        return [int(i) for i in np.argmax(logits, axis=-1).tolist()]
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
