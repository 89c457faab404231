"""Bad input: malformed constraints get errors that say what and where; pathological ones hit a
limit quickly with a clear LimitExceeded — never a crash, a hang or unbounded memory."""

from __future__ import annotations

import importlib
import pickle
import pkgutil
import re
import time

import pytest
from helpers import byte_tokenizer

import corral
from corral import errors


@pytest.fixture(scope="module")
def tok() -> corral.Tokenizer:
    return byte_tokenizer()


@pytest.mark.parametrize(
    ("pattern", "offset", "needle"),
    [
        (r"(ab", 0, "missing )"),
        (r"ab)", 2, "paren"),
        (r"a**", 2, "repeat"),
        (r"*a", 0, "repeat"),
        (r"[z-a]", 1, "range"),
        (r"[abc", 0, "character set"),
        (r"(a)\1", 3, "backreference"),
        (r"(?=a)b", 0, "look"),
        (r"(?<!a)b", 0, "look"),
        (r"a\b", 1, "\\b"),
        (r"x(?P=n)", 1, "backreference"),
        (r"a{3,1}", 1, ""),
        (r"\q", 0, "escape"),
        (r"ab(?>c)", 2, "atomic"),
        (r"a*+", 1, "possessive"),
        (r"a^b", 1, "'^'"),
    ],
)
def test_regex_errors_name_the_position(
    pattern: str, offset: int, needle: str, tok: corral.Tokenizer
) -> None:
    with pytest.raises(corral.CompileError) as ei:
        corral.compile_regex(pattern, tok)
    err = ei.value
    assert err.offset == offset, (pattern, err.offset, str(err))
    assert err.line == 1 and err.column == offset + 1
    assert needle.lower() in str(err).lower(), str(err)


@pytest.mark.parametrize(
    ("grammar", "line", "column", "needle"),
    [
        ('root ::= "a" foo', 1, 14, "undefined rule 'foo'"),
        ('root ::= "a"\nroot ::= "b"', 2, 1, "defined twice"),
        ('root ::= ("a" | "b"', 1, 20, "`)` to close the group opened at line 1, column 10"),
        ('root ::= "abc', 1, 10, "unterminated string"),
        ("root ::= [a-", 1, 10, "class"),
        ('root = "a"', 1, 6, "::="),
        ('root ::= "a"{3,1}', 1, 13, "n < m"),
        ('root ::= "\\q"', 1, 11, "escape"),
        ('x ::= "a"', 0, 0, "no rule named 'root'"),
        ("", 0, 0, "empty"),
        ("root ::= /a(b/", 1, 12, "in /regex/: missing )"),
        ('root ::= "a" @', 1, 14, "expected"),
        ("root ::= [z-a]", 1, 11, "out of order"),
        ('root ::= x\nx ::= x "a"', 0, 0, "matches no string"),
    ],
)
def test_grammar_errors_name_line_and_column(
    grammar: str, line: int, column: int, needle: str, tok: corral.Tokenizer
) -> None:
    with pytest.raises(corral.CompileError) as ei:
        corral.compile_grammar(grammar, tok)
    err = ei.value
    assert needle.lower() in str(err).lower(), str(err)
    if line:
        assert (err.line, err.column) == (line, column), str(err)


@pytest.mark.parametrize(
    ("kind", "text", "limit"),
    [
        ("regex", "a{0,100000}", "max_nfa_states"),
        ("regex", "(" * 100_000 + "a" + ")" * 100_000, "max_nesting"),
        ("regex", "(a|b)*a(a|b){20}", "max_dfa_states"),
        ("regex", "[a-z]{10000}[0-9]{10000}x{20000}y{20000}", "max_nfa_states"),
        ("grammar", "root ::= " + "(" * 10_000 + '"a"' + ")" * 10_000, "max_nesting"),
        ("grammar", 'root ::= x{0,100000}\nx ::= "a" x | "b"', "max_productions"),
    ],
)
def test_pathological_inputs_hit_a_limit_fast(
    kind: str, text: str, limit: str, tok: corral.Tokenizer
) -> None:
    t0 = time.process_time()  # CPU time: a loaded machine does not fail it
    with pytest.raises(corral.LimitExceeded) as ei:
        if kind == "regex":
            corral.compile_regex(text, tok)
        else:
            corral.compile_grammar(text, tok)
    assert ei.value.limit == limit, str(ei.value)
    assert time.process_time() - t0 < 5.0
    assert limit in str(ei.value)


