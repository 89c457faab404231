"""Thinking budgets: a think block never takes more than its budget of tokens.

In:  a compiled constraint's :class:`~corral.compile.thinking.ThinkFormat` (markers resolved for
     the vocabulary, budget in tokens), the vocabulary helpers, and each output token of a row
     as the host commits it.
Out: per row, a :class:`ThinkBudget`: :meth:`~ThinkBudget.narrow` clears from a filled mask row
     every token that would let the block outrun its budget; :meth:`~ThinkBudget.forced` gives
     the tokens that finish the close marker now (corral's own loop appends them without a
     forward pass each: jump-ahead).

The budget counts every output token from the first one (the open marker included) up to and
including the token that completes the close marker. The grammar already makes the block end
at the first close marker; this module only decides *when*. Exactness, for every host:

* ``need[k]``: the fewest non-special tokens that spell the rest of the close marker when the
  block's text ends with its first ``k`` bytes (a shortest path over the marker's byte
  positions; 1 when the close marker is a special token).
* While ``left - 1 >= max(need)`` (``left``: budget minus tokens used) any token is safe: after
  it, whatever the state, the rest of the marker still fits.
* Otherwise only tokens on the way to the close marker are allowed: a token whose bytes are the
  next bytes of the marker and after which the rest still fits (``1 + need[k'] <= left``), one
  that completes the marker (and may run on into the answer, which the grammar checks), or the
  marker's special token. The first token of a shortest spelling always qualifies, so the mask
  never empties: the invariant ``need[k] <= left`` holds at every step.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from corral.compile.thinking import ThinkFormat
from corral.errors import BudgetError
from corral.runtime.tokens import TokenTools

__all__ = ["ThinkBudget", "think_budget"]


class ThinkBudget:
    """One row's think-block budget (see the module doc). Feed it every output token in order
    (:meth:`accept`); :meth:`reset` forgets them (a host replaying a row)."""

    def __init__(self, fmt: ThinkFormat, tools: TokenTools) -> None:
        if fmt.budget is None:
            raise ValueError("a ThinkBudget needs a budget (ThinkFormat.budget)")
        self.fmt = fmt
        self.tools = tools
        self.budget = fmt.budget
        self.open = fmt.open.text.encode("utf-8")
        self.close = fmt.close.text.encode("utf-8")
        self.close_ids = set(fmt.close.token_ids)
        self.open_ids = set(fmt.open.token_ids)
        self.need, self.path = _spellings(self.close, tools) if not self.close_ids else ([1], [[]])
        if self.close_ids:
            self.need = [1] * len(self.close)
        # A token may end inside a multi-byte character, which must be finished (up to 3 more
        # bytes, a token each at worst) before the marker can start: the slack below.
        self.close_need = max(self.need)
        self.max_need = self.close_need + 3
        # Writing a forced open marker counts too: need_open[j] finishes it from its j-th byte.
        self.need_open = [1] * len(self.open) if self.open_ids else _spellings(self.open, tools)[0]
        self.forced_open = not fmt.optional
        self._cache: dict[tuple[str, int], list[int]] = {}
        if self.budget < self.need_open[0] + self.close_need:
            raise BudgetError(
                f"thinking budget_tokens={self.budget} cannot hold the think block's markers "
                f"({self.need_open[0]} + {self.close_need} tokens)"
            )
        self.reset()

    def reset(self) -> None:
        self.used = 0
        self.text = b""
        self.opened = False
        self.closed = False
        self._skipped = False  # an optional block that was not opened
        self.hit_budget = False  # the budget closed the block (not the model): a truncation

    # ---------------------------------------------------------------- following the output

    def accept(self, ids: Iterable[int]) -> None:
        """Count committed output tokens."""
        token_bytes = self.tools.tokenizer.token_bytes
        for t in ids:
            if self.closed or self._skipped:
                return
            self.used += 1
            if t in self.close_ids and self.opened:
                self.closed = True
                continue
            if not self.opened and t in self.open_ids and not self.text:
                self.opened = True
                self.text = self.open
                continue
            self.text += token_bytes[t]
            if not self.opened:
                if self.text.startswith(self.open):
                    self.opened = True
                elif not self.open.startswith(self.text):
                    self._skipped = True  # an optional block left out: the answer started
                    return
            if self.opened and self.close in self.text[len(self.open) :]:
                self.closed = True

    @property
    def active(self) -> bool:
        """Inside the block, with the budget close enough that the next token matters."""
        return self.opened and not self.closed and self.budget - self.used <= self.max_need

    @property
    def opening(self) -> bool:
        """Writing a forced open marker, with the budget close enough that the next token
        matters (a marker spelled in more tokens than it needs)."""
        if self.opened or self.closed or self._skipped or not self.forced_open:
            return False
        return self.budget - self.used <= self.need_open[len(self.text)] + self.close_need

    def _state(self) -> int:
        """``k``: the longest proper prefix of the close marker the block's text ends with."""
        body = self.text[len(self.open) :]
        for k in range(min(len(self.close) - 1, len(body)), 0, -1):
            if body.endswith(self.close[:k]):
                return k
        return 0

    # ---------------------------------------------------------------- masks and forcing

    def narrow(self, mask_row: np.ndarray) -> bool:
        """Clear from ``mask_row`` (a filled, writable int32 row) every token that would let
        the block outrun its budget; returns whether the row was narrowed."""
        if self.opening:
            ids = self._open_path(self.budget - self.used)
        elif self.active:
            ids = self._close_path(self.budget - self.used)
            self.hit_budget = True
        else:
            return False
        keep = np.zeros_like(mask_row)
        for t in ids:
            keep[t >> 5] |= np.int32(np.uint32(1 << (t & 31)).view(np.int32))
        mask_row &= keep
        return True

    def _close_path(self, left: int) -> list[int]:
        tok = self.tools.tokenizer
        special = tok.special_ids
        body = self.text[len(self.open) :]
        pending = _pending(body)
        out: list[int] = []
        if pending:  # finish the character first, a continuation byte at a time if need be
            for n in range(1, pending + 1):
                tail = (pending - n) + (self.close_need if not self.close_ids else 1)
                if 1 + tail <= left or n == pending:
                    out.extend(t for t in self._continuations(n) if t not in special)
            return out
        if self.close_ids:
            return sorted(self.close_ids)
        k = self._state()
        rest = self.close[k:]
        for n in range(1, len(rest)):
            piece = rest[:n]
            k2 = _state_after(self.text[len(self.open) :] + piece, self.close)
            if 1 + self.need[k2] <= left:
                out.extend(i for i in tok.ids_of(piece) if i not in special)
        out.extend(i for i in tok.ids_of(rest) if i not in special)
        out.extend(int(i) for i in self.tools.extensions(rest))
        return out

    def _open_path(self, left: int) -> list[int]:
        if self.open_ids and not self.text:
            return sorted(self.open_ids)
        rest = self.open[len(self.text) :]
        tok = self.tools.tokenizer
        special = tok.special_ids
        out: list[int] = []
        for n in range(1, len(rest)):
            if 1 + self.need_open[len(self.text) + n] + self.close_need <= left:
                out.extend(i for i in tok.ids_of(rest[:n]) if i not in special)
        if 1 + self.close_need <= left:  # the marker completed (the block's text may follow)
            out.extend(i for i in tok.ids_of(rest) if i not in special)
            out.extend(int(i) for i in self.tools.extensions(rest))
        return out

    def _continuations(self, n: int) -> list[int]:
        """Tokens made of exactly ``n`` UTF-8 continuation bytes (0x80-0xBF)."""
        key = ("cont", n)
        hit = self._cache.get(key)
        if hit is None:
            tb = self.tools.tokenizer.token_bytes
            hit = [i for i, b in enumerate(tb) if len(b) == n and all(0x80 <= c <= 0xBF for c in b)]
            self._cache[key] = hit
        return hit

    def forced(self) -> list[int]:
        """The tokens that finish the close marker now, when the budget requires it (empty
        otherwise): the tokenizer's own spelling of the marker's rest when it is a shortest one
        (what the model saw in training), else a shortest spelling; or its special token."""
        if not self.active or _pending(self.text[len(self.open) :]):
            return []  # inside a character: the mask finishes it first
        self.hit_budget = True
        if self.close_ids:
            return [min(self.close_ids)]
        k = self._state()
        own = self.tools.encode_exact(self.close[k:])
        return own if len(own) <= self.need[k] else list(self.path[k])


