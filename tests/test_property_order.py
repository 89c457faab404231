"""``property_order="any"``: declared properties in any order, each at most once, ``required``
enforced — exact in the mask (keyed member groups, cpp/keyed.hpp).

Checked against the ``jsonschema`` package on permuted instances (undeclared keys first, e.g.
``"$schema"``), near misses (a duplicate key, a required key missing) refused in the mask on
real tokenizers, masked random walks that only produce instances ``jsonschema`` accepts, masks
equal to the parser's verdict token by token, artifacts round-tripping the construct, and
``property_order="schema"`` grammars identical to the converter's output before the option
existed (golden digests).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from typing import Any

import jsonschema
import pytest
from helpers import byte_tokenizer, mask_matches_accept, random_walk

import corral
from corral.engine import CompiledGrammar, compile_grammar

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
        "home": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{3}$"}},
            "required": ["zip"],
        },
    },
    "required": ["name", "age"],
}
CLOSED = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}, "c": {"const": "x"}},
    "required": ["c"],
    "additionalProperties": False,
}
TYPED_EXTRA = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "kind": {"enum": ["u", "v"]}},
    "required": ["id"],
    "additionalProperties": {"type": "number"},
}
PATTERNED = {
    "type": "object",
    "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
    "patternProperties": {"^z": {"type": "boolean"}},
    "additionalProperties": False,
    "required": ["y"],
}
SCHEMAS = [PERSON, CLOSED, TYPED_EXTRA, PATTERNED]
# Dependencies and counts, also in any order (keyed groups with `^{...}` and `{min,max}`).
DEPENDENT = {
    "type": "object",
    "properties": {"card": {"type": "integer"}, "addr": {"type": "string"}, "zip": {"type": "string"}},
    "dependentRequired": {"card": ["addr"], "addr": ["zip"]},
}
DRAFT7_DEPENDENCIES = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
    "required": ["c"],
    "dependencies": {"a": ["b"], "c": {"required": ["b"]}},  # c is required, so b is too
    "additionalProperties": False,
}
DEPENDENT_SCHEMA = {
    "type": "object",
    "properties": {"p": {"type": "boolean"}, "q": {"type": "boolean"}},
    "dependentSchemas": {"q": {"required": ["p", "r"]}},
}
COUNTED = {  # one undeclared member beside the required one can reach minProperties: exact
    "type": "object",
    "properties": {"id": {"type": "integer"}, "x": {"type": "integer"}, "y": {"type": "integer"}},
    "required": ["id"],
    "minProperties": 2,
    "maxProperties": 3,
}
COUNTED_CLOSED = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}, "d": {}},
    "minProperties": 2,
    "maxProperties": 3,
    "additionalProperties": False,
}
MAX_ONLY = {"type": "object", "properties": {"a": {}, "b": {}}, "maxProperties": 2}
DEPENDENT_MIN = {**DEPENDENT, "minProperties": 2, "additionalProperties": False}
# Dependencies beside a binding maxProperties (keyed.hpp `closure`): with undeclared members
# (card brings addr and zip: three, so card and one more member is too many) ...
DEPENDENT_MAX = {**DEPENDENT, "maxProperties": 3}
# ... and without them, with a binding minimum too (the `fits` table): a and b need each other,
# c needs d, so exactly three properties are only {a, b, d}.
DEPENDENT_FITS = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}, "d": {}},
    "dependentRequired": {"a": ["b"], "b": ["a"], "c": ["d"]},
    "minProperties": 3,
    "maxProperties": 3,
    "additionalProperties": False,
}
# minProperties that two undeclared members may be needed for (cpp/keyed.hpp `%key(...)`: the
# group remembers undeclared keys, so a repeated one is refused and the count is exact).
REMEMBERED = {**TYPED_EXTRA, "minProperties": 3}
# ... also for a `$`-anchored pattern (Python's `$` allows one final newline: after `"z1\n` only
# the closing quote may follow, a dead end when "z1\n" is held, refused like a distinct item's).
REMEMBERED_ANCHORED = {
    **PATTERNED,
    "patternProperties": {"^z[0-9]+$": {"type": "boolean"}},
    "minProperties": 3,
}
COUNTED_SCHEMAS = [
    DEPENDENT,
    DRAFT7_DEPENDENCIES,
    DEPENDENT_SCHEMA,
    COUNTED,
    COUNTED_CLOSED,
    MAX_ONLY,
    DEPENDENT_MIN,
    DEPENDENT_MAX,
    DEPENDENT_FITS,
    REMEMBERED,
    REMEMBERED_ANCHORED,
]


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key")
    return dict(pairs)


def _valid(schema: Any, text: str) -> bool:
    """The oracle: jsonschema's verdict on `text`, with a duplicate key counting as invalid (the
    object it denotes is ambiguous; corral never produces one)."""
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates)
    except ValueError:
        return False
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return bool(validator(schema).is_valid(value))


def _accepts(g: CompiledGrammar, text: str) -> bool:
    m = g.matcher()
    return m.accept_bytes(text.encode()) and m.is_accepting()


def _object(pairs: list[tuple[str, str]], sep: str = ", ", colon: str = ": ") -> str:
    return "{" + sep.join(f"{json.dumps(k)}{colon}{v}" for k, v in pairs) + "}"


# Member pairs (key, JSON text) per schema: some valid values, some wrong-typed ones, undeclared
# keys; instances are subsets of these in every order (the oracle decides which are valid).
PAIRS: dict[int, list[tuple[str, str]]] = {
    id(PERSON): [
        ("name", '"Ann"'),
        ("age", "41"),
        ("tags", '["a"]'),
        ("home", '{"city": "Oslo", "zip": "123"}'),
        ("$schema", '"urn:x"'),
    ],
    id(CLOSED): [("a", "1"), ("b", "true"), ("c", '"x"'), ("d", "null")],
    id(TYPED_EXTRA): [("kind", '"u"'), ("id", "7"), ("$schema", "2.5"), ("w", '"str"')],
    id(PATTERNED): [("x", "1"), ("y", "2"), ("zeta", "false"), ("q", "3")],
    id(DEPENDENT): [("card", "1"), ("addr", '"a"'), ("zip", '"z"'), ("$schema", '"s"'), ("w", "0")],
    id(DRAFT7_DEPENDENCIES): [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")],
    id(DEPENDENT_SCHEMA): [("q", "true"), ("p", "false"), ("r", "1"), ("s", "2")],
    id(COUNTED): [("id", "1"), ("x", "2"), ("y", "3"), ("$schema", '"s"'), ("w", "0")],
    id(COUNTED_CLOSED): [("a", "1"), ("b", "2"), ("c", "3"), ("d", "null"), ("e", "5")],
    id(MAX_ONLY): [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")],
    id(DEPENDENT_MIN): [("card", "1"), ("addr", '"a"'), ("zip", '"z"'), ("w", "0")],
    id(DEPENDENT_MAX): [("card", "1"), ("addr", '"a"'), ("zip", '"z"'), ("w", "0"), ("$schema", '"s"')],
    id(DEPENDENT_FITS): [("a", "1"), ("b", "2"), ("c", "3"), ("d", "null"), ("e", "5")],
    id(REMEMBERED_ANCHORED): [
        ("y", "1"),
        ("z1", "true"),
        ("z1", "false"),
        ("z1\n", "true"),
        ("z22", "false"),
        ("x", "3"),
    ],
    id(REMEMBERED): [("id", "1"), ("w", "2.5"), ("kind", '"u"'), ("$schema", "3"), ("w", "4"), ("v", '"s"')],
}


def _instances(schema: dict[str, Any], limit: int = 400) -> list[str]:
    pairs = PAIRS[id(schema)]
    out: list[str] = []
    for r in range(len(pairs) + 1):
        for subset in itertools.combinations(pairs, r):
            for perm in itertools.permutations(subset):
                out.append(_object(list(perm)))
    rng = random.Random(7)
    rng.shuffle(out)
    out = out[:limit]
    # Near misses: a declared key twice; nested required missing; compact layout.
    first = pairs[0]
    out.append(_object([first, *pairs[1:3], first]))
    out.append(_object([pairs[1], first, (first[0], pairs[1][1])]))
    out += [_object(list(reversed(pairs)), sep=",", colon=":")]
    if schema is PERSON:
        out.append(_object([("name", '"A"'), ("age", "1"), ("home", '{"city": "Oslo"}')]))
        out.append(_object([("name", '"A"'), ("age", "1"), ("home", '{"zip": "123", "zip": "456"}')]))
    return out


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_any_order_matches_jsonschema_on_permutations(index: int) -> None:
    schema = SCHEMAS[index]
    tok = byte_tokenizer()
    # The oracle follows the spec: undeclared properties are allowed unless the schema says not.
    g = corral.compile_json_schema(schema, tok, extra_properties="spec", property_order="any")
    assert "%keyed" in g.grammar_source
    checked = {True: 0, False: 0}
    for text in _instances(schema):
        want = _valid(schema, text)
        assert _accepts(g, text) == want, f"{text}: jsonschema says {want}"
        checked[want] += 1
    assert checked[True] >= 10 and checked[False] >= 10, checked


@pytest.mark.parametrize("index", range(len(COUNTED_SCHEMAS)))
def test_dependencies_and_counts_in_any_order_match_jsonschema(index: int) -> None:
    """Every subset of the pairs in every order (near misses among them: a dependency missing,
    one member too many or too few), judged by jsonschema."""
    schema = COUNTED_SCHEMAS[index]
    g = corral.compile_json_schema(schema, byte_tokenizer(), extra_properties="spec", property_order="any")
    assert "%keyed" in g.grammar_source
    assert not any("schema order only" in e.detail for e in g.report.entries)
    checked = {True: 0, False: 0}
    for text in _instances(schema, limit=2000):
        want = _valid(schema, text)
        assert _accepts(g, text) == want, f"{text}: jsonschema says {want}"
        checked[want] += 1
    assert checked[True] >= 5 and checked[False] >= 5, checked


def test_spec_extra_properties_defaults_to_any_order() -> None:
    tok = byte_tokenizer()
    g = corral.compile_json_schema(PERSON, tok, extra_properties="spec")
    text = '{"$schema": "u", "age": 1, "name": "x"}'
    assert _valid(PERSON, text) and _accepts(g, text)
    assert not _accepts(g, '{"age": 1, "name": "x", "age": 2}')
    plain = corral.compile_json_schema(PERSON, tok)
    assert not _accepts(plain, '{"age": 1, "name": "x"}')  # generation default: schema order
    assert _accepts(plain, '{"name": "x", "age": 1}')


def test_pretty_layout_any_order() -> None:
    tok = byte_tokenizer()
    g = corral.compile_json_schema(CLOSED, tok, whitespace="pretty", property_order="any")
    for pairs in itertools.permutations([("a", 1), ("b", True), ("c", "x")]):
        text = json.dumps(dict(pairs), indent=2)
        assert _accepts(g, text), text
    assert not _accepts(g, json.dumps({"a": 1, "b": True}, indent=2))  # c is required
    assert _accepts(g, json.dumps({"c": "x"}, indent=2))


def test_counts_the_matcher_cannot_make_exact_keep_schema_order_and_say_so() -> None:
    """minProperties that two undeclared members may be needed for, when a class of their keys
    is finite (20 keys here: a group holding them all could not start another), and
    dependencies beside binding counts over more than 16 properties with no undeclared ones
    (past the engine's table), keep schema order."""
    tok = byte_tokenizer()
    schema = {**PATTERNED, "patternProperties": {"^z[0-9]$": {"type": "boolean"}}, "minProperties": 3}
    g = corral.compile_json_schema(schema, tok, property_order="any")
    assert any("cannot tell from one repeated key" in e.detail for e in g.report.entries)
    assert _accepts(g, '{"x": 1, "y": 2, "z1": true}')
    assert not _accepts(g, '{"y": 1, "z1": true, "z1": false}')
    assert not _accepts(g, '{"y": 1, "x": 2}')
    wide = {
        "type": "object",
        "properties": {f"p{i}": {"type": "integer"} for i in range(17)},
        "dependentRequired": {"p0": ["p1"]},
        "minProperties": 2,
        "maxProperties": 3,
        "additionalProperties": False,
    }
    g = corral.compile_json_schema(wide, tok, property_order="any")
    assert any("more than 16 properties" in e.detail for e in g.report.entries)
    assert _accepts(g, '{"p0": 1, "p1": 2}') and not _accepts(g, '{"p0": 1, "p2": 2}')
    narrow = {**wide, "properties": {f"p{i}": {"type": "integer"} for i in range(16)}}
    g = corral.compile_json_schema(narrow, tok, property_order="any")
    assert "%keyed" in g.grammar_source
    assert _accepts(g, '{"p5": 1, "p1": 2, "p0": 3}') and not _accepts(g, '{"p0": 1, "p2": 2}')


def test_undeclared_keys_are_remembered_where_min_needs_them() -> None:
    """minProperties 3 with one required property: two undeclared ones may be needed, so the
    group remembers undeclared keys (`%key(...)`) and refuses a repeated one, also when it is
    spelled with an escape; any order stays exact."""
    tok = byte_tokenizer()
    g = corral.compile_json_schema(REMEMBERED, tok, property_order="any")
    assert "%key(" in g.grammar_source
    assert not any("schema order only" in e.detail for e in g.report.entries)
    assert _accepts(g, '{"q": 2, "id": 1, "r": 3}')
    assert _accepts(g, '{"q": 2, "kind": "v", "id": 1}')
    assert not _accepts(g, '{"id": 1, "q": 2, "q": 3}')
    assert not _accepts(g, '{"id": 1, "q": 2, "\\u0071": 3}')  # "\u0071" is "q"
    assert not _accepts(g, '{"q": 2, "id": 1}')
    # The closing quote of a held key is refused where it is written; a longer key is not.
    assert g.matcher().accept_bytes(b'{"q": 2, "id": 1, "q')
    assert not g.matcher().accept_bytes(b'{"q": 2, "id": 1, "q"')
    assert _accepts(g, '{"q": 2, "id": 1, "qq": 4}')
    # The shortest completion writes keys the object does not hold yet (here "" is held).
    m = g.matcher()
    assert m.accept_bytes(b'{"": 2, "id": 1')
    rest = m.shortest_completion()
    assert _valid(REMEMBERED, '{"": 2, "id": 1' + rest.decode()), rest


def test_dependencies_nothing_fits_is_no_value() -> None:
    """An object whose dependencies cannot be met within the counts has no value: the object
    branch is dropped (here the other anyOf branch is all that is left), as in schema order."""
    tok = byte_tokenizer()
    cyclic = {
        "type": "object",
        "properties": {"a": {}, "b": {}, "c": {}},
        "dependentRequired": {"a": ["b"], "b": ["c"], "c": ["a"]},
        "minProperties": 2,
        "maxProperties": 2,
        "additionalProperties": False,
    }
    for order in ("any", "schema"):
        g = corral.compile_json_schema({"anyOf": [cyclic, {"type": "integer"}]}, tok, property_order=order)
        assert _accepts(g, "5") and not _accepts(g, '{"a": 1, "b": 2}'), order
        with pytest.raises(corral.SchemaError):
            corral.compile_json_schema(cyclic, tok, property_order=order)


def test_property_order_option_is_validated() -> None:
    with pytest.raises(ValueError, match="property_order"):
        corral.compile_json_schema(PERSON, byte_tokenizer(), property_order="sorted")  # type: ignore[arg-type]


def _real_tokenizers(request: pytest.FixtureRequest) -> list[corral.Tokenizer]:
    return [request.getfixturevalue("smollm2"), request.getfixturevalue("llama32")]


def _prefix_matcher(g: CompiledGrammar, text: str) -> corral.Matcher:
    m = g.matcher()
    assert m.accept_bytes(text.encode()), text
    return m


def test_near_misses_refused_in_the_mask(request: pytest.FixtureRequest) -> None:
    for tok in _real_tokenizers(request):
        g = corral.compile_json_schema(PERSON, tok, extra_properties="spec")
        index = {b: i for i, b in enumerate(tok.token_bytes) if b}

        def allowed_after(prefix: str, g: CompiledGrammar = g, tok: corral.Tokenizer = tok) -> set[int]:
            mask = corral.allocate_bitmask(1, tok)
            _prefix_matcher(g, prefix).fill_next_token_bitmask(mask, 0)
            return set(corral.allowed_tokens(mask[0], tok))

        # Duplicate key: the closing quote of a second "name" is refused, a longer undeclared
        # key with the same start is not.
        ids = allowed_after('{"age": 1, "name": "x", "name')
        assert index[b'"'] not in ids
        assert index[b"s"] in ids  # "names" is an undeclared key
        # A required key missing: the object cannot close; with both present it can.
        assert index[b"}"] not in allowed_after('{"age": 1')
        assert index[b"}"] in allowed_after('{"age": 1, "name": "x"')
        assert index[b"}"] in allowed_after('{"$schema": "s", "name": "x", "age": 1')
        # Both directions against the parser at those states, on a token sample.
        rng = random.Random(3)
        sample = rng.sample(range(tok.vocab_size), 3000) + [index[b'"'], index[b"}"], index[b","]]
        for prefix in ['{"age": 1, "name": "x", "name', '{"age": 1', '{"tags": [], "age": 1, ', '{"home": {']:
            mask_matches_accept(_prefix_matcher(g, prefix), tok, sample)


def test_dependency_and_count_near_misses_refused_in_the_mask(request: pytest.FixtureRequest) -> None:
    for tok in _real_tokenizers(request):
        index = {b: i for i, b in enumerate(tok.token_bytes) if b}
        rng = random.Random(5)
        sample = rng.sample(range(tok.vocab_size), 2000) + [index[b"}"], index[b","], index[b'"']]

        def allowed_after(
            g: CompiledGrammar, prefix: str, tok: corral.Tokenizer = tok, sample: list[int] = sample
        ) -> set[int]:
            mask = corral.allocate_bitmask(1, tok)
            m = _prefix_matcher(g, prefix)
            m.fill_next_token_bitmask(mask, 0)
            mask_matches_accept(m, tok, sample)  # both directions, at every state checked
            return set(corral.allowed_tokens(mask[0], tok))

        close, comma = index[b"}"], index[b","]
        g = corral.compile_json_schema(DEPENDENT, tok, extra_properties="spec")
        # card needs addr, which needs zip: no close until both are there, and they may follow.
        assert close not in allowed_after(g, '{"card": 1')
        assert comma in allowed_after(g, '{"card": 1, "addr": "a"')
        assert close not in allowed_after(g, '{"card": 1, "addr": "a"')
        assert close in allowed_after(g, '{"card": 1, "zip": "z", "addr": "a"')
        assert close in allowed_after(g, '{"w": 1, "zip": "z"')
        g = corral.compile_json_schema(COUNTED, tok, extra_properties="spec")
        assert close not in allowed_after(g, '{"id": 1')  # minProperties 2
        assert close in allowed_after(g, '{"$schema": "s", "id": 1')
        assert comma not in allowed_after(g, '{"id": 1, "x": 2, "w": "v"')  # maxProperties 3
        # Two undeclared members and the required id missing: only "id" may come next.
        after = allowed_after(g, '{"w": 1, "v": 2, "')
        assert index[b"i"] in after and index[b"x"] not in after and index[b"w"] not in after
        # Dependencies beside maxProperties 3: card brings addr and zip, so after one undeclared
        # member the key "card" cannot close (a longer undeclared key can), and "zip" still can.
        g = corral.compile_json_schema(DEPENDENT_MAX, tok, extra_properties="spec")
        after = allowed_after(g, '{"w": 0, "card')
        assert index[b'"'] not in after and index[b"s"] in after
        assert index[b'"'] in allowed_after(g, '{"w": 0, "zip')
        assert comma not in allowed_after(g, '{"w": 0, "zip": "z", "addr": "a"')
        # Without undeclared members: exactly {a, b, d}, so c never starts, and a needs b.
        g = corral.compile_json_schema(DEPENDENT_FITS, tok, extra_properties="spec")
        after = allowed_after(g, '{"')
        assert index[b"c"] not in after and {index[b"a"], index[b"b"], index[b"d"]} <= after
        after = allowed_after(g, '{"d": null, "a": 1')
        assert close not in after and comma in after
        # Remembered undeclared keys: a repeated one cannot close, a longer one can.
        g = corral.compile_json_schema(REMEMBERED, tok, extra_properties="spec")
        after = allowed_after(g, '{"w": 0, "id": 1, "w')
        assert index[b'"'] not in after and index[b"w"] in after
        assert index[b'"'] in allowed_after(g, '{"w": 0, "id": 1, "v')
        assert close not in allowed_after(g, '{"w": 0, "id": 1')
        # The anchored class: with "z1\n" held, the escape's `n` after `"z1\` could only
        # close it, so it is refused; "z1\u0030" ("z10") is not.
        g = corral.compile_json_schema(REMEMBERED_ANCHORED, tok, extra_properties="spec")
        after = allowed_after(g, '{"y": 1, "z1\\n": true, "z1\\')
        assert index[b"n"] not in after and index[b"u"] in after


def _assert_every_token_allowed(g: Any, tok: corral.Tokenizer, mask: Any, texts: list[str]) -> None:
    """Each text, canonically tokenized, is accepted with every token allowed by the mask first."""
    for text in texts:
        m = g.matcher()
        for t in tok.encode(text):
            m.fill_next_token_bitmask(mask, 0)
            assert t in set(corral.allowed_tokens(mask[0], tok)), (text, tok.token_bytes[t])
            assert m.accept_token(t)
        assert m.is_accepting(), text


def test_valid_dependency_and_count_instances_never_forbidden(request: pytest.FixtureRequest) -> None:
    """Every token of canonically tokenized valid instances (keys in every order) is allowed."""
    for tok in _real_tokenizers(request):
        mask = corral.allocate_bitmask(1, tok)
        for schema in (
            DEPENDENT,
            COUNTED,
            DRAFT7_DEPENDENCIES,
            DEPENDENT_MAX,
            DEPENDENT_FITS,
            REMEMBERED,
            REMEMBERED_ANCHORED,
        ):
            g = corral.compile_json_schema(schema, tok, extra_properties="spec")
            texts = [t for t in _instances(schema, limit=2000) if _valid(schema, t)][:10]
            assert len(texts) >= 5
            _assert_every_token_allowed(g, tok, mask, texts)


def test_random_walks_produce_only_valid_instances(request: pytest.FixtureRequest) -> None:
    for tok in _real_tokenizers(request):
        for schema in (
            PERSON,
            PATTERNED,
            DEPENDENT,
            COUNTED,
            DEPENDENT_MAX,
            DEPENDENT_FITS,
            REMEMBERED,
            REMEMBERED_ANCHORED,
        ):
            g = corral.compile_json_schema(schema, tok, extra_properties="spec", escapes="canonical")
            rng = random.Random(11)
            for _ in range(5):
                out, _eos = random_walk(g, rng, max_steps=40, eos_weight=0.3)
                text = out.decode()
                assert _valid(schema, text), text


def test_valid_permutations_never_forbidden(request: pytest.FixtureRequest) -> None:
    """Every token of canonically tokenized valid permutations is allowed by the mask."""
    for tok in _real_tokenizers(request):
        g = corral.compile_json_schema(PERSON, tok, extra_properties="spec")
        mask = corral.allocate_bitmask(1, tok)
        texts = [t for t in _instances(PERSON, limit=120) if _valid(PERSON, t)][:12]
        assert len(texts) >= 10
        _assert_every_token_allowed(g, tok, mask, texts)


def test_shortest_completion_adds_missing_required_keys() -> None:
    tok = byte_tokenizer()
    g = corral.compile_json_schema(PERSON, tok, extra_properties="spec")
    prefixes = [
        '{"age": 1',
        '{"tags": ["a"], ',
        '{"home": {"city": "x"',
        '{"home": {"zip": "123"}, "name": "n"',
        "{",
    ]
    for prefix in prefixes:
        m = _prefix_matcher(g, prefix)
        text = prefix + m.shortest_completion().decode()
        assert _valid(PERSON, text), text
    # ... and the dependencies and the members a count still needs.
    cases = [
        (DEPENDENT, '{"card": 1'),
        (DEPENDENT, '{"w": 0, "addr": "'),
        (COUNTED, '{"w": 0'),
        (COUNTED, "{"),
    ]
    for schema, prefix in cases:
        g = corral.compile_json_schema(schema, tok, extra_properties="spec")
        text = prefix + _prefix_matcher(g, prefix).shortest_completion().decode()
        assert _valid(schema, text), text


KEYED_GRAMMAR = (
    'root ::= "{" body "}" | "{}"\n'
    'body ::= %keyed(","; "a:" [0-9], !"b:" [0-9], "c:" root; "x" [a-z] ":" [0-9])\n'
)


def test_keyed_grammar_text_and_artifact_round_trip() -> None:
    tok = byte_tokenizer()
    g = compile_grammar(KEYED_GRAMMAR, tok)
    cases = {
        "{b:1}": True,
        "{a:1,b:2}": True,
        "{b:2,a:1}": True,
        "{a:1}": False,
        "{a:1,a:2,b:1}": False,
        "{xq:1,b:2,xq:3}": True,
        "{c:{b:1},b:1}": True,
        "{c:{a:1},b:1}": False,
        "{}": True,
        "{b:1,c:{b:2,c:{b:3}},a:4}": True,
        "{b:1,b:1}": False,
    }
    assert "keyed group" in g.grammar_text  # the printed grammar says what it cannot spell
    loaded = CompiledGrammar.from_bytes(g.to_bytes(), tok)
    for text, want in cases.items():
        assert _accepts(g, text) == want, text
        assert _accepts(loaded, text) == want, text
    rng = random.Random(5)
    for _ in range(20):
        a, b = g.matcher(), loaded.matcher()
        for _step in range(30):
            ma, mb = corral.allocate_bitmask(1, tok), corral.allocate_bitmask(1, tok)
            a.fill_next_token_bitmask(ma, 0)
            b.fill_next_token_bitmask(mb, 0)
            assert (ma == mb).all()
            ids = [i for i in corral.allowed_tokens(ma[0], tok) if i not in tok.eos_ids]
            if not ids:
                break
            t = rng.choice(ids)
            assert a.accept_token(t) and b.accept_token(t)


@pytest.mark.parametrize(
    "text",
    [
        'root ::= %keyed(","; )',
        'root ::= %keyed("," "a")',
        'root ::= %keyed(","; "a"',
        'root ::= %other(","; "a")',
        'root ::= %keyed(","; "a" | "")',
        'root ::= %keyed(","; ^{1} "a")',
        'root ::= %keyed{2,2}(","; ^{1} "a", ^{2} "b", ^{0} "c")',  # nothing fits
        'root ::= %keyed{3,}(","; "a", "b")',
    ],
)
def test_keyed_grammar_errors_are_compile_errors(text: str) -> None:
    with pytest.raises(corral.CompileError):
        compile_grammar(text, byte_tokenizer())


# sha256 of the grammar text the converter wrote for these schemas before property_order
# existed (commit dc1c516), per layout: property_order="schema" must reproduce it exactly,
# so its masks are unchanged. The entries of schemas with undeclared keys were updated once,
# when "none of the declared keys" became one quoted string per first character (the same
# language: tests/test_compile_masks.py::test_undeclared_key_branches_are_the_complement).
GOLDEN: dict[str, str] = {
    "0-flexible-schema": "f43f702e9d8a14df323135bc861fd64776ffe280d12c362ff134714278de12eb",
    "0-flexible-spec": "39909b184b28027d9b2f001332dd93d84018b6ee2b249c843b0a61169c034bf8",
    "0-pretty-schema": "d0785d6b27a67500115890ba4583347b6462abb9b4d23a1419cf007700d2c163",
    "0-pretty-spec": "3bcbcbc1673eb9702625f55844a11e2907e4c4f9695d7d9b8e22121d47318b60",
    "1-flexible-schema": "fe0323131d7de41dbdcdee60a334973d4cca20386ba1a62beaa41bb9d4810180",
    "1-flexible-spec": "fe0323131d7de41dbdcdee60a334973d4cca20386ba1a62beaa41bb9d4810180",
    "1-pretty-schema": "729da3d585c80ea7d891350e3bef6e785824c2175d4c8bfcac8bc989c882c901",
    "1-pretty-spec": "729da3d585c80ea7d891350e3bef6e785824c2175d4c8bfcac8bc989c882c901",
    "2-flexible-schema": "6862147363b6210e44766cb828e04a33cde5731c221970b953f7142607dd18c8",
    "2-flexible-spec": "6862147363b6210e44766cb828e04a33cde5731c221970b953f7142607dd18c8",
    "2-pretty-schema": "a2759bd8cc6151ce2b5f237166810bc8ee50f1af3fbe228d610cc88890c34d6d",
    "2-pretty-spec": "a2759bd8cc6151ce2b5f237166810bc8ee50f1af3fbe228d610cc88890c34d6d",
    "3-flexible-schema": "9f6a23cb55e15794124a62a27617c6cae5a3d5a7c975b910c7150b9bc7e18064",
    "3-flexible-spec": "9f6a23cb55e15794124a62a27617c6cae5a3d5a7c975b910c7150b9bc7e18064",
    "3-pretty-schema": "042e6d26eb9dd8561a308b7a41a39307931df33414709d4d5019384962655ee6",
    "3-pretty-spec": "042e6d26eb9dd8561a308b7a41a39307931df33414709d4d5019384962655ee6",
}


def _golden_key(index: int, whitespace: str, extra: str) -> str:
    return f"{index}-{whitespace}-{extra}"


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
@pytest.mark.parametrize("whitespace", ["flexible", "pretty"])
@pytest.mark.parametrize("extra", ["schema", "spec"])
def test_schema_order_grammar_unchanged(index: int, whitespace: str, extra: str) -> None:
    g = corral.compile_json_schema(
        SCHEMAS[index],
        byte_tokenizer(),
        whitespace=whitespace,
        extra_properties=extra,
        property_order="schema",
    )
    digest = hashlib.sha256(g.grammar_source.encode()).hexdigest()
    assert digest == GOLDEN[_golden_key(index, whitespace, extra)]
