"""Where the schema → grammar-text conversion runs: in this process, or in a separate one.

A JSON Schema compiles in two stages: the conversion to grammar text (pure Python) and the
engine's compile (C++, GIL released). A server runs the first in a :class:`SchemaConverter`
*process*: in the server's own process it would hold the GIL for up to seconds on a big schema,
and the decode thread — which takes the GIL back after every model call — would stall with it
(measured: a 3-pass request took 1.7 s instead of 0.3 s while a big schema converted).

Invariants: a conversion's own limit (``SchemaOptions.max_convert_ms``) stops it inside the
worker; the wait on the worker is bounded too (that limit plus ``grace_s``), so a worker that
hangs or dies costs one request a ``LimitExceeded``/``InternalError``, and the pool is replaced
(its processes killed) before the next conversion. A worker process is recycled after
``max_tasks`` conversions (Python's heap only grows with the schemas it has seen: thousands of
distinct schemas would otherwise grow it without bound).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from corral.errors import InternalError, LimitExceeded
from corral.grammar.json_schema import SchemaOptions, SchemaReport, schema_to_grammar
from corral.schema import _check_regex

__all__ = ["IN_PROCESS", "SchemaConverter", "convert_schema"]


def convert_schema(schema: Any, options: Mapping[str, Any]) -> tuple[str, SchemaReport]:
    """Schema → (grammar text, report) with the given converter options."""
    return schema_to_grammar(schema, SchemaOptions(**options), check_regex=_check_regex)


def _converter_init(nice: int = 19) -> None:
    try:  # the converter only ever competes with decoding for the CPU: let decoding win
        os.nice(nice)
    except OSError:  # pragma: no cover - not permitted
        pass


class SchemaConverter:
    """Runs conversions in ``workers`` separate low-priority processes (see the module doc); in
    the calling thread when ``workers`` is 0.

    ``grace_s``: how much longer than the conversion's ``max_convert_ms`` to wait for a worker
    before giving up on it (pickling, a busy machine); ``max_wait_s``: the wait when a schema's
    options set no time limit (``max_convert_ms=None``; None: wait as long as it takes);
    ``max_tasks``: conversions a worker process runs before it is replaced by a fresh one;
    ``nice``: how much the workers lower their priority (19, the default, lets decoding on this
    machine always win; a host whose own threads spin, such as vLLM's CPU workers, would starve
    such a worker until its conversions run out of time, and uses less).
    """

    def __init__(
        self,
        workers: int = 1,
        grace_s: float = 5.0,
        max_wait_s: float | None = None,
        max_tasks: int | None = 500,
        nice: int = 19,
    ) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self.nice = nice
        self._workers = workers
        self.max_tasks = max_tasks
        self.grace_s = grace_s
        self.max_wait_s = max_wait_s
        self._lock = threading.Lock()
        if workers > 0:
            self._pool = self._new_pool()
            self._pool.submit(convert_schema, {}, {}).result()  # start it now, not on the first request
            self._submitted = 1

    def _new_pool(self) -> ProcessPoolExecutor:
        # spawn: a fork of a process that holds torch threads is not safe.
        # Recycling is counted here, not with max_tasks_per_child: that is 3.11+ only, and a pool
        # with more queued tasks than a child has left can hang or break (CPython #115634).
        ctx = multiprocessing.get_context("spawn")
        self._submitted = 0
        return ProcessPoolExecutor(
            self._workers, mp_context=ctx, initializer=_converter_init, initargs=(self.nice,)
        )

    def _submit(self, schema: Any, options: Mapping[str, Any]) -> tuple[ProcessPoolExecutor, Future[Any]]:
        """Submit one conversion (and the pool it went to): after ``max_tasks`` conversions per
        worker, to a fresh pool (the old one finishes what it holds and its processes exit).
        Under the lock: a thread that took the pool and submitted after releasing it could meet
        that pool shut down by another thread's recycling ("cannot schedule new futures after
        shutdown"); submitting only queues the task."""
        with self._lock:
            pool = self._pool
            assert pool is not None
            if self.max_tasks is not None and self._submitted >= self.max_tasks * self._workers:
                pool.shutdown(wait=False, cancel_futures=False)
                pool = self._pool = self._new_pool()
            self._submitted += 1
            try:
                return pool, pool.submit(convert_schema, schema, dict(options))
            except BrokenProcessPool:  # broke since the last submit: replace it now
                self._renew(pool)
                raise

    def wait_limit(self, options: Mapping[str, Any]) -> float | None:
        """Seconds to wait for one conversion with these options (None: unbounded)."""
        ms = options.get("max_convert_ms", SchemaOptions.max_convert_ms)
        if ms is None:
            return self.max_wait_s
        return ms / 1000 + self.grace_s

    def convert(self, schema: Any, options: Mapping[str, Any]) -> tuple[str, SchemaReport]:
        """(grammar text, report), raising what the conversion raises; ``LimitExceeded
        ("max_convert_ms")`` when the worker does not answer in time, ``InternalError`` when it
        died (both replace the pool)."""
        if self._pool is None:
            return convert_schema(schema, options)
        wait = self.wait_limit(options)
        started = time.perf_counter()
        pool: ProcessPoolExecutor | None = None
        try:
            pool, future = self._submit(schema, options)
            return future.result(timeout=wait)
        except FutureTimeout:
            assert pool is not None
            self._replace(pool)
            elapsed = int((time.perf_counter() - started) * 1000)
            limit = options.get("max_convert_ms", SchemaOptions.max_convert_ms)
            raise LimitExceeded(
                "max_convert_ms",
                elapsed,
                int(limit if limit is not None else (wait or 0) * 1000),
                f"the schema converter process did not answer within {wait:.1f} s "
                "(the conversion's limit plus a grace period); it was stopped",
            ) from None
        except BrokenProcessPool:
            if pool is not None:  # (None: _submit met it and replaced the pool already)
                self._replace(pool)
            raise InternalError("the schema converter process died during the conversion") from None

    def _replace(self, pool: ProcessPoolExecutor) -> None:
        """Kill `pool`'s processes (a stuck conversion never returns) and start a new pool,
        once even when several requests give up on the same pool."""
        with self._lock:
            if self._pool is pool:
                self._renew(pool)

    def _renew(self, pool: ProcessPoolExecutor) -> None:
        """_replace's work, with the lock held and `pool` the current one."""
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        self._pool = self._new_pool()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


IN_PROCESS = SchemaConverter(0)
