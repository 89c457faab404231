"""``uniqueItems`` over free strings, enforced in the mask (distinct groups, cpp/distinct.hpp).

Arrays of ``{"type": "string"}`` (with at most a ``minLength``) and a ``maxItems`` of at most
MAX_REMEMBERED_ITEMS (without one: test_json_schema_distinct_values.py): hand-written
near misses (``["a","a"]``, ``["a","\\u0061"]``, escapes and
surrogate pairs that spell the same value, duplicates written in one step) are accepted exactly
when ``jsonschema`` accepts them; the mask equals the parser's verdict per token in both
directions at states where a duplicate is one token away (every token holding a ``"`` is
checked, plus a random sample); random walks on SmolLM2 and Llama 3.2 only produce valid arrays
and never hit a dead end; shortest completions add distinct items; rollback, snapshots and
artifacts keep the remembered values; the other string item schemas stay in the report. The
grammar construct itself also compares numbers by value (``[1, 1.0]``).
"""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest
from helpers import accepts_text, mask_matches_accept, random_walk

import corral
from corral.grammar.json_schema.unique_items import MAX_REMEMBERED_ITEMS

pytestmark = pytest.mark.real_tokenizer

FREE = {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "maxItems": 6}
SCHEMAS: dict[str, Any] = {
    "free strings": FREE,
    "with counts and minLength": {
        "type": "array",
        "items": {"type": "string", "minLength": 1},
        "uniqueItems": True,
        "minItems": 2,
        "maxItems": 4,
    },
    "nested in an object": {
        "type": "object",
        "properties": {"tags": FREE},
        "required": ["tags"],
        "additionalProperties": False,
    },
}
INSTANCES = [
    "[]",
    '["a"]',
    '["a", "b"]',
    '["a", "a"]',
    '["a", "\\u0061"]',
    '["\\u0061", "b", "a"]',
    '["ab", "a", "ba"]',
    '["ab", "a", "ab"]',
    '["", ""]',
    '["", "x"]',
    '["\\n", "\\\\n"]',
    '["\\n", "\\u000a"]',
    '["\\u00e9", "é"]',
    '["\\ud83d\\ude00", "😀"]',
    '["\\"", "\\u0022"]',
    '["a/b", "a\\/b"]',
    '["a", "b", "c", "d", "e", "f", "g"]',
]


def _quote_tokens(tok: corral.Tokenizer) -> list[int]:
    return [i for i in range(tok.vocab_size) if b'"' in tok.token_bytes[i]]


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_enforced_exactly_against_jsonschema(name: str, llama32: corral.Tokenizer) -> None:
    schema = SCHEMAS[name]
    g = corral.compile_json_schema(schema, llama32)
    assert not g.report.post_checks, f"{name}: {g.report}"
    assert any(e.keyword == "uniqueItems" and e.status == "enforced" for e in g.report.entries)
    validator = jsonschema.Draft202012Validator(schema)
    kinds = set()
    for text in INSTANCES:
        value = json.loads(text)
        doc = {"tags": value} if name == "nested in an object" else value
        want = validator.is_valid(doc)
        kinds.add(want)
        for spelled in (
            json.dumps(doc),
            json.dumps(doc, separators=(",", ":")),
            json.dumps(doc, ensure_ascii=False),
        ):
            assert accepts_text(g, llama32, spelled) == want, (name, spelled)
        if name != "nested in an object":
            assert accepts_text(g, llama32, text) == want, (name, text)
    assert kinds == {True, False}


