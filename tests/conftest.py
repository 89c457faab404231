"""Fixtures for the real vocabularies that ship as PyPI packages (installed by .ci/run)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import corral
import corral.backends
from corral import models


def _load(
    locate: Callable[[], Path], module: str, load: Callable[[Path], corral.Tokenizer]
) -> corral.Tokenizer:
    """Load a packaged vocabulary; skip only when its package (or reader) is not installed."""
    try:
        path = locate()
    except models.ModelNotFoundError as e:  # pragma: no cover - CI installs it
        pytest.skip(str(e))
    pytest.importorskip(module)
    return load(path)


@pytest.fixture(scope="session")
def smollm2() -> corral.Tokenizer:
    return _load(models.smollm2_gguf_path, "gguf", corral.Tokenizer.from_gguf)


@pytest.fixture(scope="session")
def llama32() -> corral.Tokenizer:
    return _load(models.llama32_tokenizer_path, "tokenizers", corral.Tokenizer.from_file)


@pytest.fixture(scope="session")
def gemma3() -> corral.Tokenizer:
    return _load(models.gemma3_gguf_path, "gguf", corral.Tokenizer.from_gguf)


@pytest.fixture(scope="session")
def smol_model() -> corral.backends.Backend:
    """SmolLM2-135M-Instruct under transformers (converted once into the corral cache)."""
    try:
        models.smollm2_gguf_path()
    except models.ModelNotFoundError as e:  # pragma: no cover - CI installs it
        pytest.skip(str(e))
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    return corral.load_model(backend="transformers", verbose=False)


# ---------------------------------------------------------------------- vLLM (the vLLM CI step)
# Session-scoped so every vLLM test module shares one offline ``LLM`` engine: a second engine in
# one process would double the start-up (about a minute on CPU) and the KV cache. Without vLLM
# installed, every test asking for them is skipped (the main test run).


@pytest.fixture(scope="session")
def vllm_mod() -> Any:
    return pytest.importorskip("vllm")


@pytest.fixture(scope="session")
def model_dir(vllm_mod: Any) -> str:
    """SmolLM2-135M-Instruct converted from its GGUF to a Hugging Face directory vLLM loads."""
    from corral.backends.loading import _converted_gguf
    from corral.models import smollm2_gguf_path

    try:
        return str(_converted_gguf(smollm2_gguf_path(), False))
    except Exception as e:  # the model package is not installed
        pytest.skip(f"SmolLM2 is not available: {e}")


@pytest.fixture(scope="session")
def llm(model_dir: str) -> Any:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM

    from corral.vllm import CorralLogitsProcessor

    # float32: the same precision as corral's transformers backend, so greedy outputs compare.
    return LLM(
        model=model_dir,
        enforce_eager=True,
        max_model_len=2048,
        dtype="float32",
        logits_processors=[CorralLogitsProcessor],
        seed=0,
    )
