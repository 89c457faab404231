"""Schema → grammar conversion time on jsonschemabench, optionally against a baseline tree.

What is measured
----------------
Every ``*.json`` schema of the jsonschemabench sets (``../shared/data/jsonschemabench`` or
``--data DIR``) is converted to grammar text by ``corral.compile.converter.convert_schema`` (the
conversion a server runs in its converter process, regex checks included) with the default
:class:`SchemaOptions` (``--max-convert-ms`` overrides the time limit). Each conversion runs in a
worker process that is killed at ``--hard-timeout`` seconds, so a conversion that never checks
its own limit is counted as *killed*, not waited for.

With ``--baseline SRC`` (a ``src`` directory of another checkout, e.g. ``git archive 71bf202
src | tar -x -C /tmp/base``) a second worker imports corral's Python code from there (the engine
extension is the installed one) and converts every schema too, alternating with the current
tree schema by schema, so both see the same machine load. Printed side by side: the conversion
time distribution (p50/p90/p99/max), how many took over ``--slow`` seconds, how many hit the
limit (``LimitExceeded``) or were killed, and outcomes (grammar / error code).

Equivalence (with ``--baseline``): per schema the outcome (a grammar, or the error code) must be
the same, and the grammars must be the same up to rule names: each grammar is put in a
canonical form (rules renamed in the order a walk from ``root`` first reaches them, unreachable
rules dropped) and compared. Grammars that still differ are compiled (byte vocabulary) and
``--walks`` random instances are drawn from each and fed to the other, and checked with
``jsonschema``; any instance one accepts and the other rejects is printed.

How to run
----------
    python bench/bench_convert.py                                   # current tree only
    python bench/bench_convert.py --baseline /tmp/base/src          # before/after side by side
    python bench/bench_convert.py --sets Snowplow --max-convert-ms 60000 --hard-timeout 90
    python bench/bench_convert.py --baseline /tmp/base/src --sets synthetic --max-convert-ms 60000

The set ``synthetic`` (not part of the default sets) is generated here: see synthetic_schemas.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import random
import re
import statistics
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

SETS = ("Github_trivial", "Github_easy", "Github_medium", "Glaiveai2K", "Snowplow")


def synthetic_schemas() -> dict[str, Any]:
    """Schemas written to stress the converter (set name ``synthetic``): nested anyOf branches
    whose siblings merge with a $ref target that has alternatives of its own (the shape of the
    slow GitHub schema in issue 16), a wide object, and a long enum."""

    def chain(n: int) -> dict[str, Any]:
        defs = {}
        for i in range(n):
            nxt = f"#/definitions/d{i + 1}" if i + 1 < n else None
            props: dict[str, Any] = {f"p{j}": {"type": "string"} for j in range(3)}
            branches: list[Any] = [{"required": ["p0"]}, {"required": ["p1"]}]
            if nxt:
                props["arr"] = {"type": "array", "items": {"$ref": nxt}}
                props["obj"] = {"$ref": nxt}
                branches.append({"$ref": nxt, "minProperties": 1})
            defs[f"d{i}"] = {"type": "object", "properties": props, "anyOf": branches}
        return {"definitions": defs, "$ref": "#/definitions/d0"}

    out: dict[str, Any] = {f"anyof_ref_chain_{n}.json": chain(n) for n in (3, 4, 5, 6)}
    props = {f"p{i}": {"type": "integer"} for i in range(10_000)}
    out["wide_10000.json"] = {"type": "object", "properties": props, "required": ["p0", "p9999"]}
    out["enum_100000.json"] = {"enum": [f"value-{i}" for i in range(100_000)]}
    return out


_DEFAULT_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "jsonschemabench"


# -- worker ------------------------------------------------------------------------------------
def _import_from(src: str | None) -> Any:
    """corral.compile.converter.convert_schema, from `src` (another checkout's src dir) or the
    installed tree. The installed engine extension is loaded first under its package name, so the
    other tree's Python code runs on it."""
    if src is not None:
        import importlib.machinery
        import importlib.util
        import sysconfig

        # (not importlib.util.find_spec: it would import this tree's corral package first)
        origin = str(next((Path(sysconfig.get_paths()["platlib"]) / "corral").glob("_core*")))
        sys.meta_path[:] = [f for f in sys.meta_path if "Redirecting" not in type(f).__name__]
        sys.path.insert(0, src)
        loader = importlib.machinery.ExtensionFileLoader("corral._core", origin)
        core_spec = importlib.util.spec_from_file_location("corral._core", origin, loader=loader)
        assert core_spec is not None
        core = importlib.util.module_from_spec(core_spec)
        loader.exec_module(core)
        sys.modules["corral._core"] = core
    from corral.compile.converter import convert_schema

    return convert_schema


def _worker(conn: Connection, src: str | None, options: dict[str, Any]) -> None:
    convert = _import_from(src)
    while True:
        path = conn.recv()
        if path is None:
            return
        try:
            schema = json.loads(Path(path).read_text())
        except (ValueError, UnicodeDecodeError):
            conn.send(("unreadable", 0.0, None))
            continue
        t0 = time.perf_counter()
        try:
            text, _ = convert(schema, options)
            out: tuple[str, float, str | None] = ("grammar", time.perf_counter() - t0, text)
        except RecursionError:
            out = ("RecursionError", time.perf_counter() - t0, None)
        except Exception as e:  # noqa: BLE001 - every outcome is recorded
            code = getattr(e, "code", None) or type(e).__name__
            if code == "limit_exceeded":
                code += ":" + str(getattr(e, "limit", ""))
            out = (code, time.perf_counter() - t0, None)
        conn.send(out)


class Worker:
    """One conversion process, restarted after a kill."""

    def __init__(self, src: str | None, options: dict[str, Any]) -> None:
        self.src, self.options = src, options
        self._start()

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, self.src, self.options), daemon=True)
        self.proc.start()

    def convert(self, path: Path, hard_timeout: float) -> tuple[str, float, str | None]:
        self.conn.send(str(path))
        if self.conn.poll(hard_timeout):
            return self.conn.recv()  # type: ignore[no-any-return]
        self.proc.kill()
        self.proc.join()
        self._start()
        return ("killed", hard_timeout, None)

    def close(self) -> None:
        self.conn.send(None)
        self.proc.join(5)


