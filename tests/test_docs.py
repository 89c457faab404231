"""The examples in the public docstrings run (so the documented API stays true)."""

from __future__ import annotations

import doctest

import corral.engine


def test_engine_docstring_examples() -> None:
    result = doctest.testmod(corral.engine, raise_on_error=False)
    assert result.attempted >= 4
    assert result.failed == 0
