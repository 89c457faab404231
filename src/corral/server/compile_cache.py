"""The server's compile cache: compiled constraints keyed by content, bounded by memory,
compiled off the decode path.

Key: SHA-256 of the constraint's canonical JSON (kind, payload, compile options) plus the
tokenizer's hash, so the same schema sent twice — in any key order — compiles once per
vocabulary. Entries are evicted least-recently-used when the estimated memory of all entries
passes the bound; an estimate is the grammar's size plus the masks it has memoised so far
(re-read at eviction time, since the memo grows while requests decode).

Compiles run in a small thread pool (the engine releases the GIL while compiling), so a request
whose constraint is new waits for its own future while the scheduler keeps decoding everybody
else. Concurrent requests for a constraint that is still compiling share one compile.

Compile threads run at the lowest CPU priority (nice 19, per thread on Linux). On a machine
whose cores are all busy, a compile at normal priority takes its share of the CPU from the
model: measured on a shared 2-core machine, a short request took 1.0-1.5 s instead of 0.48 s
while a 1 s schema compiled; at nice 19 it took 0.50 s (the compile itself only slows down).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from corral.server.metrics import ServerMetrics

__all__ = ["CompileCache", "constraint_key"]

# Fixed cost per entry (matcher tables, Python objects) on top of the grammar itself.
_BASE_BYTES = 64 * 1024


def _lower_priority() -> None:
    """Make the calling thread yield the CPU to decoding (Linux: nice applies per thread)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):  # not Linux, or not permitted: normal priority
        pass


def constraint_key(kind: str, payload: Any, options: Any, tokenizer_hash: str) -> str:
    """The content hash of a constraint for one tokenizer (key order in dicts does not matter)."""
    text = json.dumps([kind, payload, options], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256((text + "\0" + tokenizer_hash).encode()).hexdigest()


@dataclass
class _Entry:
    value: Any
    base_bytes: int

    def size(self) -> int:
        grammar = getattr(self.value, "grammar", None)
        memo = 0
        if grammar is not None:
            try:
                memo = int(grammar.cache_stats().get("bytes", 0))
            except Exception:  # a grammar without stats: count its base size only
                memo = 0
        return self.base_bytes + memo


class CompileCache:
    """Content-addressed, memory-bounded LRU of compiled constraints with background compiles.

    Parameters
    ----------
    max_bytes : int
        Bound on the estimated memory of all entries (the newest entry is always kept).
    workers : int
        Compile threads.
    metrics : ServerMetrics or None
        Where hits, misses, evictions and compile times are recorded.
    """

    def __init__(self, max_bytes: int, workers: int = 1, metrics: ServerMetrics | None = None) -> None:
        self.max_bytes = max_bytes
        self.metrics = metrics
        self._lru: OrderedDict[str, _Entry] = OrderedDict()
        self._pending: dict[str, Future[Any]] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, workers), thread_name_prefix="corral-compile", initializer=_lower_priority
        )
        self.compiles = 0

    def get(self, key: str, build: Callable[[], Any], kind: str = "") -> tuple[Future[Any], bool]:
        """A future of the compiled constraint for ``key`` (``build()`` runs in a compile thread
        on a miss), and whether it was a hit (cached, or already compiling)."""
        with self._lock:
            entry = self._lru.get(key)
            if entry is not None:
                self._lru.move_to_end(key)
                done: Future[Any] = Future()
                done.set_result(entry.value)
                self._count(hit=True)
                return done, True
            pending = self._pending.get(key)
            if pending is not None:
                self._count(hit=True)
                return pending, True
            self._count(hit=False)
            fut = self._pool.submit(self._compile, key, build, kind)
            self._pending[key] = fut
            return fut, False

    def compile_now(self, key: str, build: Callable[[], Any], kind: str = "") -> Any:
        """Compile (or fetch) synchronously: start-up pre-compilation."""
        fut, _ = self.get(key, build, kind)
        return fut.result()

    def _count(self, hit: bool) -> None:
        if self.metrics is not None:
            (self.metrics.cache_hits if hit else self.metrics.cache_misses).inc()

    def _compile(self, key: str, build: Callable[[], Any], kind: str) -> Any:
        t0 = time.perf_counter()
        try:
            value = build()
        except BaseException:
            with self._lock:
                self._pending.pop(key, None)  # failures are not cached: the next try compiles again
            raise
        elapsed = time.perf_counter() - t0
        if self.metrics is not None:
            self.metrics.compile_time.observe(elapsed, kind=kind)
        # The lowered grammar and its automata grow with the source: ~8 bytes per source byte.
        entry = _Entry(value, _BASE_BYTES + 8 * int(getattr(value, "source_len", 0)))
        with self._lock:
            self.compiles += 1
            self._pending.pop(key, None)
            self._lru[key] = entry
            self._evict()
        return value

    def _evict(self) -> None:
        total = sum(e.size() for e in self._lru.values())
        while total > self.max_bytes and len(self._lru) > 1:
            _, old = self._lru.popitem(last=False)
            total -= old.size()
            if self.metrics is not None:
                self.metrics.cache_evictions.inc()

    @property
    def entries(self) -> int:
        with self._lock:
            return len(self._lru)

    @property
    def bytes(self) -> int:
        with self._lock:
            return sum(e.size() for e in self._lru.values())

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