# -- grammar comparison -------------------------------------------------------------------------
_RULE_LINE = re.compile(r"^([A-Za-z0-9_-]+) ::= (.*)$")
_TOKEN = re.compile(
    r'"(?:[^"\\]|\\.)*"|/(?:[^/\\]|\\.)*/[a-z]*|\[(?:[^\]\\]|\\.)*\]|[A-Za-z_][A-Za-z0-9_-]*|\S'
)


def canonical(text: str) -> str:
    """The grammar with rules renamed in the order a walk from ``root`` reaches them (and
    unreachable rules dropped): equal for grammars that differ only in rule names and order."""
    rules = {}
    for line in text.splitlines():
        m = _RULE_LINE.match(line)
        if m:
            rules[m.group(1)] = _TOKEN.findall(m.group(2))
    order: dict[str, str] = {"root": "root"}
    queue = ["root"]
    out = []
    while queue:
        name = queue.pop(0)
        body = []
        for tok in rules.get(name, []):
            if tok in rules:
                if tok not in order:
                    order[tok] = f"r{len(order)}"
                    queue.append(tok)
                tok = order[tok]
            body.append(tok)
        out.append(f"{order[name]} ::= {' '.join(body)}")
    return "\n".join(out)


def _byte_tokenizer() -> Any:
    import corral

    return corral.Tokenizer.from_tokens([bytes([b]) for b in range(256)] + [b"<eos>"], eos_ids=[256])


def _walk(grammar: Any, rng: random.Random, max_len: int = 400) -> bytes | None:
    """A random instance of `grammar` (byte vocabulary), finished with the shortest completion."""
    import corral

    m = grammar.matcher()
    mask = corral.allocate_bitmask(1, grammar_tok[0])
    out = bytearray()
    for _ in range(max_len):
        if m.is_accepting() and rng.random() < 0.1:
            return bytes(out)
        m.fill_next_token_bitmask(mask, 0)
        allowed = [t for t in corral.allowed_tokens(mask[0], grammar_tok[0]) if t < 256]
        if not allowed:
            break
        t = rng.choice(allowed)
        m.accept_token(t)
        out.append(t)
    done = m.shortest_completion()
    return None if done is None else bytes(out) + bytes(done)


grammar_tok: list[Any] = []


def semantic_diff(schema: Any, before: str, after: str, walks: int, seed: int) -> list[str]:
    """Instances drawn from one grammar that the other rejects (or that fail `schema` while the
    other grammar rejects them): empty when the two agree on every drawn instance."""
    import jsonschema

    import corral

    if not grammar_tok:
        grammar_tok.append(_byte_tokenizer())
    tok = grammar_tok[0]
    try:
        ga, gb = corral.compile_grammar(before, tok), corral.compile_grammar(after, tok)
    except corral.CorralError as e:
        return [f"does not compile: {e}"]
    rng = random.Random(seed)
    problems = []
    for src_name, src, dst in (("before", ga, gb), ("after", gb, ga)):
        for _ in range(walks):
            inst = _walk(src, rng)
            if inst is None:
                continue
            m = dst.matcher()
            ok = m.accept_bytes(inst) and m.is_accepting()
            if not ok:
                try:
                    valid = jsonschema.validators.validator_for(schema)(schema).is_valid(json.loads(inst))
                except Exception:  # noqa: BLE001 - an instance that does not even parse
                    valid = False
                problems.append(f"{src_name} drew {inst[:120]!r} (valid: {valid}); the other rejects it")
    return problems


