"""Token budgets: the output must be complete and valid when ``max_new_tokens`` runs out.

In:  a row's matcher, the tokens left in its budget, and (for hosts that sample themselves) its
     packed mask row and scores.
Out: how many tokens the shortest valid completion needs (:func:`needed_tokens`), a
     :class:`corral.BudgetError` before decoding when even that cannot fit (:func:`check_need`),
     and, for logits processors, the mask narrowed so the host's sampler stays within budget
     (:func:`steer_to_budget`).

Invariant kept by every host: before a token is committed, the shortest completion from the new
state must fit in what is left of the budget.
* corral's own loop (and the server) check the *sampled* token and, if it does not fit, finish the
  row with the shortest completion from the current state: exact for every sampling mode.
* A logits processor cannot reject a token after the host samples it, so it narrows the mask
  before: (1) near the budget (the remaining tokens within ``margin`` of the shortest
  completion) to the single best-scoring token that fits; (2) everywhere, the best-scoring
  allowed token is checked and removed until one fits. Rule (2) makes greedy decoding exact (the
  token the host picks always fits). With sampling, a token other than the best-scoring one that
  raises the needed length by more than ``margin`` tokens at once can still defeat it: best effort.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from corral.engine import Matcher
from corral.errors import BudgetError
from corral.runtime.masks import allow_only, allowed_ids
from corral.runtime.tokens import TokenTools

__all__ = ["check_need", "fits", "fits_token", "guard_best", "needed_tokens", "steer_to_budget"]

# Candidates tried, best score first, before falling back to the shortest completion's first token.
_MAX_TRIES = 32


def needed_tokens(matcher: Matcher, tools: TokenTools, cap: int) -> int:
    """Tokens needed to finish the output from the matcher's state (``cap + 1`` when more than
    ``cap``; the shortest completion's byte length bounds its token count, which skips
    tokenizing in the common case)."""
    tail = matcher.shortest_completion()
    if len(tail) <= cap:
        return len(tail) if len(tail) <= 1 else min(len(tail), len(tools.encode_exact(tail)))
    return len(tools.encode_exact(tail))


def fits(matcher: Matcher, tools: TokenTools, room: int) -> bool:
    """Can the output be finished from the matcher's state in ``room`` tokens? Exactly
    ``needed_tokens(matcher, tools, room) <= room``, but a tail no longer than ``room`` bytes fits
    without tokenizing it (every token has at least one byte): the per-token check of a decode
    loop is then one engine call, and tokenizing happens only near the budget."""
    tail = matcher.shortest_completion()
    return len(tail) <= room or len(tools.encode_exact(tail)) <= room


def check_need(matcher: Matcher, tools: TokenTools, max_new_tokens: int) -> None:
    """Raise :class:`corral.BudgetError` when the shortest output from the matcher's state needs
    more than ``max_new_tokens`` tokens."""
    need = needed_tokens(matcher, tools, max_new_tokens)
    if need > max_new_tokens:
        raise BudgetError(
            f"the shortest output the constraint allows needs {need} tokens, "
            f"more than max_new_tokens={max_new_tokens}"
        )


def fits_token(m: Matcher, tools: TokenTools, eos: set[int], t: int, remaining: int) -> bool:
    """Would committing token ``t`` leave the output completable in ``remaining - 1`` tokens?"""
    if t in eos:
        return m.is_accepting()
    if not m.accept_token(t):
        return False
    ok = fits(m, tools, remaining - 1)
    m.rollback(1)
    return ok


def _fallback(m: Matcher, tools: TokenTools, eos: set[int]) -> int:
    tail = m.shortest_completion()
    return tools.encode_exact(tail)[0] if tail else min(eos)


def _scores(row_scores: Any, ids: np.ndarray) -> np.ndarray:
    vals = row_scores[ids]  # a torch tensor (transformers, vLLM) or a numpy array (llama.cpp)
    return vals.float().cpu().numpy() if hasattr(vals, "cpu") else np.asarray(vals, dtype=np.float32)


def steer_to_budget(
    m: Matcher,
    tools: TokenTools,
    eos: set[int],
    mask_row: np.ndarray,
    row_scores: Any,
    remaining: int,
    margin: int,
) -> bool:
    """Rule (1) of the module doc: when ``remaining`` (tokens left, including the one about to
    be sampled) is within ``margin`` of the shortest completion, narrow ``mask_row`` (a writable
    1-D int32 view, already filled) in place to the single highest-scoring allowed token that
    keeps the output completable in time (else the first token of the shortest completion, or
    EOS). Returns whether it narrowed. The matcher is left unchanged."""
    tail = m.shortest_completion()
    if remaining > len(tail) + margin:  # the tokens needed are at most its bytes: far from the end
        return False
    need = len(tail) if len(tail) <= 1 else min(len(tail), len(tools.encode_exact(tail)))
    if remaining > need + margin:
        return False
    allowed = allowed_ids(mask_row, tools.tokenizer.width)
    order = allowed[np.argsort(-_scores(row_scores, allowed))][:_MAX_TRIES]
    choice = next((t for t in order.tolist() if fits_token(m, tools, eos, t, remaining)), None)
    allow_only(mask_row, _fallback(m, tools, eos) if choice is None else choice)
    return True


def guard_best(
    m: Matcher, tools: TokenTools, eos: set[int], mask_row: np.ndarray, best: Iterable[int], remaining: int
) -> None:
    """Rule (2) of the module doc: ``best`` yields the allowed tokens in descending score order
    (lazily: usually only the first is needed); each that does not fit is cleared from
    ``mask_row`` until one fits. After ``_MAX_TRIES`` misses the row is narrowed to the shortest
    completion's first token."""
    for tries, t in enumerate(best):
        if tries >= _MAX_TRIES:
            break
        if fits_token(m, tools, eos, t, remaining):
            return
        mask_row[t >> 5] &= np.int32(np.uint32(~(1 << (t & 31)) & 0xFFFFFFFF).view(np.int32))
    allow_only(mask_row, _fallback(m, tools, eos))
