"""The converter's memos answer as the work they save would, and stay bounded.

Process-wide: the number-literal terminals (literals._number_literal_memo), the number-range
regexes (numeric._range_regex_of), the complement of a list of names (patterns._not_in_regex_of).
Per conversion: the patterns check_regex accepted.
"""

from __future__ import annotations

import itertools
import random
from decimal import Decimal

import pytest

from corral.errors import CompileError, UnsupportedSchemaError
from corral.grammar import numbers
from corral.grammar.json_schema import SchemaOptions, schema_to_grammar
from corral.grammar.json_schema.literals import _number_literal, _number_literal_memo
from corral.grammar.json_schema.numeric import _range_regex, _range_regex_of
from corral.grammar.json_schema.patterns import _not_in_regex_of

NUMBERS = [0, 1, -1, 7, 2.0, -0.0, 1.5, 0.1, -2.25, 1e-7, 1.7976931348623157e308, 10**20, -(10**30) + 7]


@pytest.mark.parametrize("integer_only", [False, True])
def test_number_literal_memo_equals_a_cold_call(integer_only: bool) -> None:
    _number_literal_memo.cache_clear()
    for v in NUMBERS:
        cold = _number_literal(str(v), integer_only)
        assert _number_literal_memo(str(v), integer_only) == cold
        assert _number_literal_memo(str(v), integer_only) == cold  # (the memoised answer)
    # 1 and 1.0 are one value but two spellings of a bound: never one entry.
    assert _number_literal_memo("1", integer_only) == _number_literal("1", integer_only)
    assert _number_literal_memo("1.0", integer_only) == _number_literal("1.0", integer_only)


def test_number_literal_memo_is_bounded_and_skips_long_numbers() -> None:
    assert _number_literal_memo.cache_info().maxsize == 4096
    _number_literal_memo.cache_clear()
    text, _ = schema_to_grammar({"enum": [10**60, 3, 3.0]})
    # 3 and 3.0 are two entries; the 61-digit number is converted without being kept.
    assert _number_literal_memo.cache_info().currsize == 2
    assert _number_literal(str(10**60), False) in text


BOUNDS = [None, Decimal("0"), Decimal("0.0"), Decimal("-0"), Decimal("1"), Decimal("1.0"), Decimal("-2.5")]


def test_range_regex_memo_equals_a_cold_call() -> None:
    _range_regex_of.cache_clear()
    for lo, hi in itertools.product(BOUNDS, BOUNDS):
        for lo_x, hi_x, integer, exp in itertools.product([False, True], repeat=4):
            args = {"exclusive_minimum": lo_x, "exclusive_maximum": hi_x, "integer": integer}
            try:
                cold = numbers.number_regex(lo, hi, **args, allow_exponent=exp)
            except ValueError:
                with pytest.raises(ValueError):
                    _range_regex(lo, hi, lo_x, hi_x, integer, exp)
                continue
            assert _range_regex(lo, hi, lo_x, hi_x, integer, exp) == cold
            assert _range_regex(lo, hi, lo_x, hi_x, integer, exp) == cold  # (the memoised answer)
    info = _range_regex_of.cache_info()
    assert info.maxsize == 4096 and info.hits > 0
    _range_regex_of.cache_clear()
    huge = Decimal(10**100)
    cold = numbers.number_regex(huge, None, integer=True)
    assert _range_regex(huge, None, False, False, True, True) == cold
    assert _range_regex_of.cache_info().currsize == 0  # (long bounds are not kept)


def test_check_regex_runs_once_per_distinct_pattern() -> None:
    seen: list[str] = []
    shared = {"type": "string", "pattern": "^[a-f0-9]{24}$"}
    schema = {
        "type": "object",
        "properties": {"a": shared, "b": dict(shared), "c": {"type": "string", "pattern": "^x+$"}},
        "$defs": {"d": dict(shared)},
    }
    schema_to_grammar(schema, check_regex=seen.append)
    assert sorted(seen) == sorted(set(seen)) and len(seen) == 2


def test_a_refused_pattern_is_refused_wherever_it_is_used() -> None:
    calls: list[str] = []

    def refuse(rx: str) -> None:
        calls.append(rx)
        raise CompileError("lookaround is not supported")

    bad = {"type": "string", "pattern": "a(?=b)"}
    schema = {"type": "object", "properties": {"a": bad, "b": dict(bad)}, "required": ["a", "b"]}
    with pytest.raises(UnsupportedSchemaError):
        schema_to_grammar(schema, check_regex=refuse)
    assert calls  # never remembered as accepted


def test_names_complement_memo_equals_a_cold_call() -> None:
    rng = random.Random(3)
    for _ in range(300):
        lengths = [rng.randint(0, 5) for _ in range(rng.randint(0, 6))]
        names = tuple("".join(rng.choice("ab.\\]^-é/") for _ in range(n)) for n in lengths)
        cold = _not_in_regex_of.__wrapped__(names)
        assert _not_in_regex_of(names) == cold


def test_memos_leave_the_grammar_unchanged_across_options() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"enum": [1, 2.5, 3]}, "s": {"type": "string", "pattern": "^[a-z]+$"}},
    }
    for opts in (SchemaOptions(), SchemaOptions(extra_properties="spec", escapes="canonical")):
        _number_literal_memo.cache_clear()
        _not_in_regex_of.cache_clear()
        cold, _ = schema_to_grammar(schema, opts)
        warm, _ = schema_to_grammar(schema, opts)
        assert warm == cold
