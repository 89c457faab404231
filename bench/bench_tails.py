"""Tail benchmark: every mask timed, and compile + first matcher, corral vs llguidance vs XGrammar.

What is measured
----------------
Two workloads, every engine interleaved per schema in one process run, on the Llama 3.2 tokenizer
(``--tokenizer llama3``, the default: 128k byte-level BPE) or Gemma 3's (``--tokenizer gemma3``:
262k SentencePiece pieces with byte fallback, read from the Gemma 3 270M GGUF as the tests read
it; every engine gets the same token bytes, special ids and EOS ids, and instances are encoded
with llama.cpp's tokenizer of that file). The adapters and helpers come from
``bench_engine.py`` / ``bench_json_schema.py``:

* **counted** (hand-written): schemas of the kind issue 12 names -- strings with
  ``minLength``/``maxLength`` up to 255, ``pattern: ^[0-9a-zA-Z_-]{1,255}$``, ``format:
  date-time`` beside them, arrays of such strings -- each with long valid instances of our own
  (up to the maximum length, ASCII and non-ASCII).
* **sets**: a seeded sample of ``--per-set`` schemas from each jsonschemabench set (``../shared/
  data/jsonschemabench``); instances are random walks under corral's mask (``bench_json_schema.
  Walker``, up to ``--max-walk`` tokens, so counted strings run long), kept when ``jsonschema``
  accepts them.

Each instance is serialised with ``json.dumps(ensure_ascii=False)``, tokenized canonically and fed
token by token to a fresh matcher of every engine that compiled the schema; **every** mask fill
is timed (one pass: the first time each state is seen, as in a real decode; corral's per-grammar
caches stay warm across the instances of one schema, as they would across requests).  An engine
that rejects a valid instance stops there (its timed steps count) and the rejection is reported.
**compile + first matcher** = cold compile (caches cleared) + building a matcher + its first mask.
``--clock cpu`` times with the thread's CPU clock instead of the wall clock: on a loaded machine
the wall clock charges a mask with the time slices other processes took (tails of 10-20 ms
that are the scheduler's, for every engine alike); the CPU clock does not.

Engines: corral ``compile_json_schema(schema, tok, extra_properties=--extra-properties)``
(default ``spec``, the JSON Schema default the instances need); llguidance
``grammar_from_json_schema`` defaults; XGrammar ``compile_json_schema(any_whitespace=True,
strict_mode=False)``; ``xgrammar-dyn`` the same with ``GrammarCompiler(enable_dynamic_compilation
=True)``, its fastest-compiling mode; ``corral-ref`` corral with its mask fast paths off (the
reference walk; ``--check`` compares its masks with corral's at every step).  Ratios are
corral / other: above 1 means corral is slower.

How to run
----------
    python bench/bench_tails.py                        # counted cases + 20 schemas per set
    python bench/bench_tails.py --per-set 0 --quick    # counted cases only
    python bench/bench_tails.py --per-set 40 --engines corral,llguidance --json out.json
    python bench/bench_tails.py --per-set 2 --engines corral,corral-ref --check --clock cpu
                                                       # fast paths vs the reference walk
    python bench/bench_tails.py --tokenizer gemma3 --per-set 2 --clock cpu
                                                       # the same on Gemma 3's vocabulary
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_engine import TokCtx, _f, _ratio  # noqa: E402
from bench_json_schema import (  # noqa: E402
    DEFAULT_DATA,
    SETS,
    LLGuidanceSchema,
    SchemaCompileError,
    Walker,
    XGrammarSchema,
    _validator,
    sample_files,
)
from bench_json_schema import CorralSchema as _CorralSchema  # noqa: E402

# --------------------------------------------------------------------------------------------
# Tokenizers


@dataclass
class GgufCtx(TokCtx):
    """A GGUF vocabulary (Gemma 3) as every engine sees it: corral reads the file
    (``Tokenizer.from_gguf``, as the tests do), llguidance gets the same token bytes through a
    ``TokenizerWrapper``-like object, XGrammar a raw ``TokenizerInfo`` of them (special tokens
    empty, so it never allows them); text is encoded by llama.cpp's tokenizer of the file."""

    llama: Any = None  # llama_cpp.Llama(vocab_only=True)

    @staticmethod
    def load_gguf(path: Path) -> GgufCtx:
        import llama_cpp

        import corral

        tok = corral.Tokenizer.from_gguf(path)
        llama = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        ctx = GgufCtx(
            str(path), None, tok.width, tuple(tok.eos_ids), list(tok.token_bytes), tok.special_ids, llama
        )
        ctx.token_bytes += [b""] * (tok.width - len(ctx.token_bytes))
        probe = '{"a": "x y", "é": [1, 2.5e-3]}'
        if b"".join(ctx.token_bytes[i] for i in ctx.encode(probe)) != probe.encode():
            raise SystemExit(f"{path}: llama.cpp's encoding does not spell the text back")
        return ctx

    def encode(self, text: str) -> list[int]:
        return list(self.llama.tokenize(text.encode(), add_bos=False, special=False))


