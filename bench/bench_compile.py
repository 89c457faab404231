"""Compile benchmark: where corral's compile + first matcher goes, beside llguidance and XGrammar.

What is measured
----------------
A seeded sample of ``--per-set`` schemas from each jsonschemabench set (``../shared/data/
jsonschemabench``, or ``--data``; ``--per-set 0`` takes every file), Llama 3.2 tokenizer, every
engine interleaved per schema in one process run.  Per schema and engine, **ttfm** = a cold
compile (``compile_json_schema`` bypasses corral's constraint cache; XGrammar's is cleared) + a
fresh matcher + its first mask fill.

corral's ttfm is split into stages:

* **conversion**: ``schema_to_grammar`` (the Python JSON Schema converter) without its probes;
* **probes**: the converter's engine calls (``probe.dfa_states``, ``_check_regex``; the probe
  memo is cleared per schema);
* **parse / lower / automata / bind**: the engine's own counters around ``compile_grammar``
  (``_native.compile_times``: grammar text → AST, AST → productions without automata, terminal
  NFA → minimal DFA, token terminals + grammar tables);
* **first mask**: ``matcher()`` + the first ``fill_next_token_bitmask`` (of which **walks**: the
  trie walks that filled mask-cache entries);
* **other**: the rest of ``compile_json_schema`` (schema parsing, the Python objects).

The stage table prints, at each percentile of corral's ttfm (p50, p90, p99, max), the mean of
every stage over the schemas ranked within +-2.5 percentile points of it (max: the slowest one),
so the columns add up to the ttfm of those schemas.  The engine table prints ttfm percentiles of
every engine over the schemas it compiled, and ratios corral / other over the schemas both
compiled (above 1: corral slower).

The per-vocabulary mask pool and the automaton memo (engine caches shared by every grammar on a
vocabulary) stay warm across schemas, as they do in a serving process; ``--cold-engine`` clears
them before every schema (``_native.clear_engine_caches``), the first-schema-in-a-process case.

Engines: corral ``compile_json_schema(schema, tok, extra_properties=--extra-properties)``;
llguidance ``grammar_from_json_schema`` defaults + ``LLMatcher``; XGrammar
``compile_json_schema(any_whitespace=True, strict_mode=False)``, cache cleared; ``xgrammar-dyn``
the same with ``enable_dynamic_compilation=True``.

``--clock cpu`` times with the process's CPU clock instead of the wall clock (on a loaded machine
the wall clock charges a compile with the time slices other processes took), and switches the
engine's stage counters to the compiling thread's CPU clock (``_native.set_compile_clock``).

``--outcomes FILE`` writes each schema's corral outcome ("ok" or the error type);
``--compare FILE`` prints the schemas whose outcome differs from such a file (a schema compiled
before must not start failing).

How to run
----------
    python bench/bench_compile.py                      # 40 schemas per set
    python bench/bench_compile.py --per-set 0 --engines corral --outcomes after.json
    python bench/bench_compile.py --per-set 100 --engines corral,llguidance
    python bench/bench_compile.py --per-set 60 --seed 1 --clock cpu   # on a loaded machine
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_engine import TokCtx, _f, _ratio  # noqa: E402
from bench_json_schema import DEFAULT_DATA, SETS, LLGuidanceSchema, SchemaCompileError, sample_files  # noqa: E402
from bench_tails import XGrammarDyn, XGrammarTails  # noqa: E402

_TIMES = ("parse_ms", "lower_ms", "automata_ms", "bind_ms", "walk_ms", "compiles")
STAGES = ("conversion", "probes", "parse", "lower", "automata", "bind", "first_mask", "other")
CLOCK = time.perf_counter  # --clock cpu: time.process_time (every thread of the process)
OTHERS: dict[str, type] = {
    "llguidance": LLGuidanceSchema,
    "xgrammar": XGrammarTails,
    "xgrammar-dyn": XGrammarDyn,
}


@dataclass
class Rec:
    name: str
    outcome: dict[str, str] = field(default_factory=dict)  # engine -> "ok" / error type
    ttfm_ms: dict[str, float] = field(default_factory=dict)
    stages: dict[str, float] = field(default_factory=dict)  # corral, ms
    walks_ms: float = 0.0


class CorralTimed:
    """corral's compile with the converter's probes and the engine's stages timed."""

    def __init__(self, ctx: TokCtx, args: argparse.Namespace) -> None:
        import corral
        import corral.grammar.probe as probe_mod
        import corral.schema as schema_mod
        from corral import _native

        self.corral, self.native, self.schema_mod = corral, _native, schema_mod
        self.tok = corral.Tokenizer.from_file(ctx.path, eos_ids=list(ctx.eos_ids))
        self.args = args
        self.acc = {"probes": 0.0, "conversion": 0.0}
        self.raw_probe = probe_mod.dfa_states
        self._wrap(probe_mod, "dfa_states", "probes")
        self._wrap(schema_mod, "_check_regex", "probes")
        self._wrap(schema_mod, "schema_to_grammar", "conversion")
        # Warm-up, as every engine's start() does: imports and the native vocabulary (its trie)
        # are built once per process, not per schema.
        corral.compile_json_schema({"type": "integer"}, self.tok).matcher()
        if hasattr(_native, "clear_engine_caches"):
            _native.clear_engine_caches()
        # The engine's counters around the final compile only (probes run the same stages).
        self.engine: dict[str, float] = {}
        inner = schema_mod.schema_grammar
        # An engine without stage counters (an older build: a baseline run) reports its compile
        # under "other".
        times = getattr(_native, "compile_times", None) or (lambda: dict.fromkeys(_TIMES, 0.0))
        self.times = times

        def engine_compile(*a: Any, **k: Any) -> Any:
            c0 = times()
            try:
                return inner(*a, **k)
            finally:
                c1 = times()
                self.engine = {
                    s: c1[f"{s}_ms"] - c0[f"{s}_ms"] for s in ("parse", "lower", "automata", "bind")
                }

        schema_mod.schema_grammar = engine_compile

    def _wrap(self, holder: Any, name: str, into: str) -> None:
        fn = getattr(holder, name)
        acc = self.acc

        def timed(*a: Any, **k: Any) -> Any:
            t0 = CLOCK()
            try:
                return fn(*a, **k)
            finally:
                acc[into] += CLOCK() - t0

        setattr(holder, name, timed)

    def version(self) -> str:
        return str(getattr(self.corral, "__version__", "?"))

    def run(self, rec: Rec, schema: Any) -> None:
        if self.args.cold_engine and hasattr(self.native, "clear_engine_caches"):
            self.native.clear_engine_caches()
        self.raw_probe.cache_clear()
        for k in self.acc:
            self.acc[k] = 0.0
        self.engine = {}
        perf = CLOCK
        t0 = perf()
        try:
            g = self.corral.compile_json_schema(schema, self.tok, extra_properties=self.args.extra_properties)
            t1 = perf()
            w0 = self.times()["walk_ms"]
            m = g.matcher()
            bm = self.corral.allocate_bitmask(1, self.tok)
            m.fill_next_token_bitmask(bm, 0)
            t2 = perf()
        except Exception as e:  # noqa: BLE001 - an outcome to record
            rec.outcome["corral"] = type(e).__name__
            return
        rec.outcome["corral"] = "ok"
        rec.ttfm_ms["corral"] = (t2 - t0) * 1e3
        st = dict(self.engine)
        st["probes"] = self.acc["probes"] * 1e3
        st["conversion"] = self.acc["conversion"] * 1e3 - st["probes"]
        st["first_mask"] = (t2 - t1) * 1e3
        st["other"] = (t1 - t0) * 1e3 - sum(
            st[s] for s in ("conversion", "probes", "parse", "lower", "automata", "bind")
        )
        rec.stages = st
        rec.walks_ms = self.times()["walk_ms"] - w0


