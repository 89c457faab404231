"""``uniqueItems`` over bounded integers and over numbers, enforced in the mask.

Integers with an upper bound or a negative lower bound too wide to list (``minimum: -150,
maximum: 150``, ``minimum: -20``) have prefixes after which only a few values remain: under
``maximum: 150`` the prefix ``15`` can only become 15 or 150, so with both held it is a dead
end, and unlike a string an integer is a value in the middle of its text (``15`` closes as 15
or goes on). The engine counts the values after every state of the item's automaton of
canonical integers (cpp/item_values.hpp) and refuses the prefixes whose every value the array
holds. Checked here: near misses are accepted exactly when ``jsonschema`` accepts them; the
mask equals the parser's verdict on the whole vocabulary next to dead prefixes (including
tokens that close one item and open the next); random walks on SmolLM2, Llama 3.2 and Gemma 3
never meet a dead end and produce valid arrays; what stays in the report.

Numbers (``{"type": "number"}``, with bounds) are written in plain decimal spellings in a
unique array (every value keeps one) and compared as exact decimals, as the JSON Schema spec
says: ``1.5`` and ``1.50`` are one value. After a prefix a number has one value or infinitely
many (decimals are dense): ``5`` under ``maximum: 5`` can only be 5 (``5.0``, ...), ``-``
under ``minimum: 0`` only 0, so with that value held the prefix is refused. The near misses
here have at most 15 significant digits, where Python's float comparison agrees with exact
decimals.
"""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest
from helpers import accepts_text, checked_walk, mask_matches_accept, unique_entry

import corral

pytestmark = pytest.mark.real_tokenizer


def _array(items: dict[str, Any], **bounds: Any) -> dict[str, Any]:
    return {"type": "array", "items": items, "uniqueItems": True, **bounds}


RANGE = _array({"type": "integer", "minimum": -150, "maximum": 150})
NEGATIVE = _array({"type": "integer", "minimum": -20}, maxItems=40)
# 200 values, all negative: an array holding all of them can only close.
BELOW = _array({"type": "integer", "minimum": -200, "maximum": -1})
NUMBERS = _array({"type": "number"}, maxItems=30)
UNIT = _array({"type": "number", "minimum": 0, "maximum": 5})
# One value only (5, spelled 5, 5.0, ...): the array holds at most one item.
FIVE = _array({"type": "number", "minimum": 5, "maximum": 5})
SCHEMAS = {
    "range": RANGE,
    "negative": NEGATIVE,
    "below": BELOW,
    "numbers": NUMBERS,
    "unit": UNIT,
    "five": FIVE,
}
INSTANCES: dict[str, list[str]] = {
    "range": [
        "[]",
        "[1, 10, 100, 15, 150]",
        "[15, 150, 15]",
        "[150, 150]",
        "[-15, 15, -150, 150]",
        "[-1, -1]",
        "[151]",
        "[0, 1, 0]",
    ],
    "negative": ["[-2, -20, 2, 20]", "[-20, -2, -20]", "[-21]", "[5, 50, 500, 5000, 50]", "[-2, -2]"],
    "below": ["[-1, -10, -100]", "[-100, -10, -100]", "[0]", "[-200, -20, -2]"],
    "numbers": [
        "[1, 1.5, -1.5, 0.25, 100]",
        "[1.5, 1.50]",
        "[1, 1.0]",
        "[0, -0]",
        "[0, -0.0]",
        "[0.1, 0.10, 0.2]",
        "[123456.789, 123456.7891]",
        "[2.5, 25, 0.25, 250.0]",
        "[2.5, 25, 0.25, 25.0]",
    ],
    "unit": ["[5, 4.99, 0, 0.5]", "[5, 5.0]", "[0, -0.000]", "[5.01]", "[-0.5]", "[4.5, 4.50]"],
    "five": ["[5]", "[5.00]", "[5, 5.0]", "[]", "[4]"],
}


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_enforced_exactly_against_jsonschema(name: str, llama32: corral.Tokenizer) -> None:
    schema = SCHEMAS[name]
    g = corral.compile_json_schema(schema, llama32, strict=True)
    assert unique_entry(g).status == "enforced" and not g.report.post_checks, g.report
    validator = jsonschema.Draft202012Validator(schema)
    kinds = set()
    for text in INSTANCES[name]:
        value = json.loads(text)
        want = validator.is_valid(value)
        kinds.add(want)
        for spelled in (text, json.dumps(value, separators=(",", ":"))):
            assert accepts_text(g, llama32, spelled) == want, (name, spelled)
    assert kinds == {True, False}


# (schema, prefix, bytes that must be refused next, bytes that must be accepted next)
DEAD_PREFIXES = [
    # 15 and 150 held: "15" is a dead prefix; "1" may still become 1, 10..14, 16..19, 100..149.
    (RANGE, b"[15, 150, ", [b"15", b"150", b"15,"], [b"1", b"14", b"-15", b"149"]),
    # 15 held, 150 free: "15" may go on (to 150) but not close.
    (RANGE, b"[15, ", [b"15,", b"15]", b"15 "], [b"15", b"150", b"150]"]),
    # 150 held, 15 free: "15" may close, not go on.
    (RANGE, b"[150, ", [b"150", b"150,"], [b"15", b"15,", b"15]"]),
    # A token that closes one item and opens the next in a dead prefix.
    (RANGE, b"[15, 150, 3", [b",15", b", 15", b",150"], [b",1", b", 1", b"0,", b",-15"]),
    (NEGATIVE, b"[-2, -20, ", [b"-2", b"-20"], [b"-", b"-1", b"2", b"20"]),
    (NEGATIVE, b"[-2, -20", [b",-2", b", -2"], [b",-1", b", -1", b", 2"]),
    # 5 held under maximum 5: "5" can only spell 5 again; 0 held: "-" can only spell -0.
    (
        UNIT,
        b"[5, 0, ",
        [b"5", b"5.", b"5.0", b"-", b"-0", b"0,", b"0.0]"],
        [b"4", b"4.9", b"0.", b"0.1", b"1"],
    ),
    (UNIT, b"[5, 0, 4", [b",5", b", 5", b", -"], [b",4", b", 0.5", b".5"]),
    (NUMBERS, b"[1.5, -2, ", [b"1.5,", b"1.50]", b"-2.0,", b"-2 "], [b"1.5", b"1.51", b"-2.5", b"1.", b"-2"]),
    (FIVE, b"[5.0", [b",", b", 5"], [b"]", b"0]"]),
]


