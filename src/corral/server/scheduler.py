"""The scheduler: one thread that owns the model and decodes every request with continuous
batching.

Requests arrive as :class:`Job` objects whose constraints are already compiled (compilation
happens in the compile cache's threads, so a request with a new schema never reaches this
thread until its grammar is ready: it waits alone). Each loop iteration

1. takes new jobs, cancellations and calls from the inbox (thread-safe; a call — whole-answer
   scoring for ``/v1/classify`` and greedy ``choices`` — runs right there, between two steps),
2. admits waiting jobs while the batch has room (``max_batch`` rows; a job's ``n`` rows join
   together), adding their rows to the :class:`~corral.generation.decode.DecodeEngine`,
3. runs one engine step: one batched forward pass for every decoding row (each with its own
   sampling parameters, budget and matcher), plus one prefill pass for rows that just joined,
   which are then merged into the running batch; finished and cancelled rows leave.

Text deltas and results go back to the HTTP side through each job's asyncio queue
(``loop.call_soon_threadsafe``), so the event loop never blocks on the model.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from corral.backends.base import Backend
from corral.compile import Constraint
from corral.generation.decode import DecodeEngine, Row
from corral.runtime.sampling import SamplingParams, make_generator
from corral.runtime.trace import StepTrace
from corral.server.metrics import ServerMetrics

__all__ = ["Job", "Scheduler"]

log = logging.getLogger("corral.server")


@dataclass(eq=False)
class Job:
    """One request's decoding work: ``len(prompts)`` rows (``n`` per prompt, already expanded).

    Events put on ``events``: ``("text", row, delta)``, ``("done", row, RowOutput)``, and
    ``("error", None, message)`` if the scheduler could not run it."""

    id: str
    prompts: list[list[int]]
    constraint: Constraint | None
    max_tokens: int
    params: SamplingParams
    loop: asyncio.AbstractEventLoop
    events: asyncio.Queue[tuple[str, int, Any]]
    t_arrival: float = field(default_factory=time.perf_counter)
    cancelled: bool = False
    rows: list[Row] = field(default_factory=list)
    t_first_token: float | None = None
    t_admitted: float | None = None
    remaining: int = 0
    #: The request's :class:`~corral.server.observe.RequestObserver` (trace, quality metrics).
    obs: Any = None
    t_submitted: float | None = None
    trace: int | None = None  # keep a StepTrace per row with this many alternatives (logprobs)

    def post(self, kind: str, row: int, payload: Any) -> None:
        """Hand an event to the request's event loop (from any thread)."""
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, (kind, row, payload))
        except RuntimeError:  # the loop is closed: the server is shutting down
            pass


