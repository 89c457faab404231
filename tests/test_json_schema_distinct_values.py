"""``uniqueItems`` on arrays without ``maxItems`` and on integers, enforced in the mask.

A free-string or integer array whose ``maxItems`` is missing (or over ``max_unique_items``) is a
distinct group capped at ``max_unique_items`` items (grammar/json_schema/unique_items.py): the
report says so, the mask closes the array at the cap, and ``max_unique_items=0`` keeps the
keyword checked after decoding. Integer items (no upper bound, lower bounds at or above 0) are
compared by value: near misses are accepted exactly when ``jsonschema`` accepts them, on SmolLM2
and Llama 3.2 tokens (numbers split across tokens); the mask equals the parser's verdict per token
next to duplicates (every token holding a digit, plus a sample); random walks produce valid
arrays without dead ends. The byte-pair refinement of the mask correction (cpp/distinct.cpp) is
checked against a terminal that can leave its accepting states (``a|abc``), where it must fall
back to replaying every close.
"""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest
from helpers import accepts_text, mask_matches_accept, random_walk, unique_entry
from test_json_schema_distinct import INSTANCES

import corral

pytestmark = pytest.mark.real_tokenizer

STRINGS = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
INTEGERS = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
# Integer near misses (canonical spellings: corral writes no 1.0 or -0 for integers).
INT_INSTANCES = [
    [],
    [7],
    [1, 2],
    [1, 1],
    [10, 1, 10],
    [0, 0],
    [0, 10, 100],
    [-5, 5, -5],
    [-5, 5],
    [123, 12, 1, 1234],
    [1234, 12, 1234],
    [12345678901234567890, 12345678901234567891],
    [12345678901234567890, 12345678901234567890],
]


def _digit_tokens(tok: corral.Tokenizer) -> list[int]:
    return [i for i in range(tok.vocab_size) if any(48 <= b <= 57 for b in tok.token_bytes[i])]


def test_string_arrays_without_max_items_are_enforced_up_to_the_cap(llama32: corral.Tokenizer) -> None:
    for schema in (STRINGS, {**STRINGS, "minItems": 1}, {**STRINGS, "maxItems": 1000}):
        g = corral.compile_json_schema(schema, llama32, strict=True)
        assert not g.report.post_checks, schema
        assert unique_entry(g).status == "enforced" and "capped at 256 items" in unique_entry(g).detail
        validator = jsonschema.Draft202012Validator(schema)
        kinds = set()
        for text in INSTANCES:
            value = json.loads(text)
            want = validator.is_valid(value)
            kinds.add(want)
            for spelled in (text, json.dumps(value), json.dumps(value, ensure_ascii=False)):
                assert accepts_text(g, llama32, spelled) == want, (schema, spelled)
        assert kinds == {True, False}
    # With a maxItems inside the cap the array is exact (no cap in the report).
    g = corral.compile_json_schema({**STRINGS, "maxItems": 256}, llama32)
    assert unique_entry(g).status == "enforced" and "capped" not in unique_entry(g).detail


