"""corral's decode loop: batched forward passes, per-row matchers, jump-ahead, budget-safe stops.

The loop is a step-wise engine, :class:`DecodeEngine`, so that rows can join and leave while
others decode (continuous batching, as the server does) — :func:`decode` (what
:func:`corral.generate` runs) is the same engine with every row added up front.

In:  a backend; per row: prompt token ids, a compiled constraint (or None for free
     generation), a token budget, sampling parameters.
Out: one :class:`RowOutput` per row — tokens, why it stopped, forward passes, forced tokens.

Invariants:
* Every appended token is allowed by the row's matcher (sampled under its mask, or checked
  with ``accept_token`` when appended by jump-ahead / the budget finish).
* Budget safety: before a sampled token is kept, the tokens needed to finish the output from
  the new state (the shortest completion, tokenized) must fit in the remaining budget; if not,
  the row is finished with the shortest completion from the current state, which fits because
  the same check held one step earlier (and when the row was added, where it is an error if it
  fails).
* Finished rows leave the batch at the end of the step: no more mask work or forward compute.
* Rows added between steps are prefilled together in a batch of their own (so a long prompt is
  not padded into every running row) and then merged into the running batch with
  :meth:`Batch.extend`; backends without ``extend`` keep them as a separate batch ("cohort"),
  one forward pass per cohort per step.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from corral.backends.base import Backend, Batch
from corral.compile.thinking import ThinkFormat
from corral.engine import CompiledGrammar, Matcher, fill_next_token_bitmasks
from corral.errors import BudgetError, CorralError
from corral.runtime.budget import check_need, fits, needed_tokens  # noqa: F401  (re-exported)
from corral.runtime.jump import forced_tokens
from corral.runtime.masks import apply_token_bitmask_, full_bitmask
from corral.runtime.sampling import SamplingParams, make_generator, sample
from corral.runtime.thinking import ThinkBudget, think_budget
from corral.runtime.tokens import TokenTools, any_allowed, tools_for
from corral.runtime.trace import StepTrace, logits_row, record_step

__all__ = [
    "BudgetError",
    "DecodeEngine",
    "check_budget",
    "check_context",
    "DecodeStats",
    "Row",
    "RowOutput",
    "decode",
    "TextCallback",
]

# on_text(row, delta): called with each new piece of decoded text of a row.
TextCallback = Callable[[int, str], None]


@dataclass
class RowOutput:
    """What one row produced."""

    tokens: list[int] = field(default_factory=list)
    prompt_tokens: int = 0
    stop_reason: str = ""  # "complete" | "max_tokens" | "error" | "cancelled"
    truncated: bool = False  # finished early with the shortest completion to respect the budget
    forward_passes: int = 0
    forced_tokens: int = 0  # appended by jump-ahead without a forward pass of their own
    error: str = ""
    #: Steps sampled under a mask, and the tokens those masks allowed in all (their ratio to
    #: the vocabulary is the mask density: how much the constraint narrowed the choice).
    masked_steps: int = 0
    allowed_total: int = 0
    #: Per-step records when the row was added with ``trace=`` (:mod:`corral.runtime.trace`).
    trace: StepTrace | None = None
    #: ``generate(calibrate=...)``'s report (:class:`~corral.generation.calibrated_values.CalibrationReport`).
    calibration: Any = None


@dataclass(eq=False)
class Row:
    """One sequence being decoded by a :class:`DecodeEngine` (returned by
    :meth:`DecodeEngine.add`). ``out`` fills in as it decodes; ``done`` is set when it stops.

    Rows compare by identity (two rows are never the same sequence)."""

    index: int
    matcher: Matcher | None
    budget: int
    out: RowOutput
    pending: list[int]
    decoder: Any
    params: SamplingParams = field(default_factory=SamplingParams)
    generator: Any = None
    jump_ahead: bool = True
    on_text: Callable[[str], None] | None = None
    on_finish: Callable[[Row], None] | None = None
    think: ThinkBudget | None = None
    done: bool = False
    #: Arbitrary caller data (the server keeps its request here).
    tag: Any = None
    #: Output length when the traced step in progress sampled its token (-1: none pending).
    trace_mark: int = -1


@dataclass
class DecodeStats:
    """Wall-clock split of an engine's work (or one :func:`decode` call), in seconds."""

    forward_s: float = 0.0
    mask_s: float = 0.0
    sample_s: float = 0.0
    total_s: float = 0.0
    steps: int = 0
    forward_passes: int = 0  # forward calls (one per cohort per step)


