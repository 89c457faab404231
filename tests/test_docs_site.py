"""The documentation site builds with ``mkdocs build --strict`` (broken links, unresolved API
references and unknown generated tables fail it), and every code block marked runnable runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS))

import hooks  # noqa: E402

_RUNNABLE = re.compile(r"<!-- runnable -->\n```python\n(.*?)```", re.DOTALL)


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert "compile_json_schema" in api and "OutputValidationError" in api
    tables = (tmp_path / "site" / "reference" / "tables" / "index.html").read_text(encoding="utf-8")
    assert "corral:table" not in tables and "max_dfa_states" in tables and "E101" in tables


PAGES = sorted(DOCS.rglob("*.md"))


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_runnable_blocks_run(page: Path) -> None:
    blocks = _RUNNABLE.findall(page.read_text(encoding="utf-8"))
    namespace: dict[str, object] = {}
    for code in blocks:  # in order, sharing one namespace per page, as a reader would run them
        exec(compile(code, f"{page.name}:runnable", "exec"), namespace)  # noqa: S102


def test_generated_tables_follow_the_code() -> None:
    from corral import DEFAULT_LIMITS
    from corral.linter import RULES

    text = hooks.render("<!-- corral:table limits -->\n<!-- corral:table lint-rules -->")
    for name in DEFAULT_LIMITS:
        assert f"`{name}`" in text
    for code in RULES:
        assert f"`{code}`" in text
    with pytest.raises(KeyError, match="unknown corral table"):
        hooks.render("<!-- corral:table nope -->")
