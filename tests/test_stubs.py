"""The committed type stub of the native module matches what nanobind generates from it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import corral


def test_core_stub_is_current(tmp_path: Path) -> None:
    pytest.importorskip("nanobind")
    out = tmp_path / "_core.pyi"
    subprocess.run(
        [sys.executable, "-m", "nanobind.stubgen", "-m", "corral._core", "-o", str(out)],
        check=True,
        capture_output=True,
    )
    committed = Path(corral.__file__).with_name("_core.pyi")
    assert out.read_text() == committed.read_text(), (
        "src/corral/_core.pyi is stale: regenerate with "
        "python -m nanobind.stubgen -m corral._core -o src/corral/_core.pyi"
    )
