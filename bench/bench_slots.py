"""Dynamic enum slots: bind time vs recompiling the schema with an ``enum``.

A server compiles a schema skeleton once, with a string field marked ``"x-corral-slot"``, and
binds the field's allowed values per request. This prints, for 10 / 100 / 1,000 / 10,000 values
and two value families (structured codes, free-form names):

* bind time, p50/p99 (the Python call ``skeleton.bind(...)``, everything included);
* the alternative: compiling the schema with an ``enum`` of the same values, plus its first mask;
* mask time inside the slot: the first mask at the slot's start and per token through a value,
  on a fresh binding (its slot frontiers are new; the rest of the cache is the skeleton's, warm
  from earlier requests) and on the enum-compiled grammar (first pass over a value: its
  frontiers are mostly new; second pass: cached).

Times are wall clock on a shared machine; bind is also given as CPU time of the calling thread.

Usage: python bench/bench_slots.py [--quick] [--vocab llama32|smollm2]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time
from typing import Any

import corral
from corral import models

SKELETON = {
    "type": "object",
    "properties": {
        "amount": {"type": "number", "minimum": 0},
        "currency": {"enum": ["EUR", "USD", "GBP"]},
        "cost_center": {"type": "string", "x-corral-slot": "cost_center"},
        "note": {"type": "string", "maxLength": 80},
    },
    "required": ["amount", "currency", "cost_center"],
}
WORDS = (
    "alpha bravo cedar delta ember falcon granite harbor indigo juniper kestrel lantern meadow "
    "nimbus orchid prairie quartz raven sierra timber umber violet willow xenon yarrow zephyr "
    "north south east west central field office lab plant depot hub studio annex"
).split()


def codes(n: int, rng: random.Random) -> list[str]:
    """Structured codes like ``CC-10482`` (they share prefixes and suffixes)."""
    return [f"CC-{v:05d}" for v in rng.sample(range(100000), n)]


def names(n: int, rng: random.Random) -> list[str]:
    """Free-form names like ``Harbor Violet 7f3a`` (little sharing: a harder trie)."""
    out: set[str] = set()
    while len(out) < n:
        out.add(f"{rng.choice(WORDS).title()} {rng.choice(WORDS)} {rng.getrandbits(16):04x}")
    return sorted(out, key=lambda _: rng.random())


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def timed(f: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def slot_masks(g: corral.CompiledGrammar, tok: corral.Tokenizer, value: str) -> tuple[float, list[float]]:
    """(first mask at the slot's start, masks per token through the value), seconds."""
    prefix = '{"amount": 12.5, "currency": "EUR", "cost_center": '
    m = g.matcher()
    assert m.accept_string(prefix)
    mask = corral.allocate_bitmask(1, tok)
    first, _ = timed(lambda: m.fill_next_token_bitmask(mask, 0))
    per: list[float] = []
    for t in tok.encode(json.dumps(value, ensure_ascii=False) + "}"):
        assert m.accept_token(t), (value, tok.token_bytes[t])
        dt, _ = timed(lambda: m.fill_next_token_bitmask(mask, 0))
        per.append(dt)
    assert m.is_accepting()
    return first, per


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions, no 10,000-value enum compile")
    ap.add_argument("--vocab", choices=["llama32", "smollm2"], default="llama32")
    args = ap.parse_args()
    if args.vocab == "llama32":
        tok = corral.Tokenizer.from_file(models.llama32_tokenizer_path())
    else:
        tok = corral.Tokenizer.from_gguf(models.smollm2_gguf_path())
    machine = platform.processor() or platform.machine()
    print(f"corral slots benchmark — {tok.name} ({tok.vocab_size:,} ids), {machine}, one thread\n")
    # Generous state limits so 10,000 free-form names fit (the default max_dfa_states is 20,000).
    limits = {"max_dfa_states": 400_000, "max_total_dfa_states": 2_000_000, "max_compile_ms": 120_000}
    t_skel, skeleton = timed(lambda: corral.compile_json_schema(SKELETON, tok, **limits))
    print(f"skeleton compile (once): {t_skel * 1e3:.2f} ms\n")
    # Warm the skeleton's shared cache as earlier requests would have.
    rng = random.Random(0)
    for family in (codes, names):
        vals = family(50, rng)
        for v in vals[:5]:
            slot_masks(skeleton.bind({"cost_center": vals}), tok, v)

    header = (
        "| values | family | slot DFA states | bind p50 µs | bind p99 µs | bind CPU p50 µs | "
        "enum compile ms | slot 1st mask µs (bind / enum) | "
        "slot per-token p50 µs (bind / enum 1st pass / enum cached) | "
        "slot per-token p99 µs (bind / enum 1st pass) | bind+1st mask vs enum compile+1st mask |"
    )
    print(header)
    print("| --- " * 11 + "|")
    for n in (10, 100, 1000, 10000):
        for family in (codes, names):
            values = family(n, rng)
            reps = 20 if args.quick else (200 if n <= 1000 else 40)
            bind_times, bind_cpu = [], []
            slots = {"cost_center": values}
            for _ in range(reps):
                c0 = time.thread_time()
                dt, bound = timed(lambda: skeleton.bind(slots))  # noqa: B023 (called at once)
                bind_cpu.append(time.thread_time() - c0)
                bind_times.append(dt)
            # Masks inside the slot on fresh bindings (new slot frontiers every time).
            firsts, pers = [], []
            for v in rng.sample(values, min(5, n)):
                f, p = slot_masks(skeleton.bind({"cost_center": values}), tok, v)
                firsts.append(f)
                pers += p
            if args.quick and n >= 10000:
                enum_compile = float("nan")
                e_first = [float("nan")]
                e_cold = e_warm = [float("nan")]
            else:
                schema = json.loads(json.dumps(SKELETON))
                del schema["properties"]["cost_center"]["x-corral-slot"]
                schema["properties"]["cost_center"]["enum"] = values
                enum_compile, eg = timed(lambda s=schema: corral.compile_json_schema(s, tok, **limits))
                e_first, e_cold, e_warm = [], [], []
                for v in rng.sample(values, min(5, n)):
                    f, p = slot_masks(eg, tok, v)  # cold: each value's frontiers are new
                    e_first.append(f)
                    e_cold += p
                    _, p = slot_masks(eg, tok, v)  # warm: the same path again
                    e_warm += p
            # Per request: bind + the first (cold) mask in the slot, vs compile + its first mask there.
            speedup = (enum_compile + e_first[0]) / (
                statistics.median(bind_times) + statistics.median(firsts)
            )
            us, med = 1e6, statistics.median
            cells = [
                f"{n:,}",
                family.__name__,
                f"{bound.cache_stats()['slot_states']:,}",
                f"{med(bind_times) * us:,.0f}",
                f"{pct(bind_times, 0.99) * us:,.0f}",
                f"{med(bind_cpu) * us:,.0f}",
                f"{enum_compile * 1e3:,.1f}",
                f"{med(firsts) * us:,.0f} / {e_first[0] * us:,.0f}",
                f"{med(pers) * us:,.1f} / {med(e_cold) * us:,.1f} / {med(e_warm) * us:,.1f}",
                f"{pct(pers, 0.99) * us:,.0f} / {pct(e_cold, 0.99) * us:,.0f}",
                f"{speedup:,.0f}x faster",
            ]
            print("| " + " | ".join(cells) + " |", flush=True)
    stats = skeleton.cache_stats()
    print(
        f"\nskeleton after all requests: {stats['bindings']:,} bindings, compiled once; shared cache "
        f"{stats['entries']:,} entries ({stats['bytes'] / 2**20:.1f} MiB), "
        f"{stats['hits']:,} hits / {stats['misses']:,} misses"
    )


if __name__ == "__main__":
    main()
