"""``property_order="any"`` vs ``"schema"``: completeness on permuted instances, and the cost.

For a seeded sample of jsonschemabench schemas (``../shared/data/jsonschemabench``) whose root is
an object with at least two properties, both orders are compiled (``extra_properties="spec"``,
Llama 3.2 tokenizer). Instances are masked random walks under the schema-order grammar that
``jsonschema`` accepts; each is also written with every object's keys shuffled and with a
``"$schema"`` key first, and as a near miss with one declared key repeated. Per order it prints:

* permuted / ``$schema``-first valid instances accepted (completeness), near misses accepted
  (soundness: must be 0 for ``any``);
* compile time (cold caches) and every mask fill along the schema-order instances (accepted by
  both), interleaved per schema in one run, with the ratio any / schema.

``--census`` instead compiles every schema of every set in any order and counts the objects
that keep schema order, by the reason the report gives; ``--remembered`` times the masks along
instances of objects whose ``minProperties`` makes the matcher remember undeclared keys
(``%key(...)``, cpp/keyed.hpp) beside the same objects with ``minProperties: 1``.

Run:  python bench/bench_property_order.py [--per-set 8] [--walks 3] [--seed 1] [--clock cpu]
      python bench/bench_property_order.py --census | --remembered
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

import jsonschema

import corral
from corral import models

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "jsonschemabench"
SETS = ["Github_easy", "Github_medium", "Glaiveai2K", "Snowplow"]


def shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = [(k, shuffled(v, rng)) for k, v in value.items()]
        rng.shuffle(items)
        return dict(items)
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


def walk(g: Any, tok: corral.Tokenizer, rng: random.Random, steps: int = 60) -> str | None:
    m = g.matcher()
    mask = corral.allocate_bitmask(1, tok)
    out = bytearray()
    for _ in range(steps):
        m.fill_next_token_bitmask(mask, 0)
        ids = [i for i in corral.allowed_tokens(mask[0], tok) if i not in tok.eos_ids]
        if not ids or (m.is_accepting() and rng.random() < 0.2):
            break
        t = rng.choice(ids)
        m.accept_token(t)
        out += tok.token_bytes[t]
    out += m.shortest_completion()
    try:
        return out.decode()
    except UnicodeDecodeError:
        return None


# The clock masks are timed with: the wall clock, or (``--clock cpu``) the thread's CPU time, which
# does not charge a mask with the time slices other processes took on a loaded machine.
CLOCK = {"wall": time.perf_counter, "cpu": time.thread_time}
clock = CLOCK["wall"]


def accepts(g: Any, tok: corral.Tokenizer, text: str, times: list[float] | None = None) -> bool:
    m = g.matcher()
    mask = corral.allocate_bitmask(1, tok)
    for t in tok.encode(text):
        if times is not None:
            a = clock()
            m.fill_next_token_bitmask(mask, 0)
            times.append(clock() - a)
        if not m.accept_token(t):
            return False
    return m.is_accepting()


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0.0


def census(tok: corral.Tokenizer) -> None:
    """Objects that keep schema order under ``property_order="any"``, over every schema."""
    reasons: collections.Counter[str] = collections.Counter()
    compiled = failed = 0
    for f in sorted(DATA.glob("*/*.json")):
        try:
            g = corral.compile_json_schema(
                json.loads(f.read_text()), tok, extra_properties="spec", property_order="any"
            )
        except Exception:  # noqa: BLE001 - refused schemas are counted, not judged
            failed += 1
            continue
        compiled += 1
        for e in g.report.entries:
            if "schema order only" in e.detail:
                reasons[e.detail.split(":", 1)[1].strip()] += 1
                print(f"  {f.parent.name}/{f.name} {e.pointer}: {e.detail}")
    print(f"{compiled} schemas compiled ({failed} refused); objects in schema order: {sum(reasons.values())}")
    for why, n in reasons.most_common():
        print(f"  {n:5d}  {why}")


REMEMBERED_CASES = {  # name: (schema without minProperties, instances)
    "complement keys": (
        {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "kind": {"type": "string"}},
            "required": ["id"],
        },
        [
            '{"zeta": 1, "id": 7, "alpha": "x", "beta": [1, 2], "kind": "k", "gamma": {"a": 1}}',
            '{"id": 7, "a": 1, "b": 2, "c": 3, "d": "dd", "e": null}',
        ],
    ),
    "$-anchored pattern keys": (
        {
            "type": "object",
            "properties": {"monorepo": {"const": True}},
            "patternProperties": {"^[a-z0-9\\-]+$": {"type": "boolean"}},
            "additionalProperties": False,
        },
        [
            '{"app-a": true, "monorepo": true, "app-b": false, "app-c": true}',
            '{"x1": true, "x2": false, "x3": true, "x4": false, "x5": true}',
        ],
    ),
}


def remembered(tok: corral.Tokenizer) -> None:
    """Masks along objects whose minProperties needs remembered undeclared keys (min 4), beside
    the same objects with minProperties 1 (nothing to count or remember)."""
    print(f"{'object':26}{'minProperties':>14}{'%key':>6}{'masks':>7}{'p50 us':>9}{'p90 us':>9}{'max us':>9}")
    for name, (base, texts) in REMEMBERED_CASES.items():
        for lo in (4, 1):
            g = corral.compile_json_schema({**base, "minProperties": lo}, tok, extra_properties="spec")
            times: list[float] = []
            for _ in range(3):  # the first pass pays the cold frontiers: report the steady state
                times.clear()
                for text in texts:
                    assert accepts(g, tok, text, times), (name, text)
            row = [pct(times, q) * 1e6 for q in (0.5, 0.9, 1.0)]
            flag = "%key(" in g.grammar_source
            print(f"{name:26}{lo:>14}{flag!s:>6}{len(times):>7}" + "".join(f"{x:>9.1f}" for x in row))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-set", type=int, default=8)
    ap.add_argument("--walks", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--clock", default="wall", choices=sorted(CLOCK), help="cpu: the thread's CPU time")
    ap.add_argument("--census", action="store_true", help="count the objects that keep schema order")
    ap.add_argument("--remembered", action="store_true", help="masks of objects with remembered keys")
    args = ap.parse_args()
    global clock
    clock = CLOCK[args.clock]
    tok = corral.Tokenizer.from_file(models.llama32_tokenizer_path())
    if args.census:
        census(tok)
        return
    if args.remembered:
        corral.compile_json_schema({"type": "object"}, tok)  # the vocabulary's one-time setup
        remembered(tok)
        return
    rng = random.Random(args.seed)
    corral.compile_json_schema({"type": "object"}, tok)  # the vocabulary's one-time setup
    orders = ("schema", "any")
    stats: dict[str, dict[str, Any]] = {
        o: {"perm_ok": 0, "dollar_ok": 0, "near_ok": 0, "compile": [], "masks": []} for o in orders
    }
    perms = dollars = nears = schemas = 0
    for name in SETS:
        files = sorted((DATA / name).glob("*.json"))
        rng.shuffle(files)
        taken = 0
        for f in files:
            if taken >= args.per_set:
                break
            schema = json.loads(f.read_text())
            props = schema.get("properties") if isinstance(schema, dict) else None
            if schema.get("type") != "object" or not isinstance(props, dict) or len(props) < 2:
                continue
            grammars = {}
            try:
                for o in orders if schemas % 2 else orders[::-1]:
                    a = time.perf_counter()
                    grammars[o] = corral.compile_json_schema(
                        schema, tok, extra_properties="spec", property_order=o
                    )
                    stats[o]["compile"].append(time.perf_counter() - a)
                validator = jsonschema.Draft202012Validator(schema)
            except Exception:  # noqa: BLE001 - a refused schema is skipped for both orders
                continue
            taken += 1
            schemas += 1
            for _ in range(args.walks):
                text = walk(grammars["schema"], tok, rng)
                if text is None:
                    continue
                try:
                    value = json.loads(text)
                except ValueError:
                    continue
                if not isinstance(value, dict) or not validator.is_valid(value):
                    continue
                # Whichever grammar is fed first pays the cold entries the two may share
                # (process-wide caches): alternate the order per instance.
                for o in orders if perms % 2 else orders[::-1]:
                    accepts(grammars[o], tok, text, stats[o]["masks"])
                perm = json.dumps(shuffled(value, rng), ensure_ascii=False)
                dollar = json.dumps({"$schema": "urn:x", **value}, ensure_ascii=False)
                perms += 1
                dollar_valid = validator.is_valid(json.loads(dollar))
                dollars += dollar_valid
                for o in orders:
                    stats[o]["perm_ok"] += accepts(grammars[o], tok, perm)
                    stats[o]["dollar_ok"] += dollar_valid and accepts(grammars[o], tok, dollar)
                declared = [k for k in value if k in props]
                if declared:
                    k = declared[0]
                    body = json.dumps(value, ensure_ascii=False)[:-1]
                    near = f"{body}, {json.dumps(k)}: {json.dumps(value[k])}}}"
                    nears += 1
                    for o in orders:
                        stats[o]["near_ok"] += accepts(grammars[o], tok, near)
    print(f"{schemas} schemas, {perms} permuted, {dollars} valid $schema-first, {nears} duplicate-key misses")
    print(f"{'':28}{'schema':>12}{'any':>12}{'any/schema':>12}")
    s, a = stats["schema"], stats["any"]
    print(f"{'permuted valid accepted':28}{s['perm_ok']:>12}{a['perm_ok']:>12}")
    print(f"{'$schema-first accepted':28}{s['dollar_ok']:>12}{a['dollar_ok']:>12}")
    print(f"{'duplicate-key accepted':28}{s['near_ok']:>12}{a['near_ok']:>12}")
    for label, key, q in [
        ("compile p50 (ms)", "compile", 0.5),
        ("compile p90 (ms)", "compile", 0.9),
        ("mask p50 (us)", "masks", 0.5),
        ("mask p99 (us)", "masks", 0.99),
        ("mask max (us)", "masks", 1.0),
    ]:
        scale = 1e3 if key == "compile" else 1e6
        x, y = pct(s[key], q) * scale, pct(a[key], q) * scale
        print(f"{label:28}{x:>12.1f}{y:>12.1f}{(y / x if x else 0):>12.2f}")
    ms, ma = statistics.fmean(s["masks"] or [0]) * 1e6, statistics.fmean(a["masks"] or [0]) * 1e6
    print(f"{'mask mean (us)':28}{ms:>12.1f}{ma:>12.1f}{(ma / ms if ms else 0):>12.2f}")


if __name__ == "__main__":
    main()