def load_tokenizer(name: str | None) -> TokCtx:
    """``llama3`` (default), ``gemma3``, or a path to a Hugging Face ``tokenizer.json``."""
    if name in (None, "llama3"):
        return TokCtx.load(None)
    if name == "gemma3":
        from corral import models

        try:
            return GgufCtx.load_gguf(models.gemma3_gguf_path())
        except models.ModelNotFoundError as e:
            raise SystemExit(str(e)) from e
    return TokCtx.load(name)


class _Wrapped:
    """What ``llguidance.TokenizerWrapper`` reads: token bytes, special ids, EOS, an encoder."""

    def __init__(self, ctx: TokCtx) -> None:
        self.ctx = ctx
        self.eos_token_id = ctx.eos_ids[0]
        self.bos_token_id = None
        self.tokens = ctx.token_bytes
        self.special_token_ids = sorted(ctx.special_ids)

    def __call__(self, s: str | bytes) -> list[int]:
        return self.ctx.encode(s.decode() if isinstance(s, bytes) else s)


# --------------------------------------------------------------------------------------------
# Engines


class CorralTails(_CorralSchema):
    def setup(self) -> None:
        if not isinstance(self.ctx, GgufCtx):
            super().setup()
            return
        import corral

        self.mod = corral
        self.tok = corral.Tokenizer.from_gguf(self.ctx.path, eos_ids=list(self.ctx.eos_ids))
        self.has_cache = hasattr(corral, "clear_cache")

    def compile_schema(self, schema: Any, text: str) -> Any:
        self.clear_cache()
        return self.mod.compile_json_schema(schema, self.tok, extra_properties=self.args.extra_properties)


class CorralReference(CorralTails):
    """corral with its mask fast paths off (``_native.set_mask_fast_paths(False)``) around every
    call: the reference trie walk, on a vocabulary of its own (so the cross-grammar pool does not
    hand it the fast engine's entries). Its masks must equal corral's bit for bit (``--check``)."""

    def setup(self) -> None:
        super().setup()
        from corral import _native

        self.switch = _native.set_mask_fast_paths

    def _ref(self, fn: Any, *a: Any) -> Any:
        self.switch(False)
        try:
            return fn(*a)
        finally:
            self.switch(True)

    def compile_schema(self, schema: Any, text: str) -> Any:
        return self._ref(super().compile_schema, schema, text)

    def filler(self, m: Any, bm: Any) -> Any:
        inner = super().filler(m, bm)
        return lambda: self._ref(inner)


class LLGuidanceTails(LLGuidanceSchema):
    def setup(self) -> None:
        if not isinstance(self.ctx, GgufCtx):
            super().setup()
            return
        import llguidance

        self.llg = llguidance
        wrapped = llguidance.TokenizerWrapper(_Wrapped(self.ctx))
        self.tok = llguidance.LLTokenizer(
            wrapped, n_vocab=self.ctx.vocab_size, eos_token=list(self.ctx.eos_ids)
        )


class XGrammarTails(XGrammarSchema):
    dynamic = False

    def setup(self) -> None:
        import xgrammar

        self.xgr = xgrammar
        if isinstance(self.ctx, GgufCtx):
            # The decoded bytes as a raw vocabulary; special tokens empty (never allowed).
            vocab = [b"" if i in self.ctx.special_ids else b for i, b in enumerate(self.ctx.token_bytes)]
            info = xgrammar.TokenizerInfo(
                vocab,
                xgrammar.VocabType.RAW,
                vocab_size=self.ctx.vocab_size,
                stop_token_ids=list(self.ctx.eos_ids),
            )
        else:
            import transformers

            hf_tok = transformers.PreTrainedTokenizerFast(tokenizer_file=self.ctx.path)
            info = xgrammar.TokenizerInfo.from_huggingface(
                hf_tok, vocab_size=self.ctx.vocab_size, stop_token_ids=list(self.ctx.eos_ids)
            )
        self.compiler = xgrammar.GrammarCompiler(
            info, max_threads=self.args.threads, cache_enabled=True, enable_dynamic_compilation=self.dynamic
        )

    def compile_schema(self, schema: Any, text: str) -> Any:
        self.compiler.clear_cache()
        return self.compiler.compile_json_schema(text, any_whitespace=True, strict_mode=False)


