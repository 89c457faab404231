"""Background compiles yield the CPU without holding the GIL at low priority.

The compile cache's threads used to run at nice 19 as a whole. On a busy machine the kernel then
left such a thread waiting for a core while it held the GIL (it runs Python between engine
calls), and the server's decode loop waited for the GIL: a priority inversion (the head-of-line
benchmark, docs/benchmarks.md). Now only the engine's work runs at low priority, on a native
helper thread that never touches the GIL, and the compile thread keeps normal priority.

The checks read thread priorities from ``/proc`` (Linux, where nice values are per thread).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import corral
from corral.compile import CompileCache
from corral.compile.cache import COMPILE_NICE
from corral.engine import compile_priority, set_compile_priority

TOK = corral.Tokenizer.from_tokens(
    [bytes([c]) for c in range(97, 123)] + [b"<eos>"], special_ids=[26], eos_ids=[26]
)
# A DFA of 2**12 states (the 12th letter from the end is an "a"): tens of ms of engine work.
SLOW = r"[a-z]*a[a-z]{11}"


def _nice(tid: int) -> int | None:
    """The nice value of thread ``tid`` of this process (None once it has exited)."""
    try:
        fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[16])  # field 19 of stat; fields[0] is field 3 (state)


def _low_threads_during(fn: Any) -> tuple[Any, set[int]]:
    """Run ``fn()`` while sampling this process's threads: (its result, the ids of every thread
    other than the caller seen at nice COMPILE_NICE meanwhile)."""
    seen: set[int] = set()
    stop = threading.Event()
    me = threading.get_native_id()

    def sample() -> None:
        while not stop.is_set():
            for tid in os.listdir("/proc/self/task"):
                if int(tid) != me and _nice(int(tid)) == COMPILE_NICE:
                    seen.add(int(tid))
            time.sleep(0.0002)

    th = threading.Thread(target=sample)
    th.start()
    try:
        out = fn()
    finally:
        stop.set()
        th.join()
    return out, seen


def test_the_compile_thread_keeps_normal_priority_and_its_engine_work_runs_low() -> None:
    base = os.getpriority(os.PRIO_PROCESS, 0)
    cache = CompileCache(1 << 20, workers=1)
    record: dict[str, Any] = {}

    def build() -> Any:
        # Python code runs only with the GIL held: the thread running it must not be low priority.
        record["tid"] = threading.get_native_id()
        record["nice"] = _nice(record["tid"])
        record["compile_priority"] = compile_priority()
        return _low_threads_during(lambda: corral.compile_regex(SLOW, TOK))

    try:
        fut, hit = cache.get("slow", build)
        grammar, low = fut.result(timeout=60)
    finally:
        cache.close()
    assert not hit
    assert record["nice"] == base, record  # was 19: the inversion
    assert record["compile_priority"] == COMPILE_NICE, record
    # The engine's work ran on another thread, at low priority, and that thread has exited.
    assert low and record["tid"] not in low, (low, record)
    assert all(_nice(t) is None for t in low), low
    m = grammar.matcher()
    assert m.accept_bytes(b"a" + b"b" * 11) and m.is_accepting()


def test_low_priority_compiles_give_the_same_results_and_errors() -> None:
    def in_thread(fn: Any, nice: int) -> Any:
        out: dict[str, Any] = {}

        def run() -> None:
            set_compile_priority(nice)
            try:
                out["value"] = fn()
            except Exception as e:  # noqa: BLE001 - compared below
                out["error"] = e

        th = threading.Thread(target=run)
        th.start()
        th.join()
        return out

    for nice in (0, COMPILE_NICE):
        ok = in_thread(lambda: corral.compile_grammar('root ::= "a" [b-c]+', TOK).matcher(), nice)
        assert ok["value"].accept_bytes(b"abc") and ok["value"].is_accepting()
        # Engine errors cross the helper thread as the same corral exception, with its details.
        bad = in_thread(lambda: corral.compile_regex("a(", TOK), nice)["error"]
        assert isinstance(bad, corral.CompileError) and bad.offset is not None, bad
        over = in_thread(lambda: corral.compile_regex(SLOW, TOK, max_dfa_states=100), nice)["error"]
        assert isinstance(over, corral.LimitExceeded), over
        loaded = in_thread(
            lambda: corral.CompiledGrammar.from_bytes(corral.compile_regex("ab", TOK).to_bytes(), TOK), nice
        )
        assert "value" in loaded, loaded


def test_compile_priority_is_per_thread_and_checked() -> None:
    assert compile_priority() == 0  # this (test) thread was never set
    with pytest.raises(ValueError):
        set_compile_priority(20)
    with pytest.raises(ValueError):
        set_compile_priority(-1)