def test_duplicates_in_one_step_and_across_tokens(llama32: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(FREE, llama32)
    # Both items inside one accept_bytes step, or the duplicate closed in the same step.
    assert not g.matcher().accept_bytes(b'["a","a"')
    assert not g.matcher().accept_bytes(b'["x", "y", "\\u0078"')
    m = g.matcher()
    assert m.accept_bytes(b'["ab", "a')
    assert not m.copy().accept_bytes(b'b"') and m.copy().accept_bytes(b'c"')
    assert m.copy().accept_bytes(b"b")  # "ab..." may still become another value
    # Token by token, the duplicate split across tokens is refused at the closing quote.
    ids = llama32.encode('["hello", "hello"]')
    n = g.matcher()
    verdicts = [n.accept_token(t) for t in ids]
    assert not all(verdicts)
    closing = verdicts.index(False)
    assert b'"' in llama32.token_bytes[ids[closing]]


@pytest.mark.parametrize(
    "prefix",
    [b'["a", "', b'["a", "b", "a', b'["ab", "a', b'["", ', b'["\\u0061", "', b"[", b'["x",'],
)
def test_mask_equals_the_parser_next_to_duplicates(prefix: bytes, llama32: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(FREE, llama32)
    m = g.matcher()
    assert m.accept_bytes(prefix)
    rng = random.Random(prefix)
    mask_matches_accept(m, llama32, sample=_quote_tokens(llama32) + rng.sample(range(llama32.width), 800))


TWO = {
    "type": "object",
    "properties": {"tags": FREE, "name": {"type": "string"}, "more": FREE},
    "required": ["tags", "name", "more"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "prefix",
    [
        b'{"tags": ["a"], "name": "',
        b'{"tags": ["a"], "name": "a", "more": ["',
        b'{"tags": ["a", "b"], "name": "b", "more": ["a',
    ],
)
def test_each_array_remembers_its_own_items(prefix: bytes, llama32: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(TWO, llama32)
    validator = jsonschema.Draft202012Validator(TWO)
    doc = {"tags": ["a", "b"], "name": "a", "more": ["a", "b"]}
    assert validator.is_valid(doc) and accepts_text(g, llama32, json.dumps(doc))
    assert not accepts_text(g, llama32, json.dumps({**doc, "more": ["b", "b"]}))
    m = g.matcher()
    assert m.accept_bytes(prefix)
    assert m.copy().accept_bytes(b'"')  # "a" again: another array, or no array at all
    rng = random.Random(prefix)
    mask_matches_accept(m, llama32, sample=_quote_tokens(llama32) + rng.sample(range(llama32.width), 300))


@pytest.mark.parametrize("whitespace", ["compact", "pretty"])
def test_arrays_of_unique_arrays(whitespace: str, llama32: corral.Tokenizer) -> None:
    schema = {"type": "array", "items": {**FREE, "minItems": 1}, "maxItems": 3}
    g = corral.compile_json_schema(schema, llama32, whitespace=whitespace)
    assert not g.report.post_checks
    dump = (
        (lambda v: json.dumps(v, indent=2))
        if whitespace == "pretty"
        else (lambda v: json.dumps(v, separators=(",", ":")))
    )
    assert accepts_text(g, llama32, dump([["a", "b"], ["a"], ["b", "a"]]))
    assert not accepts_text(g, llama32, dump([["a"], ["b", "b"]]))
    text = dump([["a", "b"], ["b", "a"]])
    m = g.matcher()
    assert m.accept_bytes(text[: text.rindex('a"')].encode())  # inside the last "a": "b" is held
    assert m.copy().accept_bytes(b'a"') and not m.copy().accept_bytes(b'b"')
    rng = random.Random(whitespace)
    mask_matches_accept(m, llama32, sample=_quote_tokens(llama32) + rng.sample(range(llama32.width), 300))


def test_the_mask_forbids_exactly_the_duplicate_closes(llama32: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(FREE, llama32)
    mask = corral.allocate_bitmask(1, llama32)

    def allowed(m: corral.Matcher) -> set[bytes]:
        m.fill_next_token_bitmask(mask, 0)
        return {llama32.token_bytes[i] for i in corral.allowed_tokens(mask[0], llama32)}

    m = g.matcher()
    assert m.accept_bytes(b'["+", "a", "')
    # Llama 3.2 has `+"` and `%"` as tokens: the first closes a repeat of "+", the second not.
    now = allowed(m)
    assert b'+"' not in now and b'%"' in now and b"+" in now and b'"' in now
    assert m.accept_bytes(b"a")
    now = allowed(m)
    assert not now & {b'"', b'",', b'"]', b'","'}
    assert b"b" in now and b"a" in now and b'+"' in now  # "ab", "aa", "a+" are new values
    assert m.accept_bytes(b"b")
    assert {b'"', b'",', b'"]', b'","'} <= allowed(m)


def test_completions_stay_distinct(llama32: corral.Tokenizer) -> None:
    schema = {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "minItems": 4, "maxItems": 5}
    g = corral.compile_json_schema(schema, llama32)
    validator = jsonschema.Draft202012Validator(schema)
    for prefix in (b"[", b'["', b'["", "', b'["a", " ", "a', b'["", "  ", " '):
        m = g.matcher()
        assert m.accept_bytes(prefix)
        rest = m.shortest_completion()
        value = json.loads(prefix + rest)
        assert validator.is_valid(value), (prefix, rest)
        assert m.accept_bytes(rest) and m.is_accepting()


def test_rollback_snapshot_and_artifact_keep_the_values(llama32: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(FREE, llama32)
    loaded = corral.CompiledGrammar.from_bytes(g.to_bytes(), llama32)
    m, n = g.matcher(), loaded.matcher()
    for t in llama32.encode('["alpha", "beta", "'):
        assert m.accept_token(t) and n.accept_token(t)
    mask_a, mask_b = corral.allocate_bitmask(1, llama32), corral.allocate_bitmask(1, llama32)
    m.fill_next_token_bitmask(mask_a, 0)
    n.fill_next_token_bitmask(mask_b, 0)
    assert (mask_a == mask_b).all()
    r = loaded.restore(m.snapshot())
    for mm in (m, n, r):
        assert not mm.copy().accept_bytes(b'alpha"') and not mm.copy().accept_bytes(b'beta"')
        assert mm.copy().accept_bytes(b'gamma"]')
    # Rollback past "beta" forgets it; rolling forward again remembers it.
    steps = m.num_steps
    assert m.accept_bytes(b'gamma", "')
    assert not m.copy().accept_bytes(b'gamma"')
    m.rollback(1)
    assert m.num_steps == steps and m.copy().accept_bytes(b'gamma"')
    m.rollback(steps)
    assert m.accept_bytes(b'["beta", "alpha"')
    assert not m.copy().accept_bytes(b', "beta"') and m.copy().accept_bytes(b', "gamma"]')


def test_other_string_items_stay_in_the_report(llama32: corral.Tokenizer) -> None:
    for items, bound in (
        ({"type": "string"}, {"minItems": MAX_REMEMBERED_ITEMS + 1}),  # over the cap (no maxItems)
        # (maxLength, closed patterns, date: test_json_schema_distinct_bounded.py)
        ({"type": "string", "format": "ipv6"}, {"maxItems": 3}),  # finite, several terminals
        # (numbers: test_json_schema_distinct_numbers.py)
        ({"type": "number", "multipleOf": 2}, {"maxItems": 3}),
    ):
        schema = {"type": "array", "items": items, "uniqueItems": True, **bound}
        g = corral.compile_json_schema(schema, llama32)
        assert [e.keyword for e in g.report.checked_after()] == ["uniqueItems"], schema
        with pytest.raises(corral.UnsupportedSchemaError):
            corral.compile_json_schema(schema, llama32, strict=True)
    g = corral.compile_json_schema({**FREE, "maxItems": MAX_REMEMBERED_ITEMS}, llama32)
    assert not g.report.post_checks


@pytest.mark.parametrize("whitespace", ["pretty", "compact", "flexible"])
def test_every_whitespace_mode(whitespace: str, llama32: corral.Tokenizer) -> None:
    schema = SCHEMAS["nested in an object"]
    g = corral.compile_json_schema(schema, llama32, whitespace=whitespace)
    validator = jsonschema.Draft202012Validator(schema)
    for items in (["a", "b"], [], ["a", "a"], ["x", "y", "x"], ["\u00e9", "e"]):
        v = {"tags": items}
        if whitespace == "pretty":
            text = json.dumps(v, indent=2)
        elif whitespace == "compact":
            text = json.dumps(v, separators=(",", ":"))
        else:
            text = json.dumps(v)
        assert accepts_text(g, llama32, text) == validator.is_valid(v), (whitespace, text)


def test_the_grammar_construct_compares_numbers_by_value(llama32: corral.Tokenizer) -> None:
    g = corral.compile_grammar(
        'root ::= "[" items "]"\n'
        'items ::= %distinct{1,6}("," ; num)\n'
        "num ::= /-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?/\n",
        llama32,
    )
    for text, want in (
        ("[1,2]", True),
        ("[1,1.0]", False),
        ("[1,1e0]", False),
        ("[0.5,5e-1]", False),
        ("[10e-1,1]", False),
        ("[0,-0]", False),
        ("[0,0.0e5]", False),
        ("[100,1e2,2]", False),
        ("[1,10,0.1,-1]", True),
        ("[12,1.2e1]", False),
    ):
        m = g.matcher()
        assert (m.accept_bytes(text.encode()) and m.is_accepting()) == want, text
    with pytest.raises(corral.CompileError):
        corral.compile_grammar('root ::= %distinct{3,2}("," ; "a")', llama32)


@pytest.mark.slow
@pytest.mark.parametrize("tokenizer", ["smollm2", "llama32"])
def test_random_walks_stay_distinct_and_exact(tokenizer: str, request: pytest.FixtureRequest) -> None:
    tok: corral.Tokenizer = request.getfixturevalue(tokenizer)
    schema = {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "minItems": 2, "maxItems": 5}
    g = corral.compile_json_schema(schema, tok)
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(f"distinct/{tokenizer}")
    quotes = _quote_tokens(tok)
    for _ in range(8):
        out, _ = random_walk(g, rng, max_steps=25, eos_weight=0.2)
        assert validator.is_valid(json.loads(out.decode("utf-8"))), out
    # A walk that keeps writing short items, so duplicates are often one token away: the mask
    # equals the parser's verdict per token at every step (every quote token, plus a sample).
    m = g.matcher()
    mask = corral.allocate_bitmask(1, tok)
    short = [
        i
        for i in range(tok.vocab_size)
        if tok.token_bytes[i] in (b'"', b'","', b'", "', b"a", b"b", b'a"', b'b"')
    ]
    for _ in range(14):
        mask_matches_accept(m, tok, sample=quotes + rng.sample(range(tok.width), 300))
        m.fill_next_token_bitmask(mask, 0)
        ids = [i for i in corral.allowed_tokens(mask[0], tok) if i not in tok.eos_ids]
        if not ids:
            break
        pick = [i for i in ids if i in short] or ids
        assert m.accept_token(rng.choice(pick))


@pytest.mark.slow
def test_generation_lists_distinct_free_strings(smol_model: Any) -> None:
    schema = {
        "type": "object",
        "properties": {
            "colours": {
                "type": "array",
                "items": {"type": "string"},
                "uniqueItems": True,
                "minItems": 5,
                "maxItems": 5,
            }
        },
        "required": ["colours"],
    }
    r = corral.generate(
        smol_model, "List 5 colours as JSON. Red, red, red, red, red.", schema=schema, max_new_tokens=80
    )
    value = json.loads(r.text)
    assert jsonschema.Draft202012Validator(schema).is_valid(value), r.text
    assert len(set(value["colours"])) == 5
