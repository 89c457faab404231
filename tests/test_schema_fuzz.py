"""Property test: random JSON Schemas either compile or raise a SchemaError naming a pointer, and
every output generated under a compiled schema satisfies it (jsonschema), or violates only a
keyword the report lists as checked after decoding.

``format`` is an assertion in corral (the mask enforces the built-in formats, also under
``not``/``oneOf``/``if``), defined by the regexes of ``corral.grammar.formats``; the oracle
(bench.fuzz.oracles.format_checker) checks those regexes with Python's ``re``, another regex
engine than the one the mask runs on. Plain jsonschema treats ``format`` as an annotation,
under which ``oneOf: [{pattern}, {format}]`` rejects a string the pattern matches even when it
is no date: another semantics, not a violation."""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path
from typing import Any

import jsonschema
from helpers import byte_tokenizer, random_walk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import corral  # noqa: E402
from bench.fuzz import oracles  # noqa: E402
from corral.grammar.json_schema import _NoValue  # noqa: E402

TOK = byte_tokenizer()
EXAMPLES = int(os.environ.get("CORRAL_FUZZ_EXAMPLES", "120"))

scalars = st.one_of(
    st.just({"type": "null"}),
    st.just({"type": "boolean"}),
    st.builds(
        lambda lo, span: {"type": "integer", "minimum": lo, "maximum": lo + span},
        st.integers(-50, 50),
        st.integers(0, 100),
    ),
    st.builds(
        lambda lo, x: {"type": "number", "minimum": lo, "exclusiveMaximum": lo + x},
        st.integers(-5, 5),
        st.sampled_from([0.5, 1, 2.25, 10]),
    ),
    st.builds(
        lambda lo, span: {"type": "string", "minLength": lo, "maxLength": lo + span},
        st.integers(0, 3),
        st.integers(0, 5),
    ),
    st.builds(
        lambda p: {"type": "string", "pattern": p},
        st.sampled_from(["^[a-c]+$", "x", "^[0-9]{2}-", "(ab|cd)$"]),
    ),
    st.builds(
        lambda vs: {"enum": vs},
        st.lists(
            st.one_of(st.integers(-3, 3), st.text("abé", max_size=3), st.booleans(), st.none()),
            min_size=1,
            max_size=4,
        ),
    ),
    st.builds(lambda f: {"type": "string", "format": f}, st.sampled_from(["date", "uuid", "ipv4", "email"])),
    st.just({}),
    st.just({"minimum": 2}),
)


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.builds(
            lambda items, lo, span: {"type": "array", "items": items, "minItems": lo, "maxItems": lo + span},
            children,
            st.integers(0, 2),
            st.integers(0, 3),
        ),
        st.builds(
            lambda props, req, extra: {
                "type": "object",
                "properties": props,
                "required": [k for k in props if req.get(k)],
                **({"additionalProperties": extra} if extra is not None else {}),
            },
            st.dictionaries(st.sampled_from(["a", "b", "c", "é"]), children, max_size=3),
            st.dictionaries(st.sampled_from(["a", "b", "c", "é"]), st.booleans()),
            st.one_of(st.none(), st.booleans(), st.just({"type": "integer"})),
        ),
        st.builds(lambda xs: {"anyOf": xs}, st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda xs: {"allOf": xs}, st.lists(children, min_size=1, max_size=2)),
        st.builds(lambda xs: {"oneOf": xs}, st.lists(children, min_size=1, max_size=2)),
    )


schemas = st.recursive(scalars, _extend, max_leaves=6)
_FORMATS = oracles.format_checker()
# Values of every shape the generator's schemas constrain (for "no value satisfies" claims).
CANDIDATES: list[Any] = [
    *(None, True, False, 0, 1, -1, 2, 3, 7, 50, -50, 0.5, 2.5, -2.25, 100),
    *("", "a", "b", "ab", "abc", "é", "x", "abx", "12-", "cd", "2020-01-01", "1.2.3.4", "a@b.co"),
    "123e4567-e89b-12d3-a456-426614174000",
    *([], [None], [1, 2], ["a"], {}, {"a": 1}, {"a": None}, {"a": "x", "b": 2}),
]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(schemas, st.integers(0, 2**16))
def test_random_schemas_are_sound(schema: dict[str, Any], seed: int) -> None:
    validator = jsonschema.Draft202012Validator(schema, format_checker=_FORMATS)
    try:
        g = corral.compile_json_schema(schema, TOK)
    except corral.SchemaError as e:
        assert e.pointer.startswith("#")
        if isinstance(e, _NoValue):  # a claim that no value satisfies it: none of these may
            valid = [v for v in CANDIDATES if validator.is_valid(v)]
            assert not valid, f"refused as allowing no value, yet {valid[0]!r} is valid: {schema} ({e})"
        return
    rng = random.Random(seed)
    for _ in range(3):
        out, _ = random_walk(g, rng, max_steps=40, eos_weight=0.3)
        value = json.loads(out.decode())
        if not validator.is_valid(value):
            assert g.report.post_checks, f"unsound: {schema} produced {out!r}\n{g.report}"
            try:
                g.validate(out)
            except corral.OutputValidationError:
                continue
            raise AssertionError(f"validate() missed a violation: {schema} {out!r}")
