"""``uniqueItems`` in the mask (unique groups) against the post-decode check, side by side.

Two modes in one run, schema by schema: *before* — the converter never builds a unique group
(``UniqueItemsMixin.unique_check`` reports every ``uniqueItems`` as checked after decoding, as
the converter did before unique groups existed) — and *after* (this tree).

1. The official suite (draft 2020-12, from ``../shared/data`` or ``--suite``): every schema that
   mentions ``uniqueItems``, each test instance fed as Llama 3.2 tokens (``json.dumps`` and the
   compact form, as bench/conformance_json_schema.py does). Per mode: invalid instances refused
   by the mask, left to ``validate()`` (accepted by the grammar, reported), wrongly accepted
   (accepted although the report claims full enforcement), valid instances accepted.
2. jsonschemabench (``--bench``, sets Github_*): every schema with ``_uniqueItems`` (the
   benchmark's files rename ``uniqueItems`` so, making it an annotation; this script restores
   the keyword to see how the real-world uses fare). Per mode: the ``uniqueItems`` report
   entries enforced / checked after decoding, compile failures, and the median ratio of
   compile CPU time (after / before; the order of the two modes alternates per schema, and
   the compile cache is cleared before each).

3. Mask CPU time (thread clock) along random walks on a few synthetic unique arrays, per mode:
   before, the plain array (the keyword reported); after, the unique or distinct group. The
   free-string and integer arrays (distinct groups, cpp/distinct.hpp) are walked twice: with
   uniform tokens, and preferring short tokens (``"``, ``a``, ``", "``, one digit...) so that
   duplicates are often one token away and the correction has remembered values to compare.
   Strings with ``maxLength``, a closed pattern or a format, integers between bounds and numbers
   (counted values, dead prefixes: cpp/item_values.hpp) are walked too.
4. Mask CPU time inside arrays of strings and of integers without ``maxItems`` that already
   hold 1, 64 and 255 items (the correction compares each close with every held value), and
   of strings with ``maxLength: 8`` whose open item is a few characters from the bound.

Run:  python bench/bench_unique_items.py [--suite DIR] [--bench DIR] [--limit N] [--walks N]
                                         [--masks-only]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from conformance_json_schema import accepts_instance  # bench/: the same judging

import corral
from corral import models
from corral.compile import clear_cache
from corral.grammar.json_schema.unique_items import UniqueItemsMixin

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
ORIGINAL = UniqueItemsMixin.unique_check


def _report_only(self: Any, schema: dict[str, Any], pointer: str, bounded_to_one: bool) -> bool:
    # As before unique groups: any uniqueItems (even false) is reported as checked after decoding.
    if "uniqueItems" in schema:
        self.cannot_enforce(pointer + "/uniqueItems", "uniqueItems", "checked after decoding")
    return False


def set_mode(mode: str) -> None:
    before = mode == "before"
    UniqueItemsMixin.unique_check = _report_only if before else ORIGINAL  # type: ignore[method-assign]
    clear_cache()


def suite(tok: corral.Tokenizer, root: Path) -> None:
    stats = {mode: Counter() for mode in ("before", "after")}
    for f in sorted(root.glob("*.json")):
        for grp in json.loads(f.read_text()):
            if "uniqueItems" not in json.dumps(grp["schema"]):
                continue
            for mode in ("before", "after"):
                set_mode(mode)
                st = stats[mode]
                try:
                    g = corral.compile_json_schema(grp["schema"], tok, extra_properties="spec")
                except corral.CorralError:
                    st["refused schemas"] += 1
                    continue
                st["schemas"] += 1
                post = bool(g.report.post_checks)
                for test in grp["tests"]:
                    ok = accepts_instance(g, tok, test["data"])
                    if test["valid"]:
                        st["valid"] += 1
                        st["valid accepted"] += ok
                    else:
                        st["invalid"] += 1
                        where = "refused in the mask" if not ok else "left to validate()" if post else "WRONG"
                        st[where] += 1
    print("Official suite, schemas mentioning uniqueItems (Llama 3.2, extra_properties=spec):")
    keys = ["schemas", "refused schemas", "invalid", "refused in the mask", "left to validate()", "WRONG"]
    keys += ["valid", "valid accepted"]
    print(f"  {'':<24} {'before':>8} {'after':>8}")
    for k in keys:
        print(f"  {k:<24} {stats['before'][k]:>8} {stats['after'][k]:>8}")


def restore_keyword(node: Any) -> Any:
    """The schema with jsonschemabench's ``_uniqueItems`` renamed back to ``uniqueItems``."""
    if isinstance(node, dict):
        return {("uniqueItems" if k == "_uniqueItems" else k): restore_keyword(v) for k, v in node.items()}
    if isinstance(node, list):
        return [restore_keyword(v) for v in node]
    return node


