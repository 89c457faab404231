"""Lark grammars: corral's matcher and the ``lark`` package's own parser agree, token by token on
a real tokenizer, on a corpus of grammars written for these tests; unsupported constructs are
refused with their line and column."""

from __future__ import annotations

import random

import lark
import numpy as np
import pytest
from lark_corpus import CORPUS, REFUSED

import corral
from corral.grammar.lark import COMMON, lark_to_gbnf

IDS = [c[0] for c in CORPUS]


def _lark(grammar: str) -> lark.Lark:
    # dynamic_complete: every terminal may end wherever its pattern allows (corral's semantics).
    return lark.Lark(grammar, parser="earley", lexer="dynamic_complete")


def _lark_accepts(parser: lark.Lark, text: str) -> bool:
    try:
        parser.parse(text)
        return True
    except lark.exceptions.LarkError:
        return False


def _matcher_accepts(g: corral.CompiledGrammar, tok: corral.Tokenizer, text: str) -> bool:
    m = g.matcher()
    return all(m.accept_token(t) for t in tok.encode(text)) and m.is_accepting()


def _accepts_text(g: corral.CompiledGrammar, text: str) -> bool:
    m = g.matcher()
    return m.accept_string(text) and m.is_accepting()


def test_the_corpus_has_thirty_grammars() -> None:
    assert len(CORPUS) >= 30


@pytest.mark.parametrize(("name", "grammar", "accepted", "rejected"), CORPUS, ids=IDS)
def test_corral_accepts_what_lark_accepts(
    name: str, grammar: str, accepted: list[str], rejected: list[str], smollm2: corral.Tokenizer
) -> None:
    parser = _lark(grammar)
    g = corral.compile_grammar(grammar, smollm2, syntax="lark")
    for text in accepted:
        assert _lark_accepts(parser, text), f"the corpus is wrong: lark rejects {text!r}"
        assert _matcher_accepts(g, smollm2, text), f"corral rejects {text!r}, which lark accepts"
    for text in rejected:
        assert not _lark_accepts(parser, text), f"the corpus is wrong: lark accepts {text!r}"
        assert not _matcher_accepts(g, smollm2, text), f"corral accepts {text!r}, which lark rejects"


@pytest.mark.parametrize(("name", "grammar", "accepted", "rejected"), CORPUS, ids=IDS)
def test_walks_under_the_mask_parse_with_lark(
    name: str, grammar: str, accepted: list[str], rejected: list[str], smollm2: corral.Tokenizer
) -> None:
    parser = _lark(grammar)
    g = corral.compile_grammar(grammar, smollm2, syntax="lark")
    rng = random.Random(name)
    mask = np.zeros((1, (smollm2.width + 31) // 32), dtype=np.int32)
    eos = set(smollm2.eos_ids)
    for _ in range(4):
        m = g.matcher()
        out = bytearray()
        for _step in range(rng.randrange(2, 16)):
            m.fill_next_token_bitmask(mask, 0)
            allowed = np.flatnonzero(
                np.unpackbits(mask.view(np.uint8), bitorder="little")[: smollm2.vocab_size]
            )
            assert allowed.size > 0, "a live matcher must allow some token"
            choices = [int(t) for t in allowed if int(t) not in eos]
            if not choices:
                break
            t = rng.choice(choices)
            assert m.accept_token(t)
            out += smollm2.token_bytes[t]
        out += m.shortest_completion()
        text = out.decode("utf-8")
        assert _lark_accepts(parser, text), f"a walk under corral's mask wrote {text!r}, which lark rejects"


@pytest.mark.parametrize(("name", "grammar", "fragment", "line"), REFUSED, ids=[r[0] for r in REFUSED])
def test_unsupported_or_broken_grammars_are_refused_where_they_are(
    name: str, grammar: str, fragment: str, line: int
) -> None:
    with pytest.raises(corral.CompileError) as e:
        lark_to_gbnf(grammar)
    assert fragment in str(e.value)
    if line:
        assert e.value.line == line and e.value.column is not None


def test_common_terminals_match_lark_on_random_strings() -> None:
    """Each bundled common terminal has Lark's language: compared on strings built from the
    characters that matter (digits, signs, quotes, backslashes, newlines, comment markers)."""
    rng = random.Random(0)
    alphabet = list('09aZ_.eE+-"\\ \t\n\r#/*x')
    tok = corral.Tokenizer.from_tokens([bytes([i]) for i in range(128)] + [b""], eos_ids=[128])
    for name in COMMON:
        if name.startswith("_"):
            continue
        grammar = f"start: {name}\n%import common.{name}\n"
        parser = _lark(grammar)
        g = corral.compile_grammar(grammar, tok, syntax="lark")
        for _ in range(300):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 7)))
            if name == "ESCAPED_STRING":
                text = '"' + text + '"'
            elif name == "C_COMMENT":
                text = "/*" + text + "*/"
            assert _lark_accepts(parser, text) == _accepts_text(g, text), (name, text)


def test_ignored_text_is_bounded(smollm2: corral.Tokenizer) -> None:
    grammar = 'start: "a" "b"\n%ignore " "\n'
    g = corral.compile_grammar(grammar, smollm2, syntax="lark")
    assert _matcher_accepts(g, smollm2, "a" + " " * 16 + "b")
    assert not _matcher_accepts(g, smollm2, "a" + " " * 17 + "b")
    loose = lark_to_gbnf(grammar, max_ignore=40)
    assert _matcher_accepts(
        corral.compile_grammar(loose, smollm2, start="lark-start"), smollm2, "a" + " " * 30 + "b"
    )


def test_syntax_is_checked() -> None:
    tok = corral.Tokenizer.from_tokens([bytes([i]) for i in range(128)] + [b""], eos_ids=[128])
    with pytest.raises(ValueError, match="syntax"):
        corral.compile_grammar('root ::= "a"', tok, syntax="ebnf")  # type: ignore[arg-type]
    # GBNF stays the default, and a Lark start rule can be named.
    assert _accepts_text(corral.compile_grammar('root ::= "a"', tok), "a")
    g = corral.compile_grammar('top: "x"\n', tok, syntax="lark", start="top")
    assert _accepts_text(g, "x")


def test_every_host_reads_lark_through_the_spec(smollm2: corral.Tokenizer) -> None:
    from corral.compile import ConstraintSpec, compile_constraint, spec_from_args
    from corral.grammar.lark import grammar_syntax

    lark_text = 'start: "a" B\nB: /[0-9]+/\n'
    assert grammar_syntax(lark_text) == "lark" and grammar_syntax('root ::= "a"') == "gbnf"
    spec = spec_from_args({"grammar": lark_text})
    assert spec.options == {"syntax": "lark"}
    assert spec_from_args({"grammar": 'root ::= "a"'}).options == {}
    assert spec.key(smollm2.hash) != ConstraintSpec.grammar(lark_text, syntax="gbnf").key(smollm2.hash)
    c = compile_constraint(spec, smollm2)
    assert _matcher_accepts(c.grammar, smollm2, "a42")
    with pytest.raises(ValueError, match="syntax"):
        ConstraintSpec.grammar(lark_text, syntax="ebnf")
