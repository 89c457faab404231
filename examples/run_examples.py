"""Run the example tasks in examples/tasks/ and check every output: valid, and right.

    python examples/run_examples.py                        # Qwen2.5-Coder-0.5B-Instruct (preset)
    python examples/run_examples.py --model smollm2-135m   # the small test model
    python examples/run_examples.py --model path/to/model.gguf

Each task file holds a prompt, one constraint (a JSON Schema or a regex) and the expected
answer: the fields a person would check (``expected``: a JSON pointer into the output with
``equals``, ``one_of``, ``contains`` or ``length``). The output is validated independently
(``jsonschema`` / ``re.fullmatch``) — corral's constraints make an invalid output impossible —
and then compared with the expected answer, which is up to the model. The script exits 1 if any
output is invalid or wrong.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

import corral

TASKS = Path(__file__).parent / "tasks"
MAIN_MODEL = "qwen2.5-coder-0.5b"


def _resolve(value: Any, pointer: str) -> Any:
    """The value at a JSON pointer (RFC 6901), or raise LookupError."""
    if pointer == "":
        return value
    for raw in pointer.lstrip("/").split("/"):
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, list):
            if not key.isdigit() or int(key) >= len(value):
                raise LookupError(pointer)
            value = value[int(key)]
        elif isinstance(value, dict):
            if key not in value:
                raise LookupError(pointer)
            value = value[key]
        else:
            raise LookupError(pointer)
    return value


def _same(got: Any, want: Any) -> bool:
    # As a person reads it: numbers by value (219 == 219.0), strings ignoring case and the
    # surrounding spaces.
    if isinstance(want, bool) or isinstance(got, bool):
        return got is want
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return abs(got - want) < 1e-9
    if isinstance(want, str) and isinstance(got, str):
        return got.strip().casefold() == want.strip().casefold()
    return bool(got == want)


def check_expected(expected: list[dict[str, Any]], value: Any) -> list[str]:
    """The expected-answer checks ``value`` fails, as readable lines (empty: all right)."""
    wrong = []
    for check in expected:
        pointer = check["path"]
        where = pointer or "the answer"
        try:
            got = _resolve(value, pointer)
        except LookupError:
            wrong.append(f"{where}: missing")
            continue
        if "equals" in check and not _same(got, check["equals"]):
            wrong.append(f"{where}: {got!r}, expected {check['equals']!r}")
        if "one_of" in check and not any(_same(got, w) for w in check["one_of"]):
            wrong.append(f"{where}: {got!r}, expected one of {check['one_of']!r}")
        if "contains" in check and (
            not isinstance(got, str) or check["contains"].casefold() not in got.casefold()
        ):
            wrong.append(f"{where}: {got!r} does not contain {check['contains']!r}")
        if "length" in check and (not isinstance(got, list) or len(got) != check["length"]):
            wrong.append(f"{where}: {got!r}, expected {check['length']} items")
    return wrong


@dataclass
class TaskResult:
    name: str
    task: dict[str, Any]
    result: Any  # corral.GenerationResult
    valid: bool
    wrong: list[str] = field(default_factory=list)

    @property
    def right(self) -> bool:
        return self.valid and not self.wrong


def load_tasks() -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(TASKS.glob("*.json"))}


def run_task(model: Any, name: str, task: dict[str, Any], max_new_tokens: int = 256) -> TaskResult:
    """Generate the task's answer under its constraint, validate it and check it."""
    kw = {"schema": task["schema"]} if "schema" in task else {"regex": task["regex"]}
    r = corral.generate(model, task["prompt"], max_new_tokens=max_new_tokens, **kw)
    if "schema" in task:
        try:
            value = json.loads(r.text)
            jsonschema.validate(value, task["schema"])
            valid = True
        except (ValueError, jsonschema.ValidationError):
            value, valid = None, False
    else:
        value = r.text
        valid = re.fullmatch(task["regex"], r.text) is not None
    wrong = check_expected(task.get("expected", []), value) if valid else ["output is invalid"]
    return TaskResult(name, task, r, valid, wrong)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=MAIN_MODEL, help=f"a preset or a path (default: {MAIN_MODEL})")
    ap.add_argument("--backend", default="auto", choices=("auto", "transformers", "llama.cpp"))
    ap.add_argument("--max-new-tokens", type=int, default=256)
    args = ap.parse_args()
    t = time.perf_counter()
    model = corral.load_model(args.model, backend=args.backend)
    print(f"loaded {model.describe()} in {time.perf_counter() - t:.1f} s\n")
    invalid = wrong = 0
    for name, task in load_tasks().items():
        tr = run_task(model, name, task, args.max_new_tokens)
        r = tr.result
        invalid += not tr.valid
        wrong += tr.valid and not tr.right
        print(f"== {name}: {task['description']}")
        print(r.text)
        verdict = "right" if tr.right else ("INVALID" if not tr.valid else "valid but WRONG")
        print(
            f"-- {verdict}; {r.completion_tokens} tokens, "
            f"{r.forward_passes} forward passes ({r.forced_tokens} tokens forced), "
            f"{r.timing['total']:.2f} s (forward {r.timing['forward']:.2f} s, "
            f"mask {r.timing['mask']:.3f} s), stop: {r.stop_reason}"
            f"{' (truncated)' if r.truncated else ''}"
        )
        for line in tr.wrong if tr.valid else []:
            print(f"   wrong: {line}")
        print()
    total = len(load_tasks())
    print(f"{total - invalid}/{total} valid, {total - invalid - wrong}/{total} right")
    return 1 if invalid or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
