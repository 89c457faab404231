"""Compile-time work must not change a mask: golden digests of seeded mask walks.

Every speed-up of the compile path (automaton memo, lazy or shared construction, skipped
probes, converter fast paths) has to leave each grammar's masks bit for bit as they were. Each
schema below is compiled on the SmolLM2 vocabulary and walked along seeded random paths of
allowed tokens; every mask on the way (and the token taken) goes into a SHA-256. The digests
were recorded before the compile work of issue 12 part 2 (main ``f55a2a3``'s engine, the lead's
converter at ``b205a8a``), so a changed mask, a changed path or a changed grammar text fails here.

The enum filter's fast path (``literals._type_check``) is compared with jsonschema's own
verdicts on every JSON type.
"""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any

import numpy as np
import pytest
from helpers import byte_tokenizer

import corral
from corral.grammar.json_schema import literals

# A corpus touching every compile path: counted strings, patterns, formats, enums, numbers with
# bounds, nested and recursive objects, arrays, composition, negation, both property modes.
SCHEMAS: list[dict[str, Any]] = [
    {"type": "string", "minLength": 2, "maxLength": 12},
    {"type": "string", "pattern": "^[0-9a-zA-Z_-]{1,40}$"},
    {"type": "string", "format": "date-time"},
    {"type": "integer", "minimum": -40, "maximum": 1234},
    {"type": "number", "exclusiveMinimum": 0.5, "multipleOf": 0.25},
    {"enum": ["red", "green", 3, None, [1, 2], {"a": 1}]},
    {"type": "string", "enum": ["x", "y", 7, "zz"]},
    {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "name": {"type": "string", "maxLength": 30},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
            "kind": {"enum": ["a", "b"]},
        },
        "required": ["id", "name"],
    },
    {
        "type": "object",
        "properties": {"value": {"type": "number"}, "next": {"$ref": "#"}},
        "required": ["value"],
        "additionalProperties": False,
    },
    {
        "$defs": {"pt": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}}},
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/pt"}, "b": {"$ref": "#/$defs/pt"}, "c": {"$ref": "#/$defs/pt"}},
    },
    {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "array", "items": {"type": "integer"}}]},
    {"oneOf": [{"type": "integer", "minimum": 10}, {"type": "integer", "maximum": 20}]},
    {"type": "string", "not": {"enum": ["admin", "root"]}},
    {
        "type": "object",
        "patternProperties": {"^x-": {"type": "string"}, "^[a-z]+$": {"type": "integer"}},
        "additionalProperties": False,
    },
    {"type": "array", "prefixItems": [{"type": "boolean"}, {"type": "null"}], "items": False},
    {
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email"},
            "uuid": {"type": "string", "format": "uuid"},
            "when": {"type": "string", "format": "date"},
        },
    },
]