def test_pathological_but_fine_inputs_compile_fast(tok: corral.Tokenizer) -> None:
    t0 = time.process_time()  # CPU time: a loaded machine does not fail it
    m = corral.compile_regex(r"(a|aa)*", tok).matcher()
    assert m.accept_bytes(b"a" * 5000) and m.is_accepting()
    m = corral.compile_regex(r"((a*)*)*", tok).matcher()
    assert m.accept_bytes(b"a" * 5000) and m.is_accepting()
    # a grammar nested 10,000 deep *in its data* (not its text) is fine: recursion is exact
    g = corral.compile_grammar('root ::= "[" root "]" | "x"', tok)
    m = g.matcher()
    assert m.accept_bytes(b"[" * 3000 + b"x" + b"]" * 2999)
    assert not m.is_accepting()
    assert m.shortest_completion() == b"]"
    assert m.accept_bytes(b"]") and m.is_accepting()
    assert time.process_time() - t0 < 10.0


def test_limits_are_configurable(tok: corral.Tokenizer) -> None:
    with pytest.raises(corral.LimitExceeded) as ei:
        corral.compile_regex("[a-z]{50}", tok, max_dfa_states=10)
    assert ei.value.limit == "max_dfa_states"
    corral.compile_regex("a{0,100000}", tok, max_nfa_states=400_000, max_dfa_states=200_000)
    with pytest.raises(TypeError, match="unknown limit"):
        corral.compile_regex("a", tok, max_bananas=3)
    with pytest.raises(ValueError):
        corral.compile_regex("a", tok, max_dfa_states=0)


def test_ambiguous_grammar_puts_matcher_in_error_state(tok: corral.Tokenizer) -> None:
    # Exponentially ambiguous grammar: the item limit trips, the matcher reports it instead of
    # exhausting memory, and only EOS stays allowed.
    g = corral.compile_grammar(
        'root ::= x*\nx ::= "a" | "a" "a" | y\ny ::= x x | "b"', tok, max_items_per_set=200
    )
    m = g.matcher()
    ok = m.accept_bytes(b"a" * 200)
    assert not ok
    assert "max_items_per_set" in m.error
    mask = corral.allocate_bitmask(1, tok)
    m.fill_next_token_bitmask(mask, 0)
    assert corral.allowed_tokens(mask[0], tok) == list(tok.eos_ids)


def test_errors_are_corral_errors(tok: corral.Tokenizer) -> None:
    assert issubclass(corral.CompileError, corral.CorralError)
    assert issubclass(corral.LimitExceeded, corral.CorralError)
    assert issubclass(corral.TokenizerError, corral.CorralError)
    with pytest.raises(TypeError):
        corral.compile_regex(b"abc", tok)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- one error hierarchy


def _error_classes() -> list[type[errors.CorralError]]:
    return [c for c in (getattr(errors, n) for n in errors.__all__) if isinstance(c, type)]


def test_every_error_class_has_its_own_unique_code() -> None:
    classes = _error_classes()
    assert errors.CorralError in classes and len(classes) >= 12
    codes = [c.__dict__.get("code") for c in classes]
    for cls, code in zip(classes, codes, strict=True):
        assert isinstance(code, str) and re.fullmatch(r"[a-z]+(_[a-z]+)*", code), cls
        assert issubclass(cls, errors.CorralError) and cls.__doc__, cls
        assert errors.error_class(code) is cls
    assert len(set(codes)) == len(codes), codes


def test_every_native_error_type_has_a_python_twin() -> None:
    from corral import _core

    native = _core.error_types()
    assert native[0] == ("CorralError", "", "corral_error")
    names = {name for name, _, _ in native}
    assert {"CompileError", "LimitExceeded", "TokenizerError", "SlotError", "InternalError"} <= names
    for name, parent, code in native:
        twin = errors.error_class(code)
        assert twin.__name__ == name and getattr(errors, name) is twin, (name, code)
        if not parent:
            assert twin is errors.CorralError
            continue
        (direct,) = [b for b in twin.__bases__ if issubclass(b, errors.CorralError)]
        assert direct.__name__ == parent, (name, direct.__name__, parent)
        assert parent in names, f"{name}'s parent {parent} is not a native type"
        assert direct.code == next(c for n, _, c in native if n == parent)


