"""Exact log-probabilities of whole token sequences after prompts (closed-set scoring).

In:  a backend, prompt ids (one list per prompt) and, per prompt, the same number of candidate
     continuations (token id lists).
Out: ``(prompts, candidates)`` array of ``log P(continuation | prompt)`` — the sum over the
     continuation's tokens of the model's log-softmax at each step — plus, with ``end_ids``,
     the log-probability that the model stops right after it (any of the end tokens).

Cost: one forward pass for the prompts (the first token of every candidate is read from it);
when some candidate has more than one token, one more pass over the *distinct* continuation
prefixes of all prompts together, each forked from its prompt's KV cache (a trie of candidate
tokens: `refund_request` / `refund_status` share the `refund` row). Never one pass per candidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from corral.backends.base import Backend, Batch

__all__ = [
    "SharedPrefix",
    "answer_ids",
    "calibrated_probs",
    "content_free_prior",
    "score_continuations",
    "shared_prefix",
]


def answer_ids(
    backend: Backend, prompt_text: str, prompt_ids: Sequence[int], answer: str, add_special: bool
) -> list[int]:
    """The answer's tokens as the tokenizer produces them right after the prompt (a leading
    space or newline merges the way it would in the model's own output)."""
    joint = backend.encode(prompt_text + answer, add_special=add_special)
    n = len(prompt_ids)
    if joint[:n] == list(prompt_ids) and len(joint) > n:
        return joint[n:]
    return backend.encode(answer)


@dataclass
class SharedPrefix:
    """The KV cache of a token prefix every prompt of a job starts with (a system prompt and
    instructions), computed once and forked for each batch."""

    ids: list[int]
    batch: Batch


def shared_prefix(
    backend: Backend, prompts: Sequence[Sequence[int]], min_len: int = 8
) -> SharedPrefix | None:
    """Prefill the longest common prefix of ``prompts`` (leaving every prompt at least one token
    of its own); None when it is shorter than ``min_len`` tokens."""
    if not prompts:
        return None
    n = min(len(p) for p in prompts) - 1
    first = prompts[0]
    for p in prompts[1:]:
        k = 0
        while k < n and p[k] == first[k]:
            k += 1
        n = k
    if n < min_len:
        return None
    batch = backend.new_batch()
    batch.forward([list(first[:n])])
    return SharedPrefix(list(first[:n]), batch)


def _leaf_chunks(prefixes: set[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The prefixes that are not a proper prefix of another one (trie leaves)."""
    leaves: list[tuple[int, ...]] = []
    for p in sorted(prefixes, key=len, reverse=True):
        if not any(q[: len(p)] == p for q in leaves):
            leaves.append(p)
    return leaves


def score_continuations(
    backend: Backend,
    prompts: Sequence[Sequence[int]],
    continuations: Sequence[Sequence[Sequence[int]]],
    *,
    end_ids: Sequence[int] = (),
    max_rows: int = 32,
    prefix: SharedPrefix | None = None,
) -> np.ndarray:
    """``log P(continuations[p][c] | prompts[p])`` for every prompt ``p`` and candidate ``c``.

    With ``end_ids``, each score also includes ``log sum_e P(e | prompt + continuation)``: the
    candidate as a *complete* answer, so a label that is a prefix of another (``refund`` /
    ``refund_request``) is not favoured just for being shorter. With ``prefix`` (see
    :func:`shared_prefix`), prompts that start with its tokens reuse its KV cache."""
    if len(prompts) != len(continuations):
        raise ValueError("one list of continuations per prompt")
    if not prompts:
        return np.zeros((0, 0))
    n_cand = len(continuations[0])
    if any(len(c) != n_cand for c in continuations) or any(not x for c in continuations for x in c):
        raise ValueError("every prompt needs the same number of non-empty continuations")
    n = len(prefix.ids) if prefix is not None else 0
    if prefix is not None and all(len(p) > n and list(p[:n]) == prefix.ids for p in prompts):
        batch = prefix.batch.fork([0] * len(prompts))
        first = _log_softmax(batch.forward([list(p[n:]) for p in prompts]))
    else:
        batch = backend.new_batch()
        first = _log_softmax(batch.forward([list(p) for p in prompts]))
    scores = np.zeros((len(prompts), n_cand), dtype=np.float64)
    for p, conts in enumerate(continuations):
        scores[p] = _numpy(first[p, [c[0] for c in conts]])
    # Rows of the second pass: each prompt's distinct longest continuation prefixes.
    rows: list[tuple[int, tuple[int, ...]]] = []
    where: dict[tuple[int, tuple[int, ...]], tuple[int, int]] = {}  # (p, prefix) -> (row, index)
    for p, conts in enumerate(continuations):
        # With end tokens the logits after the *whole* continuation are needed too.
        prefixes = {tuple(c) if end_ids else tuple(c[:-1]) for c in conts if end_ids or len(c) > 1}
        for leaf in _leaf_chunks(prefixes):
            for k in range(1, len(leaf) + 1):
                where.setdefault((p, leaf[:k]), (len(rows), k - 1))
            rows.append((p, leaf))
    for start in range(0, len(rows), max_rows):
        sub = rows[start : start + max_rows]
        fork = batch.fork([p for p, _ in sub])
        logits = fork.forward([list(chunk) for _, chunk in sub], all_positions=True)
        logp = _log_softmax(logits)
        width = logp.shape[1]
        ends = list(end_ids)
        for p, conts in enumerate(continuations):
            for c, cont in enumerate(conts):
                for k in range(1, len(cont) + (1 if end_ids else 0)):
                    row, index = where[(p, tuple(cont[:k]))]
                    if not start <= row < start + len(sub):
                        continue
                    at = logp[row - start, width - len(sub[row - start][1]) + index]
                    if k < len(cont):
                        scores[p, c] += float(at[cont[k]])
                    else:
                        scores[p, c] += float(np.logaddexp.reduce(_numpy(at[ends])))
    return scores


def _softmax(x: np.ndarray) -> np.ndarray:
    z = x - x.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def content_free_prior(cf_scores: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """The model's prior over a closed set: the mean of ``softmax(score / T)`` over the
    ``(content-free inputs, options)`` scores. Dividing a distribution by it is contextual
    calibration (Zhao et al., 2021)."""
    return _softmax(np.asarray(cf_scores, dtype=np.float64) / temperature).mean(axis=0)


def calibrated_probs(scores: np.ndarray, temperature: float, prior: np.ndarray | None) -> np.ndarray:
    """``softmax(scores / T)`` divided by ``prior`` (when given) and renormalised, along the
    last axis."""
    z = np.asarray(scores, dtype=np.float64) / temperature
    if prior is not None:
        z = z - np.log(np.maximum(prior, 1e-300))  # p / p_cf, in log space (softmax renormalises)
    return _softmax(z)


def _log_softmax(logits: Any) -> Any:
    """Log-softmax over the last axis of a torch tensor (kept on its device) or a numpy array
    (a llama.cpp-only install has no torch)."""
    if isinstance(logits, np.ndarray):
        x = logits.astype(np.float64, copy=False)
        top = x.max(axis=-1, keepdims=True)
        return x - (top + np.log(np.exp(x - top).sum(axis=-1, keepdims=True)))
    import torch

    return torch.log_softmax(logits, dim=-1)


def _numpy(x: Any) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x.astype(np.float64, copy=False)
    return x.double().cpu().numpy()
