"""Jump-ahead: the tokens a constraint dictates, appended without a forward pass each.

In:  a row's matcher, the vocabulary helpers, a one-row scratch bitmask and the row's remaining
     budget.
Out: the token ids to append (the matcher is left advanced past exactly those tokens).

The rule (one definition for every host that can append several tokens per step — corral's own
loop and the server; logits processors cannot):
* the forced bytes are tokenized as the tokenizer would (:meth:`TokenTools.encode_exact`);
* where the model takes over: the first forced token at which some allowed token starts and runs
  past the forced bytes (``"`` vs ``"John``, ``": "`` vs ``": "J``). Tokens from there on are left
  to the model, so the token boundary is the one it would choose; only the last tokens (within
  one token length of the end) can be crossed;
* nothing is forced when the forced tokens would leave too little budget for the shortest
  completion (the budget finish takes over at the next step).
"""

from __future__ import annotations

import numpy as np

from corral.engine import Matcher
from corral.runtime.budget import fits
from corral.runtime.tokens import TokenTools, any_allowed

__all__ = ["forced_tokens"]


def forced_tokens(m: Matcher, tools: TokenTools, scratch: np.ndarray, room: int) -> list[int]:
    """The tokens to append now (possibly none); ``m`` ends advanced past them."""
    forced = m.forced_bytes()
    if not forced:
        return []
    ids = tools.encode_exact(forced)
    token_bytes = tools.tokenizer.token_bytes
    starts = []
    pos = 0
    for t in ids:
        starts.append(pos)
        pos += len(token_bytes[t])
    accepted = 0
    for t in ids:
        if not m.accept_token(t):
            break
        accepted += 1
    if accepted < len(ids):
        forced = forced[: starts[accepted]]
    cut = accepted
    at = accepted  # the matcher is positioned after `at` forced tokens
    for j in range(accepted - 1, -1, -1):
        suffix = forced[starts[j] :]
        if len(suffix) >= tools.max_token_len:
            break
        m.rollback(at - j)
        at = j
        m.fill_next_token_bitmask(scratch, 0)
        if any_allowed(scratch[0], tools.extensions(suffix)):
            cut = j
    for t in ids[at:cut]:
        m.accept_token(t)
    ids = ids[:cut]
    if not ids:
        return []
    if len(ids) > room or not fits(m, tools, room - len(ids)):
        m.rollback(len(ids))
        return []
    return ids