def check_context(backend: Backend, prompt_tokens: int, max_new_tokens: int, where: str = "") -> None:
    """Raise :class:`corral.CorralError` when the prompt plus the output budget exceed the model's
    context (``where`` prefixes the message, e.g. ``"prompt 3: "``)."""
    if prompt_tokens + max_new_tokens > backend.context_length:
        raise CorralError(
            f"{where}{prompt_tokens} prompt tokens + max_new_tokens={max_new_tokens} exceed the "
            f"model's context of {backend.context_length} tokens"
        )


def check_budget(backend: Backend, grammar: CompiledGrammar, max_new_tokens: int) -> None:
    """Raise :class:`BudgetError` when ``grammar``'s shortest output needs more than
    ``max_new_tokens`` of ``backend``'s tokens (what :meth:`DecodeEngine.add` checks)."""
    check_need(grammar.matcher(), _tools_for(backend), max_new_tokens)


@dataclass(eq=False)
class _Cohort:
    """A backend batch and the rows it holds (``rows[i]`` is the batch's row ``i``)."""

    batch: Batch
    rows: list[Row]


class DecodeEngine:
    """A step-wise decoder: rows join with :meth:`add`, each :meth:`step` runs one forward pass
    over every live row (plus one prefill pass for rows added since the last step), and finished
    rows leave.

    Not thread-safe: one thread owns the engine (the server's scheduler thread; the caller of
    :func:`decode`). Callbacks run on that thread.

    Parameters
    ----------
    backend : Backend
        The model.
    jump_ahead : bool
        Default for rows: append the tokens the constraint forces without a forward pass each.
    """

    def __init__(self, backend: Backend, *, jump_ahead: bool = True) -> None:
        self.backend = backend
        self.tok = backend.tokenizer
        self.tools = _tools_for(backend)
        self.jump_ahead = jump_ahead
        self.eos = set(self.tok.eos_ids)
        self.eos_arr = np.array(sorted(self.eos), dtype=np.int64)
        self.scratch = np.zeros((1, (self.tok.width + 31) // 32), dtype=np.int32)
        self.stats = DecodeStats()
        self._cohorts: list[_Cohort] = []
        self._waiting: list[Row] = []
        self._can_extend = True
        self._next_index = 0

    # ---------------------------------------------------------------- rows

    def check_budget(self, grammar: CompiledGrammar, max_new_tokens: int) -> None:
        """Raise :class:`BudgetError` when the constraint's shortest output needs more than
        ``max_new_tokens`` tokens."""
        check_budget(self.backend, grammar, max_new_tokens)

    def add(
        self,
        prompt: Sequence[int],
        grammar: CompiledGrammar | None,
        *,
        max_new_tokens: int,
        params: SamplingParams | None = None,
        generator: Any = None,
        jump_ahead: bool | None = None,
        on_text: Callable[[str], None] | None = None,
        on_finish: Callable[[Row], None] | None = None,
        tag: Any = None,
        think: ThinkFormat | None = None,
        trace: StepTrace | None = None,
    ) -> Row:
        """Queue a row; it is prefilled at the next :meth:`step`.

        ``generator`` is the torch generator for sampling (rows may share one; by default each
        sampled row gets its own, seeded from ``params.seed``). ``think`` is the constraint's
        think block (``Constraint.think``): its budget is kept to the token. Tokens the constraint forces at
        the start are appended at once; a row whose whole output is forced finishes here
        (``on_finish`` is called before this returns).

        Raises :class:`BudgetError` when the constraint's shortest output does not fit
        ``max_new_tokens``, and :class:`corral.CorralError` when the prompt plus the budget
        exceed the model's context — both before the row joins.

        ``trace``: fill this :class:`~corral.runtime.trace.StepTrace` with a record per step
        (logprobs, allowed count, the choices the mask removed); it is also ``row.out.trace``.
        """
        if not prompt:
            raise ValueError("the prompt is empty (no tokens)")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        check_context(self.backend, len(prompt), max_new_tokens)
        params = params or SamplingParams()
        matcher = grammar.matcher() if grammar is not None else None
        if matcher is not None:
            check_need(matcher, self.tools, max_new_tokens)
        budget = think_budget(think, self.tools) if matcher is not None else None
        if generator is None and not params.greedy:
            generator = make_generator(params)
        row = Row(
            index=self._next_index,
            matcher=matcher,
            budget=max_new_tokens,
            out=RowOutput(prompt_tokens=len(prompt), trace=trace),
            pending=list(prompt),
            decoder=codecs.getincrementaldecoder("utf-8")(errors="replace"),
            params=params,
            generator=generator,
            jump_ahead=self.jump_ahead if jump_ahead is None else jump_ahead,
            on_text=on_text,
            on_finish=on_finish,
            tag=tag,
            think=budget,
        )
        self._next_index += 1
        if matcher is not None and row.jump_ahead:
            self.force(row)
        if trace is not None:
            trace.leading = list(row.out.tokens)
        self.check_done(row)
        if not row.done:
            # Rows finished before any forward pass (fully forced output) never enter a batch.
            self._waiting.append(row)
        return row

    def cancel(self, row: Row, reason: str = "cancelled") -> None:
        """Stop a row now (its sequence leaves the batch at the next step)."""
        if not row.done:
            self.finish(row, reason)

    @property
    def active(self) -> int:
        """Rows not finished yet (decoding or waiting for their prefill)."""
        return sum(not r.done for c in self._cohorts for r in c.rows) + sum(not r.done for r in self._waiting)

    @property
    def has_work(self) -> bool:
        return self.active > 0

    # ---------------------------------------------------------------- per-row steps

    def emit(self, row: Row, ids: Sequence[int]) -> None:
        if row.think is not None:
            row.think.accept(ids)
        row.out.tokens.extend(ids)
        row.pending.extend(ids)
        if row.on_text is not None and ids:
            text = row.decoder.decode(self.tok.decode(ids))
            if text:
                row.on_text(text)

    def finish(self, row: Row, reason: str, error: str = "") -> None:
        self._file_step(row)  # before on_finish, so callbacks see the last step complete
        row.done = True
        row.out.stop_reason = reason
        row.out.error = error
        if row.on_text is not None:
            rest = row.decoder.decode(b"", final=True)
            if rest:
                row.on_text(rest)
        if row.on_finish is not None:
            row.on_finish(row)

    def remaining(self, row: Row) -> int:
        return row.budget - len(row.out.tokens)

    def finish_shortest(self, row: Row) -> None:
        """Append the shortest completion and stop: the output is valid, but cut short."""
        m = row.matcher
        assert m is not None
        tail_ids = self.tools.encode_exact(m.shortest_completion())
        for t in tail_ids:
            if not m.accept_token(t):
                self.finish(row, "error", f"internal: completion token {t} rejected ({m.error})")
                return
        self.emit(row, tail_ids)
        if row.out.trace is not None:
            row.out.trace.tail = list(tail_ids)
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

    def force(self, row: Row) -> None:
        """Jump-ahead: the close marker when the think block's budget requires it
        (:meth:`ThinkBudget.forced`), then what the constraint forces
        (:func:`corral.runtime.jump.forced_tokens`)."""
        assert row.matcher is not None
        if row.think is not None:
            close = row.think.forced()
            if close and self._append_forced(row, close):
                row.out.forced_tokens += len(close)
        ids = forced_tokens(row.matcher, self.tools, self.scratch, self.remaining(row))
        if ids:
            self.emit(row, ids)
            row.out.forced_tokens += len(ids)

    def _append_forced(self, row: Row, ids: list[int]) -> bool:
        """Append ``ids`` if the matcher accepts them all and the output still fits the budget
        after them (else nothing is appended: the mask narrowing takes over)."""
        m = row.matcher
        assert m is not None
        n = 0
        for t in ids:
            if not m.accept_token(t):
                break
            n += 1
        if (
            n < len(ids)
            or len(ids) > self.remaining(row)
            or not fits(m, self.tools, self.remaining(row) - len(ids))
        ):
            m.rollback(n)
            return False
        self.emit(row, ids)
        return True

    def advance(self, row: Row, t: int) -> None:
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
        if not fits(m, self.tools, room):
            m.rollback(1)
            self.finish_shortest(row)
            return
        self.emit(row, [t])
        if row.jump_ahead:
            self.force(row)
        self.check_done(row)

    def check_done(self, row: Row) -> None:
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

    # ---------------------------------------------------------------- steps

    def step(self) -> None:
        """One decoding step: a forward pass per running cohort (one token or a jump-ahead chunk
        per row), then the prefill of rows added since the last step; finished rows leave."""
        t_start = time.perf_counter()
        for c in self._cohorts:
            self._compact(c)
        self._cohorts = [c for c in self._cohorts if c.rows]
        for c in self._cohorts:
            self._forward(c)
        new = [r for r in self._waiting if not r.done]
        self._waiting = []
        if new:
            cohort = _Cohort(self.backend.new_batch(), new)
            self._forward(cohort)
            self._cohorts.append(cohort)
        for c in self._cohorts:
            self._compact(c)
        self._cohorts = [c for c in self._cohorts if c.rows]
        self._merge()
        self.stats.steps += 1
        self.stats.total_s += time.perf_counter() - t_start

    def run(self) -> None:
        """Step until every row has finished."""
        while self.has_work:
            self.step()

    def _compact(self, c: _Cohort) -> None:
        live = [i for i, r in enumerate(c.rows) if not r.done]
        if len(live) == len(c.rows):
            return
        if live:
            c.batch.keep(live)
        c.rows = [c.rows[i] for i in live]

    def _merge(self) -> None:
        """Fold every cohort into the first (one forward pass per step for all rows)."""
        while self._can_extend and len(self._cohorts) > 1:
            main, other = self._cohorts[0], self._cohorts[1]
            try:
                main.batch.extend(other.batch)
            except NotImplementedError:
                self._can_extend = False  # this backend keeps separate cohorts
                return
            main.rows.extend(other.rows)
            del self._cohorts[1]

    def _forward(self, c: _Cohort) -> None:
        rows = c.rows
        t0 = time.perf_counter()
        logits = c.batch.forward([r.pending for r in rows])
        t1 = time.perf_counter()
        for r in rows:
            r.out.forward_passes += 1
            r.pending = []
        constrained = [i for i, r in enumerate(rows) if r.matcher is not None]
        traced = [i for i, r in enumerate(rows) if r.out.trace is not None]
        raw = {i: logits_row(logits, i) for i in traced}  # before the mask touches them
        allowed = {}
        if constrained:
            mask = full_bitmask(len(rows), self.tok.width)
            fill_next_token_bitmasks([rows[i].matcher for i in constrained], mask, constrained)  # type: ignore[misc]
            for i in constrained:
                think = rows[i].think
                if think is not None:
                    think.narrow(mask[i])
            apply_token_bitmask_(logits, mask)
            counts = np.bitwise_count(mask[constrained].view(np.uint32)).sum(axis=1)
            for i, n in zip(constrained, counts.tolist(), strict=True):
                rows[i].out.masked_steps += 1
                rows[i].out.allowed_total += int(n)
                allowed[i] = int(n)
        t2 = time.perf_counter()
        picked = self._sample(rows, logits)
        t3 = time.perf_counter()
        for i, (r, t) in enumerate(zip(rows, picked, strict=True)):
            if r.done:  # a callback may have cancelled a row mid-step
                continue
            if r.out.trace is None:
                self.advance(r, t)
                continue
            masked = logits_row(logits, i) if i in allowed else raw[i]
            rec = record_step(raw[i], masked, t, allowed.get(i, masked.size), r.out.trace.top_k)
            r.out.trace.steps.append(rec)
            r.trace_mark = len(r.out.tokens)
            self.advance(r, t)
            self._file_step(r)
        self.stats.forward_s += t1 - t0
        self.stats.mask_s += t2 - t1 + (time.perf_counter() - t3)
        self.stats.sample_s += t3 - t2
        self.stats.forward_passes += 1

    @staticmethod
    def _file_step(row: Row) -> None:
        """Complete the traced step in progress: the tokens jump-ahead appended after its
        sampled token (the budget finish's completion is the trace's ``tail`` instead)."""
        trace = row.out.trace
        if trace is None or row.trace_mark < 0:
            return
        rec = trace.steps[-1]
        new = row.out.tokens[row.trace_mark : len(row.out.tokens) - len(trace.tail)]
        rec.forced = new[1:] if new[:1] == [rec.token] else new
        row.trace_mark = -1

    def _sample(self, rows: list[Row], logits: Any) -> list[int]:
        """One token per row, each under its own sampling parameters. Rows that share
        parameters and a generator are sampled in one call (as one batch from one stream, so a
        batch from :func:`decode` draws exactly what it always did)."""
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, r in enumerate(rows):
            key = ("greedy",) if r.params.greedy else (r.params, id(r.generator))
            groups.setdefault(key, []).append(i)
        picked = [0] * len(rows)
        for idx in groups.values():
            first = rows[idx[0]]
            sub = logits if len(idx) == len(rows) else logits[idx]
            for i, t in zip(idx, sample(sub, first.params, first.generator), strict=True):
                picked[i] = t
        return picked


def _tools_for(backend: Backend) -> TokenTools:
    return tools_for(backend.tokenizer)


def decode(
    backend: Backend,
    prompts: Sequence[Sequence[int]],
    constraints: Sequence[CompiledGrammar | None],
    *,
    max_new_tokens: int,
    params: SamplingParams | None = None,
    jump_ahead: bool = True,
    on_text: TextCallback | None = None,
    think: ThinkFormat | None = None,
    trace: int | None = None,
) -> tuple[list[RowOutput], DecodeStats]:
    """Decode every prompt under its constraint, all rows batched together.

    Raises :class:`BudgetError` (before any forward pass) when some constraint's shortest
    output needs more than ``max_new_tokens`` tokens. ``think``: the constraints' think block
    (every row's; ``Constraint.think``), its budget kept to the token. ``trace``: keep a
    :class:`~corral.runtime.trace.StepTrace` per row (``RowOutput.trace``) with this many
    alternatives per step (0 keeps only the chosen token's logprob).
    """
    if len(prompts) != len(constraints):
        raise ValueError("one constraint (or None) per prompt")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    params = params or SamplingParams()
    engine = DecodeEngine(backend, jump_ahead=jump_ahead)
    for i, p in enumerate(prompts):
        if not p:
            raise ValueError(f"prompt {i} is empty (no tokens)")
    # Every budget is checked before any row starts (and before any text is streamed).
    for g in {id(c): c for c in constraints if c is not None}.values():
        engine.check_budget(g, max_new_tokens)
    # The rows of one call share one random stream, sampled as one batch.
    gen = None if params.greedy else make_generator(params)
    rows = []
    for i, (p, c) in enumerate(zip(prompts, constraints, strict=True)):
        cb = None if on_text is None else _bind(on_text, i)
        rows.append(
            engine.add(
                p,
                c,
                max_new_tokens=max_new_tokens,
                params=params,
                generator=gen,
                on_text=cb,
                think=think,
                trace=None if trace is None else StepTrace(top_k=trace),
            )
        )
    engine.run()
    return [r.out for r in rows], engine.stats


def _bind(on_text: TextCallback, index: int) -> Callable[[str], None]:
    return lambda delta: on_text(index, delta)