def test_native_errors_raise_their_twins(tok: corral.Tokenizer) -> None:
    with pytest.raises(errors.SlotError) as se:
        corral.compile_regex("a", tok).bind({"x": ["a"]})
    assert type(se.value) is errors.SlotError and se.value.code == "slot_error"
    assert not isinstance(se.value, errors.CompileError)
    with pytest.raises(errors.LimitExceeded) as le:
        corral.compile_regex("[a-z]{50}", tok, max_dfa_states=10)
    assert le.value.code == "limit_exceeded"
    with pytest.raises(errors.CompileError) as ce:
        corral.compile_regex("(a", tok)
    assert type(ce.value) is errors.CompileError and ce.value.line == 1


def test_every_corral_error_class_lives_in_corral_errors() -> None:
    import corral as pkg

    for info in pkgutil.walk_packages(pkg.__path__, "corral."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:  # optional dependency (vLLM, a server extra) not installed
            continue
    stack: list[type] = [errors.CorralError]
    seen: list[type] = []
    while stack:
        cls = stack.pop()
        seen.append(cls)
        stack.extend(cls.__subclasses__())
    strays = [
        f"{c.__module__}.{c.__qualname__}"
        for c in seen
        if c.__module__ != "corral.errors"
        and not c.__name__.startswith("_")
        and c.__module__.startswith("corral")
    ]
    assert not strays, strays
    assert corral.BudgetError is errors.BudgetError
    assert corral.OutputValidationError is errors.OutputValidationError
    from corral import models, schema
    from corral.generation import decode

    assert decode.BudgetError is errors.BudgetError
    assert schema.OutputValidationError is errors.OutputValidationError
    assert models.ModelNotFoundError is errors.ModelNotFoundError
    assert not issubclass(errors.ModelNotFoundError, errors.TokenizerError)
    assert issubclass(errors.ModelNotFoundError, (errors.ModelError, FileNotFoundError))


_SAMPLES: list[errors.CorralError] = [
    errors.CorralError("plain"),
    errors.CompileError("bad", 3, 1, 4),
    errors.CompileError("whole text"),
    errors.SchemaError("too small", "#/minimum"),
    errors.SchemaError("not JSON"),
    errors.UnsupportedSchemaError("remote $ref", "#/$ref"),
    errors.LimitExceeded("max_dfa_states", 11, 10),
    errors.TokenizerError("no EOS"),
    errors.SlotError("slot 'x': no values", "x"),
    errors.BudgetError("does not fit"),
    errors.OutputValidationError("not JSON", ["Expecting value"]),
    errors.ModelError("cannot load"),
    errors.ModelNotFoundError("model not found: /x.gguf"),
    errors.InternalError("invariant failed"),
    errors.ToolError("tools[0]: duplicate name", "tools[0].function.name", None),
    errors.ToolError("bad parameters", "tools[1].function.parameters", "#/properties/x"),
    errors.ArtifactError("not an artifact", "bad_magic"),
]


def test_samples_cover_every_class() -> None:
    assert {type(e) for e in _SAMPLES} == set(_error_classes())


@pytest.mark.parametrize("err", _SAMPLES, ids=lambda e: f"{type(e).__name__}:{e}")
def test_every_error_pickles(err: errors.CorralError) -> None:
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is type(err) and str(again) == str(err) and again.code == err.code
    assert {k: v for k, v in vars(again).items()} == {k: v for k, v in vars(err).items()}


def test_no_position_is_printed_when_none_is_known(tok: corral.Tokenizer) -> None:
    assert str(errors.CompileError("whole text")) == "whole text"
    assert str(errors.CompileError("bad", 3, 1, 4)) == "bad (line 1, column 4)"
    assert str(errors.CompileError("bad", 0)) == "bad (at offset 0)"  # a known offset 0 is shown
    assert str(errors.SchemaError("not JSON")) == "not JSON"
    assert str(errors.SchemaError("too small", "#/minimum")) == "too small (at #/minimum)"
    assert errors.SchemaError("not JSON").pointer == "#"
    # engine errors about the grammar as a whole come back without a position
    for text in ('x ::= "a"', "", 'root ::= x\nx ::= x "a"'):
        with pytest.raises(errors.CompileError) as ei:
            corral.compile_grammar(text, tok)
        e = ei.value
        assert (e.offset, e.line, e.column) == (None, None, None), (text, str(e))
        assert "line 0" not in str(e) and "offset" not in str(e), str(e)
    with pytest.raises(errors.SchemaError) as si:
        corral.compile_json_schema("{not json", tok)
    assert "(at #)" not in str(si.value)


# ---------------------------------------------------------------------- server mapping


class _Sub(errors.SchemaError):
    """A subclass without a row of its own (like a frontend's private error)."""


_HTTP: list[tuple[errors.CorralError, int, str]] = [
    (errors.CorralError("x"), 400, "invalid_request"),
    (errors.CompileError("x", 0, 1, 1), 400, "invalid_constraint"),
    (errors.SchemaError("x", "#/a"), 400, "invalid_schema"),
    (errors.UnsupportedSchemaError("x", "#/b"), 400, "unsupported_schema"),
    (errors.LimitExceeded("max_dfa_states", 2, 1), 400, "constraint_too_complex"),
    (errors.SlotError("x", "s"), 400, "invalid_slots"),
    (errors.BudgetError("x"), 400, "max_tokens_too_small"),
    (errors.OutputValidationError("x", []), 500, "output_validation_error"),
    (errors.TokenizerError("x"), 500, "tokenizer_error"),
    (errors.ModelError("x"), 500, "model_error"),
    (errors.ModelNotFoundError("x"), 404, "model_not_found"),
    (errors.InternalError("x"), 500, "internal_error"),
    (errors.ToolError("tools[1]: bad", "tools[1].function.parameters", "#/type"), 400, "invalid_tools"),
    (errors.ArtifactError("corrupt artifact", "corrupt"), 400, "invalid_artifact"),
]


def test_server_table_covers_every_code() -> None:
    from corral.server.errors import STATUS_BY_CODE

    assert set(STATUS_BY_CODE) == {c.code for c in _error_classes()}
    assert {type(e) for e, _, _ in _HTTP} == set(_error_classes())


@pytest.mark.parametrize(("err", "status", "code"), _HTTP, ids=lambda v: getattr(v, "code", str(v)))
def test_server_maps_each_error_by_its_code(err: errors.CorralError, status: int, code: str) -> None:
    from corral.server.errors import error_from_exception

    api = error_from_exception(err, "response_format")
    assert (api.status, api.code) == (status, code)
    body = api.body()["error"]
    assert body["code"] == code
    assert body["type"] == ("server_error" if status >= 500 else "invalid_request_error")
    if status >= 500:
        assert api.param is None  # not the request's fault
    elif isinstance(err, errors.ToolError):
        assert api.param == err.param  # the tool's own field, not the request field it came in
    else:
        assert api.param == "response_format"
    if isinstance(err, (errors.SchemaError, errors.ToolError)):
        assert body["pointer"] == err.pointer


def test_unsupported_keywords_in_tools_keep_their_code() -> None:
    from corral.server.errors import error_from_exception

    e = errors.ToolError(
        "tools[0].function.parameters: remote $ref", "tools[0].function.parameters", "#/$ref"
    )
    e.unsupported = True
    api = error_from_exception(e)
    assert (api.status, api.code, api.param, api.pointer) == (
        400,
        "unsupported_schema",
        "tools[0].function.parameters",
        "#/$ref",
    )


def test_server_mapping_of_other_exceptions() -> None:
    from corral.server.errors import APIError, error_from_exception

    sub = error_from_exception(_Sub("x", "#/c"))
    assert (sub.status, sub.code, sub.pointer) == (400, "invalid_schema", "#/c")
    assert error_from_exception(errors.InternalError("boom")).status == 500
    assert error_from_exception(ValueError("v")).status == 400
    assert error_from_exception(TypeError("t")).status == 400
    bug = error_from_exception(KeyError("k"))
    assert (bug.status, bug.code) == (500, "internal_error")
    same = APIError(418, "teapot", "teapot")
    assert error_from_exception(same) is same
