"""CLI latency: what a user waits for at the shell, fresh interpreter each time.

    python bench/bench_cli_latency.py [--runs 3] [--backend auto]

Prints the median wall and CPU time of each command over ``--runs`` runs, side by side, with
ratios to the refused-schema case measured in the same run (a shared machine is noisy: the CPU
seconds and the ratios are the comparable figures):

* ``import corral`` — what every command pays first;
* a refused schema / a refused regex — ``corral generate`` checks the constraint before it
  loads the model;
* the same refusal the old way — the model loaded first, then the schema refused (what
  ``corral generate`` did before the check moved ahead);
* the same with the transformers backend loaded first (the backend used when the llama.cpp extra
  is not installed);
* a one-line generation (``--regex 'ORD-[0-9]{5}'``) — a model load plus a few tokens;
* ``import torch`` alone — the part of a generation the llama.cpp backend still pays for
  corral's torch-based sampling.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

LOAD_FIRST = (
    "import corral, sys\n"
    "m = corral.load_model(backend=sys.argv[1])\n"
    "try:\n"
    "    corral.generate(m, 'x', schema={'type': 'nonsense'})\n"
    "except corral.CorralError as e:\n"
    "    print('corral: error:', e, file=sys.stderr)\n"
)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _time(cmd: list[str], runs: int) -> tuple[float, float]:
    """Median wall and CPU seconds (CPU: what the command costs, whatever else runs)."""
    wall, cpu = [], []
    for _ in range(runs):
        t, c = time.perf_counter(), _cpu()
        subprocess.run(cmd, capture_output=True, timeout=600)
        wall.append(time.perf_counter() - t)
        cpu.append(_cpu() - c)
    return statistics.median(wall), statistics.median(cpu)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--backend", default="auto", choices=("auto", "transformers", "llama.cpp"))
    args = ap.parse_args()
    py = sys.executable
    gen = [py, "-m", "corral", "generate", "--backend", args.backend, "--prompt", "An order id:"]
    cases = [
        ("import corral", [py, "-c", "import corral"]),
        ("refused schema", [*gen, "--schema", '{"type": "nonsense"}']),
        ("refused regex", [*gen, "--regex", "ORD-(\\d+"]),
        ("refused, model loaded first (old order)", [py, "-c", LOAD_FIRST, args.backend]),
        ("one-line generation", [*gen, "--regex", "ORD-[0-9]{5}"]),
        ("import torch alone", [py, "-c", "import torch"]),
    ]
    if args.backend != "llama.cpp":
        cases.insert(4, ("refused, transformers loaded first", [py, "-c", LOAD_FIRST, "transformers"]))
    results = [(name, *_time(cmd, args.runs)) for name, cmd in cases]
    base = {name: (w, c) for name, w, c in results}["refused schema"]
    print(f"median of {args.runs} runs, backend={args.backend}")
    print(f"{'command':42} {'wall s':>7} {'CPU s':>6} {'wall x refused':>15} {'CPU x refused':>14}")
    for name, w, c in results:
        print(f"{name:42} {w:7.2f} {c:6.2f} {w / base[0]:15.1f} {c / base[1]:14.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
