"""corral's decode loop: batched forward passes, per-row matchers, jump-ahead, budget-safe stops.

In:  a backend, prompt token ids (one list per row), one compiled constraint per row (or None
     for free generation), sampling parameters, a token budget.
Out: one :class:`RowOutput` per row — tokens, why it stopped, forward passes, forced tokens.

Invariants:
* Every appended token is allowed by the row's matcher (sampled under its mask, or checked
  with ``accept_token`` when appended by jump-ahead / the budget finish).
* Budget safety: before a sampled token is kept, the tokens needed to finish the output from
  the new state (the shortest completion, tokenized) must fit in the remaining budget; if not,
  the row is finished with the shortest completion from the current state, which fits because
  the same check held one step earlier (and at the start, where it is an error if it fails).
* Finished rows leave the batch at once: no more mask work or forward compute for them.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from corral.engine import CompiledGrammar, Matcher, fill_next_token_bitmasks
from corral.errors import CorralError
from corral.generation.backends.base import Backend
from corral.generation.masking import apply_token_bitmask_
from corral.generation.sampling import SamplingParams, make_generator, sample
from corral.generation.tokens import TokenTools, any_allowed

__all__ = ["BudgetError", "RowOutput", "decode", "TextCallback"]

# on_text(row, delta): called with each new piece of decoded text of a row.
TextCallback = Callable[[int, str], None]


class BudgetError(CorralError):
    """The shortest output the constraint allows does not fit in ``max_new_tokens``."""


@dataclass
class RowOutput:
    """What one row produced."""

    tokens: list[int] = field(default_factory=list)
    prompt_tokens: int = 0
    stop_reason: str = ""  # "complete" | "max_tokens" | "error"
    truncated: bool = False  # finished early with the shortest completion to respect the budget
    forward_passes: int = 0
    forced_tokens: int = 0  # appended by jump-ahead without a forward pass of their own
    error: str = ""


@dataclass
class _Row:
    index: int
    matcher: Matcher | None
    budget: int
    out: RowOutput
    pending: list[int]
    decoder: Any
    done: bool = False


@dataclass
class DecodeStats:
    """Wall-clock split of one :func:`decode` call, in seconds."""

    forward_s: float = 0.0
    mask_s: float = 0.0
    sample_s: float = 0.0
    total_s: float = 0.0
    steps: int = 0


def needed_tokens(matcher: Matcher, tools: TokenTools, cap: int) -> int:
    """Tokens needed to finish the output from the matcher's state (``cap + 1`` when more than
    ``cap``; the shortest completion's byte length bounds its token count, which skips
    tokenizing in the common case)."""
    tail = matcher.shortest_completion()
    if len(tail) <= cap:
        return len(tail) if len(tail) <= 1 else min(len(tail), len(tools.encode_exact(tail)))
    return len(tools.encode_exact(tail))


class _Decoder:
    def __init__(
        self,
        backend: Backend,
        params: SamplingParams,
        jump_ahead: bool,
        on_text: TextCallback | None,
    ) -> None:
        self.backend = backend
        self.tok = backend.tokenizer
        self.tools = _tools_for(backend)
        self.params = params
        self.jump_ahead = jump_ahead
        self.on_text = on_text
        self.eos = set(self.tok.eos_ids)
        self.eos_arr = np.array(sorted(self.eos), dtype=np.int64)
        self.scratch = np.zeros((1, (self.tok.width + 31) // 32), dtype=np.int32)
        self.stats = DecodeStats()

    # ---------------------------------------------------------------- per-row steps

    def emit(self, row: _Row, ids: Sequence[int]) -> None:
        row.out.tokens.extend(ids)
        row.pending.extend(ids)
        if self.on_text is not None and ids:
            text = row.decoder.decode(self.tok.decode(ids))
            if text:
                self.on_text(row.index, text)

    def finish(self, row: _Row, reason: str, error: str = "") -> None:
        row.done = True
        row.out.stop_reason = reason
        row.out.error = error
        if self.on_text is not None:
            rest = row.decoder.decode(b"", final=True)
            if rest:
                self.on_text(row.index, rest)

    def remaining(self, row: _Row) -> int:
        return row.budget - len(row.out.tokens)

    def finish_shortest(self, row: _Row) -> None:
        """Append the shortest completion and stop: the output is valid, but cut short."""
        m = row.matcher
        assert m is not None
        tail_ids = self.tools.encode_exact(m.shortest_completion())
        for t in tail_ids:
            if not m.accept_token(t):
                self.finish(row, "error", f"internal: completion token {t} rejected ({m.error})")
                return
        self.emit(row, tail_ids)
        row.out.truncated = True
        self.finish(row, "max_tokens")

    def only_eos_left(self, m: Matcher) -> bool:
        """Accepting, and nothing but EOS may follow: the output is complete."""
        if not m.is_accepting():
            return False
        m.fill_next_token_bitmask(self.scratch, 0)
        row = self.scratch[0]
        total = int(np.unpackbits(row.view(np.uint8)).sum())
        return total == sum(any_allowed(row, self.eos_arr[i : i + 1]) for i in range(self.eos_arr.size))

    def force(self, row: _Row) -> None:
        """Jump-ahead: append the tokens the constraint dictates, keeping the token boundary
        where the model would place it."""
        m = row.matcher
        assert m is not None
        forced = m.forced_bytes()
        if not forced:
            return
        ids = self.tools.encode_exact(forced)
        starts = []
        pos = 0
        for t in ids:
            starts.append(pos)
            pos += len(self.tok.token_bytes[t])
        accepted = 0
        for t in ids:
            if not m.accept_token(t):
                break
            accepted += 1
        # A trailing forced token that some allowed token extends past the forced bytes would
        # cut a token the model may prefer whole (`"` vs `"John`): leave those to the model.
        keep = accepted
        for j in range(accepted - 1, -1, -1):
            suffix = forced[starts[j] :]
            if len(suffix) >= self.tools.max_token_len:
                break
            m.rollback(keep - j)
            keep = j
            m.fill_next_token_bitmask(self.scratch, 0)
            if not any_allowed(self.scratch[0], self.tools.extensions(suffix)):
                # Tokens j.. are safe after all: re-accept them.
                for t in ids[j:accepted]:
                    m.accept_token(t)
                keep = accepted
                break
        ids = ids[:keep]
        if not ids:
            return
        room = self.remaining(row)
        if len(ids) > room or needed_tokens(m, self.tools, room - len(ids)) > room - len(ids):
            m.rollback(len(ids))  # the budget finish takes over at the next step
            return
        self.emit(row, ids)
        row.out.forced_tokens += len(ids)

    def advance(self, row: _Row, t: int) -> None:
        m = row.matcher
        if t in self.eos and (m is None or m.is_accepting()):
            if m is not None:
                m.accept_token(t)
            self.finish(row, "complete")
            return
        if m is None:
            self.emit(row, [t])
            if self.remaining(row) <= 0:
                self.finish(row, "max_tokens")
            return
        if not m.accept_token(t):
            self.finish(row, "error", f"internal: sampled token {t} rejected ({m.error})")
            return
        room = self.remaining(row) - 1
        if needed_tokens(m, self.tools, room) > room:
            m.rollback(1)
            self.finish_shortest(row)
            return
        self.emit(row, [t])
        if self.jump_ahead:
            self.force(row)
        self.check_done(row)

    def check_done(self, row: _Row) -> None:
        m = row.matcher
        if m is None or row.done:
            return
        if m.error:
            self.finish(row, "error", str(m.error))
        elif self.only_eos_left(m):
            self.finish(row, "complete")
        elif self.remaining(row) <= 0:
            # The budget check kept the output completable in zero tokens: it is accepting.
            self.finish(row, "max_tokens")

    # ---------------------------------------------------------------- the loop

    def run(self, rows: list[_Row]) -> None:
        t_start = time.perf_counter()
        for row in rows:
            m = row.matcher
            if m is not None:
                need = needed_tokens(m, self.tools, row.budget)
                if need > row.budget:
                    raise BudgetError(
                        f"the shortest output the constraint allows needs {need} tokens, "
                        f"more than max_new_tokens={row.budget}"
                    )
        gen = None if self.params.greedy else make_generator(self.params)
        for row in rows:
            if row.matcher is not None and self.jump_ahead:
                self.force(row)
            self.check_done(row)
        batch = self.backend.new_batch()
        live = rows[:]
        # Rows finished before any forward pass (fully forced output) never enter the batch.
        started = False
        while True:
            active = [r for r in live if not r.done]
            if not active:
                break
            if started:
                batch.keep([live.index(r) for r in active])
            live = active
            started = True
            t0 = time.perf_counter()
            logits = batch.forward([r.pending for r in live])
            t1 = time.perf_counter()
            for r in live:
                r.out.forward_passes += 1
                r.pending = []
            constrained = [i for i, r in enumerate(live) if r.matcher is not None]
            if constrained:
                mask = np.zeros((len(live), self.scratch.shape[1]), dtype=np.int32)
                mask[:] = -1
                fill_next_token_bitmasks([live[i].matcher for i in constrained], mask, constrained)  # type: ignore[misc]
                apply_token_bitmask_(logits, mask)
            t2 = time.perf_counter()
            picked = sample(logits, self.params, gen)
            t3 = time.perf_counter()
            for r, t in zip(live, picked, strict=False):
                self.advance(r, t)
            self.stats.forward_s += t1 - t0
            self.stats.mask_s += t2 - t1 + (time.perf_counter() - t3)
            self.stats.sample_s += t3 - t2
            self.stats.steps += 1
        self.stats.total_s = time.perf_counter() - t_start


_TOOLS: dict[int, tuple[Any, TokenTools]] = {}


def _tools_for(backend: Backend) -> TokenTools:
    """TokenTools are built once per tokenizer (sorting the vocabulary costs ~50 ms)."""
    key = id(backend.tokenizer)
    hit = _TOOLS.get(key)
    if hit is None or hit[0] is not backend.tokenizer:
        hit = (backend.tokenizer, TokenTools(backend.tokenizer))
        _TOOLS[key] = hit
    return hit[1]


def decode(
    backend: Backend,
    prompts: Sequence[Sequence[int]],
    constraints: Sequence[CompiledGrammar | None],
    *,
    max_new_tokens: int,
    params: SamplingParams | None = None,
    jump_ahead: bool = True,
    on_text: TextCallback | None = None,
) -> tuple[list[RowOutput], DecodeStats]:
    """Decode every prompt under its constraint, all rows batched together.

    Raises :class:`BudgetError` (before any forward pass) when some constraint's shortest
    output needs more than ``max_new_tokens`` tokens.
    """
    if len(prompts) != len(constraints):
        raise ValueError("one constraint (or None) per prompt")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    dec = _Decoder(backend, params or SamplingParams(), jump_ahead, on_text)
    rows = []
    for i, (p, c) in enumerate(zip(prompts, constraints, strict=False)):
        if not p:
            raise ValueError(f"prompt {i} is empty (no tokens)")
        out = RowOutput(prompt_tokens=len(p))
        rows.append(
            _Row(
                index=i,
                matcher=c.matcher() if c is not None else None,
                budget=max_new_tokens,
                out=out,
                pending=list(p),
                decoder=codecs.getincrementaldecoder("utf-8")(errors="replace"),
            )
        )
    dec.run(rows)
    return [r.out for r in rows], dec.stats