# (schema index, extra_properties) -> digest of two seeded walks of 40 steps (the digest covers
# the grammar text too: 7/9/15-spec were updated when "none of the declared keys" became one
# quoted string per first character, with every mask of their walks unchanged).
GOLDEN: dict[str, str] = {
    "0-schema": "37ca6185e2f629e8194af9be9c7f6dd2b8d37a9df93325fee5e7737dabd0d019",
    "0-spec": "37ca6185e2f629e8194af9be9c7f6dd2b8d37a9df93325fee5e7737dabd0d019",
    "1-schema": "904926c25b4ba547802a9441f01bd9a7c5506a4a5d541db9cc58e3d9bedad262",
    "1-spec": "904926c25b4ba547802a9441f01bd9a7c5506a4a5d541db9cc58e3d9bedad262",
    "2-schema": "bcee6ab86df1f12e9cefdf334989e8c8872193e7c64cc579077c38895e3bfe78",
    "2-spec": "bcee6ab86df1f12e9cefdf334989e8c8872193e7c64cc579077c38895e3bfe78",
    "3-schema": "6e8e2e1811ee5dab04d2c05a4c7a228b4a0c79a59caa0c30f41ac04e1d1d31c5",
    "3-spec": "6e8e2e1811ee5dab04d2c05a4c7a228b4a0c79a59caa0c30f41ac04e1d1d31c5",
    "4-schema": "0536464567e4191cfb68dd39c99c4c5cfb9d4ec7becb9584e86d222af3dd728e",
    "4-spec": "0536464567e4191cfb68dd39c99c4c5cfb9d4ec7becb9584e86d222af3dd728e",
    "5-schema": "6b0adc6f04adbfbdc2836b6f48aa2960becf3c06d625b51b7fea72271eb3caa9",
    "5-spec": "6b0adc6f04adbfbdc2836b6f48aa2960becf3c06d625b51b7fea72271eb3caa9",
    "6-schema": "e46ef3983f62ae18250926287a477b58fd3eaf7963f61fb8188b6e8a8eaf6d4e",
    "6-spec": "e46ef3983f62ae18250926287a477b58fd3eaf7963f61fb8188b6e8a8eaf6d4e",
    "7-schema": "df644d2c0af319a1b71490153e4f49386a2ee546f7023c488e2a8d772a59afcb",
    "7-spec": "fdc961303a45ed7ec9d382234c877237f18813bb593fc915ee00a396b6b9480f",
    "8-schema": "7cb3cb96dc8ebf52bb2b4066a83cd5fb1362fec78c77281e3d36fff0fa9c4d9f",
    "8-spec": "d312bf979a036d0692864d4b6fb81b1ca3e3d9770742ba28c92497db66131071",
    "9-schema": "034afdbeedf9fc732ddf819840d73b3622ff5e67007623c187185d29ebe8f633",
    "9-spec": "395c60671737a9997052c4e413772ced9e587fa7204268c3ffec59c1e91e4504",
    "10-schema": "4d1363695840c690fef082140fd6246afb9dd26b5329242b0c3e68745ec4b279",
    "10-spec": "4d1363695840c690fef082140fd6246afb9dd26b5329242b0c3e68745ec4b279",
    "11-schema": "7c0f97c6050d150ce948dd35d1d8360c7a761e4e23775b990b9f1c75356147dc",
    "11-spec": "7c0f97c6050d150ce948dd35d1d8360c7a761e4e23775b990b9f1c75356147dc",
    "12-schema": "881560514a21b4f90e9a212f9fd4ec58ee254102a806b5476667194715e09872",
    "12-spec": "881560514a21b4f90e9a212f9fd4ec58ee254102a806b5476667194715e09872",
    "13-schema": "0b06450f5c7eb7b6322ddffcae5e4cc0c268c0b503e08e81a3e888ec17801aa2",
    "13-spec": "0b06450f5c7eb7b6322ddffcae5e4cc0c268c0b503e08e81a3e888ec17801aa2",
    "14-schema": "e5dd4ed5cdb12d4d6dafdd09ebe280a3864cd93c17c910e1527b6777ae9ebf05",
    "14-spec": "e5dd4ed5cdb12d4d6dafdd09ebe280a3864cd93c17c910e1527b6777ae9ebf05",
    "15-schema": "f67cd9af80a2acb6f2e9ea6c17382e4cbf86bb5e4f1fa4b35412e8bd206490f0",
    "15-spec": "d7e53c2fa4078726e88f8d4421ddef36b7ab95ee842795066da87ce2dd59afee",
}

STEPS = 40
SEEDS = (1, 2)


def walk_digest(g: corral.CompiledGrammar, tok: corral.Tokenizer) -> str:
    h = hashlib.sha256(g.grammar_source.encode())
    for seed in SEEDS:
        rng = random.Random(seed)
        m = g.matcher()
        bm = corral.allocate_bitmask(1, tok)
        for _ in range(STEPS):
            m.fill_next_token_bitmask(bm, 0)
            h.update(bm.tobytes())
            allowed = np.flatnonzero(np.unpackbits(bm.view(np.uint8), bitorder="little"))
            allowed = allowed[allowed < tok.vocab_size]
            if m.is_terminated() or not len(allowed):
                break
            t = int(allowed[rng.randrange(len(allowed))])
            h.update(t.to_bytes(4, "little"))
            assert m.accept_token(t)
            if m.is_terminated():
                break
    return h.hexdigest()


def _key(i: int, extra: str) -> str:
    return f"{i}-{extra}"