def run_other(rec: Rec, name: str, eng: Any, schema: Any) -> None:
    text = json.dumps(schema)
    t0 = CLOCK()
    try:
        c = eng.compile_schema(schema, text)
        m = eng.matcher(c)
        bm = eng.alloc()
        eng.filler(m, bm)()
    except (Exception, SchemaCompileError) as e:  # noqa: BLE001 - an outcome to record
        rec.outcome[name] = type(e).__name__
        return
    rec.outcome[name] = "ok"
    rec.ttfm_ms[name] = (CLOCK() - t0) * 1e3


def _pct(xs: list[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(xs), q)) if xs else None


def report(recs: list[Rec], names: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ok = sorted((r for r in recs if "corral" in r.ttfm_ms), key=lambda r: r.ttfm_ms["corral"])
    n = len(ok)
    print(f"\n== corral compile + first matcher, split by stage (ms; {n} schemas compiled of {len(recs)})")
    print(f"{'at':<5} {'ttfm':>8} " + " ".join(f"{s:>10}" for s in STAGES) + f" {'(walks)':>9}")
    for label, q in (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100)):
        if not n:
            break
        if q == 100:
            band = ok[-1:]
        else:
            lo = int(np.floor(n * (q - 2.5) / 100))
            hi = int(np.ceil(n * (q + 2.5) / 100))
            band = ok[max(0, lo) : max(lo + 1, min(n, hi))]
        row = {s: float(np.mean([r.stages[s] for r in band])) for s in STAGES}
        row["ttfm"] = float(np.mean([r.ttfm_ms["corral"] for r in band]))
        row["walks"] = float(np.mean([r.walks_ms for r in band]))
        out[f"split_{label}"] = row
        print(
            f"{label:<5} {_f(row['ttfm']):>8} "
            + " ".join(f"{_f(row[s]):>10}" for s in STAGES)
            + f" {_f(row['walks']):>9}"
        )
    if n:
        tot = {s: sum(r.stages[s] for r in ok) for s in STAGES}
        allt = sum(tot.values())
        print("share of all corral ttfm: " + ", ".join(f"{s} {100 * tot[s] / allt:.1f}%" for s in STAGES))
    print("\n== compile + first matcher (ms), each engine over the schemas it compiled")
    print(f"{'engine':<13} {'compiled':>9} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8} {'mean':>8}")
    for e in names:
        ts = [r.ttfm_ms[e] for r in recs if e in r.ttfm_ms]
        s = {f"p{q}": _pct(ts, q) for q in (50, 90, 99)}
        s["max"] = max(ts) if ts else None
        s["mean"] = float(np.mean(ts)) if ts else None
        s["compiled"] = len(ts)
        out[e] = s
        print(
            f"{e:<13} {len(ts):>4}/{len(recs):<4} {_f(s['p50']):>8} {_f(s['p90']):>8} {_f(s['p99']):>8} "
            f"{_f(s['max']):>8} {_f(s['mean']):>8}"
        )
    for e in names:
        if e == "corral":
            continue
        both = [r for r in recs if "corral" in r.ttfm_ms and e in r.ttfm_ms]
        a = [r.ttfm_ms["corral"] for r in both]
        b = [r.ttfm_ms[e] for r in both]
        cols = [(f"p{q}", _pct(a, q), _pct(b, q)) for q in (50, 90, 99)]
        cols.append(("max", max(a, default=None), max(b, default=None)))
        print(
            f"  corral / {e:<12} on {len(both)} schemas both compiled: "
            + " ".join(f"{c}={_ratio(x, y)}" for c, x, y in cols)
        )
    slow = sorted(ok, key=lambda r: -r.ttfm_ms["corral"])[:6]
    print("slowest corral: " + ", ".join(f"{r.name} {r.ttfm_ms['corral']:.0f}" for r in slow))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--per-set", type=int, default=40, help="schemas sampled per set (0: all)")
    ap.add_argument("--engines", default="corral,llguidance,xgrammar-dyn")
    ap.add_argument("--extra-properties", default="spec", choices=["spec", "schema"])
    ap.add_argument("--cold-engine", action="store_true", help="clear the engine's shared caches per schema")
    ap.add_argument("--threads", type=int, default=1, help="XGrammar compiler threads")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer", default=None)
    ap.add_argument("--outcomes", type=Path, default=None, help="write corral's outcome per schema")
    ap.add_argument("--compare", type=Path, default=None, help="outcomes file to compare with")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--clock", default="wall", choices=["wall", "cpu"], help="cpu: the process's CPU time")
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    if args.clock == "cpu" and "corral" in args.engines.split(","):
        from corral import _native

        # (A converter older than the engine may not export it from _native; an older engine has
        # none: its stages stay on wall time.)
        set_clock = getattr(_native, "set_compile_clock", None) or getattr(
            _native._core, "set_compile_clock", None
        )
        if set_clock is not None:
            set_clock(True)
        else:
            print("  corral: this engine's stage counters are wall time (no set_compile_clock)")
    t_start = time.perf_counter()
    ctx = TokCtx.load(args.tokenizer)
    names = args.engines.split(",")
    corral_eng = CorralTimed(ctx, args) if "corral" in names else None
    others: dict[str, Any] = {}
    for nm in names:
        if nm == "corral":
            continue
        cls = OTHERS[nm]
        if not cls.available():
            print(f"  {nm}: not installed ({cls.install_hint})")
            continue
        eng = cls(ctx, args)
        eng.start()
        others[nm] = eng
    names = [nm for nm in names if nm == "corral" or nm in others]
    vers = ([f"corral {corral_eng.version()}"] if corral_eng else []) + [
        f"{nm} {e.version()}" for nm, e in others.items()
    ]
    print(f"tokenizer {ctx.path} ({ctx.vocab_size} ids); engines: {', '.join(vers)}")
    files = sample_files(args.data, args.sets.split(","), args.per_set, args.seed)
    recs: list[Rec] = []
    gc.collect()
    gc.disable()
    try:
        for i, (s, f) in enumerate(files):
            try:
                schema = json.loads(f.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                continue
            rec = Rec(f"{s}/{f.name}")
            if corral_eng:
                corral_eng.run(rec, schema)
            for nm, eng in others.items():
                run_other(rec, nm, eng, schema)
            recs.append(rec)
            if (i + 1) % 50 == 0:
                print(f"  [{i + 1}/{len(files)}]", file=sys.stderr)
                gc.collect()
    finally:
        gc.enable()
    out = report(recs, names)
    if args.outcomes:
        args.outcomes.write_text(json.dumps({r.name: r.outcome.get("corral", "-") for r in recs}, indent=0))
    if args.compare:
        before = json.loads(args.compare.read_text())
        now = {r.name: r.outcome.get("corral", "-") for r in recs}
        diff = [(k, before[k], v) for k, v in now.items() if k in before and before[k] != v]
        lost = [d for d in diff if d[1] == "ok"]
        print(f"\noutcomes vs {args.compare}: {len(diff)} differ, {len(lost)} compiled before and fail now")
        for k, a, b in diff[:30]:
            print(f"  {k}: {a} -> {b}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    print(f"\n{time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