class Scheduler:
    """Owns the backend; decodes all jobs with continuous batching (see the module doc).

    Parameters
    ----------
    backend : Backend
        The loaded model (used from this scheduler's thread only).
    metrics : ServerMetrics
        Where step, token and TTFT figures go.
    max_batch : int
        Most rows decoded at once; further jobs wait (FIFO) until rows finish.
    """

    def __init__(self, backend: Backend, metrics: ServerMetrics, max_batch: int = 16) -> None:
        self.backend = backend
        self.metrics = metrics
        self.max_batch = max(1, max_batch)
        self.engine = DecodeEngine(backend)
        self._inbox: queue.Queue[tuple[str, Job]] = queue.Queue()
        self._waiting: deque[Job] = deque()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="corral-scheduler", daemon=True)
        self.queued = 0  # jobs submitted and not yet admitted (read by gauges)
        self.failure: BaseException | None = None
        self._traced: list[Job] = []  # admitted jobs whose trace records (per-step events)

    # ---------------------------------------------------------------- any thread

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._inbox.put(("wake", None))  # type: ignore[arg-type]
        self._thread.join(timeout=5)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and self.failure is None

    @property
    def active_rows(self) -> int:
        return self.engine.active

    def submit(self, job: Job) -> None:
        """Queue a job (its rows join the batch as soon as there is room)."""
        job.remaining = len(job.prompts)
        job.t_submitted = time.perf_counter()
        self.queued += 1
        self._inbox.put(("submit", job))

    def cancel(self, job: Job) -> None:
        """Stop a job (client gone): its rows are freed at the next step."""
        job.cancelled = True
        self._inbox.put(("cancel", job))

    def call(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run ``fn()`` on the scheduler thread between two decoding steps (this thread owns
        the model): whole-answer scoring for ``/v1/classify`` and greedy ``choices``. Its result
        or exception comes back through the future; a future cancelled before it starts is
        skipped."""
        fut: Future[Any] = Future()
        self._inbox.put(("call", (fn, fut)))  # type: ignore[arg-type]
        return fut

    # ---------------------------------------------------------------- scheduler thread

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._drain(block=not self.engine.has_work and not self._waiting)
                self._admit()
                if self.engine.has_work:
                    self._step()
        except BaseException as e:  # the model failed: fail every job instead of hanging them
            self.failure = e
            log.exception("scheduler stopped: %s", e)
            for job in list(self._waiting):
                job.post("error", -1, f"scheduler failure: {e}")

    def _drain(self, block: bool) -> None:
        try:
            item = self._inbox.get(timeout=0.5) if block else self._inbox.get_nowait()
        except queue.Empty:
            return
        while True:
            kind, job = item
            if kind == "submit":
                self._waiting.append(job)
            elif kind == "cancel":
                self._cancel(job)
            elif kind == "call":
                self._call(*job)  # type: ignore[misc]
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return

    @staticmethod
    def _call(fn: Callable[[], Any], fut: Future[Any]) -> None:
        if not fut.set_running_or_notify_cancel():
            return  # the request gave up (deadline, client gone) before its turn
        try:
            fut.set_result(fn())
        except Exception as e:  # handed to the request, which answers 400/500
            fut.set_exception(e)

    def _cancel(self, job: Job) -> None:
        if job in self._waiting:
            self._waiting.remove(job)
            self.queued -= 1
            return
        freed = 0
        for row in job.rows:
            if not row.done:
                self.engine.cancel(row)
                freed += 1
        if freed:
            self.metrics.cancelled.inc(freed)

    def _admit(self) -> None:
        while self._waiting:
            job = self._waiting[0]
            busy = self.engine.active
            # A job larger than the batch runs alone rather than never.
            if busy and busy + len(job.prompts) > self.max_batch:
                return
            self._waiting.popleft()
            self.queued -= 1
            if job.cancelled:
                continue
            self._start(job)

    def _start(self, job: Job) -> None:
        job.t_admitted = time.perf_counter()
        grammar = job.constraint.grammar if job.constraint is not None else None
        # The rows of a job share one random stream: n samples of one seeded request differ
        # from each other and repeat exactly with the same seed.
        gen = None if job.params.greedy else make_generator(job.params)
        for i, prompt in enumerate(job.prompts):
            try:
                row = self.engine.add(
                    prompt,
                    grammar,
                    max_new_tokens=job.max_tokens,
                    params=job.params,
                    generator=gen,
                    on_text=self._text_cb(job, i),
                    on_finish=self._finish_cb(job, i),
                    tag=job,
                    think=job.constraint.think if job.constraint is not None else None,
                    trace=None if job.trace is None else StepTrace(top_k=job.trace),
                )
            except Exception as e:  # checked by the HTTP side first; a safety net
                for r in job.rows:
                    self.engine.cancel(r, "error")
                job.post("error", i, str(e))
                return
            job.rows.append(row)
            self.metrics.prompt_tokens.inc(len(prompt))
        if job.obs is not None and job.obs.recording:
            self._traced.append(job)

    def _text_cb(self, job: Job, i: int) -> Any:
        def on_text(delta: str) -> None:
            if job.t_first_token is None:
                job.t_first_token = time.perf_counter()
                self.metrics.ttft.observe(job.t_first_token - job.t_arrival)
            job.post("text", i, delta)

        return on_text

    def _finish_cb(self, job: Job, i: int) -> Any:
        def on_finish(row: Row) -> None:
            out = row.out
            self.metrics.tokens.inc(len(out.tokens))
            self.metrics.forced.inc(out.forced_tokens)
            if job.t_first_token is None and out.tokens:
                job.t_first_token = time.perf_counter()
                self.metrics.ttft.observe(job.t_first_token - job.t_arrival)
            job.post("done", i, out)

        return on_finish

    def _step(self) -> None:
        stats = self.engine.stats
        mask0, passes0 = stats.mask_s, stats.forward_passes
        rows = self.engine.active
        t0 = time.perf_counter()
        self.engine.step()
        self.metrics.step_time.observe(time.perf_counter() - t0)
        self.metrics.mask_time.observe(stats.mask_s - mask0)
        self.metrics.forward_passes.inc(stats.forward_passes - passes0)
        self.metrics.batch_rows.observe(rows)
        if self._traced:  # only requests being traced: nothing per step otherwise
            t = time.perf_counter()
            mask_s = stats.mask_s - mask0
            self._traced = [j for j in self._traced if j.obs.on_step(j, t, mask_s, rows)]
