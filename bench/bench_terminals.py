"""First-time automaton construction of typical JSON Schema terminals, one by one (CPU clock).

What is measured
----------------
Each terminal below (the shapes the JSON Schema converter writes: a declared key with the
whitespace and colon after it, a key with escapes and non-ASCII, an enum of strings, counted
strings, a pattern under ``maxLength``, terminals with unbounded repetition, and the undeclared
key beside declared ones: "none of these names", a trie with ``(?s:.)*`` exits, which the direct
construction builds with its one cycle since session 7) is compiled to its minimal DFA by
``_native.probe_expression`` with the engine's process-wide memos emptied first
(``clear_engine_caches``), so every run builds it from scratch. It prints the best of
``--repeat`` runs in process CPU time and the DFA's state count.

Run it with two builds to compare engines, e.g. main's venv and this tree's, back to back:

    /work/main/.venv/bin/python bench/bench_terminals.py > before.txt
    python bench/bench_terminals.py --before before.txt

``--before FILE`` reads such an earlier output and adds the before / after ratio per terminal
(and checks that the state counts, which are language facts of minimal DFAs, are equal).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from corral import _native

WS = r"[ \t\n\r]{0,16}"
NAMES = [
    *("id name type description created_at updated_at status value enabled tags metadata url".split()),
    *("version items properties required default title format pattern minimum maximum".split()),
    *("apiVersion kind spec labels annotations namespace selector replicas template image".split()),
    *("command args env ports volumeMounts resources limits requests".split()),
]


def _not_in(names: list[str]) -> str:
    """The converter's regex for a string that is none of `names`."""
    from corral.grammar.json_schema.patterns import _not_in_regex

    return _not_in_regex(names)


ENUM = "|".join(f"value_{i}" for i in range(20))
TERMINALS: dict[str, str] = {
    "key": rf'"\"" /someLongPropertyName/j "\"" {WS} ":" {WS}',
    "key, escapes + non-ASCII": rf'"\"" /a"b\\c\/d\u00e9\u4e2d\U0001F600/j "\"" {WS} ":" {WS}',
    "next key (comma first)": rf'"," {WS} "\"" /created_at/j "\"" {WS} ":" {WS}',
    "enum of 20 strings": rf'"\"" /(?:{ENUM})/j "\""',
    "maxLength 64": r'"\"" /(?s:.){0,64}/j "\""',
    "minLength 1, maxLength 255": r'"\"" /(?s:.){1,255}/j "\""',
    "pattern [0-9a-zA-Z_-]{1,255}": r'"\"" /[0-9a-zA-Z_-]{1,255}/j "\""',
    "date (\\d{4}-\\d{2}-\\d{2})": r'"\"" /\d{4}-\d{2}-\d{2}/j "\""',
    "any string (unbounded)": r'"\"" /(?s:.)*/j "\""',
    "pattern ^[a-z]+$ (unbounded)": r'"\"" /[a-z]+/j "\""',
    # An undeclared key beside declared ones (extra_properties="spec"): "none of these names",
    # a trie with `(?s:.)*` exits, as json_schema/patterns.py writes it.
    "undeclared key, 8 names": rf'"\"" /{_not_in(NAMES[:8])}/j "\"" {WS} ":" {WS}',
    "undeclared key, 40 names": rf'"\"" /{_not_in(NAMES)}/j "\"" {WS} ":" {WS}',
}


def measure(rhs: str, repeat: int, limits: dict[str, int]) -> tuple[float, int]:
    """Best CPU ms of `repeat` cold builds of `rhs`, and its DFA state count."""
    best = float("inf")
    states = 0
    for _ in range(repeat):
        _native.clear_engine_caches()
        t0 = time.process_time()
        states = _native.probe_expression(rhs, 1_000_000, limits)
        best = min(best, time.process_time() - t0)
    return best * 1e3, states


def read_before(path: Path) -> dict[str, tuple[float, int]]:
    """name -> (ms, states) from an earlier run's output."""
    out: dict[str, tuple[float, int]] = {}
    for line in path.read_text().splitlines():
        parts = line.split("  ")
        parts = [p.strip() for p in parts if p.strip()]
        if len(parts) >= 3 and parts[0] in TERMINALS:
            out[parts[0]] = (float(parts[1].split()[0]), int(parts[2].split()[0]))
    return out


def main() -> None:
    """Time every terminal; with --before, print the ratios."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--before", type=Path, default=None, help="an earlier run's output")
    args = ap.parse_args()
    limits = _native.default_limits()
    before = read_before(args.before) if args.before else {}
    width = max(len(n) for n in TERMINALS)
    header = f"{'terminal':{width}s}  {'CPU ms':>9s}  {'states':>7s}"
    print(header + ("  before ms  before/after" if before else ""))
    for name, rhs in TERMINALS.items():
        ms, states = measure(rhs, args.repeat, limits)
        line = f"{name:{width}s}  {ms:6.3f} ms  {states:7d}"
        if name in before:
            b_ms, b_states = before[name]
            line += f"  {b_ms:6.3f} ms  {b_ms / ms:5.2f}x"
            if b_states != states:
                line += f"  STATES DIFFER (before {b_states})"
        print(line)


if __name__ == "__main__":
    main()
