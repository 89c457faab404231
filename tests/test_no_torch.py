"""The edge profile: with only the llama.cpp backend installed (no torch, no transformers),
``corral generate`` and ``corral classify`` run on the bundled model, sampling and masking in
numpy. torch is hidden from a subprocess (``sys.modules[name] = None`` makes ``import name``
fail as in an install without it); the numpy sampler is checked against its definition."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from corral import models
from corral.runtime.sampling import SamplingParams, make_generator, sample

HIDE = "import sys\nfor m in ('torch', 'transformers'):\n    sys.modules[m] = None\n"
RUN_CLI = HIDE + "from corral.cli import main\nsys.exit(main(sys.argv[1:]))\n"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RUN_CLI, *args], capture_output=True, text=True, timeout=600, check=False
    )


@pytest.fixture(scope="module")
def llama_ready() -> None:
    pytest.importorskip("llama_cpp")
    try:
        models.smollm2_gguf_path()
    except models.ModelNotFoundError as e:  # pragma: no cover - CI installs it
        pytest.skip(str(e))


def test_generate_and_classify_without_torch(llama_ready: None) -> None:
    schema = {
        "type": "object",
        "properties": {"colour": {"enum": ["red", "green", "blue"]}, "count": {"type": "integer"}},
        "required": ["colour", "count"],
    }
    common = ("--backend", "llama.cpp", "--max-new-tokens", "40")
    greedy = _cli(
        "generate", *common, "--schema", json.dumps(schema), "--prompt", "Three red apples as JSON."
    )
    assert greedy.returncode == 0, greedy.stderr[-2000:]
    value = json.loads(greedy.stdout)
    assert value["colour"] in {"red", "green", "blue"} and isinstance(value["count"], int)
    assert "torch" not in greedy.stderr

    # Seeded sampling (numpy generator): valid, and the same seed gives the same text.
    sampled = [
        _cli("generate", *common, "--regex", "(red|green|blue) [a-z]{2,8}", "--temperature", "1.0",
             "--top-p", "0.9", "--seed", "7", "--prompt", "Name a colour and a fruit.")
        for _ in range(2)
    ]  # fmt: skip
    for r in sampled:
        assert r.returncode == 0, r.stderr[-2000:]
    assert re.fullmatch(r"(red|green|blue) [a-z]{2,8}", sampled[0].stdout.strip())
    assert sampled[0].stdout == sampled[1].stdout

    cls = _cli(
        "classify", "--backend", "llama.cpp", "--labels", "billing,bug", "--text", "I was charged twice"
    )
    assert cls.returncode == 0, cls.stderr[-2000:]
    row = json.loads(cls.stdout)
    assert row["label"] in {"billing", "bug"}
    assert sum(row["probabilities"].values()) == pytest.approx(1.0)


def test_transformers_backend_without_torch_is_a_clear_error(llama_ready: None) -> None:
    r = _cli("generate", "--backend", "transformers", "--regex", "a", "--prompt", "x")
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert "torch" in r.stderr or "transformers" in r.stderr


def test_numpy_sampler_follows_its_transforms() -> None:
    logits = np.log(np.array([[0.5, 0.3, 0.15, 0.05, 0.0]], dtype=np.float32) + 1e-30)
    logits[0, 4] = -np.inf  # masked
    rng = np.random.default_rng(0)
    draws = [sample(logits, SamplingParams(temperature=1.0), rng)[0] for _ in range(4000)]
    freq = np.bincount(draws, minlength=5) / len(draws)
    assert freq[4] == 0.0  # a masked token is never drawn
    assert np.allclose(freq[:4], [0.5, 0.3, 0.15, 0.05], atol=0.03)
    top_k = {sample(logits, SamplingParams(temperature=1.0, top_k=2), rng)[0] for _ in range(300)}
    assert top_k == {0, 1}
    # top_p=0.7: tokens 0 and 1 (the mass before token 2 is 0.8 >= 0.7).
    top_p = {sample(logits, SamplingParams(temperature=1.0, top_p=0.7), rng)[0] for _ in range(300)}
    assert top_p == {0, 1}
    hot = [sample(logits, SamplingParams(temperature=0.05), rng)[0] for _ in range(200)]
    assert set(hot) == {0}  # a low temperature is nearly greedy
    assert sample(logits, SamplingParams(), None) == [0]
    # Seeded generators repeat themselves.
    p = SamplingParams(temperature=1.0, seed=3)
    a = [sample(logits, p, g)[0] for g in [np.random.default_rng(3)] for _ in range(50)]
    b = [sample(logits, p, g)[0] for g in [np.random.default_rng(3)] for _ in range(50)]
    assert a == b


def test_make_generator_without_torch_is_numpy() -> None:
    code = HIDE + (
        "from corral.runtime.sampling import SamplingParams, make_generator\n"
        "g = make_generator(SamplingParams(temperature=1.0, seed=5))\n"
        "print(type(g).__module__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip().startswith("numpy")
    assert type(make_generator(SamplingParams(seed=1))).__module__.startswith("torch")
