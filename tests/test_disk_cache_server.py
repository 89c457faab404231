"""``corral serve --cache-dir``: a restarted server serves constraints from the directory — its
``/metrics`` shows disk hits and no compiles — with outputs that still match the schema."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from server_helpers import Server, start_server

from corral import models

pytestmark = [pytest.mark.real_tokenizer, pytest.mark.slow]
pytest.importorskip("openai")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

CITY = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 30},
        "population": {"type": "integer", "minimum": 0},
    },
    "required": ["city", "population"],
    "additionalProperties": False,
}
WORD = {"type": "object", "properties": {"word": {"type": "string", "maxLength": 20}}, "required": ["word"]}


def _disk(server: Server) -> dict[str, float]:
    """corral_compile_cache_disk_total by event."""
    out: dict[str, float] = {}
    for line in server.metrics().splitlines():
        m = re.match(r'corral_compile_cache_disk_total\{event="(\w+)"\} (\S+)$', line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def _compiles(server: Server) -> float:
    return server.metric("corral_compile_seconds_count")


def _ask(server: Server) -> tuple[Any, str]:
    """The greedy answer, and the response's ``x-corral-cache`` (where its constraint came from)."""
    raw = server.client.chat.completions.with_raw_response.create(
        model="SmolLM2-135M-Instruct",
        messages=[{"role": "user", "content": "The largest city of Norway as JSON."}],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "city", "schema": CITY, "strict": True},
        },
        max_tokens=40,
        temperature=0,
    )
    r = raw.parse()
    value = json.loads(r.choices[0].message.content)
    jsonschema.validate(value, CITY)
    return value, raw.headers["x-corral-cache"]


def test_a_restarted_server_loads_instead_of_compiling(tmp_path: Path) -> None:
    try:
        models.smollm2_gguf_path()
    except models.ModelNotFoundError as e:  # pragma: no cover - CI installs it
        pytest.skip(str(e))
    cache, schemas = tmp_path / "cache", tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "word.json").write_text(json.dumps(WORD))
    args = ("--cache-dir", str(cache), "--schema-dir", str(schemas), "--cache-max-bytes", "64M")

    first = start_server(tmp_path, *args)
    try:
        answer, source = _ask(first)
        assert source == "miss"  # compiled by this request
        d = _disk(first)
        # the schema dir's schema and the request's: both missed, compiled and were written
        assert (d.get("miss"), d.get("write"), d.get("hit", 0)) == (2, 2, 0), d
        assert _compiles(first) == 2
    finally:
        first.stop()
    assert len(list(cache.glob("*.entry"))) == 2

    second = start_server(tmp_path, *args)
    try:
        # greedy: the same output from the loaded grammar, and the header says it was loaded
        assert _ask(second) == (answer, "disk")
        assert _ask(second) == (answer, "hit")  # now in memory
        d = _disk(second)
        assert (d.get("hit"), d.get("miss", 0), d.get("write", 0), d.get("corrupt", 0)) == (2, 0, 0, 0), d
        assert _compiles(second) == 0  # loaded, not compiled (start-up pre-compile included)
    finally:
        second.stop()


def test_a_bad_cache_size_is_refused_before_the_model_loads() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "corral", "serve", "--cache-dir", "/tmp/x", "--cache-max-bytes", "lots"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert "--cache-max-bytes" in r.stderr and "not a size" in r.stderr