@pytest.mark.parametrize("extra", ["schema", "spec"])
@pytest.mark.parametrize("i", range(len(SCHEMAS)))
def test_masks_unchanged(smollm2: corral.Tokenizer, i: int, extra: str) -> None:
    g = corral.compile_json_schema(SCHEMAS[i], smollm2, extra_properties=extra)
    assert walk_digest(g, smollm2) == GOLDEN[_key(i, extra)]


def test_the_digest_sees_a_one_token_change(smollm2: corral.Tokenizer) -> None:
    # The harness can fail: a grammar that differs from another by one allowed string
    # changes the digest.
    a = corral.compile_json_schema({"enum": ["red", "green"]}, smollm2)
    b = corral.compile_json_schema({"enum": ["red", "greet"]}, smollm2)
    assert walk_digest(a, smollm2) != walk_digest(b, smollm2)


_VALUES: list[Any] = [None, True, False, 0, 1, -3, 2.0, 2.5, "", "s", [], [1], {}, {"a": 1}]
_TYPES: list[Any] = [
    "null",
    "boolean",
    "integer",
    "number",
    "string",
    "array",
    "object",
    ["integer", "string"],
    ["null", "number"],
    ["array", "object", "boolean"],
]


@pytest.mark.parametrize("types", _TYPES, ids=str)
def test_enum_type_fast_path_agrees_with_jsonschema(types: Any) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    for v in _VALUES:
        expected = jsonschema.Draft202012Validator({"type": types}).is_valid(v)
        assert literals._type_check(types, v) is expected, (types, v)
        assert literals._satisfies({"type": types, "x-note": 1}, v) is expected, (types, v)


@pytest.mark.parametrize("types", [[], "integerx", ["string", 3], 7, None])
def test_enum_type_fast_path_leaves_odd_type_keywords_to_the_validator(types: Any) -> None:
    assert literals._type_check(types, 1) is None


def test_the_fast_path_knows_every_keyword_jsonschema_reads() -> None:
    # A keyword the validator reads but the fast path took for an annotation would let an enum
    # value through that the schema excludes.
    jsonschema = pytest.importorskip("jsonschema")
    assert set(jsonschema.Draft202012Validator.VALIDATORS) <= literals._VALIDATING


@pytest.mark.parametrize(
    "internal",
    [
        {literals._NOT_MATCHING: ["^(?:token)\\Z"]},
        {literals._NOT_MATCHING: ["^a", "b$", "[("]},  # a malformed pattern never excludes
        {literals._NOT_MATCHING: []},
        {literals._FRACTION: True},
        {literals._FRACTION: False},  # the handler ignores the flag's value, as jsonschema runs it
        {literals._NOT_MATCHING: ["x"], literals._FRACTION: True},
    ],
    ids=str,
)
def test_internal_keywords_fast_path_agrees_with_the_validator(internal: dict[str, Any]) -> None:
    # oneOf exclusivity writes _NOT_MATCHING beside a branch's enums: answered without the
    # validator (importing jsonschema cost ~0.1 s of the first such schema's compile).
    values = [*_VALUES, "token", "tokens", "a", "xb", "ab", "", 2, 2.0, 2.5, -0.0, True]
    for types in [None, "string", ["number", "string"], "integer"]:
        schema = dict(internal) if types is None else {"type": types, **internal}
        for v in values:
            expected = literals._quick_check(schema, v)
            assert literals._satisfies(schema, v) is expected, (schema, v)


