"""``uniqueItems`` over strings with finitely many values, enforced in the mask.

Strings with ``maxLength``, a closed ``pattern`` or a fixed-shape ``format`` (``date``,
``uuid``) have prefixes after which only a few values remain, so refusing the close of a
duplicate is not enough: after ``"ab`` under ``maxLength: 2`` with "ab" held, the only way on
is the refused quote. The matcher counts the values after every state of the item's automaton
(cpp/item_values.hpp) and refuses the prefixes whose every value the array holds, and an
array holding every value of its items closes. Checked here: near misses (duplicates spelled
with other escapes, arrays at the length bound, exhausted alphabets) are accepted exactly when
``jsonschema`` accepts them; the mask equals the parser's verdict on the whole vocabulary at
states next to dead prefixes (inside an escape too); random walks on SmolLM2 and Llama 3.2 that
exhaust small alphabets never meet a dead end and produce valid arrays; shortest completions
find the values left; the items the engine cannot count stay in the report.
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


AB = _array({"type": "string", "maxLength": 1, "pattern": "^[ab]$"}, maxItems=3)
SHORT = _array({"type": "string", "maxLength": 2}, maxItems=4)
# (Python's `$` also matches before a final newline: "a\n" is a value, eight in all.)
TWO_CHARS = _array({"type": "string", "pattern": "^[ab]{1,2}$", "maxLength": 2})
DATE = _array({"type": "string", "format": "date"}, maxItems=5)
UUID = _array({"type": "string", "format": "uuid"}, maxItems=4)
SLUG = _array({"type": "string", "pattern": "^[a-z0-9_-]{1,64}$"}, maxItems=8)
DASH = _array({"type": "string", "maxLength": 1, "pattern": "^[-_a]$"}, maxItems=3)
SCHEMAS = {"ab": AB, "short": SHORT, "two chars": TWO_CHARS, "date": DATE, "uuid": UUID, "slug": SLUG}
U1 = "123e4567-e89b-12d3-a456-426614174000"
INSTANCES: dict[str, list[str]] = {
    "ab": [
        "[]",
        '["a"]',
        '["a", "b"]',
        '["a", "a"]',
        '["a", "\\u0061"]',
        '["b", "a", "b"]',
        '["ab"]',
        '["c"]',
    ],
    "short": [
        '["ab", "a", ""]',
        '["ab", "ab"]',
        '["ab", "a\\u0062"]',
        '["\\u0061\\u0062", "ab"]',
        '["abc"]',
        '["\\n", "\\u000a"]',
        '["\\"", "\\u0022"]',
        '["é", "\\u00e9"]',
        '["😀", "\\ud83d\\ude00"]',
        '["😀", "\\ud83d\\ude01"]',
        '["", "a", "b", "c"]',
        '["", "a", "b", "c", "d"]',
    ],
    "two chars": [
        '["a", "b", "aa", "ab", "ba", "bb", "a\\n", "b\\n"]',
        '["a", "b", "aa", "ab", "ba", "b\\u0062"]',
        '["a\\n", "a\\u000a"]',
        '["ab", "ba", "a\\u0062"]',
        '["abb"]',
    ],
    "date": [
        '["2024-01-01", "2024-01-02"]',
        '["2024-01-01", "2024-01-01"]',
        '["2024-01-01", "2024-01-0\\u0031"]',
    ],
    "uuid": [f'["{U1}"]', f'["{U1}", "{U1}"]', f'["{U1}", "{U1[:-1]}1"]', f'["{U1}", "{U1.upper()}"]'],
    "slug": ['["a", "a-b", "a_b"]', '["a-b", "a\\u002db"]', '["' + "x" * 64 + '", "' + "x" * 64 + '"]'],
}


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_enforced_exactly_against_jsonschema(name: str, llama32: corral.Tokenizer) -> None:
    schema = SCHEMAS[name]
    g = corral.compile_json_schema(schema, llama32, strict=True)
    assert unique_entry(g).status == "enforced" and not g.report.post_checks, g.report
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    kinds = set()
    for text in INSTANCES[name]:
        value = json.loads(text)
        want = validator.is_valid(value)
        kinds.add(want)
        for spelled in (
            text,
            json.dumps(value),
            json.dumps(value, ensure_ascii=False, separators=(",", ":")),
        ):
            assert accepts_text(g, llama32, spelled) == want, (name, spelled)
    assert kinds == {True, False}


# (schema, prefix, bytes that must be refused next, bytes that must be accepted next)
DEAD_PREFIXES = [
    (AB, b'["a", ', [b'"a', b'"\\u0061'], [b'"b', b'"\\u0062', b'"']),
    (AB, b'["a", "b"', [b",", b", "], [b"]"]),
    (AB, b'["a", "\\u006', [b"1"], [b"2"]),
    (AB, b'["a", "\\', [b"u0061"], [b"u0062", b"u006"]),
    (SHORT, b'["ab", "a', [b"b", b'b"', b"\\u0062"], [b"c", b'"', b"\\u0063"]),
    (SHORT, b'["ab", "\\u0061', [b"b", b"\\u0062"], [b"a", b'"']),
    # Held values spelled otherwise than the open item (the vocabulary walk decodes both).
    (SHORT, '["\\u00e9\\u00e9", "é'.encode(), ["é".encode(), b"\\u00e9"], [b"e", b'"']),
    (SHORT, '["éa", "\\u00e9'.encode(), [b"a", b'a"'], [b"b", b'"']),
    (TWO_CHARS, b'["aa", "ab", "', [], [b"a", b"b"]),
    (TWO_CHARS, b'["aa", "ab", "a', [b"a", b"b", b'a"'], [b'"', b"\\n"]),
    (TWO_CHARS, b'["a", "aa", "ab", "a\\n", "', [b"a", b"\\u0061"], [b"b", b"\\u0062"]),
    (DATE, b'["2024-01-01", "2024-01-0', [b"1"], [b"2", b'2"']),
    # Tokens that open the next item and end in it (` "-` is one Llama token).
    (DASH, b'["-",', [b' "-', b'"-'], [b' "_', b' "', b'"a']),
    (UUID, ('["' + U1 + '", "' + U1[:-1]).encode(), [b"0", b'0"'], [b"1", b"A"]),
]


@pytest.mark.parametrize("case", range(len(DEAD_PREFIXES)))
def test_dead_prefixes_are_refused_and_the_mask_equals_the_parser(
    case: int, llama32: corral.Tokenizer
) -> None:
    schema, prefix, refused, accepted = DEAD_PREFIXES[case]
    g = corral.compile_json_schema(schema, llama32)
    m = g.matcher()
    assert m.accept_bytes(prefix)
    for b in refused:
        assert not m.copy().accept_bytes(b), (prefix, b)
    for b in accepted:
        assert m.copy().accept_bytes(b), (prefix, b)
    mask_matches_accept(m, llama32)  # the whole vocabulary


def test_rollback_and_snapshots_keep_the_values(llama32: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(SHORT, llama32)
    m = g.matcher()
    for t in llama32.encode('["ab", "cd", "'):
        assert m.accept_token(t)
    steps = m.num_steps
    r = g.restore(m.snapshot())
    for mm in (m, r):
        assert not mm.copy().accept_bytes(b"ab") and not mm.copy().accept_bytes(b"c\\u0064")
        assert mm.copy().accept_bytes(b'ac"')
    assert m.accept_bytes(b'ef", "')
    assert not m.copy().accept_bytes(b"ef")
    m.rollback(m.num_steps - steps)
    assert m.copy().accept_bytes(b"ef") and not m.copy().accept_bytes(b"cd")
    m.rollback(steps)
    assert m.accept_bytes(b'["cd", "ab", "')
    assert not m.copy().accept_bytes(b"ab") and m.copy().accept_bytes(b"ef")
    mask_matches_accept(m, llama32)


def test_an_exhausted_alphabet_closes_the_array(llama32: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(AB, llama32)
    m = g.matcher()
    assert m.accept_bytes(b'["b", "a"')
    mask = corral.allocate_bitmask(1, llama32)
    m.fill_next_token_bitmask(mask, 0)
    allowed = {llama32.token_bytes[i] for i in corral.allowed_tokens(mask[0], llama32)}
    assert b"]" in allowed and not any(b"," in t for t in allowed), allowed
    with pytest.raises(corral.SchemaError, match="needs more distinct items"):
        corral.compile_json_schema({**AB, "minItems": 3}, llama32)


@pytest.mark.parametrize("prefix", [b"[", b'["b", ', b'["b", "', b'["\\u0062"'])
def test_completions_find_the_values_left(prefix: bytes, llama32: corral.Tokenizer) -> None:
    schema = {**AB, "minItems": 2}
    g = corral.compile_json_schema(schema, llama32)
    m = g.matcher()
    assert m.accept_bytes(prefix)
    rest = m.shortest_completion()
    value = json.loads(prefix + rest)
    assert jsonschema.Draft202012Validator(schema).is_valid(value), (prefix, rest)
    assert m.accept_bytes(rest) and m.is_accepting()


def test_what_stays_in_the_report(llama32: corral.Tokenizer) -> None:
    for items in (
        {"type": "string", "format": "ipv6"},  # (finite, and its automaton is several terminals)
        {"type": "string", "maxLength": 3, "not": {"const": "a"}},  # other keywords
    ):
        g = corral.compile_json_schema(_array(items, maxItems=3), llama32)
        assert [e.keyword for e in g.report.checked_after()] == ["uniqueItems"], items
    for items in (
        {"type": "string", "maxLength": 3},
        {"type": "string", "pattern": "^[ab]$"},
        {"type": "string", "pattern": "^[a-z]+$"},  # (a final newline ends the item)
        {"type": "string", "pattern": "^[a-z]+", "maxLength": 8},
        {"type": "string", "format": "date-time"},
        {"type": "string", "minLength": 2, "maxLength": 2, "pattern": "^[0-9]+$"},
    ):
        g = corral.compile_json_schema(_array(items), llama32, strict=True)
        assert unique_entry(g).status == "enforced", items


def test_with_a_cap_below_the_values(llama32: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(TWO_CHARS, llama32, max_unique_items=3)
    assert unique_entry(g).capped_at == 3
    g = corral.compile_json_schema(TWO_CHARS, llama32)
    assert unique_entry(g).capped_at is None  # eight values: the array closes when they are written
    m = g.matcher()
    assert m.accept_bytes(b'["a", "b", "aa", "ab", "ba", "bb", "a\\n", "b\\n"')
    assert not m.copy().accept_bytes(b",") and m.accept_bytes(b"]")


@pytest.mark.slow
@pytest.mark.parametrize("tokenizer", ["smollm2", "llama32"])
@pytest.mark.parametrize("name", ["ab", "two chars", "short", "date"])
def test_random_walks_never_meet_a_dead_end(
    name: str, tokenizer: str, request: pytest.FixtureRequest
) -> None:
    # Items kept short, so that small alphabets run out and duplicates are one token away; at
    # every step the mask equals the parser on the quote tokens, the short ones and a sample.
    tok: corral.Tokenizer = request.getfixturevalue(tokenizer)
    schema = SCHEMAS[name]
    g = corral.compile_json_schema(schema, tok)
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(f"bounded/{tokenizer}/{name}")
    short = [i for i in range(tok.vocab_size) if len(tok.token_bytes[i]) <= 2 and i not in tok.eos_ids]
    quotes = [i for i in range(tok.vocab_size) if b'"' in tok.token_bytes[i]]

    def choose(non_eos: list[int]) -> int | None:
        if not non_eos:
            return None
        # Short tokens, quotes half the time, and the array kept open while it can grow.
        pick = [i for i in non_eos if len(tok.token_bytes[i]) <= 2 and b"]" not in tok.token_bytes[i]]
        quoted = [i for i in pick if b'"' in tok.token_bytes[i]]
        return rng.choice(quoted if quoted and rng.random() < 0.5 else pick or non_eos)

    lengths: list[int] = []
    for _ in range(4):
        text = checked_walk(g, tok, 40, quotes + short[:: max(1, len(short) // 300)], choose)
        value = json.loads(text)
        assert validator.is_valid(value), text
        lengths.append(len(value))
    assert max(lengths) >= 2, lengths  # (the walks did write several items)


def test_items_behind_a_ref_are_counted_too(llama32: corral.Tokenizer) -> None:
    # (the item rule is built from the $ref's target, one terminal the engine counts)
    schema = {
        "type": "array",
        "items": {"$ref": "#/$defs/code"},
        "uniqueItems": True,
        "maxItems": 4,
        "$defs": {"code": {"type": "string", "maxLength": 1, "pattern": "^[ab]$"}},
    }
    g = corral.compile_json_schema(schema, llama32, strict=True)
    assert unique_entry(g).status == "enforced"
    m = g.matcher()
    assert m.accept_bytes(b'["a", "')
    assert not m.copy().accept_bytes(b"a") and not m.copy().accept_bytes(b"\\u0061")
    assert m.copy().accept_bytes(b'b"')
    mask_matches_accept(m, llama32)