@pytest.mark.parametrize("tokenizer", ["llama32", "gemma3"])
@pytest.mark.parametrize("case", range(len(DEAD_PREFIXES)))
def test_dead_prefixes_are_refused_and_the_mask_equals_the_parser(
    case: int, tokenizer: str, request: pytest.FixtureRequest
) -> None:
    tok: corral.Tokenizer = request.getfixturevalue(tokenizer)
    schema, prefix, refused, accepted = DEAD_PREFIXES[case]
    g = corral.compile_json_schema(schema, tok)
    m = g.matcher()
    assert m.accept_bytes(prefix)
    validator = jsonschema.Draft202012Validator(schema)
    for b in refused:
        assert not m.copy().accept_bytes(b), (prefix, b)
    for b in accepted:
        c = m.copy()
        assert c.accept_bytes(b), (prefix, b)
        # ... and it really leads to a valid array.
        rest = c.shortest_completion()
        assert validator.is_valid(json.loads(prefix + b + rest)), (prefix, b, rest)
    mask_matches_accept(m, tok)  # the whole vocabulary


def test_an_exhausted_range_closes_the_array(llama32: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(BELOW, llama32)
    assert unique_entry(g).capped_at is None  # (200 values: the array closes when they are written)
    m = g.matcher()
    assert m.accept_bytes(("[" + ", ".join(str(-k) for k in range(1, 201))).encode())
    assert not m.copy().accept_bytes(b",") and m.accept_bytes(b"]")
    with pytest.raises(corral.SchemaError, match="needs more distinct items"):
        corral.compile_json_schema({**BELOW, "minItems": 201}, llama32)


def test_what_stays_in_the_report(llama32: corral.Tokenizer) -> None:
    for items in (
        {"type": "number", "multipleOf": 2},  # (several rules)
        {"type": ["number", "null"]},  # (a branch of several kinds)
        {"type": "integer", "multipleOf": 3, "minimum": 0, "maximum": 1000},
        {"type": "integer", "maximum": 500, "not": {"const": 3}},  # other keywords
    ):
        g = corral.compile_json_schema(_array(items), llama32)
        assert [e.keyword for e in g.report.checked_after()] == ["uniqueItems"], items
    for items in (
        {"type": "integer", "maximum": 5},
        {"type": "integer", "minimum": -1},
        {"type": "integer", "minimum": 1, "exclusiveMaximum": 1e9},
        {"type": ["integer"], "minimum": -1000, "maximum": 1000},
        {"type": "integer", "minimum": -1e300, "maximum": 1e300},  # (no C size overflows)
        {"type": "number"},
        {"type": "number", "exclusiveMinimum": 0, "maximum": 1e6},
        {"type": "number", "minimum": -0.5, "exclusiveMaximum": 0.5},
    ):
        g = corral.compile_json_schema(_array(items), llama32, strict=True)
        assert unique_entry(g).status == "enforced" and unique_entry(g).capped_at == 256, items


def test_numbers_are_written_without_exponents_in_a_unique_array(llama32: corral.Tokenizer) -> None:
    # (every value keeps its plain decimal spelling; exponents stay allowed elsewhere)
    schema = {"type": "object", "properties": {"a": NUMBERS, "b": {"type": "number"}}}
    g = corral.compile_json_schema(schema, llama32)
    m = g.matcher()
    assert m.accept_bytes(b'{"a": [1.5')
    assert not m.copy().accept_bytes(b"e3") and m.copy().accept_bytes(b"], ")
    m = g.matcher()
    assert m.accept_bytes(b'{"b": 1.5e3')


@pytest.mark.slow
@pytest.mark.parametrize("tokenizer", ["smollm2", "llama32", "gemma3"])
@pytest.mark.parametrize("name", ["range", "negative", "unit"])
def test_random_walks_never_meet_a_dead_end(
    name: str, tokenizer: str, request: pytest.FixtureRequest
) -> None:
    # Short digit tokens, so that values repeat and prefixes with few values left are met; at
    # every step the mask equals the parser on the short tokens and a sample of the others.
    tok: corral.Tokenizer = request.getfixturevalue(tokenizer)
    schema = SCHEMAS[name]
    g = corral.compile_json_schema(schema, tok)
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(f"integers/{tokenizer}/{name}")
    short = [i for i in range(tok.vocab_size) if len(tok.token_bytes[i]) <= 2 and i not in tok.eos_ids]
    sample = short + list(range(0, tok.vocab_size, max(1, tok.vocab_size // 300)))

    def choose(ids: list[int]) -> int | None:
        pick = [i for i in ids if len(tok.token_bytes[i]) <= 2]
        pick = [i for i in pick if b"]" not in tok.token_bytes[i]] or pick
        return rng.choice(pick) if pick else None

    lengths: list[int] = []
    for _ in range(3):
        text = checked_walk(g, tok, 60, sample, choose)
        value = json.loads(text)
        assert validator.is_valid(value), text
        lengths.append(len(value))
    assert max(lengths) >= 4, lengths  # (the walks did write several items)
