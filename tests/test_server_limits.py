"""Operator settings apply to every request's constraint on the server: engine limits
(``--limit``) and schema-converter options (``--schema-option``)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

import corral
from corral.compile import ConstraintSpec

pytest.importorskip("starlette")

BYTES = corral.Tokenizer.from_tokens(
    [bytes([b]) for b in range(256)] + [b"<eos>"], special_ids=[256], eos_ids=[256]
)


def _server_with(**config: object) -> object:
    from corral.server import ServerConfig, create_server

    backend = SimpleNamespace(
        tokenizer=BYTES, name="stub", describe=lambda: "stub", context_length=64, chat_template_source=None
    )
    return create_server(backend, ServerConfig(compile_workers=0, **config))  # type: ignore[arg-type]


def test_server_limits_reach_every_compile() -> None:
    from corral.server.errors import APIError

    spec = ConstraintSpec.regex("[a-z]{1,300}", param="regex")
    tight = _server_with(limits={"max_dfa_states": 50})
    with pytest.raises(APIError) as e:
        asyncio.run(tight._constraint(spec))  # type: ignore[attr-defined]
    assert e.value.status == 400 and e.value.code == "constraint_too_complex" and e.value.param == "regex"
    loose = _server_with()
    constraint, source, _ = asyncio.run(loose._constraint(spec))  # type: ignore[attr-defined]
    assert constraint is not None and source == "miss"


def test_limit_flags_are_checked() -> None:
    from corral.cli.serve_cmd import parse_limits

    assert parse_limits(["max_dfa_states=500", "max_compile_ms = 100"]) == {
        "max_dfa_states": 500,
        "max_compile_ms": 100,
    }
    for bad in (["max_dfa_states"], ["max_dfa_states=lots"], ["max_bogus=1"], ["max_dfa_states=0"]):
        with pytest.raises((ValueError, TypeError)):
            parse_limits(bad)


def test_server_schema_options_reach_every_schema() -> None:
    from corral.server.protocol import schema_spec

    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    spec = schema_spec(schema, False, "response_format.json_schema.schema")
    compact = _server_with(schema_options={"whitespace": "compact"})
    c, _, _ = asyncio.run(compact._constraint(spec))  # type: ignore[attr-defined]
    m = c.grammar.matcher()
    assert m.accept_bytes(b'{"a":1}') and m.is_accepting()
    default = _server_with()
    d, _, _ = asyncio.run(default._constraint(spec))  # type: ignore[attr-defined]
    assert not d.grammar.matcher().accept_bytes(b'{"a":1}')  # the default layout is pretty
    m = d.grammar.matcher()
    assert m.accept_bytes(b'{\n  "a": 1\n}') and m.is_accepting()


def test_schema_option_flags_are_checked() -> None:
    from corral.cli.serve_cmd import parse_schema_options

    assert parse_schema_options(["whitespace=flexible", "indent=4"]) == {
        "whitespace": "flexible",
        "indent": 4,
    }
    for bad in (["whitespace"], ["whitespce=flexible"], ["indent=-3"]):
        with pytest.raises((ValueError, TypeError)):
            parse_schema_options(bad)