# -- main ---------------------------------------------------------------------------------------
def _dist(times: list[float]) -> str:
    if not times:
        return "-"
    s = sorted(times)

    def q(p: float) -> float:
        return s[min(len(s) - 1, int(p * len(s)))] * 1000

    return f"p50 {q(0.5):7.1f}  p90 {q(0.9):7.1f}  p99 {q(0.99):8.1f}  max {s[-1] * 1000:8.0f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=_DEFAULT_DATA)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--baseline", help="src directory of the tree to compare with")
    ap.add_argument("--max-convert-ms", type=int, default=None, help="SchemaOptions.max_convert_ms")
    ap.add_argument("--hard-timeout", type=float, default=30.0, help="kill a conversion after this")
    ap.add_argument("--slow", type=float, default=1.0, help="count conversions over this many seconds")
    ap.add_argument("--limit", type=int, default=0, help="at most this many schemas per set (0: all)")
    ap.add_argument("--walks", type=int, default=20, help="instances per grammar that differs")
    ap.add_argument("--json", type=Path, help="write per-schema results here")
    args = ap.parse_args()

    options: dict[str, Any] = {}
    if args.max_convert_ms is not None:
        options["max_convert_ms"] = args.max_convert_ms
    impls = {"after": Worker(None, options)}
    if args.baseline:
        impls = {"before": Worker(str(Path(args.baseline).resolve()), options), **impls}
    results: dict[str, dict[str, tuple[str, float, str | None]]] = {k: {} for k in impls}
    paths = []
    for name in args.sets.split(","):
        if name == "synthetic":
            folder = Path(tempfile.mkdtemp()) / "synthetic"
            folder.mkdir()
            for file, schema in synthetic_schemas().items():
                (folder / file).write_text(json.dumps(schema))
            paths += sorted(folder.glob("*.json"))
            continue
        files = sorted((args.data / name).glob("*.json"))
        paths += files[: args.limit] if args.limit else files
    t_start = time.time()
    for i, path in enumerate(paths):
        key = f"{path.parent.name}/{path.name}"
        for label, w in impls.items():
            results[label][key] = w.convert(path, args.hard_timeout)
        if (i + 1) % 500 == 0:
            print(f"  {i + 1}/{len(paths)} schemas, {time.time() - t_start:.0f} s", file=sys.stderr)
    for w in impls.values():
        w.close()

    print(f"{len(paths)} schemas from {args.sets}; options {options or 'default'}")
    for label, res in results.items():
        times = [t for status, t, _ in res.values() if status != "unreadable"]
        counts: dict[str, int] = {}
        for status, _, _ in res.values():
            counts[status] = counts.get(status, 0) + 1
        over = sum(t > args.slow for t in times)
        total = sum(times)
        print(f"{label:>6}: {_dist(times)}  total {total:6.1f} s  over {args.slow:g} s: {over}")
        print(f"        outcomes: {dict(sorted(counts.items(), key=lambda kv: -kv[1]))}")
    if "before" in results:
        before, after = results["before"], results["after"]
        ratios = [
            before[k][1] / after[k][1]
            for k in paths_keys(paths)
            if before[k][0] == after[k][0] == "grammar" and after[k][1] > 0
        ]
        if ratios:
            print(f"time before/after per schema (both grammar): median {statistics.median(ratios):.2f}x")
        slowest = sorted(paths_keys(paths), key=lambda k: -before[k][1])[:8]
        print(
            "slowest before:  " + "  ".join(f"{k} {before[k][1]:.2f}s->{after[k][1]:.2f}s" for k in slowest)
        )
        changed = [k for k in paths_keys(paths) if before[k][0] != after[k][0]]
        print(f"outcome changed: {len(changed)}")
        for k in changed:
            print(f"  {k}: {before[k][0]} ({before[k][1]:.2f}s) -> {after[k][0]} ({after[k][1]:.2f}s)")
        same_text = same_canon = 0
        differ = []
        for k in paths_keys(paths):
            (sb, _, tb), (sa, _, ta) = before[k], after[k]
            if sb == sa == "grammar" and tb is not None and ta is not None:
                if tb == ta:
                    same_text += 1
                elif canonical(tb) == canonical(ta):
                    same_canon += 1
                else:
                    differ.append(k)
        print(
            f"grammars identical: {same_text}; identical up to rule names: {same_canon}; "
            f"differ: {len(differ)}"
        )
        bad = 0
        for k in differ:
            schema = json.loads(next(p for p in paths if f"{p.parent.name}/{p.name}" == k).read_text())
            problems = semantic_diff(schema, before[k][2] or "", after[k][2] or "", args.walks, 0)
            bad += bool(problems)
            print(
                f"  {k}: {'; '.join(problems[:3]) if problems else f'{2 * args.walks} drawn instances agree'}"
            )
        print(f"differing grammars with instances the other rejects: {bad}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    label: {
                        k: [s, t, hashlib.sha256((g or "").encode()).hexdigest()[:16]]
                        for k, (s, t, g) in r.items()
                    }
                    for label, r in results.items()
                },
                indent=1,
            )
        )


def paths_keys(paths: list[Path]) -> list[str]:
    return [f"{p.parent.name}/{p.name}" for p in paths]


if __name__ == "__main__":
    main()
