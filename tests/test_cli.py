"""The ``corral`` command line, run as a real subprocess on the bundled model (offline)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

pytestmark = [pytest.mark.real_tokenizer, pytest.mark.slow]

TASKS = Path(__file__).resolve().parent.parent / "examples" / "tasks"


def corral_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    return subprocess.run(
        [sys.executable, "-m", "corral", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


@pytest.fixture(scope="module", autouse=True)
def _model_installed(smol_model: Any) -> None:
    """The subprocesses load the bundled model too; the fixture converts it once first."""


@pytest.mark.parametrize("task", sorted(p.stem for p in TASKS.glob("*.json")))
def test_cli_runs_each_example_and_output_validates(task: str, tmp_path: Path) -> None:
    spec = json.loads((TASKS / f"{task}.json").read_text())
    args = ["generate", "--prompt", spec["prompt"], "--json", "--max-new-tokens", "200"]
    if "schema" in spec:
        schema_file = tmp_path / "schema.json"
        schema_file.write_text(json.dumps(spec["schema"]))
        args += ["--schema", str(schema_file)]
    else:
        args += ["--regex", spec["regex"]]
    proc = corral_cli(*args)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["valid"] and out["error"] is None
    if "schema" in spec:
        jsonschema.validate(json.loads(out["text"]), spec["schema"])
        assert out["value"] == json.loads(out["text"])
    else:
        assert re.fullmatch(spec["regex"], out["text"])
    assert out["forward_passes"] <= out["completion_tokens"] + 1


def test_cli_batch_jsonl_one_line_per_input(tmp_path: Path) -> None:
    inp = tmp_path / "prompts.jsonl"
    prompts = ["Say yes", {"prompt": "Say no"}, {"messages": [{"role": "user", "content": "Say maybe"}]}]
    inp.write_text("".join(json.dumps(p) + "\n" for p in prompts))
    out = tmp_path / "out.jsonl"
    proc = corral_cli("generate", "--input", str(inp), "--choices", "yes,no,maybe", "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 3
    assert all(x["value"] in ("yes", "no", "maybe") for x in lines)


def test_cli_stream_prints_the_output(tmp_path: Path) -> None:
    proc = corral_cli("generate", "--prompt", "Give an order id", "--regex", "ORD-[0-9]{4}", "--stream")
    assert proc.returncode == 0, proc.stderr
    assert re.fullmatch(r"ORD-[0-9]{4}\n", proc.stdout)


def test_cli_bad_input_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": "string", "minLength": 5, "maxLength": 2}')
    proc = corral_cli("generate", "--prompt", "x", "--schema", str(bad))
    assert proc.returncode == 2
    assert "minLength" in proc.stderr and "Traceback" not in proc.stderr
    proc = corral_cli("generate", "--prompt", "x", "--regex", "a", "--model", str(tmp_path / "missing.gguf"))
    assert proc.returncode == 2 and "not found" in proc.stderr and "Traceback" not in proc.stderr
    lines = tmp_path / "in.jsonl"
    lines.write_text('"ok"\nnot json\n')
    proc = corral_cli("generate", "--input", str(lines), "--regex", "a")
    assert proc.returncode == 2 and ":2:" in proc.stderr and "Traceback" not in proc.stderr
    proc = corral_cli("generate", "--prompt", "x", "--regex", "a", "--choices", "a,b")
    assert proc.returncode == 2 and "at most one" in proc.stderr


def test_cli_model_by_preset_name(tmp_path: Path) -> None:
    # --model takes a preset name on every command that loads a model (here the small one).
    proc = corral_cli(
        "generate",
        "--model",
        "smollm2-135m",
        "--backend",
        "transformers",
        "--prompt",
        "An id",
        "--regex",
        "ID-[0-9]{3}",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    assert re.fullmatch(r"ID-[0-9]{3}", json.loads(proc.stdout)["text"])
    proc = corral_cli("classify", "--model", "smollm2-135m", "--labels", "yes,no", "--text", "Is it?")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["label"] in ("yes", "no")
    proc = corral_cli("generate", "--model", "no-such-preset", "--prompt", "x", "--regex", "a")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "no preset" in proc.stderr and "qwen2.5-coder-0.5b" in proc.stderr
    proc = corral_cli("models", "list")
    assert proc.returncode == 0, proc.stderr
    assert "smollm2-135m" in proc.stdout and "qwen2.5-coder-0.5b" in proc.stdout


def test_arguments_nested_too_deep_are_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from corral.cli import main

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 20_000 + "]" * 20_000)
    assert main(["generate", "--schema", str(deep), "--prompt", "x"]) == 2
    assert "--schema nests more than max_arg_depth=900" in capsys.readouterr().err
    assert main(["classify", "--labels", "[" * 5000 + "]" * 5000, "--text", "hi"]) == 2
    assert "max_arg_depth" in capsys.readouterr().err
