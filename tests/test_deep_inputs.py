"""Deep and wide inputs from strangers: a working matcher or a corral error naming the limit.

Each case builds one hostile input (a schema dict nested 10,000 deep, its JSON text, a grammar
or regex nested 10,000 deep, an object with 10,000 properties, an ``enum`` of 100,000 values,
...) and compiles it in a fresh subprocess under a memory cap (``RLIMIT_AS``) and a timeout, so
a ``RecursionError``, a crash (a C++ stack overflow), a hang or a memory blow-up fails the test
instead of taking the test run down. The deep cases also run on a background thread, whose
stack (1 MiB here) is smaller than the main thread's. Asserted per case: either the matcher accepts a valid
instance and rejects an invalid one, or the error's ``code``, ``limit`` and message.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

MEMORY_CAP = 3 << 30  # bytes of address space (the interpreter and engine need ~1 GiB)
TIMEOUT_S = 60

_PRELUDE = r"""
import json, resource, sys, threading
resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))
import corral

# A byte vocabulary: fast to build, and every text has one tokenization.
TOK = corral.Tokenizer.from_tokens([bytes([b]) for b in range(256)] + [b"<eos>"], eos_ids=[256])
N = {n}

def outcome(build, valid=None, invalid=None):
    try:
        g = build()
    except corral.CorralError as e:
        return {{"code": e.code, "limit": getattr(e, "limit", None), "message": str(e)[:400]}}
    out = {{"code": "ok"}}
    for name, text in (("valid", valid), ("invalid", invalid)):
        if text is not None:
            m = g.matcher()
            out[name] = bool(m.accept_string(text) and m.is_accepting())
    return out

def schema(s, valid=None, invalid=None, **kw):
    return outcome(lambda: corral.compile_json_schema(s, TOK, **kw), valid, invalid)

def grammar(t, valid=None, invalid=None):
    return outcome(lambda: corral.compile_grammar(t, TOK), valid, invalid)

def regex(t, valid=None, invalid=None):
    return outcome(lambda: corral.compile_regex(t, TOK), valid, invalid)

def run():
{body}

if {thread}:
    threading.stack_size(1 << 20)  # smaller than the main thread's 8 MiB: what a pool may give
    box = []
    t = threading.Thread(target=lambda: box.append(run()))
    t.start()
    t.join()
    result = box[0] if box else {{"code": "thread died"}}
else:
    result = run()