@pytest.mark.parametrize(
    "listed",
    [
        {"const": 1},
        {"const": 1.0, "standsFor": "miter"},
        {"const": True},
        {"const": None},
        {"const": "a"},
        {"const": [1, "a"]},
        {"const": {"k": [1.5, None]}},
        {"enum": [1, "2", False, None, [1], {"a": 0}]},
        {"enum": []},
        {"enum": [2.5], "const": 2.5},
        {"enum": [1, 2], "const": 3},
        {"exclusiveMaximum": 2, "$corral:plain-numbers": True},
        {"exclusiveMinimum": 2, "exclusiveMaximum": 3},
        {"minimum": 1, "maximum": 2.5},
        {"minimum": -0.5, "const": 1},
        {"maximum": 10**20, "exclusiveMinimum": 1e-3},
        {"minItems": 2, "maxItems": 2},
        {"minLength": 1, "maxLength": 2.5},
        {"maxLength": 0, "minProperties": 1},
        {"maxProperties": 1, "minItems": 1, "minimum": 2},
    ],
    ids=str,
)
def test_const_enum_and_bounds_fast_path_agrees_with_jsonschema(listed: dict[str, Any]) -> None:
    # A oneOf of consts filters each branch by the others without importing jsonschema (the
    # first such schema of a process paid ~0.1 s for the import).
    jsonschema = pytest.importorskip("jsonschema")
    values = [*_VALUES, 1, 1.0, 2, 2.5, 3, -1, 0.001, 10**20, 1e20 + 1e5, "a", "2", True, False, None]
    values += [[1], [1.0], [1, "a"], {"a": 0}, "", "ab", "abc", "\U0001f600\u00e9", [], {}, {"a": 1, "b": 2}]
    values += [{"a": False}, {"k": [1.5, None]}, {"k": [1.5]}]
    for types in [None, "number", ["string", "null"], ["array", "object"]]:
        schema = dict(listed) if types is None else {"type": types, **listed}
        for v in values:
            expected = jsonschema.Draft202012Validator(schema).is_valid(v)
            assert literals._satisfies(schema, v) is expected, (schema, v)
    assert literals._listed_check({"enum": "x"}, 1) is None
    assert literals._bounds_check({"minimum": "x"}, 1) is None
    assert literals._bounds_check({"maximum": True}, 1) is None


def test_the_fast_path_leaves_validating_siblings_to_the_validator() -> None:
    assert literals._satisfies({"type": "string", "maxLength": 2}, "abc") is False
    assert literals._satisfies({"type": "string", "x-prompt": "?"}, "abc") is True
    assert literals._satisfies({"x-prompt": "?"}, 3) is True


def _regex_terminal_reference(pattern: str, flag: str) -> str:
    # The definition: escape sequences copied, a bare `/` escaped (the character loop it was).
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        out.append("\\/" if pattern[i] == "/" else pattern[i])
        i += 1
    return "/" + "".join(out) + "/" + flag


def test_regex_terminal_escapes_as_the_definition_says() -> None:
    from corral.grammar.json_schema.util import _regex_terminal

    rng = random.Random(0)
    for _ in range(5000):
        p = "".join(rng.choice("ab/\\\n.") for _ in range(rng.randrange(0, 10)))
        assert _regex_terminal(p, "j") == _regex_terminal_reference(p, "j"), repr(p)


def test_not_in_regex_is_the_exact_complement() -> None:

    from corral.grammar.json_schema.patterns import _not_in_regex

    rng = random.Random(1)
    alphabet = "ab.-é\\]^"
    for _ in range(300):
        n = rng.randrange(0, 5)
        names = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 4))) for _ in range(n)]
        rx = re.compile(_not_in_regex(names), re.S)
        assert _not_in_regex(list(names)) == rx.pattern  # memoised: the same text again
        for _ in range(30):
            s = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 5)))
            assert (rx.fullmatch(s) is not None) is (s not in names), (names, s)


@pytest.mark.parametrize(
    ("count", "length", "split"),
    [(6, (1, 4), False), (6, (12, 20), False), (40, (18, 22), True)],
    ids=["short", "long", "split"],
)
def test_undeclared_key_branches_are_the_complement(count: int, length: tuple[int, int], split: bool) -> None:
    """The converter writes "none of the declared keys" as one quoted string per top-level
    branch of the complement (``_not_in_branches``); the lowering merges them into one terminal
    when finite_dfa builds the alternation within its state cap (a trie of the names: linear),
    and lowers them as several terminals past it. Either way an undeclared property is accepted
    exactly when its key (in any JSON spelling) is not a declared name."""
    from corral.grammar.json_schema.patterns import _not_in_branches, _not_in_regex

    rng = random.Random(count * 100 + length[0])
    alphabet = "abcdefghijklmnop_é" if split else "abc_é"
    tok = byte_tokenizer()
    for _ in range(2 if split else 12):
        names = sorted(
            {"".join(rng.choice(alphabet) for _ in range(rng.randrange(*length))) for _ in range(count)}
        )
        assert "|".join(_not_in_branches(names)) == _not_in_regex(names)
        schema = {"type": "object", "properties": {n: {"type": "string"} for n in names}}
        g = corral.compile_json_schema(schema, tok, extra_properties="spec")
        assert ("alt_" in g.grammar_text) is split  # the complement split into terminals, or not
        samples = [*names, "", *(n[:-1] for n in names), *(n + "a" for n in names)]
        samples += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 24))) for _ in range(40)]
        for key in samples:
            spelled = "".join(f"\\u{ord(c):04x}" if rng.random() < 0.2 else c for c in key)
            m = g.matcher()
            ok = m.accept_bytes(('{"' + spelled + '": 1}').encode()) and m.is_accepting()
            assert ok is (key not in names), (names, key, spelled)