def bench_sets(tok: corral.Tokenizer, root: Path, limit: int) -> None:
    files = [p for d in sorted(root.glob("Github_*")) for p in sorted(d.glob("*.json"))]
    files = [p for p in files if '"_uniqueItems"' in p.read_text(errors="replace")][: limit or None]
    stats = {mode: Counter() for mode in ("before", "after")}
    ratios: list[float] = []  # schemas with a unique group
    same: list[float] = []  # the others (the noise of the measurement)
    for i, p in enumerate(files):
        schema = restore_keyword(json.loads(p.read_text()))
        cpu: dict[str, float] = {}
        changed = False  # a unique group was built (else both modes write the same grammar)
        order = ("before", "after") if i % 2 == 0 else ("after", "before")
        # Round 0 warms the engine's process-wide memos for both modes (and reads the report);
        # rounds 1-2 are timed, the best of two per mode.
        for rnd in range(3):
            for mode in order:
                set_mode(mode)
                t0 = time.thread_time()
                try:
                    g = corral.compile_json_schema(schema, tok)
                except corral.CorralError as e:
                    if rnd == 0:
                        stats[mode][f"failed ({type(e).__name__})"] += 1
                    continue
                took = time.thread_time() - t0
                if rnd == 0:
                    for e in g.report.entries:
                        if e.keyword == "uniqueItems":
                            stats[mode][f"uniqueItems {e.status}"] += 1
                            changed = changed or (mode == "after" and e.status == "enforced")
                else:
                    cpu[mode] = min(cpu.get(mode, took), took)
        if len(cpu) == 2 and cpu["before"] > 0:
            (ratios if changed else same).append(cpu["after"] / cpu["before"])
    print(f"\njsonschemabench Github_* schemas mentioning uniqueItems: {len(files)} (Llama 3.2, defaults)")
    keys = sorted(set(stats["before"]) | set(stats["after"]))
    print(f"  {'':<40} {'before':>8} {'after':>8}")
    for k in keys:
        print(f"  {k:<40} {stats['before'][k]:>8} {stats['after'][k]:>8}")
    print("  compile CPU time after/before (warm, best of 2):")
    for label, rs in (("with a unique group", ratios), ("without (noise)", same)):
        if len(rs) >= 2:
            q = statistics.quantiles(rs, n=10)
            print(
                f"    {label:<20} {len(rs):>4} schemas: p10 {q[0]:.2f}x, "
                f"median {statistics.median(rs):.2f}x, "
                f"p90 {q[-1]:.2f}x, max {max(rs):.2f}x"
            )


MASK_SCHEMAS: list[tuple[str, Any]] = [
    ("20 enum strings", {"items": {"enum": [f"tag-{i}" for i in range(20)]}}),
    ("5 enum objects", {"items": {"enum": [{"k": i, "v": f"x{i}"} for i in range(5)]}}),
    ("integers 0..31", {"items": {"type": "integer", "minimum": 0, "maximum": 31}, "maxItems": 12}),
    ("integers 0..63", {"items": {"type": "integer", "minimum": 0, "maximum": 63}, "maxItems": 12}),
    ("integers 0..100", {"items": {"type": "integer", "minimum": 0, "maximum": 100}, "maxItems": 12}),
    ("booleans/null", {"items": {"type": ["boolean", "null"]}}),
    ("free strings", {"items": {"type": "string"}, "maxItems": 12}),
    ("free strings, short", {"items": {"type": "string"}, "maxItems": 12}),
    ("strings, no maxItems", {"items": {"type": "string"}}),
    ("integers, no bounds", {"items": {"type": "integer"}}),
    ("integers, short", {"items": {"type": "integer", "minimum": 0}}),
    # Strings with finitely many values (cpp/item_values.hpp): dead prefixes near the bound.
    ("maxLength 8, short", {"items": {"type": "string", "maxLength": 8}}),
    ("maxLength 64", {"items": {"type": "string", "maxLength": 64}}),
    ("slug pattern", {"items": {"type": "string", "pattern": "^[a-z0-9_-]{1,64}$"}}),
    ("[ab]{1,2}, short", {"items": {"type": "string", "pattern": "^[ab]{1,2}$", "maxLength": 2}}),
    ("format date", {"items": {"type": "string", "format": "date"}, "maxItems": 12}),
    ("format uuid", {"items": {"type": "string", "format": "uuid"}, "maxItems": 12}),
    # Counted integers and numbers (item_values.hpp: numeric and decimal items).
    ("integers -150..150", {"items": {"type": "integer", "minimum": -150, "maximum": 150}}),
    ("ints -150..150, short", {"items": {"type": "integer", "minimum": -150, "maximum": 150}}),
    ("numbers", {"items": {"type": "number"}}),
    ("numbers 0..5, short", {"items": {"type": "number", "minimum": 0, "maximum": 5}}),
]
# Walks on these prefer tokens of at most two bytes (see the module docstring).
SHORT = {
    "free strings, short",
    "integers, short",
    "maxLength 8, short",
    "[ab]{1,2}, short",
    "ints -150..150, short",
    "numbers 0..5, short",
}


