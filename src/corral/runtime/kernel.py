"""The per-step kernel for hosts that sample themselves: transformers' ``model.generate()``,
llama-cpp-python's ``create_completion`` and vLLM all call :meth:`MaskKernel.mask`.

In:  the step's logits ``(rows, width)`` and, per constrained row, its logits row index, its
     matcher (already advanced by the row's tokens; None when the row must end), the tokens
     left in its budget (None when the host does not say) and its think-block budget, if any.
Out: the logits masked in place: every token that would break a row's constraint is ``-inf``; a
     row whose matcher is finished or failed may only end (EOS); rows with a budget are steered to
     finish within it (:mod:`corral.runtime.budget`: exact for greedy decoding); a row's think
     block is closed within its own budget (:mod:`corral.runtime.thinking`: exact).

Masks are filled for all rows at once (threads, GIL released), written into one packed int32
array, and applied through :func:`corral.runtime.masks.apply_token_bitmask_` (numpy view on CPU,
unpacked on the logits' device otherwise).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from corral.engine import Matcher, fill_next_token_bitmasks
from corral.runtime.budget import fits_token, guard_best, steer_to_budget
from corral.runtime.masks import allow_only, apply_token_bitmask_
from corral.runtime.thinking import ThinkBudget
from corral.runtime.tokens import tools_for
from corral.tokenizer import Tokenizer

__all__ = ["MaskKernel", "MaskRow"]


@dataclass
class MaskRow:
    """One constrained row of a step.

    ``matcher`` None (or terminated) means the row may only end; ``remaining`` counts the tokens
    left in its budget including the one about to be sampled (None: no budget known); ``think``
    is the row's think-block budget (fed the row's tokens by the host), if it has one."""

    index: int
    matcher: Matcher | None
    remaining: int | None = None
    think: ThinkBudget | None = None


class MaskKernel:
    """Masks one step's logits for a batch of constrained rows (see the module doc).

    Parameters
    ----------
    tokenizer : Tokenizer
        The vocabulary the matchers were compiled for (its width is the mask's).
    threads : int
        Threads for filling masks (0: one per core).
    margin : int
        Budget steering margin, in tokens.
    """

    def __init__(self, tokenizer: Tokenizer, *, threads: int = 0, margin: int = 16) -> None:
        self.tokenizer = tokenizer
        self.tools = tools_for(tokenizer)
        self.eos = set(tokenizer.eos_ids)
        self.end_token = min(self.eos) if self.eos else 0
        self.words = (tokenizer.width + 31) // 32
        self.threads = threads
        self.margin = margin

    def mask(self, logits: Any, rows: Sequence[MaskRow], allowed: list[int] | None = None) -> Any:
        """Mask ``logits`` in place for ``rows`` (other logits rows are untouched). ``allowed``:
        a list to extend with how many tokens each row's mask allowed (one vectorised popcount
        over the step's masks, before the budget guard's rare narrowing), for mask density."""
        if not rows:
            return logits
        width = int(logits.shape[-1])
        if width < self.tokenizer.width:
            raise ValueError(
                f"the constraint was compiled for {self.tokenizer.width} tokens but the logits have "
                f"{width}: compile it for the model's tokenizer at the logits' width"
            )
        mask = np.zeros((len(rows), self.words), dtype=np.int32)
        live: list[int] = []
        for k, r in enumerate(rows):
            if r.matcher is None or r.matcher.is_terminated() or r.matcher.error:
                allow_only(mask[k], self.end_token)
            else:
                live.append(k)
        if live:
            fill_next_token_bitmasks([rows[k].matcher for k in live], mask, live, self.threads)  # type: ignore[misc]
        for k in live:
            think = rows[k].think
            if think is not None:
                think.narrow(mask[k])  # the think block's budget first: steering picks within it
        guarded: list[int] = []
        for k in live:
            r = rows[k]
            if r.remaining is None or r.remaining < 1:
                continue
            assert r.matcher is not None
            if not steer_to_budget(
                r.matcher, self.tools, self.eos, mask[k], logits[r.index], r.remaining, self.margin
            ):
                guarded.append(k)
        apply_token_bitmask_(logits, mask, [r.index for r in rows])
        if allowed is not None:
            allowed.extend(int(n) for n in _popcount_rows(mask))
        if not guarded:
            return logits
        # The best token of every guarded row in one call (one device round trip); a row whose
        # best token does not fit falls back to the lazy best-first order.
        best = _argmax_rows(logits, [rows[k].index for k in guarded])
        for k, t in zip(guarded, best, strict=True):
            r = rows[k]
            assert r.matcher is not None and r.remaining is not None
            if fits_token(r.matcher, self.tools, self.eos, t, r.remaining):
                continue
            guard_best(r.matcher, self.tools, self.eos, mask[k], _best_first(logits, r.index), r.remaining)
            # Re-apply the narrowed row: cleared tokens become -inf.
            apply_token_bitmask_(logits, mask[k : k + 1], [r.index])
        return logits


def _popcount_rows(mask: np.ndarray) -> np.ndarray:
    """Set bits per row of a packed int32 mask."""
    bits = mask.view(np.uint32)
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        return np.bitwise_count(bits).sum(axis=1, dtype=np.int64)
    return np.unpackbits(bits.view(np.uint8), axis=1).sum(axis=1, dtype=np.int64)


def _argmax_rows(logits: Any, indices: list[int]) -> list[int]:
    """The argmax of each of the given logits rows."""
    if hasattr(logits, "detach"):
        import torch

        idx = torch.tensor(indices, dtype=torch.long, device=logits.device)
        return [int(i) for i in torch.argmax(logits.index_select(0, idx), dim=-1).tolist()]
    return [int(i) for i in np.argmax(np.asarray(logits)[indices], axis=-1).tolist()]


def _best_first(logits: Any, index: int) -> Iterator[int]:
    """Token ids of one masked logits row, best score first, computed lazily (usually only the
    argmax is needed)."""
    row = logits[index]
    if hasattr(row, "detach"):
        import torch

        vals = row.detach().float()
        t = int(torch.argmax(vals))
        yield t
        order = torch.argsort(vals, descending=True)[1:64].tolist()
        yield from (int(i) for i in order)
        return
    arr = np.asarray(row, dtype=np.float32)
    t = int(np.argmax(arr))
    yield t
    yield from (int(i) for i in np.argsort(-arr)[1:64].tolist())
