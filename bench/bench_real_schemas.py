"""Real schemas, one table: conformance, every mask timed, compile time -- corral vs llguidance vs
XGrammar (and XGrammar with dynamic compilation), side by side in one run.

This prints the table of issue 12 for a seeded sample of the jsonschemabench sets
(``../shared/data/jsonschemabench``), on the Llama 3.2 tokenizer, every engine interleaved per
schema:

* **instances.** Valid ones, of two kinds, kept when ``jsonschema`` accepts them:
  *schema-shaped* -- random walks (``bench_json_schema.Walker``) under corral's mask compiled with
  its defaults (declared keys in schema order, undeclared keys only where ``additionalProperties``
  gives them a schema), the shape every engine generates; *any-shaped* -- walks under the
  ``extra_properties="spec"`` grammar (keys in any order, undeclared keys wherever the schema
  allows them) and the schema-shaped values with the keys of every object reversed. Both are
  valid by the spec; engines that keep schema order or refuse undeclared keys reject the second
  kind, so it has rows of its own. Invalid ones: near misses of the schema-shaped ones -- a
  key dropped, a value of another type, an undeclared key, an array item repeated, a string made
  longer / emptied / suffixed, a number moved far out, a nested value nulled -- kept when
  ``jsonschema`` rejects them. Each is serialised with ``json.dumps(ensure_ascii=False)``,
  tokenized canonically and fed token by token to a fresh matcher of every engine that compiled
  the schema, **every** mask fill timed (one pass: a state's first mask is paid as in a decode).
  An instance is *accepted* when every token is allowed and the matcher then accepts the end.
  The mask rows are over the schema-shaped and invalid instances (the ones every engine can
  follow: an engine stops at the token it rejects); the any-shaped ones have rows of their own.
* **schemas passing**: compiled, every valid instance accepted and every invalid one rejected
  (once over the schema-shaped valid instances, once over all).
  For corral an accepted invalid instance whose errors are all explained by its keyword report
  (keywords it lists as checked after decoding: ``corral.generate`` validates those) is counted
  apart, as the issue's table does.
* **compile + first matcher**: cold compile (caches cleared) + a matcher + its first mask. A
  compile longer than ``--timeout`` seconds counts as a timeout (measured after it returns).

Engines and their settings are those of ``bench_tails.py`` (corral with ``extra_properties=
"spec"``, the JSON Schema default the instances need). ``--clock cpu`` times with the thread's CPU
clock, for a loaded machine. Ratios are corral / other: above 1 means corral is slower.

How to run
----------
    python bench/bench_real_schemas.py                    # 20 schemas per set (100), ~15 min
    python bench/bench_real_schemas.py --per-set 80 --clock cpu --json out.json
    python bench/bench_real_schemas.py --per-set 4 --engines corral,llguidance   # a quick look
"""

from __future__ import annotations

import argparse
import copy
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
from bench_engine import _f, _ratio  # noqa: E402
from bench_json_schema import (  # noqa: E402
    SchemaCompileError,
    Walker,
    _left_to_validate,
    _validator,
    sample_files,
)
from bench_tails import add_sample_args, start_engines  # noqa: E402

CLOCK = time.perf_counter_ns  # --clock cpu: time.thread_time_ns

