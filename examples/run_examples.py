"""Run the example tasks in examples/tasks/ on the bundled model and check every output.

    python examples/run_examples.py            # all tasks, bundled SmolLM2-135M-Instruct
    python examples/run_examples.py --model path/to/model.gguf

Each task file holds a prompt and one constraint (a JSON Schema or a regex). The output is
validated independently (``jsonschema`` / ``re.fullmatch``); the script exits non-zero if any
output fails, which corral's constraints make impossible.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import jsonschema

import corral

TASKS = Path(__file__).parent / "tasks"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--model", default=None, help="default: the bundled SmolLM2-135M-Instruct")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    args = ap.parse_args()
    t = time.perf_counter()
    model = corral.load_model(args.model)
    print(f"loaded {model.describe()} in {time.perf_counter() - t:.1f} s\n")
    failures = 0
    for path in sorted(TASKS.glob("*.json")):
        task = json.loads(path.read_text(encoding="utf-8"))
        kw = {"schema": task["schema"]} if "schema" in task else {"regex": task["regex"]}
        r = corral.generate(model, task["prompt"], max_new_tokens=args.max_new_tokens, **kw)
        if "schema" in task:
            try:
                jsonschema.validate(json.loads(r.text), task["schema"])
                ok = True
            except (ValueError, jsonschema.ValidationError):
                ok = False
        else:
            ok = re.fullmatch(task["regex"], r.text) is not None
        failures += not ok
        print(f"== {path.stem}: {task['description']}")
        print(r.text)
        print(
            f"-- {'valid' if ok else 'INVALID'}; {r.completion_tokens} tokens, "
            f"{r.forward_passes} forward passes ({r.forced_tokens} tokens forced), "
            f"{r.timing['total']:.2f} s (forward {r.timing['forward']:.2f} s, "
            f"mask {r.timing['mask']:.3f} s), stop: {r.stop_reason}"
            f"{' (truncated)' if r.truncated else ''}\n"
        )
    print("all outputs valid" if not failures else f"{failures} invalid output(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
