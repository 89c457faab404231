"""The fuzz harness (bench/fuzz) at a small budget, so CI keeps it working; and its oracles can
fail: a wrong reference or a wrong sample is reported."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import corral  # noqa: E402
from bench.fuzz import gen, oracles  # noqa: E402
from bench.fuzz.run import KINDS, run  # noqa: E402

BUDGET = float(os.environ.get("CORRAL_FUZZ_SECONDS", "40"))


def test_a_short_fuzz_run_finds_nothing(tmp_path: Path) -> None:
    report = run(BUDGET, seed=int(os.environ.get("CORRAL_FUZZ_SEED", "0")), out=tmp_path)
    assert report.found == [], report.summary()
    assert all(report.cases[k] > 0 for k in KINDS), report.summary()
    assert list(tmp_path.iterdir()) == []


def test_the_oracles_catch_a_wrong_mask() -> None:
    tok = oracles.small_vocab()
    g = corral.compile_regex("(ab|c)+", tok)
    rng = random.Random(0)
    # A reference that rejects what the grammar allows: the walk oracle reports it.
    assert "rejected by the reference" in (oracles.check_walks(g, tok, lambda s: False, rng) or "")
    # Samples outside the language: the sample oracle reports the forbidden token.
    assert "forbidden" in (oracles.check_samples(g, tok, ["abx"], rng) or "")
    assert oracles.check_samples(g, tok, ["abc", "cab"], rng) is None
    assert oracles.check_operations(g, tok, rng) is None


def test_generators_render_what_they_sample() -> None:
    import re

    import lark

    rng = random.Random(3)
    for _ in range(50):
        node = gen.random_regex(rng)
        pattern = gen.render_regex(node)
        for _ in range(3):
            assert re.fullmatch(pattern, gen.sample_regex(node, rng)), pattern
        cfg = gen.random_grammar(rng)
        parser = lark.Lark(gen.render_lark(cfg), parser="earley", lexer="dynamic_complete")
        parser.parse(gen.sample_grammar(cfg, rng))


@pytest.mark.parametrize("seed", range(5))
def test_mutated_schemas_stay_json(seed: int) -> None:
    import json

    base = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 1}}, "required": ["a"]}
    out = gen.mutate_schema(base, random.Random(seed))
    json.dumps(out)
    assert base["required"] == ["a"]  # the original is not modified