class XGrammarDyn(XGrammarTails):
    dynamic = True


ADAPTERS: dict[str, type] = {
    "corral": CorralTails,
    "corral-ref": CorralReference,
    "llguidance": LLGuidanceTails,
    "xgrammar": XGrammarTails,
    "xgrammar-dyn": XGrammarDyn,
}

# --------------------------------------------------------------------------------------------
# Hand-written counted-string cases (issue 12)

ISSUE_SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"type": "string", "minLength": 1, "maxLength": 255},
        "b": {"type": "string", "pattern": "^[0-9a-zA-Z_-]{1,255}$"},
        "c": {"type": "string", "format": "date-time"},
    },
}


def _text(rng: random.Random, n: int, alphabet: str) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def counted_cases(seed: int) -> list[tuple[str, Any, list[Any]]]:
    rng = random.Random(seed)
    words = "the quick brown fox jumps over a lazy dog while ".split()
    prose = lambda n: (" ".join(rng.choice(words) for _ in range(n)))[:n]  # noqa: E731
    ident = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_-"
    uni = "aé漢字ßøДж😀 "
    cases: list[tuple[str, Any, list[Any]]] = []
    inst = []
    for la, lb in ((255, 255), (254, 200), (120, 64), (40, 255), (1, 1), (200, 17)):
        inst.append({"a": prose(la), "b": _text(rng, lb, ident), "c": "2024-05-17T08:30:00.123+02:00"})
    inst.append({"a": _text(rng, 255, uni), "b": _text(rng, 255, ident), "c": "1999-12-31T23:59:59Z"})
    inst.append({"c": "2024-01-01T00:00:00Z", "b": "x", "a": prose(250)})
    cases.append(("issue-12 a/b/c", ISSUE_SCHEMA, inst))
    cases.append(
        (
            "array of maxLength 100",
            {"type": "array", "items": {"type": "string", "maxLength": 100}, "maxItems": 8},
            [[prose(100) for _ in range(6)], [_text(rng, 99, uni), prose(3), ""]],
        )
    )
    cases.append(
        (
            "pattern {3,64} + enum",
            {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "pattern": "^[a-z][a-z0-9-]{2,63}$"},
                    "kind": {"enum": ["alpha", "beta", "gamma"]},
                    "note": {"type": "string", "maxLength": 500},
                },
                "required": ["id", "kind"],
            },
            [
                {"id": "a" + _text(rng, 63, "abcdefghij0123-"), "kind": "beta", "note": prose(500)},
                {"id": "abc", "kind": "gamma", "note": _text(rng, 480, uni)},
            ],
        )
    )
    return cases


# --------------------------------------------------------------------------------------------
# The run


@dataclass
class Rec:
    name: str
    compile_ms: dict[str, float | None] = field(default_factory=dict)  # None: failed
    ttfm_ms: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    mask_us: dict[str, list[float]] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)
    instances: int = 0
    mismatches: int = 0  # --check: steps where corral's mask differs from corral-ref's


CLOCK = time.perf_counter_ns  # --clock cpu: time.thread_time_ns


def compile_all(rec: Rec, engines: dict[str, Any], schema: Any) -> dict[str, Any]:
    text = json.dumps(schema)
    out: dict[str, Any] = {}
    perf = CLOCK
    for name, eng in engines.items():
        t0 = perf()
        try:
            c = eng.compile_schema(schema, text)
            t1 = perf()
            m = eng.matcher(c)
            bm = eng.alloc()
            eng.filler(m, bm)()
            t2 = perf()
        except (Exception, RecursionError, SchemaCompileError) as e:  # noqa: BLE001 - data
            rec.compile_ms[name] = None
            rec.errors[name] = f"{type(e).__name__}: {str(e).strip()[:160]}"
            continue
        rec.compile_ms[name] = (t1 - t0) / 1e6
        rec.ttfm_ms[name] = (t2 - t0) / 1e6
        out[name] = c
    return out


CHECK = False  # --check: keep corral's and corral-ref's masks per step and compare them


