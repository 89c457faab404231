"""Fast by default: the CLI refuses bad input before it imports a model runtime or loads weights.

Each case runs ``corral`` in a fresh interpreter with a sentinel import hook: importing torch,
transformers or llama_cpp raises an error the CLI does not catch (a traceback, exit status 1), so
a command that loads the model before checking its input fails here whatever the machine's
speed. The wall-time bound is generous (a shared 2-core machine; measured ~0.6 s against 8-16 s
before the check moved ahead of the model load) and backs the sentinel up: it bounds the
command's CPU time (what it costs, whatever else the machine runs) tightly and its wall time
loosely (six sessions share two cores here).
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import time

import pytest

from corral.cli.precheck import HEAVY_MODULES

# Generous bounds for a refused command (measured: ~0.6 s of CPU); importing torch alone takes
# about 3 s of CPU here, loading a model more.
REFUSED_CPU_S = 2.5
REFUSED_WALL_S = 20.0

SENTINEL = f"""
import os, sys
HEAVY = tuple(os.environ.get("CORRAL_TEST_HEAVY", {",".join(HEAVY_MODULES)!r}).split(","))

class Sentinel:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HEAVY:
            raise AssertionError("heavy import before the input was checked: " + name)
        return None

sys.meta_path.insert(0, Sentinel())
from corral.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_guarded(
    *args: str, heavy: tuple[str, ...] = HEAVY_MODULES
) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """The command's result, wall seconds and CPU seconds (importing ``heavy`` is an error)."""
    t0, c0 = time.perf_counter(), _children_cpu()
    env = dict(os.environ, CORRAL_TEST_HEAVY=",".join(heavy))
    cmd = [sys.executable, "-c", SENTINEL, *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    return p, time.perf_counter() - t0, _children_cpu() - c0


REFUSED = [
    (["--schema", '{"type": "nonsense"}'], "unknown type 'nonsense' (at #/type)"),
    (
        ["--schema", '{"type": "integer", "minimum": 5, "maximum": 2}'],
        "the number bounds allow no value",
    ),
    (["--schema", '{"type": "object"'], "--schema is not valid JSON"),
    (["--regex", "ORD-(\\d+"], "missing ), unterminated subpattern"),
    (["--grammar", "GRAMMAR"], "line 1"),
    (["--regex", "x", "--temperature", "-1"], "temperature must be >= 0"),
    (["--regex", "x", "--top-p", "0"], "top_p must be in (0, 1]"),
    (["--regex", "x", "--schema", "{}"], "give at most one of"),
]


@pytest.mark.parametrize("args,message", REFUSED, ids=[a[1] for a, _ in REFUSED])
def test_bad_input_is_refused_before_the_model_loads(tmp_path, args, message):
    if "GRAMMAR" in args:
        bad = tmp_path / "bad.gbnf"
        bad.write_text('root ::= "a" missing_rule\n', encoding="utf-8")
        args = [str(bad) if a == "GRAMMAR" else a for a in args]
    p, wall, cpu = run_guarded("generate", *args, "--prompt", "hi")
    assert "heavy import" not in p.stderr, p.stderr
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith("corral: error: ") and message in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    assert cpu < REFUSED_CPU_S and wall < REFUSED_WALL_S, f"refused in {wall:.2f} s ({cpu:.2f} s CPU)"


def test_bad_input_file_is_refused_before_the_model_loads(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('"one"\n{"text": "no prompt field"}\n', encoding="utf-8")
    p, *_ = run_guarded("generate", "--regex", "x", "--input", str(prompts))
    assert p.returncode == 2, p.stderr
    assert 'prompts.jsonl:2: expected a "prompt" or "messages" field' in p.stderr, p.stderr
    missing = str(tmp_path / "no" / "o.txt")
    p, *_ = run_guarded("generate", "--regex", "x", "--prompt", "hi", "--output", missing)
    assert p.returncode == 2 and "--output: no such directory" in p.stderr, p.stderr


def test_the_sentinel_fires_once_the_input_is_good():
    # The control: with a valid constraint the command goes on to load the model, and the
    # sentinel stops it there. Without this the cases above could pass with a broken sentinel.
    p, *_ = run_guarded("generate", "--schema", json.dumps({"type": "integer"}), "--prompt", "hi")
    assert p.returncode == 1, p.stderr
    assert "heavy import before the input was checked" in p.stderr


def test_import_corral_is_lazy():
    # `import corral` (which every command pays) defers the engine, numpy and the rest to first
    # use of a name; the names themselves still resolve.
    code = (
        "import sys, corral\n"
        "assert not [m for m in ('numpy', 'corral.engine', 'corral.generation') if m in sys.modules], "
        "sorted(m for m in sys.modules if m.startswith('corral'))\n"
        "from corral import generate, CorralError, compile_regex\n"
        "assert callable(generate) and issubclass(CorralError, Exception) and callable(compile_regex)\n"
        "assert set(corral.__all__) <= set(dir(corral))\n"
        "missing = [n for n in corral.__all__ if getattr(corral, n, None) is None]\n"
        "assert not missing, missing\n"
        "assert corral.compile.spec.ConstraintSpec is corral.ConstraintSpec\n"  # subpackages too
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr


def test_greedy_generation_on_llama_cpp_never_imports_torch():
    # corral's greedy decode works on llama.cpp's numpy logits: a one-line generation does not
    # pay the seconds of importing torch (or transformers).
    pytest.importorskip("llama_cpp")
    p, *_ = run_guarded(
        "generate",
        "--backend",
        "llama.cpp",
        "--regex",
        "ORD-[0-9]{5}",
        "--prompt",
        "An order id:",
        heavy=("torch", "transformers"),
    )
    assert p.returncode == 0, p.stderr
    assert re.fullmatch(r"ORD-[0-9]{5}\n", p.stdout), p.stdout


def test_serve_refuses_a_bad_schema_dir_before_the_model_loads(tmp_path):
    pytest.importorskip("uvicorn")
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    for where, message in ((tmp_path / "missing", "not a directory"), (tmp_path, "bad.json is not JSON")):
        p, *_ = run_guarded("serve", "--schema-dir", str(where))
        assert p.returncode == 2 and message in p.stderr, p.stderr
