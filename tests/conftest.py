"""Fixtures for the real vocabularies that ship as PyPI packages (installed by .ci/run)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

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