# --------------------------------------------------------------------------------------------
# Near-miss instances


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    out = [(path, value)]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _nodes(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _nodes(v, (*path, i))
    return out


def _set(root: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    parent = root
    for p in path[:-1]:
        parent = parent[p]
    parent[path[-1]] = new
    return root


def _other_type(v: Any) -> Any:
    if isinstance(v, bool) or v is None:
        return "true" if v else 0
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, str):
        return 12345
    if isinstance(v, list):
        return {}
    return []


def mutate(value: Any, rng: random.Random) -> Any:
    """One near miss of ``value`` (a deep copy; it may still be valid: the caller checks)."""
    v = copy.deepcopy(value)
    nodes = _nodes(v)
    kind = rng.choice(["drop", "retype", "extra", "dup", "string", "number", "null"])
    objs = [(p, n) for p, n in nodes if isinstance(n, dict)]
    if kind == "drop" and any(n for _, n in objs):
        _, n = rng.choice([(p, n) for p, n in objs if n])
        del n[rng.choice(list(n))]
    elif kind == "extra" and objs:
        _, n = rng.choice(objs)
        n["zz_undeclared"] = 1
    elif kind == "dup":
        arrs = [n for _, n in nodes if isinstance(n, list) and n]
        if not arrs:
            return None
        a = rng.choice(arrs)
        a.append(copy.deepcopy(rng.choice(a)))
    elif kind == "string":
        ss = [(p, n) for p, n in nodes if isinstance(n, str)]
        if not ss:
            return None
        p, s = rng.choice(ss)
        v = _set(v, p, rng.choice([s + "x" * 300, "", s + "_not", "not a " + s]))
    elif kind == "number":
        ns = [(p, n) for p, n in nodes if isinstance(n, (int, float)) and not isinstance(n, bool)]
        if not ns:
            return None
        p, x = rng.choice(ns)
        v = _set(v, p, rng.choice([x * 1000 + 1000007, -abs(x) - 10**9, x + 0.5]))
    elif kind == "null":
        p, _ = rng.choice(nodes)
        v = _set(v, p, None)
    else:
        p, n = rng.choice(nodes)
        v = _set(v, p, _other_type(n))
    return v


def dumps(value: Any) -> str | None:
    """The instance's text, or None for a value JSON cannot spell (a number that parsed as an
    infinite float: ``json.dumps`` would write ``Infinity``)."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except ValueError:
        return None


def reorder(value: Any) -> Any:
    """``value`` with the keys of every object in reverse order."""
    if isinstance(value, dict):
        return {k: reorder(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reorder(x) for x in value]
    return value


# --------------------------------------------------------------------------------------------
# The run


@dataclass
class Rec:
    name: str
    ttfm_ms: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # compile errors
    timeouts: set[str] = field(default_factory=set)
    mask_us: dict[str, list[float]] = field(default_factory=dict)  # schema-shaped and invalid
    mask_any_us: dict[str, list[float]] = field(default_factory=dict)  # any-shaped instances
    valid: int = 0  # schema-shaped
    valid_any: int = 0  # any-shaped
    invalid: int = 0
    rejected: dict[str, int] = field(default_factory=dict)  # schema-shaped valid instances rejected
    rejected_any: dict[str, int] = field(default_factory=dict)  # any-shaped ones rejected
    accepted: dict[str, int] = field(default_factory=dict)  # invalid instances accepted
    explained: int = 0  # corral's accepted invalid instances its report explains

    def passing(self, n: str, any_shaped: bool = False) -> bool:
        ok = n in self.ttfm_ms and not self.rejected.get(n) and not self.accepted.get(n)
        return ok and not (any_shaped and self.rejected_any.get(n))


def compile_all(rec: Rec, engines: dict[str, Any], schema: Any, timeout: float) -> dict[str, Any]:
    text = json.dumps(schema)
    out: dict[str, Any] = {}
    for name, eng in engines.items():
        t0 = CLOCK()
        try:
            c = eng.compile_schema(schema, text)
            m = eng.matcher(c)
            bm = eng.alloc()
            eng.filler(m, bm)()
        except (Exception, RecursionError, SchemaCompileError) as e:  # noqa: BLE001 - data
            rec.errors[name] = f"{type(e).__name__}: {str(e).strip()[:160]}"
            continue
        ms = (CLOCK() - t0) / 1e6
        if ms > timeout * 1000:
            rec.timeouts.add(name)
            continue
        rec.ttfm_ms[name] = ms
        out[name] = c
    return out


def feed(times: dict[str, list[float]], eng: Any, name: str, compiled: Any, ids: list[int]) -> bool:
    """Step ``ids`` through a fresh matcher, timing every mask into ``times[name]``; True when
    the engine accepts them."""
    m = eng.matcher(compiled)
    bm = eng.alloc()
    fill = eng.filler(m, bm)
    ns = times.setdefault(name, [])
    for tok in ids:
        t0 = CLOCK()
        fill()
        ns.append((CLOCK() - t0) / 1000.0)
        if not eng.accept(m, tok):
            return False
    t0 = CLOCK()
    fill()
    ns.append((CLOCK() - t0) / 1000.0)
    return bool(eng.finish(m))


Instance = tuple[Any, str]  # (value, its text)


def _walks(walker: Walker, compiled: Any, validator: Any, seed: int, n: int, attempts: int) -> list[Any]:
    out: list[Any] = []
    for attempt in range(attempts):
        if len(out) >= n:
            break
        try:
            value = json.loads(walker.walk(compiled, random.Random(seed + attempt)).decode("utf-8"))
        except Exception:  # noqa: BLE001 - a walk we cannot use
            continue
        if validator.is_valid(value):
            out.append(value)
    return out


def instances(
    walker: Walker, shaped: Any, spec: Any, validator: Any, seed: int, args: argparse.Namespace
) -> tuple[list[Instance], list[Instance], list[Instance]]:
    """(schema-shaped valid, any-shaped valid, invalid) instances, all of distinct texts."""
    seen: set[str] = set()

    def keep(values: list[Any], valid: bool, into: list[Instance], most: int) -> None:
        for v in values:
            text = dumps(v)
            if len(into) < most and text is not None and text not in seen and validator.is_valid(v) == valid:
                seen.add(text)
                into.append((v, text))

    valid: list[Instance] = []
    keep(_walks(walker, shaped, validator, seed, args.instances, args.attempts), True, valid, args.instances)
    any_shaped: list[Instance] = []
    walked = _walks(walker, spec, validator, seed ^ 0xA11, 1, args.attempts)
    keep(walked + [reorder(v) for v, _ in valid], True, any_shaped, args.instances + 1)
    invalid: list[Instance] = []
    rng = random.Random(seed ^ 0x5EED)
    for _ in range(12 * args.invalid):
        if len(invalid) >= args.invalid or not valid:
            break
        bad = mutate(rng.choice(valid)[0], rng)
        if bad is not None:
            keep([bad], False, invalid, args.invalid)
    return valid, any_shaped, invalid


def run(args: argparse.Namespace) -> tuple[list[Rec], list[str]]:
    ctx, engines = start_engines(args)
    if "corral" not in engines:
        raise SystemExit("corral is needed: it walks the valid instances")
    walker = Walker(ctx, engines["corral"], args.max_walk)
    files = sample_files(args.data, args.sets.split(","), args.per_set, args.seed)
    recs: list[Rec] = []
    gc.collect()
    gc.disable()
    try:
        for i, (s, f) in enumerate(files):
            try:
                schema = json.loads(f.read_text(encoding="utf-8"))
                validator = _validator(schema)
            except Exception:  # noqa: BLE001 - not a schema jsonschema can check: not judged
                continue
            rec = Rec(f"{s}/{f.name}")
            compiled = compile_all(rec, engines, schema, args.timeout)
            if "corral" not in compiled:
                recs.append(rec)  # no instances: counted as a corral failure only
                continue
            seed = zlib.crc32(f"{args.seed}/{s}/{f.name}".encode())
            corral_eng = engines["corral"]
            try:
                shaped = corral_eng.mod.compile_json_schema(schema, corral_eng.tok)
            except Exception:  # noqa: BLE001 - walk the spec grammar only
                shaped = compiled["corral"]
            valid, any_shaped, invalid = instances(walker, shaped, compiled["corral"], validator, seed, args)
            left = [e for e in compiled["corral"].report.entries if e.status != "enforced"]
            for kind, values in (("valid", valid), ("any", any_shaped), ("invalid", invalid)):
                for value, text in values:
                    ids = ctx.encode(text)
                    if kind == "valid":
                        rec.valid += 1
                    elif kind == "any":
                        rec.valid_any += 1
                    else:
                        rec.invalid += 1
                    for name, c in compiled.items():
                        times = rec.mask_any_us if kind == "any" else rec.mask_us
                        ok = feed(times, engines[name], name, c, ids)
                        if not ok and kind != "invalid":
                            into = rec.rejected if kind == "valid" else rec.rejected_any
                            into[name] = into.get(name, 0) + 1
                        if ok and kind == "invalid":
                            if name == "corral" and all(
                                _left_to_validate(e, left) for e in validator.iter_errors(value)
                            ):
                                rec.explained += 1
                                continue
                            rec.accepted[name] = rec.accepted.get(name, 0) + 1
            recs.append(rec)
            print(
                f"[{i + 1}/{len(files)}] {rec.name}: {rec.valid} + {rec.valid_any} valid, "
                f"{rec.invalid} invalid; "
                + " ".join(f"{n}:{'ok' if n in rec.ttfm_ms else 'err'}" for n in engines),
                file=sys.stderr,
            )
    finally:
        gc.enable()
    return recs, list(engines)


# --------------------------------------------------------------------------------------------
# Report


def _pct(xs: list[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(xs), q)) if xs else None


def report(recs: list[Rec], names: list[str], any_order: bool = True) -> dict[str, Any]:
    """Print the table; ``any_order``: corral was compiled to accept any-shaped instances
    (``extra_properties="spec"``), so rejecting one is a misjudgement."""
    judged = [r for r in recs if r.valid or r.valid_any or r.invalid]
    st: dict[str, dict[str, Any]] = {}
    for n in names:
        us = [x for r in recs for x in r.mask_us.get(n, [])]
        tt = [r.ttfm_ms[n] for r in recs if n in r.ttfm_ms]
        s: dict[str, Any] = {
            "passing": sum(r.passing(n) for r in judged),
            "passing_any": sum(r.passing(n, True) for r in judged),
            "errors": sum(n in r.errors for r in recs),
            "timeouts": sum(n in r.timeouts for r in recs),
            "valid": sum(r.valid for r in judged if n in r.ttfm_ms),
            "rejected": sum(r.rejected.get(n, 0) for r in judged),
            "valid_any": sum(r.valid_any for r in judged if n in r.ttfm_ms),
            "rejected_any": sum(r.rejected_any.get(n, 0) for r in judged),
            "invalid": sum(r.invalid for r in judged if n in r.ttfm_ms),
            "accepted": sum(r.accepted.get(n, 0) for r in judged),
            "steps": len(us),
        }
        ua = [x for r in recs for x in r.mask_any_us.get(n, [])]
        s["any_steps"] = len(ua)
        for q in (99, 99.9):
            s[f"any_p{q:g}"] = _pct(ua, q)
        s["any_max"] = max(ua) if ua else None
        for q in (50, 99, 99.9):
            s[f"p{q:g}"] = _pct(us, q)
        s["max"] = max(us) if us else None
        s["mean"] = float(np.mean(us)) if us else None
        for q in (50, 90, 99):
            s[f"ttfm_p{q}"] = _pct(tt, q)
        s["ttfm_max"] = max(tt) if tt else None
        st[n] = s
    explained = sum(r.explained for r in judged)
    rows: list[tuple[str, Any]] = [
        (f"schemas passing, schema-shaped (of {len(judged)})", lambda s: str(s["passing"])),
        (f"schemas passing, all instances (of {len(judged)})", lambda s: str(s["passing_any"])),
        ("compile errors / timeouts", lambda s: f"{s['errors']} / {s['timeouts']}"),
        ("mask steps timed (schema-shaped + invalid)", lambda s: f"{s['steps']:,}"),
        ("mask p50 us", lambda s: _f(s["p50"])),
        ("mask p99 us", lambda s: _f(s["p99"])),
        ("mask p99.9 us", lambda s: _f(s["p99.9"])),
        ("mask max us", lambda s: _f(s["max"])),
        ("mask mean us", lambda s: _f(s["mean"])),
        ("any-shaped: steps timed", lambda s: f"{s['any_steps']:,}"),
        (
            "any-shaped: mask p99 / p99.9 / max us",
            lambda s: f"{_f(s['any_p99'])} / {_f(s['any_p99.9'])} / {_f(s['any_max'])}",
        ),
        (
            "compile + first matcher p50 / p90 / p99 ms",
            lambda s: f"{_f(s['ttfm_p50'])} / {_f(s['ttfm_p90'])} / {_f(s['ttfm_p99'])}",
        ),
        ("compile + first matcher max ms", lambda s: _f(s["ttfm_max"])),
        ("valid instances rejected, schema-shaped", lambda s: f"{s['rejected']} / {s['valid']}"),
        ("valid instances rejected, any-shaped", lambda s: f"{s['rejected_any']} / {s['valid_any']}"),
        ("invalid instances accepted", lambda s: f"{s['accepted']} / {s['invalid']}"),
    ]
    w = max(len(r[0]) for r in rows)
    cw = max(18, *(len(get(st[n])) for _, get in rows for n in names))
    print(
        f"\n== {len(recs)} schemas sampled; {sum(r.valid for r in judged)} schema-shaped and "
        f"{sum(r.valid_any for r in judged)} any-shaped valid, "
        f"{sum(r.invalid for r in judged)} invalid instances"
    )
    print(f"| {'':<{w}} | " + " | ".join(f"{n:>{cw}}" for n in names) + " |")
    print(f"| {'-' * w} | " + " | ".join("-" * cw for _ in names) + " |")
    for label, get in rows:
        print(f"| {label:<{w}} | " + " | ".join(f"{get(st[n]):>{cw}}" for n in names) + " |")
    print(
        f"corral: {explained} more invalid instances accepted, all by keywords its report lists as "
        "checked after decoding (generate() validates them)"
    )
    if "corral" in st:
        print(
            "ratios corral / other (>1: corral slower); mask over the schema-shaped and invalid "
            "steps, compile over all schemas"
        )
        cols = ["p50", "p99", "p99.9", "max", "mean", "ttfm_p50", "ttfm_p90", "ttfm_p99", "ttfm_max"]
        for o in names:
            if o != "corral":
                a, b = st["corral"], st[o]
                print(f"  vs {o:<12} " + " ".join(f"{c}={_ratio(a[c], b[c])}" for c in cols))
    bad = [
        (
            r.name,
            r.rejected.get("corral", 0) + (r.rejected_any.get("corral", 0) if any_order else 0),
            r.accepted.get("corral", 0),
        )
        for r in judged
    ]
    bad = [b for b in bad if b[1] or b[2]]
    if bad:
        print("corral misjudged: " + ", ".join(f"{n} (rejected {a}, accepted {b})" for n, a, b in bad[:20]))
    for r in recs:
        if "corral" in r.errors:
            print(f"  corral failed: {r.name}: {r.errors['corral']}")
    return {"engines": st, "explained": explained, "schemas": len(recs), "judged": len(judged)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_sample_args(ap, "schemas sampled per set")
    ap.add_argument("--instances", type=int, default=2, help="valid walks per schema (each also reordered)")
    ap.add_argument("--invalid", type=int, default=3, help="near-miss instances per schema")
    ap.add_argument("--attempts", type=int, default=6, help="walks tried per schema")
    ap.add_argument("--max-walk", type=int, default=160)
    ap.add_argument("--threads", type=int, default=1, help="XGrammar compiler threads")
    ap.add_argument("--timeout", type=float, default=20.0, help="a compile over this (s) is a timeout")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer", default=None, help="llama3 (default), gemma3, or a tokenizer.json path")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--clock", default="wall", choices=["wall", "cpu"], help="cpu: the thread's CPU time")
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.thread_time_ns if args.clock == "cpu" else time.perf_counter_ns
    t0 = time.perf_counter()
    recs, names = run(args)
    out = report(recs, names, any_order=args.extra_properties == "spec")
    print(f"\n{time.perf_counter() - t0:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
