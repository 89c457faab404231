"""Bad input: malformed constraints get errors that say what and where; pathological ones hit a
limit quickly with a clear LimitExceeded — never a crash, a hang or unbounded memory."""

from __future__ import annotations

import time

import pytest
from helpers import byte_tokenizer

import corral


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
    t0 = time.perf_counter()
    with pytest.raises(corral.LimitExceeded) as ei:
        if kind == "regex":
            corral.compile_regex(text, tok)
        else:
            corral.compile_grammar(text, tok)
    assert ei.value.limit == limit, str(ei.value)
    assert time.perf_counter() - t0 < 5.0
    assert limit in str(ei.value)


def test_pathological_but_fine_inputs_compile_fast(tok: corral.Tokenizer) -> None:
    t0 = time.perf_counter()
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
    assert time.perf_counter() - t0 < 10.0


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