def time_instance(rec: Rec, engines: dict[str, Any], compiled: dict[str, Any], ids: list[int]) -> None:
    perf = CLOCK
    rec.instances += 1
    kept: dict[str, list[bytes]] = {}
    for name, c in compiled.items():
        eng = engines[name]
        m = eng.matcher(c)
        bm = eng.alloc()
        fill = eng.filler(m, bm)
        accept = eng.accept
        ns = rec.mask_us.setdefault(name, [])
        ok = True
        for tok in ids:
            t0 = perf()
            fill()
            t1 = perf()
            ns.append((t1 - t0) / 1000.0)
            if CHECK and name in ("corral", "corral-ref"):
                kept.setdefault(name, []).append(np.asarray(bm).tobytes())
            if not accept(m, tok):
                ok = False
                break
        if ok:
            t0 = perf()
            fill()
            ns.append((perf() - t0) / 1000.0)
            ok = eng.finish(m)
        if not ok:
            rec.rejected[name] = rec.rejected.get(name, 0) + 1
    if len(kept) == 2:
        a, b = kept["corral"], kept["corral-ref"]
        rec.mismatches += sum(x != y for x, y in zip(a, b, strict=False)) + abs(len(a) - len(b))


def start_engines(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The tokenizer (``--tokenizer``) and every installed engine of ``--engines``, started
    (also used by bench_real_schemas.py)."""
    ctx = load_tokenizer(args.tokenizer)
    engines: dict[str, Any] = {}
    for n in args.engines.split(","):
        cls = ADAPTERS[n]
        if not cls.available():
            print(f"  {n}: not installed ({cls.install_hint})")
            continue
        eng = cls(ctx, args)
        eng.start()
        engines[n] = eng
    print(
        f"tokenizer {ctx.path} ({ctx.vocab_size} ids); engines: "
        + ", ".join(f"{n} {e.version()}" for n, e in engines.items())
    )
    return ctx, engines


def run(args: argparse.Namespace) -> list[tuple[str, list[Rec]]]:
    ctx, engines = start_engines(args)
    groups: list[tuple[str, list[Rec]]] = []
    gc.collect()
    gc.disable()
    try:
        recs = []
        for name, schema, insts in [] if args.skip_counted else counted_cases(args.seed):
            rec = Rec(name)
            compiled = compile_all(rec, engines, schema)
            for v in insts:
                time_instance(rec, engines, compiled, ctx.encode(json.dumps(v, ensure_ascii=False)))
            recs.append(rec)
        if recs:
            groups.append(("counted", recs))
        if args.per_set > 0 and "corral" in engines:
            walker = Walker(ctx, engines["corral"], args.max_walk)
            files = sample_files(args.data, args.sets.split(","), args.per_set, args.seed)
            recs = []
            for i, (s, f) in enumerate(files):
                try:
                    schema = json.loads(f.read_text(encoding="utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError):
                    continue
                rec = Rec(f"{s}/{f.name}")
                compiled = compile_all(rec, engines, schema)
                if "corral" in compiled:
                    try:
                        validator = _validator(schema)
                    except Exception:  # noqa: BLE001
                        validator = None
                    seed = zlib.crc32(f"{args.seed}/{s}/{f.name}".encode())
                    kept = 0
                    for attempt in range(args.attempts):
                        if kept >= args.instances:
                            break
                        try:
                            raw = walker.walk(compiled["corral"], random.Random(seed + attempt))
                            value = json.loads(raw.decode("utf-8"))
                            if validator is not None and not validator.is_valid(value):
                                continue
                        except Exception:  # noqa: BLE001 - an instance we cannot use
                            continue
                        time_instance(
                            rec, engines, compiled, ctx.encode(json.dumps(value, ensure_ascii=False))
                        )
                        kept += 1
                recs.append(rec)
                print(
                    f"[{i + 1}/{len(files)}] {rec.name}: "
                    + " ".join(
                        f"{n}:{'ok' if rec.compile_ms.get(n) is not None else 'err'}" for n in engines
                    ),
                    file=sys.stderr,
                )
            groups.append(("sets", recs))
    finally:
        gc.enable()
    return groups


# --------------------------------------------------------------------------------------------
# Report


def _pct(xs: list[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(xs), q)) if xs else None


def report(groups: list[tuple[str, list[Rec]]], names: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for gname, recs in groups + ([("all", [r for _, rs in groups for r in rs])] if len(groups) > 1 else []):
        print(f"\n== {gname}: {len(recs)} schemas")
        hdr = f"{'engine':<13} {'compiled':>9} {'steps':>7} {'p50':>7} {'p99':>8}"
        hdr += f" {'p99.9':>8} {'max':>8} {'mean':>7}"
        hdr += f"  | {'ttfm p50':>8} {'p90':>7} {'p99':>7} {'max':>7}  rejected"
        print("mask fill us" + " " * 38 + "| compile + first matcher ms")
        print(hdr)
        st: dict[str, Any] = {}
        for n in names:
            us = [x for r in recs for x in r.mask_us.get(n, [])]
            tt = [r.ttfm_ms[n] for r in recs if n in r.ttfm_ms]
            ok = sum(r.compile_ms.get(n) is not None for r in recs)
            rej = sum(r.rejected.get(n, 0) for r in recs)
            inst = sum(r.instances for r in recs if n in r.ttfm_ms)
            s = {"compiled": ok, "steps": len(us), "rejected": rej, "instances": inst}
            for q in (50, 99, 99.9):
                s[f"p{q:g}"] = _pct(us, q)
            s["max"] = max(us) if us else None
            s["mean"] = float(np.mean(us)) if us else None
            for q in (50, 90, 99):
                s[f"ttfm_p{q}"] = _pct(tt, q)
            s["ttfm_max"] = max(tt) if tt else None
            st[n] = s
            print(
                f"{n:<13} {ok:>4}/{len(recs):<4} {len(us):>7} {_f(s['p50']):>7} {_f(s['p99']):>8} "
                f"{_f(s['p99.9']):>8} {_f(s['max']):>8} {_f(s['mean']):>7}  | {_f(s['ttfm_p50']):>8} "
                f"{_f(s['ttfm_p90']):>7} {_f(s['ttfm_p99']):>7} {_f(s['ttfm_max']):>7}  {rej}/{inst}"
            )
        if "corral" in st:
            print("ratios corral / other (>1: corral slower); mask over all steps, compile over all schemas")
            for o in names:
                if o == "corral":
                    continue
                a, b = st["corral"], st[o]
                cols = ["p50", "p99", "p99.9", "max", "mean", "ttfm_p50", "ttfm_p90", "ttfm_p99", "ttfm_max"]
                print(f"  vs {o:<11} " + " ".join(f"{c}={_ratio(a[c], b[c])}" for c in cols))
        out[gname] = st
    slow = sorted(((r.ttfm_ms.get("corral", 0.0), r.name) for _, rs in groups for r in rs), reverse=True)[:5]
    print("\nslowest corral compiles (ms): " + ", ".join(f"{n} {t:.0f}" for t, n in slow))
    if CHECK:
        bad = sum(r.mismatches for _, rs in groups for r in rs)
        print(f"--check: {bad} steps where corral's mask differs from corral-ref's")
    errs = [(r.name, r.errors["corral"]) for _, rs in groups for r in rs if "corral" in r.errors]
    for n, e in errs[:10]:
        print(f"  corral failed: {n}: {e}")
    return out


def add_sample_args(ap: argparse.ArgumentParser, per_set_help: str) -> None:
    """The options this script shares with bench_real_schemas.py: the jsonschemabench sample,
    the engines and corral's extra_properties mode."""
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--per-set", type=int, default=20, help=per_set_help)
    ap.add_argument("--engines", default="corral,llguidance,xgrammar,xgrammar-dyn")
    ap.add_argument("--extra-properties", default="spec", choices=["spec", "schema"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_sample_args(ap, "schemas sampled per set (0: counted cases only)")
    ap.add_argument("--instances", type=int, default=2, help="walk instances timed per schema")
    ap.add_argument("--attempts", type=int, default=4, help="walks tried per schema")
    ap.add_argument("--max-walk", type=int, default=160)
    ap.add_argument("--threads", type=int, default=1, help="XGrammar compiler threads")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--tokenizer",
        default="llama3",
        help="llama3 (Llama 3.2, 128k), gemma3 (Gemma 3 270M GGUF, 262k), or a tokenizer.json path",
    )
    ap.add_argument("--quick", action="store_true", help="alias for --per-set 3")
    ap.add_argument("--skip-counted", action="store_true", help="only the jsonschemabench sample")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--clock", default="wall", choices=["wall", "cpu"], help="cpu: the thread's CPU time")
    ap.add_argument(
        "--check", action="store_true", help="with corral-ref: compare the two engines' masks at every step"
    )
    args = ap.parse_args()
    global CLOCK, CHECK
    CLOCK = time.thread_time_ns if args.clock == "cpu" else time.perf_counter_ns
    CHECK = args.check
    if args.quick:
        args.per_set = min(args.per_set, 3)
    t0 = time.perf_counter()
    groups = run(args)
    names = [n for n in args.engines.split(",") if any(n in r.compile_ms for _, rs in groups for r in rs)]
    out = report(groups, names)
    print(f"\n{time.perf_counter() - t0:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