print("RESULT " + json.dumps(result))
"""


def _run(body: str, n: int, thread: bool = False) -> dict[str, object]:
    code = _PRELUDE.format(
        cap=MEMORY_CAP, n=n, thread=thread, body=textwrap.indent(textwrap.dedent(body), "    ")
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT_S)
    lines = [line for line in p.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"no result (exit {p.returncode}): {p.stderr[-2000:]}"
    return json.loads(lines[-1][len("RESULT ") :])  # type: ignore[no-any-return]


def _limit(result: dict[str, object], limit: str, *words: str) -> None:
    assert result["code"] == "limit_exceeded", result
    assert result["limit"] == limit, result
    for w in words:
        assert w in str(result["message"]), result


def _works(result: dict[str, object]) -> None:
    assert result == {"code": "ok", "valid": True, "invalid": False}, result


# -- schemas nested deep (as a dict, as JSON text, through $ref) ---------------------------------
DEEP_SCHEMAS = {
    "properties": (
        """
        s = {"type": "string"}
        for _ in range(N):
            s = {"type": "object", "properties": {"a": s}, "required": ["a"]}
        return schema(s)
        """,
        "#/properties/a/properties/a",
    ),
    "items": (
        """
        s = {"type": "integer"}
        for _ in range(N):
            s = {"type": "array", "items": s}
        return schema(s)
        """,
        "#/items/items",
    ),
    "anyOf": (
        """
        s = {"type": "integer"}
        for _ in range(N):
            s = {"anyOf": [s, {"type": "null"}]}
        return schema(s)
        """,
        "#/anyOf/0/anyOf/0",
    ),
    "allOf": (
        """
        s = {"type": "integer"}
        for _ in range(N):
            s = {"allOf": [s, {"minimum": 0}]}
        return schema(s)
        """,
        "#/allOf/0/allOf/0",
    ),
    "text": (
        """
        return schema('{"type": "object", "properties": {"a": ' * N + '{"type": "string"}' + "}}" * N)
        """,
        "line 1, column",
    ),
    "text-arrays": ("return schema('[' * N + ']' * N)", "line 1, column 129"),
    "ref-chain": (
        """
        defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(N)}
        defs[f"d{N}"] = {"type": "integer"}
        return schema({"$defs": defs, "$ref": "#/$defs/d0"})
        """,
        "counting $ref hops) at #/$defs/d127",
    ),
    "ref-chain-objects": (
        """
        defs = {
            f"d{i}": {"type": "object", "properties": {"x": {"$ref": f"#/$defs/d{i + 1}"}}} for i in range(N)
        }
        defs[f"d{N}"] = {"type": "integer"}
        return schema({"$defs": defs, "$ref": "#/$defs/d0"})
        """,
        "counting $ref hops) at #/$defs/d63/properties/x",
    ),
    "ref-chain-siblings": (
        """
        defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}", "minimum": 0} for i in range(N)}
        defs[f"d{N}"] = {"type": "integer"}
        return schema({"$defs": defs, "$ref": "#/$defs/d0"})
        """,
        "counting $ref hops) at #/$defs/d0/allOf",
    ),
}


@pytest.mark.parametrize("thread", [False, True], ids=["main", "thread"])
@pytest.mark.parametrize("case", list(DEEP_SCHEMAS))
def test_deep_schema_is_refused_by_max_schema_depth(case: str, thread: bool) -> None:
    body, where = DEEP_SCHEMAS[case]
    _limit(_run(body, 10_000, thread), "max_schema_depth", "max_schema_depth=128", where)


def test_schema_at_the_depth_limit_compiles() -> None:
    # 60 nested objects: 121 arrays/objects deep in the document, 61 subschemas deep.
    body = """
    s = {"type": "integer"}
    for _ in range(N):
        s = {"type": "object", "properties": {"a": s}, "required": ["a"]}
    return schema(s, valid='{"a":' * N + "1" + "}" * N, invalid='{"a":' * N + '"x"' + "}" * N)
    """
    _works(_run(body, 60, thread=True))


def test_max_schema_depth_is_settable() -> None:
    body = """
    s = {"type": "integer"}
    for _ in range(N):
        s = {"type": "array", "items": s}
    return schema(s, max_schema_depth=8)
    """
    _limit(_run(body, 10, thread=False), "max_schema_depth", "max_schema_depth=8", "#/items")


def test_deep_pattern_is_refused_before_python_re_reads_it() -> None:
    body = """return schema({"type": "string", "pattern": "^" + "(" * N + "a" + ")" * N + "$"})"""
    _limit(_run(body, 10_000, thread=True), "max_nesting", "at #/pattern")


# -- wide objects, long enums ---------------------------------------------------------------------
def test_object_with_10000_properties_converts() -> None:
    # The conversion (this frontend's part) at full width.
    body = """
    from corral.grammar.json_schema import schema_to_grammar
    props = {f"p{i}": {"type": "integer"} for i in range(N)}
    text, _ = schema_to_grammar({"type": "object", "properties": props, "required": ["p9999"]})
    return {"code": "ok", "last": '/p9999/j' in text, "first": '/p0/j' in text}
    """
    assert _run(body, 10_000) == {"code": "ok", "last": True, "first": True}


def test_object_with_10000_properties_compiles_to_a_matcher() -> None:
    # Canonical key spellings: one small automaton per key. (The engine's tables over the
    # 10,000-rule member chain are built by worklists: the round-robin fixpoints they replace
    # took 46 s here.)
    body = """
    props = {f"p{i}": {"type": "integer"} for i in range(N)}
    required = [f"p{i}" for i in range(0, N, 1000)] + ["p9999"]
    s = {"type": "object", "properties": props, "required": required}
    valid = json.dumps({r: 1 for r in required}, separators=(",", ":"))
    invalid = json.dumps({r: 1 for r in required[:-1]}, separators=(",", ":"))
    # (a generous conversion limit: the subject is the engine's compile, on a busy machine;
    # _run's 60 s timeout bounds the whole)
    return schema(s, valid, invalid, escapes="canonical", max_convert_ms=60_000)
    """
    _works(_run(body, 10_000))


def test_object_with_10000_properties_in_every_key_spelling_is_refused_by_a_limit() -> None:
    # Every escape spelling of every key: 10,000 key automata pass the total-states bound.
    body = """
    props = {f"p{i}": {"type": "integer"} for i in range(N)}
    return schema({"type": "object", "properties": props}, max_convert_ms=60_000)
    """
    _limit(_run(body, 10_000), "max_total_dfa_states")


def test_object_with_2000_properties() -> None:
    body = """
    props = {f"p{i}": {"type": "integer"} for i in range(N)}
    required = [f"p{i}" for i in range(0, N, 100)]
    s = {"type": "object", "properties": props, "required": required}
    valid = json.dumps({r: 1 for r in required}, separators=(",", ":"))
    invalid = json.dumps({r: "x" for r in required}, separators=(",", ":"))
    return schema(s, valid, invalid, escapes="canonical")
    """
    _works(_run(body, 2_000))


def test_long_property_name_with_extra_properties() -> None:
    # The extra-key class is the complement of the declared names: a trie as deep as the name.
    body = """
    s = {"type": "object", "properties": {"a" * N: {"type": "integer"}}, "additionalProperties": True}
    return schema(s)
    """
    _limit(_run(body, 10_000, thread=True), "max_nesting")


def test_enum_of_100000_integers() -> None:
    _limit(_run("return schema({'enum': list(range(N))})", 100_000), "max_productions")


def test_enum_of_100000_strings_converts() -> None:
    # The conversion at full length (under a second).
    body = """
    from corral.grammar.json_schema import schema_to_grammar
    text, _ = schema_to_grammar({"enum": [f"value-{i}" for i in range(N)]})
    return {"code": "ok", "last": "/value\\\\-99999/j" in text}
    """
    assert _run(body, 100_000) == {"code": "ok", "last": True}


def test_enum_of_100000_strings_is_refused_by_a_limit() -> None:
    # The engine's compile: one production per value passes max_productions (in seconds).
    body = "return schema({'enum': [f'value-{i}' for i in range(N)]}, max_convert_ms=60_000)"
    _limit(_run(body, 100_000), "max_productions")


def test_enum_of_1000_strings_works() -> None:
    body = "return schema({'enum': [f'value-{i}' for i in range(N)]}, '\"value-777\"', '\"value-1000\"')"
    _works(_run(body, 1_000))


# -- grammar text and regexes ---------------------------------------------------------------------
@pytest.mark.parametrize("thread", [False, True], ids=["main", "thread"])
def test_grammar_nested_10000_deep_in_parentheses(thread: bool) -> None:
    body = """return grammar("root ::= " + "(" * N + '"a"' + ")" * N)"""
    _limit(_run(body, 10_000, thread), "max_nesting", "line 1, column")


@pytest.mark.parametrize("thread", [False, True], ids=["main", "thread"])
def test_grammar_rule_chain_10000_deep(thread: bool) -> None:
    body = """
    lines = [f'r{i} ::= "(" r{i + 1} ")"' for i in range(N)] + [f'r{N} ::= "x"']
    text = "root ::= r0\\n" + "\\n".join(lines)
    return grammar(text, "(" * N + "x" + ")" * N, "(" * N + "x" + ")" * (N - 1))
    """
    _works(_run(body, 10_000, thread))


@pytest.mark.parametrize("thread", [False, True], ids=["main", "thread"])
def test_grammar_with_100000_stacked_quantifiers(thread: bool) -> None:
    # Each quantifier wraps the last one: as deep as nesting, and counted as such.
    body = """return grammar('root ::= "a"' + '*' * N)"""
    _limit(_run(body, 100_000, thread), "max_nesting", "line 1, column")


@pytest.mark.parametrize("thread", [False, True], ids=["main", "thread"])
def test_chain_of_30000_regular_rules_stays_shallow(thread: bool) -> None:
    # Every rule is regular, so lowering inlines them into one terminal: past max_nesting the
    # chain stays nonterminals (before, 5,000 overflowed a 1 MiB stack).
    body = """
    lines = [f'r{i} ::= "(" r{i + 1} ")"' for i in range(N)] + [f'r{N} ::= "x"']
    text = "root ::= r0\\n" + "\\n".join(lines)
    return grammar(text, "(" * N + "x" + ")" * N, "(" * N + ")" * N)
    """
    _works(_run(body, 30_000, thread))


@pytest.mark.parametrize("kind", ["regex", "grammar"])
def test_max_nesting_has_a_ceiling(kind: str) -> None:
    # Raising max_nesting cannot let 50,000 levels reach the recursive parsers on a small stack.
    text = "'(' * N + 'a' + ')' * N" if kind == "regex" else """'root ::= ' + '(' * N + '"a"' + ')' * N"""
    body = f"return outcome(lambda: corral.compile_{kind}({text}, TOK, max_nesting=100_000))"
    _limit(_run(body, 50_000, thread=True), "max_nesting", "refused whatever max_nesting says")


def test_grammar_with_100000_alternatives() -> None:
    body = """return grammar("root ::= " + " | ".join(f'"w{i}"' for i in range(N)))"""
    _limit(_run(body, 100_000), "max_productions")


def test_grammar_sequence_of_100000() -> None:
    body = """return grammar("root ::= " + " ".join('"a"' for _ in range(N)), "a" * N, "a" * (N - 1))"""
    _works(_run(body, 100_000))


@pytest.mark.parametrize("thread", [False, True], ids=["main", "thread"])
@pytest.mark.parametrize("group", ["(", "(?:"])
def test_regex_groups_nested_10000_deep(group: str, thread: bool) -> None:
    body = f"return regex({group!r} * N + 'a' + ')' * N)"
    _limit(_run(body, 10_000, thread), "max_nesting", "nested too deeply")


@pytest.mark.parametrize("thread", [False, True], ids=["main", "thread"])
def test_regex_of_100000_alternatives_and_concatenation(thread: bool) -> None:
    body = """
    a = regex("|".join(f"w{i}" for i in range(N)))
    b = regex("a" * N)
    return a if a["code"] != "limit_exceeded" else b
    """
    _limit(_run(body, 100_000, thread), "max_nfa_states")


def test_regex_of_5000_alternatives_works() -> None:
    body = """return regex("|".join(f"w{i}" for i in range(N)), "w4321", "w")"""
    _works(_run(body, 5_000, thread=True))


# -- deep JSON data --------------------------------------------------------------------------------
def test_output_nested_10000_deep_matches_and_validate_raises_a_corral_error() -> None:
    body = """
    g = corral.compile_json_schema({"type": "array"}, TOK)
    text = "[" * N + "]" * N
    m = g.matcher()
    ok = m.accept_string(text) and m.is_accepting()
    try:
        g.validate(text)
        return {"code": "validated", "matched": ok}
    except corral.CorralError as e:
        return {"code": e.code, "matched": ok, "message": str(e)}
    """
    result = _run(body, 10_000)
    assert result["matched"] is True, result
    assert result["code"] == "output_validation_error" and "nests too deeply" in str(result["message"]), (
        result
    )


# -- conversion time ------------------------------------------------------------------------------
def _alternatives_chain(n: int) -> dict[str, object]:
    """anyOf branches whose constraining siblings merge with a $ref target that has alternatives
    of its own, nested n deep: exact conversion multiplies the alternatives (issue 16)."""
    defs: dict[str, object] = {}
    for i in range(n):
        nxt = f"#/definitions/d{i + 1}"
        props = {
            "p0": {"type": "string"},
            "obj": {"$ref": nxt},
            "arr": {"type": "array", "items": {"$ref": nxt}},
        }
        branches = [{"required": ["p0"]}, {"required": ["obj"]}, {"$ref": nxt, "minProperties": 1}]
        defs[f"d{i}"] = {"type": "object", "properties": props, "anyOf": branches}
    defs[f"d{n}"] = {"type": "object"}
    return {"definitions": defs, "$ref": "#/definitions/d0"}


def test_conversion_time_limit_names_the_pointer() -> None:
    from corral.errors import LimitExceeded
    from corral.grammar.json_schema import SchemaOptions, schema_to_grammar

    with pytest.raises(LimitExceeded) as info:
        schema_to_grammar(_alternatives_chain(40), SchemaOptions(max_convert_ms=300))
    assert info.value.limit == "max_convert_ms"
    assert "it was at #/definitions/" in info.value.message


def test_converter_process_wait_is_bounded_and_the_pool_recovers() -> None:
    from corral.compile.converter import SchemaConverter
    from corral.errors import LimitExceeded

    # A generous grace: the worker runs at nice 19 and a busy machine may starve it a while.
    conv = SchemaConverter(1, grace_s=30.0, max_wait_s=1.0)
    try:
        # The conversion's own limit, inside the worker.
        with pytest.raises(LimitExceeded, match="it was at #/definitions/"):
            conv.convert(_alternatives_chain(40), {"max_convert_ms": 300})
        # No limit of its own: the wait gives up, and the stuck worker is replaced.
        with pytest.raises(LimitExceeded, match="did not answer within 1.0 s"):
            conv.convert(_alternatives_chain(40), {"max_convert_ms": None})
        text, _ = conv.convert({"type": "integer"}, {})
        assert text.startswith("root ::= ")
    finally:
        conv.close()


def test_converter_processes_are_recycled() -> None:
    """A worker runs at most max_tasks conversions, then a fresh process takes over (its heap
    does not keep every schema it has seen), and the answers stay right across the change."""
    from corral.compile.converter import SchemaConverter

    conv = SchemaConverter(1, max_tasks=2)
    try:
        pids = set()
        for i in range(6):
            text, _ = conv.convert({"const": f"v{i}"}, {})
            assert f"/v{i}/j" in text, text
            pool = conv._pool
            assert pool is not None
            pids |= {p.pid for p in pool._processes.values()}  # type: ignore[attr-defined]
        assert len(pids) >= 3, pids  # 7 conversions (one at start-up), 2 per process
        # Many conversions in flight across a recycling point (where a pool with more queued
        # tasks than its child has left can hang: CPython #115634): every one answers, right.
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(4) as ex:
            texts = list(ex.map(lambda i: conv.convert({"const": f"w{i}"}, {})[0], range(16), timeout=120))
        assert all(f"/w{i}/j" in t for i, t in enumerate(texts)), texts
    finally:
        conv.close()


def test_time_limit_fires_inside_a_long_enum() -> None:
    from corral.errors import LimitExceeded
    from corral.grammar.json_schema import SchemaOptions, schema_to_grammar

    with pytest.raises(LimitExceeded, match=r"it was at #/enum/\d+$"):
        schema_to_grammar({"enum": list(range(100_000))}, SchemaOptions(max_convert_ms=200))
