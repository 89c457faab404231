"""The compile cache: compiled constraints keyed by content, bounded by memory, compiled off the
decode path — one implementation for the library, the server and vLLM.

Key: :meth:`ConstraintSpec.key` — SHA-256 of the constraint's content in its own key order (the
order declared properties are generated in) plus the tokenizer's hash, so the same constraint sent
twice compiles once per vocabulary and two schemas that differ only in property order never share
a grammar. Entries are evicted least-recently-used when the estimated memory of all entries passes
the bound; an estimate is the source size plus the masks the grammar has memoised so far (re-read
at eviction time, since the memo grows while requests decode).

Two ways in:
* :meth:`CompileCache.get` returns a future: on a miss the compile runs in a background thread
  (the engine releases the GIL while compiling), so a server's decode loop keeps stepping while a
  new constraint compiles. Concurrent requests for a constraint still compiling share one compile.
* :meth:`CompileCache.get_or_compile` is the synchronous path (``corral.generate``): a miss
  compiles in the caller's own thread, at the caller's priority.

Backed by a directory (:class:`~corral.compile.disk_cache.DiskCache`: ``corral serve
--cache-dir``, ``CORRAL_CACHE_DIR`` for the library and vLLM), a miss first looks on disk and
loads the entry instead of compiling; a compile is written there for the next process. The disk
is consulted only where a compile would run (the background thread, or the caller's thread on the
synchronous path), so a load never blocks a decode loop either.

Compiles in the background threads run at the lowest CPU priority: on a machine whose cores are
all busy, a compile at normal priority takes its share of the CPU from the model (measured on a
shared 2-core machine: a short request took 1.0-1.5 s instead of 0.48 s while a 1 s schema
compiled; at nice 19, 0.50 s). Only the engine's work is lowered, on a native thread of its own
(:func:`corral.engine.set_compile_priority`); the compile thread itself, which runs Python and so
holds the GIL at times, keeps normal priority. Lowering the whole thread (as before) was a
priority inversion: on a busy machine the kernel left the nice-19 thread waiting for a core while
it held the GIL, and the decode loop waited for the GIL (py-spy: 80% of the GIL-holding samples in
the compile thread at a line of trivial Python; docs/benchmarks.md, head-of-line).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from corral.engine import set_compile_priority

if TYPE_CHECKING:
    from corral.compile.disk_cache import DiskCache

__all__ = ["CacheMetrics", "CompileCache", "default_cache"]

# Fixed cost per entry (matcher tables, Python objects) on top of the grammar itself.
_BASE_BYTES = 64 * 1024
DEFAULT_CACHE_MB = 256


class _Counter(Protocol):
    def inc(self, amount: float = ..., /) -> None: ...


class _Histogram(Protocol):
    def observe(self, value: float, /, *, kind: str) -> None: ...


class CacheMetrics(Protocol):
    """Where a cache reports (the server's metrics registry has these)."""

    @property
    def cache_hits(self) -> _Counter: ...
    @property
    def cache_misses(self) -> _Counter: ...
    @property
    def cache_evictions(self) -> _Counter: ...
    @property
    def compile_time(self) -> _Histogram: ...


# The nice value of the engine work of background compiles (see the module doc).
COMPILE_NICE = 19


def _lower_priority() -> None:
    """Make the compiles this (compile) thread starts yield the CPU to decoding, without lowering
    the thread itself (see the module doc)."""
    set_compile_priority(COMPILE_NICE)


def _quietly(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, or None if it raises: the directory is an optimisation, and a bug in it
    must neither fail a request nor leave a compile's waiters hanging."""
    try:
        return fn(*args)
    except Exception:
        logging.getLogger("corral.compile.cache").warning("compile cache directory failed", exc_info=True)
        return None


@dataclass
class _Entry:
    value: Any
    base_bytes: int
    loaded: bool = False  # read from the directory rather than compiled in this process

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
        Background compile threads (started on first use).
    metrics : CacheMetrics or None
        Where hits, misses, evictions and compile times are reported.
    disk : DiskCache or None
        The directory behind the memory: misses load from it, compiles are written to it (only
        for calls that give the tokenizer, which loading needs).
    """

    def __init__(
        self,
        max_bytes: int,
        workers: int = 1,
        metrics: CacheMetrics | None = None,
        disk: DiskCache | None = None,
    ) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self.metrics = metrics
        self.disk = disk
        self.workers = max(1, workers)
        self._lru: OrderedDict[str, _Entry] = OrderedDict()
        self._pending: dict[str, Future[Any]] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self.compiles = 0
        self.loads = 0  # misses served from the directory instead of compiled
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=self.workers, thread_name_prefix="corral-compile", initializer=_lower_priority
            )
        return self._pool

    def get(
        self, key: str, build: Callable[[], Any], kind: str = "", tokenizer: Any = None
    ) -> tuple[Future[Any], bool]:
        """A future of the compiled constraint for ``key`` (``build()`` runs in a background
        compile thread on a miss), and whether it was a hit (cached, or already compiling).
        With ``tokenizer`` (what ``key`` was compiled for), a miss first tries the directory."""
        with self._lock:
            hit = self._lookup(key)
            if hit is not None:
                return hit, True
            fut: Future[Any] = Future()
            self._pending[key] = fut
        self._executor().submit(self._compile, key, build, kind, fut, tokenizer)
        return fut, False

    def get_or_compile(
        self, key: str, build: Callable[[], Any], kind: str = "", tokenizer: Any = None
    ) -> tuple[Any, bool]:
        """(compiled constraint, hit): a miss compiles (or, given ``tokenizer``, loads from the
        directory) in the calling thread; a constraint already compiling elsewhere is waited
        for. Raises what ``build`` raises."""
        with self._lock:
            hit = self._lookup(key)
            if hit is None:
                fut: Future[Any] = Future()
                self._pending[key] = fut
        if hit is not None:
            return hit.result(), True
        self._compile(key, build, kind, fut, tokenizer)
        return fut.result(), False

    def peek(self, key: str) -> Any:
        """The compiled constraint cached under ``key``, or None (not cached, or still compiling),
        without compiling, waiting or counting: for a host deciding whether a request is ready
        now or must wait for a compile."""
        with self._lock:
            entry = self._lru.get(key)
            return None if entry is None else entry.value

    def compile_now(self, key: str, build: Callable[[], Any], kind: str = "") -> Any:
        """Compile (or fetch) synchronously: start-up pre-compilation."""
        return self.get_or_compile(key, build, kind)[0]

    def _lookup(self, key: str) -> Future[Any] | None:
        """A future for a cached or compiling key (counts the hit or miss); lock held."""
        entry = self._lru.get(key)
        if entry is not None:
            self._lru.move_to_end(key)
            done: Future[Any] = Future()
            done.set_result(entry.value)
            self._count(hit=True)
            return done
        pending = self._pending.get(key)
        if pending is not None:
            self._count(hit=True)
            return pending
        self._count(hit=False)
        return None

    def _count(self, hit: bool) -> None:
        if hit:
            self.hits += 1
        else:
            self.misses += 1
        if self.metrics is not None:
            (self.metrics.cache_hits if hit else self.metrics.cache_misses).inc()

    def _compile(
        self, key: str, build: Callable[[], Any], kind: str, fut: Future[Any], tokenizer: Any = None
    ) -> None:
        disk = self.disk if tokenizer is not None else None
        value = _quietly(disk.load, key, tokenizer) if disk is not None else None
        loaded = value is not None
        if not loaded:
            t0 = time.perf_counter()
            try:
                value = build()
            except BaseException as e:
                with self._lock:
                    self._pending.pop(key, None)  # failures are not cached: the next try compiles again
                fut.set_exception(e)
                return
            elapsed = time.perf_counter() - t0
            if self.metrics is not None:
                self.metrics.compile_time.observe(elapsed, kind=kind)
        # The lowered grammar and its automata grow with the source: ~8 bytes per source byte.
        entry = _Entry(value, _BASE_BYTES + 8 * int(getattr(value, "source_len", 0)), loaded)
        with self._lock:
            if loaded:
                self.loads += 1
            else:
                self.compiles += 1
            self._pending.pop(key, None)
            self._lru[key] = entry
            self._evict()
        fut.set_result(value)
        if disk is not None and not loaded:  # after the waiters have their result
            _quietly(disk.store, key, tokenizer, value)

    def loaded_from_disk(self, key: str) -> bool:
        """Whether ``key``'s cached entry was loaded from the directory rather than compiled
        (the server's ``x-corral-cache: disk``)."""
        with self._lock:
            entry = self._lru.get(key)
            return entry is not None and entry.loaded

    def _evict(self) -> None:
        total = sum(e.size() for e in self._lru.values())
        while total > self.max_bytes and len(self._lru) > 1:
            _, old = self._lru.popitem(last=False)
            total -= old.size()
            self.evictions += 1
            if self.metrics is not None:
                self.metrics.cache_evictions.inc()

    def clear(self) -> None:
        """Forget every cached constraint (compiles in flight finish and are kept)."""
        with self._lock:
            self._lru.clear()

    @property
    def entries(self) -> int:
        with self._lock:
            return len(self._lru)

    @property
    def bytes(self) -> int:
        with self._lock:
            return sum(e.size() for e in self._lru.values())

    def stats(self) -> dict[str, int]:
        """entries, bytes, hits, misses, compiles, loads (misses served from the directory),
        evictions; with a directory, its counts too (``disk_hit``, ``disk_write``, ...)."""
        out = {
            "entries": self.entries,
            "bytes": self.bytes,
            "hits": self.hits,
            "misses": self.misses,
            "compiles": self.compiles,
            "loads": self.loads,
            "evictions": self.evictions,
        }
        if self.disk is not None:
            out.update({f"disk_{k}": v for k, v in self.disk.counts.items()})
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


_DEFAULT: CompileCache | None = None
_DEFAULT_LOCK = threading.Lock()


def default_cache() -> CompileCache:
    """The process-wide cache ``corral.generate``, the logits processors and vLLM share.
    ``CORRAL_COMPILE_CACHE_MB`` (default 256) bounds its memory; ``CORRAL_CACHE_DIR`` backs it
    with a directory (bounded by ``CORRAL_CACHE_MAX_BYTES``, default 1 GiB)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            from corral.compile.disk_cache import disk_cache_from_env

            mb = int(os.environ.get("CORRAL_COMPILE_CACHE_MB", str(DEFAULT_CACHE_MB)))
            _DEFAULT = CompileCache(mb * 1024 * 1024, workers=1, disk=disk_cache_from_env())
        return _DEFAULT
