"""``uniqueItems`` over strings of an open-ended ``format`` (``email``, ``hostname``, ``uri``),
enforced in the mask (distinct groups, cpp/distinct.hpp).

Their automata are split into several terminals by the lowering (a hostname's starred label
group is a terminal of its own), but every prefix of an item still has infinitely many values,
which is what makes a distinct group exact; the converter asks that of the language
(``probe_open_ended`` builds it as one automaton). Checked: near misses (the same value written
twice, also with an escape) accepted exactly when the items are distinct values each the
format accepts alone; the mask equals the parser at states a duplicate is one token away, on
Llama 3.2; random walks on SmolLM2 and Llama 3.2 give distinct arrays; a finite format
(``ipv6``) stays in the report.
"""

from __future__ import annotations

import json
import random

import pytest
from helpers import accepts_text, mask_matches_accept, random_walk, unique_entry

import corral

pytestmark = pytest.mark.real_tokenizer

FORMATS = ("email", "hostname", "uri")
INSTANCES = {
    "email": [
        '["a@b.c", "a@b.c"]',
        '["a@b.c", "a\\u0040b.c"]',
        '["a@b.c", "b@b.c"]',
        '["x@y", "x@y.z", "x@y"]',
        '["a@b.c", "A@b.c"]',
        '["a@b.c", "nope"]',
    ],
    "hostname": [
        '["a.b", "a.b"]',
        '["a.b", "a\\u002eb"]',
        '["a.b", "a.bc"]',
        '["ab", "a-b", "ab"]',
        '["-a", "b"]',
    ],
    "uri": [
        '["http://a.b/x", "http://a.b/x"]',
        '["http://a.b/x", "http://a.b/y"]',
        '["a:b", "a:\\u0062"]',
        '["a:b", "a:c", "b:a"]',
    ],
}


def _array(fmt: str) -> dict[str, object]:
    return {"type": "array", "items": {"type": "string", "format": fmt}, "uniqueItems": True, "maxItems": 4}


@pytest.mark.parametrize("fmt", FORMATS)
def test_enforced_exactly(fmt: str, llama32: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(_array(fmt), llama32, strict=True)
    assert unique_entry(g).status == "enforced"
    one = corral.compile_json_schema({"type": "string", "format": fmt}, llama32)
    for text in INSTANCES[fmt]:
        items = json.loads(text)
        each = all(accepts_text(one, llama32, json.dumps(item)) for item in items)
        want = each and len(set(items)) == len(items)
        assert accepts_text(g, llama32, text) == want, text


@pytest.mark.parametrize(
    ("fmt", "prefix"),
    [("email", '["a@b.cd", "a@b.cd'), ("hostname", '["ab.cd", "ab.cd'), ("uri", '["a:bc", "a:bc')],
)
def test_mask_equals_the_parser_next_to_a_duplicate(fmt: str, prefix: str, llama32: corral.Tokenizer) -> None:
    g = corral.compile_json_schema(_array(fmt), llama32)
    index = {b: i for i, b in enumerate(llama32.token_bytes) if b}
    m = g.matcher()
    assert m.accept_bytes(prefix.encode())
    mask = corral.allocate_bitmask(1, llama32)
    m.fill_next_token_bitmask(mask, 0)
    allowed = set(corral.allowed_tokens(mask[0], llama32))
    # Every close of the held value is refused; the item may still go on.
    assert not {index[b'"'], index[b'",'], index[b'"]']} & allowed and index[b"x"] in allowed
    rng = random.Random(5)
    quotes = [i for i in range(llama32.vocab_size) if b'"' in llama32.token_bytes[i]]
    mask_matches_accept(m, llama32, quotes + rng.sample(range(llama32.vocab_size), 400))


@pytest.mark.slow
@pytest.mark.parametrize("tokenizer", ["smollm2", "llama32"])
def test_random_walks_stay_distinct(tokenizer: str, request: pytest.FixtureRequest) -> None:
    tok: corral.Tokenizer = request.getfixturevalue(tokenizer)
    for fmt in FORMATS:
        g = corral.compile_json_schema(_array(fmt), tok, escapes="canonical")
        one = corral.compile_json_schema({"type": "string", "format": fmt}, tok, escapes="canonical")
        rng = random.Random(13)
        for _ in range(6):
            out, _eos = random_walk(g, rng, max_steps=40, eos_weight=0.1)
            items = json.loads(out.decode())
            assert len(set(items)) == len(items), (fmt, items)
            assert all(accepts_text(one, tok, json.dumps(item, ensure_ascii=False)) for item in items), items


def test_a_finite_format_stays_in_the_report(llama32: corral.Tokenizer) -> None:
    # ipv6 has finitely many values (bounded length) and several terminals: not counted.
    g = corral.compile_json_schema(_array("ipv6"), llama32)
    assert [e.keyword for e in g.report.checked_after()] == ["uniqueItems"]