@pytest.mark.parametrize("cpu", [True, False])
def test_compile_stage_counters_run_on_either_clock(smollm2: corral.Tokenizer, cpu: bool) -> None:
    from corral import _native

    _native.set_compile_clock(cpu)
    _native.clear_engine_caches()  # (a memoised automaton would cost next to nothing)
    try:
        before = _native.compile_times()
        corral.compile_grammar('root ::= "\\"" /[a-z]{1,8}x(?s:.){0,3}/j "\\""', smollm2)
        after = _native.compile_times()
    finally:
        _native.set_compile_clock(False)
    assert after["compiles"] == before["compiles"] + 1
    spent = {k: after[k] - before[k] for k in ("parse_ms", "lower_ms", "automata_ms", "bind_ms")}
    assert all(v >= 0 for v in spent.values()), spent
    assert spent["automata_ms"] > 0, spent  # a DFA was built, on whichever clock


def _mask_walk(g: corral.CompiledGrammar, tok: corral.Tokenizer, seed: int, steps: int) -> list[bytes]:
    """Every mask of one seeded random walk of allowed tokens (and the tokens taken)."""
    rng = random.Random(seed)
    m = g.matcher()
    bm = corral.allocate_bitmask(1, tok)
    out: list[bytes] = []
    for _ in range(steps):
        m.fill_next_token_bitmask(bm, 0)
        out.append(bm.tobytes())
        allowed = np.flatnonzero(np.unpackbits(bm.view(np.uint8), bitorder="little"))
        allowed = allowed[allowed < tok.vocab_size]
        if m.is_terminated() or not len(allowed):
            break
        t = int(allowed[rng.randrange(len(allowed))])
        out.append(t.to_bytes(4, "little"))
        assert m.accept_token(t)
    return out


_LENGTHS: list[dict[str, Any]] = [
    {"type": "string", "maxLength": 40},
    {"type": "string", "minLength": 5, "maxLength": 64},
    {"type": "string", "minLength": 33, "maxLength": 33},
    {"type": "object", "properties": {"id": {"type": "string", "maxLength": 256}}, "required": ["id"]},
    {"type": "object", "propertyNames": {"maxLength": 40}, "additionalProperties": {"type": "integer"}},
]


@pytest.mark.parametrize("escapes", ["any", "canonical"])
@pytest.mark.parametrize("i", range(len(_LENGTHS)))
def test_a_length_alone_is_a_counted_terminal_with_the_products_masks(
    smollm2: corral.Tokenizer, monkeypatch: pytest.MonkeyPatch, i: int, escapes: str
) -> None:
    # A bounded length alone is written as a plain counted terminal, not as a product with
    # `(?s:.)*` (strings.regular_string): the same language, so the masks of the product form
    # (the converter with the fast path off) must be equal at every step.
    from corral.grammar.json_schema import strings

    g = corral.compile_json_schema(_LENGTHS[i], smollm2, escapes=escapes, whitespace="compact")
    monkeypatch.setattr(strings, "COUNTED_TERMINALS", False)
    product = corral.compile_json_schema(_LENGTHS[i], smollm2, escapes=escapes, whitespace="compact")
    flag = "j" if escapes == "any" else "c"
    assert re.search(rf"\( /\(\?s:\.\)\{{\d+,\d+\}}/{flag} \)", g.grammar_source), g.grammar_source
    assert f"& /(?s:.)*/{flag}" not in g.grammar_source
    assert f"& /(?s:.)*/{flag}" in product.grammar_source
    for seed in (1, 2, 3):
        assert _mask_walk(g, smollm2, seed, 120) == _mask_walk(product, smollm2, seed, 120), seed