def _pending(body: bytes) -> int:
    """Continuation bytes still missing from a UTF-8 character ``body`` ends inside (0: none)."""
    for back in range(1, min(4, len(body)) + 1):
        c = body[-back]
        if 0x80 <= c <= 0xBF:
            continue
        size = 2 if 0xC0 <= c <= 0xDF else 3 if 0xE0 <= c <= 0xEF else 4 if 0xF0 <= c <= 0xF7 else 1
        return max(0, size - back)
    return 0


def _state_after(body: bytes, close: bytes) -> int:
    for k in range(min(len(close) - 1, len(body)), 0, -1):
        if body.endswith(close[:k]):
            return k
    return 0


def _spellings(close: bytes, tools: TokenTools) -> tuple[list[int], list[list[int]]]:
    """For every ``k``, the fewest non-special tokens spelling ``close[k:]`` and one such
    spelling (a shortest path over byte positions, computed backwards)."""
    tok = tools.tokenizer
    special = tok.special_ids
    n = len(close)
    best: list[int] = [0] * (n + 1)
    path: list[list[int]] = [[] for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        best[i] = n + 1
        for j in range(i + 1, min(n, i + tools.max_token_len) + 1):
            ids = [t for t in tok.ids_of(close[i:j]) if t not in special]
            if ids and 1 + best[j] < best[i]:
                best[i] = 1 + best[j]
                path[i] = [ids[0], *path[j]]
        if best[i] > n:
            raise ValueError(f"the vocabulary cannot spell the close marker {close!r}")
    return best[:n], path[:n]


def think_budget(fmt: ThinkFormat | None, tools: TokenTools) -> ThinkBudget | None:
    """A row's :class:`ThinkBudget` for a constraint's think format (None when it has no think
    block or no budget). Raises :class:`corral.BudgetError` when the budget cannot hold the
    markers."""
    if fmt is None or fmt.budget is None:
        return None
    return ThinkBudget(fmt, tools)