def test_the_cap_closes_the_array(llama32: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(STRINGS, llama32, max_unique_items=3)
    assert "capped at 3 items" in unique_entry(g).detail
    assert accepts_text(g, llama32, '["a", "b", "c"]')
    assert not accepts_text(g, llama32, '["a", "b", "c", "d"]')
    m = g.matcher()
    assert m.accept_bytes(b'["a", "b", "c"')
    mask_matches_accept(
        m, llama32, sample=[i for i in range(llama32.vocab_size) if b"," in llama32.token_bytes[i]]
    )
    assert not m.copy().accept_bytes(b",") and m.copy().accept_bytes(b"]")
    # The default cap: 256 distinct items, not 257.
    g = corral.compile_json_schema(STRINGS, llama32)
    items = [f"w{i}" for i in range(257)]
    assert accepts_text(g, llama32, json.dumps(items[:256]))
    assert not accepts_text(g, llama32, json.dumps(items))


def test_without_the_cap_the_keyword_stays_in_the_report(llama32: corral.Tokenizer) -> None:
    for schema, options in (
        (STRINGS, {"max_unique_items": 0}),
        (INTEGERS, {"max_unique_items": 0}),
        ({**STRINGS, "minItems": 4}, {"max_unique_items": 3}),  # minItems over the cap
    ):
        g = corral.compile_json_schema(schema, llama32, **options)
        assert [e.keyword for e in g.report.checked_after()] == ["uniqueItems"], (schema, options)
        with pytest.raises(corral.UnsupportedSchemaError):
            corral.compile_json_schema(schema, llama32, strict=True, **options)
    with pytest.raises(ValueError, match="max_unique_items"):
        corral.compile_json_schema(STRINGS, llama32, max_unique_items=4097)


@pytest.mark.parametrize("tokenizer", ["smollm2", "llama32"])
@pytest.mark.parametrize(
    "items",
    [{"type": "integer"}, {"type": "integer", "minimum": 0}, {"type": "integer", "exclusiveMinimum": 3}],
)
def test_integers_enforced_exactly_against_jsonschema(
    items: dict[str, Any], tokenizer: str, request: pytest.FixtureRequest
) -> None:
    tok: corral.Tokenizer = request.getfixturevalue(tokenizer)
    for bound in ({}, {"maxItems": 5}, {"minItems": 2}):
        schema = {**INTEGERS, "items": items, **bound}
        g = corral.compile_json_schema(schema, tok, strict=True)
        assert unique_entry(g).status == "enforced" and "integers" in unique_entry(g).detail
        validator = jsonschema.Draft202012Validator(schema)
        kinds = set()
        for value in INT_INSTANCES:
            want = validator.is_valid(value)
            kinds.add(want)
            for spelled in (json.dumps(value), json.dumps(value, separators=(",", ":"))):
                assert accepts_text(g, tok, spelled) == want, (schema, spelled)
        assert kinds == {True, False}


@pytest.mark.parametrize("tokenizer", ["smollm2", "llama32"])
@pytest.mark.parametrize(
    "prefix", [b"[1, ", b"[12, 1", b"[0, ", b"[10, 1", b"[5,", b"[123,12", b"[7, 70, 7", b"[", b"[3"]
)
def test_integer_mask_equals_the_parser_next_to_duplicates(
    prefix: bytes, tokenizer: str, request: pytest.FixtureRequest
) -> None:
    tok: corral.Tokenizer = request.getfixturevalue(tokenizer)
    g = corral.compile_json_schema(INTEGERS, tok)
    m = g.matcher()
    assert m.accept_bytes(prefix)
    rng = random.Random(prefix)
    mask_matches_accept(m, tok, sample=_digit_tokens(tok) + rng.sample(range(tok.width), 600))


def test_integer_duplicates_are_refused_where_they_close(llama32: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(INTEGERS, llama32)
    m = g.matcher()
    assert m.accept_bytes(b"[15, 0, 1")
    assert m.copy().accept_bytes(b"5") and not m.copy().accept_bytes(b"5,")  # "15..." may go on
    assert m.copy().accept_bytes(b"50]") and not m.copy().accept_bytes(b"5]")
    assert not m.copy().accept_bytes(b", 0")  # 0 cannot go on: refused at once
    assert m.accept_bytes(b"5")
    assert not m.copy().accept_bytes(b",") and m.copy().accept_bytes(b"1,")


def test_integer_completions_stay_distinct(llama32: corral.Tokenizer) -> None:
    schema = {**INTEGERS, "minItems": 4}
    g = corral.compile_json_schema(schema, llama32)
    validator = jsonschema.Draft202012Validator(schema)
    for prefix in (b"[", b"[0", b"[0, 1, ", b"[1, 2, 3", b"[10, 1"):
        m = g.matcher()
        assert m.accept_bytes(prefix)
        rest = m.shortest_completion()
        assert validator.is_valid(json.loads(prefix + rest)), (prefix, rest)
        assert m.accept_bytes(rest) and m.is_accepting()


@pytest.mark.slow
@pytest.mark.parametrize("tokenizer", ["smollm2", "llama32"])
def test_integer_random_walks_stay_distinct_and_exact(tokenizer: str, request: pytest.FixtureRequest) -> None:
    tok: corral.Tokenizer = request.getfixturevalue(tokenizer)
    schema = {**INTEGERS, "minItems": 2}
    g = corral.compile_json_schema(schema, tok)
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(f"distinct ints/{tokenizer}")
    digits = _digit_tokens(tok)
    for _ in range(6):
        out, _ = random_walk(g, rng, max_steps=30, eos_weight=0.2)
        assert validator.is_valid(json.loads(out.decode("utf-8"))), out
    # Short tokens (one digit, a separator), so duplicates are often one token away.
    m = g.matcher()
    mask = corral.allocate_bitmask(1, tok)
    short = {i for i in range(tok.vocab_size) if tok.token_bytes[i] in (b"1", b"2", b",", b", ", b"0")}
    for _ in range(16):
        mask_matches_accept(m, tok, sample=digits + rng.sample(range(tok.width), 200))
        m.fill_next_token_bitmask(mask, 0)
        ids = [i for i in corral.allowed_tokens(mask[0], tok) if i not in tok.eos_ids]
        if not ids:
            break
        assert m.accept_token(rng.choice([i for i in ids if i in short] or ids))


def test_other_integer_items_stay_in_the_report(llama32: corral.Tokenizer) -> None:
    # (integers under a maximum or above a negative minimum, where "1" can only become 1 or
    # 10..19, are counted by the engine: test_json_schema_distinct_numbers.py)
    for items in (
        {"type": "integer", "multipleOf": 2},
        {"type": ["number", "null"]},  # (numbers alone: test_json_schema_distinct_numbers.py)
    ):
        g = corral.compile_json_schema({**INTEGERS, "items": items}, llama32)
        assert [e.keyword for e in g.report.checked_after()] == ["uniqueItems"], items


def test_the_correction_replays_every_close_of_a_terminal_that_can_leave_acceptance(
    llama32: corral.Tokenizer,
) -> None:
    # "a" may go on to "ab" (not a value): after "[ab" (an "a" and the separator, or "ab..."),
    # the token "aba" reads as a repeated "a" (refused) going on to "ab", then "a" (no value); no
    # byte pair in it is a close followed by a byte that cannot go on, and its last byte may go
    # on, so the pairs alone would let the mask allow it.
    g = corral.compile_grammar(
        'root ::= "[" items "]"\nitems ::= %distinct{1,6}("b" ; item)\nitem ::= /a|abc/\n', llama32
    )
    m = g.matcher()
    assert m.accept_bytes(b"[ab")
    assert not m.copy().accept_bytes(b"aba") and m.copy().accept_bytes(b"abc")
    abc = [
        i
        for i in range(llama32.vocab_size)
        if llama32.token_bytes[i] and set(llama32.token_bytes[i]) <= set(b"abc]")
    ]
    assert any(llama32.token_bytes[i] == b"aba" for i in abc)
    mask_matches_accept(m, llama32, sample=abc)


@pytest.mark.parametrize("kind", ["strings", "integers"])
def test_long_arrays_stay_exact_past_the_value_index(kind: str, llama32: corral.Tokenizer) -> None:
    # From 32 held values the parser indexes the open array's values (cpp/distinct.cpp): the
    # verdicts, the mask and rollback must not change.
    schema = STRINGS if kind == "strings" else INTEGERS
    item = (lambda i: f'"w{i}"') if kind == "strings" else (lambda i: str(7 * i + 3))
    g = corral.compile_json_schema(schema, llama32)
    m = g.matcher()
    for t in llama32.encode("[" + ", ".join(item(i) for i in range(34))):
        assert m.accept_token(t)
    at_34 = m.num_steps
    for t in llama32.encode("".join(", " + item(i) for i in range(34, 40))):
        assert m.accept_token(t)
    for i in (0, 5, 31, 32, 39):
        assert not m.copy().accept_bytes(f", {item(i)}]".encode()), i
    assert m.copy().accept_bytes(f", {item(40)}]".encode())
    near = b', "w3' if kind == "strings" else b", 1"  # "w3" and 10 are held; "w30", 17, 1... too
    c = m.copy()
    assert c.accept_bytes(near)
    sample = (
        [i for i in range(llama32.vocab_size) if b'"' in llama32.token_bytes[i]]
        if kind == "strings"
        else _digit_tokens(llama32)
    )
    mask_matches_accept(c, llama32, sample=sample)
    # Back to 34 items: the six dropped values may be written again, the others not.
    m.rollback(m.num_steps - at_34)
    assert m.copy().accept_bytes(f", {item(36)}]".encode())
    assert not m.copy().accept_bytes(f", {item(33)}]".encode())


PATTERNED = {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+"}, "uniqueItems": True}


def test_open_ended_probe() -> None:
    from corral import _native

    for expression, want in (
        ("/(?s:.)*/j", 1),
        ("/[a-z]+/j", 1),
        ("/x[0-9]{2}(y+)?/j", 1),  # "x12" may still become "x12y", "x12yy", ...
        ("/a(?:#b*)?/j", 1),
        ("/[ab]/j", 0),  # finite
        ("/ab|a+/j", 0),  # "ab" is complete and can go nowhere
        ("/a(?:b|c)*d?/j", 0),  # "ad" likewise
        ("/(?:[a-z]+)\\n?/j", 0),  # "abc\n": Python's $ before a final newline
        ("/[a-z]+/j & /(?s:.){0,10}/j", 0),  # bounded length
        ('"a" "b"', 0),  # two terminals: not one item automaton
    ):
        assert _native.probe_open_ended(expression, 6000, {}) == want, expression


def test_open_ended_pattern_items_are_enforced(llama32: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(PATTERNED, llama32, strict=True)
    assert unique_entry(g).status == "enforced" and "infinitely many continuations" in unique_entry(g).detail
    validator = jsonschema.Draft202012Validator(PATTERNED)
    kinds = set()
    for text in (
        "[]",
        '["ab"]',
        '["ab", "ab"]',
        '["a", "\\u0061"]',
        '["ab", "a", "abc"]',
        '["ab", "a", "ab"]',
        '["Ab"]',
        '["a1", "a1"]',
        '["a1", "a2"]',
        '["x-y", "x\\u002dy"]',
    ):
        value = json.loads(text)
        want = validator.is_valid(value)
        kinds.add(want)
        for spelled in (text, json.dumps(value), json.dumps(value, separators=(",", ":"))):
            assert accepts_text(g, llama32, spelled) == want, spelled
    assert kinds == {True, False}
    for prefix in (b'["ab", "a', b'["ab", "', b'["a1", "a'):
        m = g.matcher()
        assert m.accept_bytes(prefix)
        rng = random.Random(prefix)
        mask_matches_accept(
            m,
            llama32,
            sample=[i for i in range(llama32.vocab_size) if b'"' in llama32.token_bytes[i]]
            + rng.sample(range(llama32.width), 400),
        )


def test_closed_patterns_and_formats_are_counted_or_stay_in_the_report(llama32: corral.Tokenizer) -> None:
    # Closed patterns and fixed-shape formats are counted (test_json_schema_distinct_bounded.py);
    # open-ended formats split into several terminals are exact (test_json_schema_distinct_formats.py),
    # finite ones split so stay in the report.
    for items in (
        {"type": "string", "pattern": "^[ab]$"},
        {"type": "string", "pattern": "^[a-z]+$"},  # "abc\n" ends the item
        {"type": "string", "pattern": "^[a-z]+", "maxLength": 8},
        {"type": "string", "format": "date"},
    ):
        g = corral.compile_json_schema({**PATTERNED, "items": items}, llama32)
        entry = unique_entry(g)
        assert entry.status == "enforced" and "finitely many values" in entry.detail, items
    g = corral.compile_json_schema({**PATTERNED, "items": {"type": "string", "format": "ipv6"}}, llama32)
    assert [e.keyword for e in g.report.checked_after()] == ["uniqueItems"]


@pytest.mark.slow
@pytest.mark.parametrize("tokenizer", ["smollm2", "llama32"])
@pytest.mark.parametrize("schema", [STRINGS, PATTERNED], ids=["strings", "pattern"])
def test_capped_random_walks_stay_valid(
    schema: dict[str, Any], tokenizer: str, request: pytest.FixtureRequest
) -> None:
    # A cap of 4 is reached within a walk: the mask closes the array there, never a dead end.
    tok: corral.Tokenizer = request.getfixturevalue(tokenizer)
    g = corral.compile_json_schema(schema, tok, max_unique_items=4)
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(f"capped/{tokenizer}/{json.dumps(schema)}")
    short = {i for i in range(tok.vocab_size) if len(tok.token_bytes[i]) <= 2}
    lengths: list[int] = []
    for _ in range(6):
        m = g.matcher()
        mask = corral.allocate_bitmask(1, tok)
        out = bytearray()
        for _ in range(60):
            m.fill_next_token_bitmask(mask, 0)
            ids = [i for i in corral.allowed_tokens(mask[0], tok) if i not in tok.eos_ids]
            assert ids or m.is_accepting(), f"dead end after {bytes(out)!r}"
            if not ids:
                break
            # Items kept short (quote tokens half the time) so that the cap is reached.
            quotes = [i for i in ids if b'"' in tok.token_bytes[i] and b"]" not in tok.token_bytes[i]]
            t = rng.choice(quotes if quotes and rng.random() < 0.5 else [i for i in ids if i in short] or ids)
            assert m.accept_token(t)
            out += tok.token_bytes[t]
        rest = m.shortest_completion()
        assert m.accept_bytes(rest) and m.is_accepting()
        value = json.loads(bytes(out) + rest)
        assert validator.is_valid(value) and len(value) <= 4, value
        lengths.append(len(value))
    assert 4 in lengths, lengths  # the cap was reached