def masks(tok: corral.Tokenizer, walks: int) -> None:
    """Mask CPU time along random walks, per mode (the walks differ: after, items are distinct)."""
    import random

    print(f"\nMask CPU time along {walks} random walks per schema (Llama 3.2), before -> after:")
    for name, extra in MASK_SCHEMAS:
        schema = {"type": "array", "uniqueItems": True, **extra}
        line = []
        for mode in ("before", "after"):
            set_mode(mode)
            g = corral.compile_json_schema(schema, tok)
            rng = random.Random(name)
            times: list[float] = []
            mask = corral.allocate_bitmask(1, tok)
            short = {i for i in range(tok.vocab_size) if len(tok.token_bytes[i]) <= 2}
            for _ in range(walks):
                m = g.matcher()
                for _ in range(40):
                    t0 = time.thread_time()
                    m.fill_next_token_bitmask(mask, 0)
                    times.append(time.thread_time() - t0)
                    ids = [i for i in corral.allowed_tokens(mask[0], tok) if i not in tok.eos_ids]
                    if not ids:
                        break
                    if name in SHORT:
                        ids = [i for i in ids if i in short] or ids
                    m.accept_token(rng.choice(ids))
            times.sort()
            p99 = times[int(0.99 * (len(times) - 1))]
            line.append(
                f"p50 {1e6 * statistics.median(times):.0f} / p99 {1e6 * p99:.0f} / max {1e6 * times[-1]:.0f}"
            )
        print(f"  {name:<18} {line[0]:<36} -> {line[1]} us")


def filled(tok: corral.Tokenizer, rounds: int) -> None:
    """Mask CPU time inside an array that already holds n items (no maxItems: capped at the
    default max_unique_items, 256), per mode: the correction's cost grows with what is held."""
    print("\nMask CPU time inside an array holding n items (Llama 3.2, no maxItems), before -> after:")
    mask = corral.allocate_bitmask(1, tok)
    cases = (
        ("strings", {"type": "string"}, lambda i: f'"w{i}"', (b", ", b', "w')),
        ("integers", {"type": "integer"}, lambda i: str(7 * i + 3), (b", ", b", 1")),
        ("numbers", {"type": "number"}, lambda i: f"{i}.5", (b", ", b", 1")),
        # The open item one to three characters from maxLength: the vocabulary walk's worst case.
        ("maxLen 8", {"type": "string", "maxLength": 8}, lambda i: f'"w{i:07d}"', (b', "w000', b', "w00000')),
    )
    for name, items, item, nexts in cases:
        for n in (1, 64, 255):
            line = []
            for mode in ("before", "after"):
                set_mode(mode)
                g = corral.compile_json_schema({"type": "array", "items": items, "uniqueItems": True}, tok)
                m = g.matcher()
                assert m.accept_bytes(("[" + ", ".join(item(i) for i in range(n))).encode())
                times: list[float] = []
                for nxt in nexts:
                    c = m.copy()
                    assert c.accept_bytes(nxt)
                    for _ in range(rounds):
                        t0 = time.thread_time()
                        c.fill_next_token_bitmask(mask, 0)
                        times.append(time.thread_time() - t0)
                line.append(f"median {1e6 * statistics.median(times):.0f} / max {1e6 * max(times):.0f}")
            print(f"  {name:<9} n={n:<4} {line[0]:<24} -> {line[1]} us")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", type=Path, default=DATA / "JSON-Schema-Test-Suite" / "tests" / "draft2020-12")
    ap.add_argument("--bench", type=Path, default=DATA / "jsonschemabench")
    ap.add_argument("--limit", type=int, default=0, help="at most N jsonschemabench schemas (0: all)")
    ap.add_argument("--walks", type=int, default=10, help="random walks per schema for mask times")
    ap.add_argument("--masks-only", action="store_true", help="only part 3 (mask CPU time)")
    args = ap.parse_args()
    tok = corral.Tokenizer.from_file(models.llama32_tokenizer_path())
    if args.suite.is_dir() and not args.masks_only:
        suite(tok, args.suite)
    if args.bench.is_dir() and not args.masks_only:
        bench_sets(tok, args.bench, args.limit)
    masks(tok, args.walks)
    filled(tok, 5)
    set_mode("after")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
