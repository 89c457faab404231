"""The examples in the public docstrings run (so the documented API stays true)."""

from __future__ import annotations

import doctest

import pytest

import corral.engine
import corral.schema


@pytest.mark.parametrize("module", [corral.engine, corral.schema], ids=lambda m: m.__name__)
def test_docstring_examples(module: object) -> None:
    result = doctest.testmod(module, raise_on_error=False)  # type: ignore[arg-type]
    assert result.attempted >= 4
    assert result.failed == 0
