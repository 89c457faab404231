"""Matcher behaviour: EOS rules, rollback, copy, batch fill, jump-ahead bytes, completions,
partial UTF-8 tokens, tokens spanning terminal boundaries."""

from __future__ import annotations

import random

import numpy as np
import pytest
from helpers import allowed, byte_tokenizer, mask_matches_accept

import corral

TOKENS = [
    b"{",
    b"}",
    b'"',
    b'":',
    b'",',
    b'"}',
    b"a",
    b"b",
    b"ab",
    b'ab"',
    b"1",
    b"12",
    b" ",
    b"\xc3",
    b"\xa9",
    b"\xc3\xa9",
    b"true",
    b"tr",
    b"ue",
    b",",
    b":",
    b"[",
    b"]",
    b"[1",
    b"1]",
    b"null",
]


def make_tok() -> corral.Tokenizer:
    toks = TOKENS + [b"<eos>", b"<pad>"]
    n = len(toks)
    return corral.Tokenizer.from_tokens(toks, special_ids=[n - 2, n - 1], eos_ids=[n - 2], width=64)


def ids(tok: corral.Tokenizer, *pieces: bytes) -> list[int]:
    return [tok.token_bytes.index(p) for p in pieces]


def test_eos_only_when_complete() -> None:
    tok = make_tok()
    m = corral.compile_regex(r"ab(ab)?", tok).matcher()
    eos = tok.eos_ids[0]
    assert eos not in allowed(m, tok)
    assert not m.accept_token(eos)
    assert m.accept_token(ids(tok, b"ab")[0])
    assert eos in allowed(m, tok) and m.is_accepting()
    assert m.accept_token(ids(tok, b"ab")[0])
    assert allowed(m, tok) == [eos]
    assert m.accept_token(eos) and m.is_terminated()
    assert not m.accept_token(ids(tok, b"a")[0])
    assert allowed(m, tok) == [eos]  # a finished row only ever produces EOS


def test_padding_ids_and_special_tokens_never_allowed() -> None:
    tok = make_tok()
    m = corral.compile_regex(r"(?s).*", tok).matcher()
    mask = corral.allocate_bitmask(1, tok)
    m.fill_next_token_bitmask(mask, 0)
    got = set(corral.allowed_tokens(mask[0], tok))
    lone_continuation = TOKENS.index(b"\xa9")  # can never start a UTF-8 character
    assert got == (set(range(len(TOKENS))) - {lone_continuation}) | {tok.eos_ids[0]}
    assert all(i < tok.vocab_size for i in got)


def test_tokens_spanning_terminal_boundaries() -> None:
    tok = make_tok()
    g = corral.compile_grammar(
        r"""
root ::= "{" pair ("," pair)* "}"
pair ::= "\"" [ab]+ "\":" value
value ::= [0-9]+ | "true" | "[" value "]"
""",
        tok,
    )
    m = g.matcher()
    for piece in [b"{", b'"', b"ab", b'":', b"[1", b"1]", b",", b'"', b"a", b'":', b"true", b"}"]:
        mask_matches_accept(m, tok)
        assert m.accept_token(ids(tok, piece)[0]), piece
    assert m.is_accepting()
    # a token that spans a boundary into something invalid is refused
    m2 = g.matcher()
    assert m2.accept_bytes(b'{"a')
    assert tok.token_bytes.index(b'",') not in allowed(m2, tok)
    assert tok.token_bytes.index(b'":') in allowed(m2, tok)


def test_partial_utf8_tokens() -> None:
    tok = make_tok()
    m = corral.compile_regex(r"[é]+", tok).matcher()
    a = set(allowed(m, tok))
    assert tok.token_bytes.index(b"\xc3") in a and tok.token_bytes.index(b"\xc3\xa9") in a
    assert tok.token_bytes.index(b"\xa9") not in a  # a continuation byte cannot start a char
    assert m.accept_token(tok.token_bytes.index(b"\xc3"))
    assert not m.is_accepting()
    assert allowed(m, tok) == [tok.token_bytes.index(b"\xa9")]
    m2 = corral.compile_regex(r"[è]+", tok).matcher()  # U+00E8 = C3 A8: \xc3 allowed, \xa9 then not
    assert m2.accept_token(tok.token_bytes.index(b"\xc3"))
    assert allowed(m2, tok) == []  # no token continues C3 with A8: a dead end is visible, not hidden
    # (in a real vocabulary all 256 bytes exist; see test_regex_constraints for no-dead-end walks)


def test_rollback_equals_fresh_prefix() -> None:
    tok = byte_tokenizer([b"ab", b'",', b'"}'])
    g = corral.compile_json(tok)
    doc = b'{"ab": [1, 2, {"c": "d"}], "e": true}'
    rng = random.Random(1)
    for _ in range(20):
        cut = rng.randint(0, len(doc))
        extra = rng.randint(0, len(doc) - cut)
        m = g.matcher()
        for b in doc[: cut + extra]:
            assert m.accept_token(b)
        m.rollback(extra)
        fresh = g.matcher()
        for b in doc[:cut]:
            assert fresh.accept_token(b)
        mask1, mask2 = corral.allocate_bitmask(1, tok), corral.allocate_bitmask(1, tok)
        m.fill_next_token_bitmask(mask1, 0)
        fresh.fill_next_token_bitmask(mask2, 0)
        assert np.array_equal(mask1, mask2)
        assert m.is_accepting() == fresh.is_accepting()
        assert m.num_steps == cut
        assert m.shortest_completion() == fresh.shortest_completion()
    # rolling back EOS un-terminates
    m = corral.compile_regex("a", tok).matcher()
    assert m.accept_token(ord("a")) and m.accept_token(tok.eos_ids[0])
    m.rollback(1)
    assert not m.is_terminated() and m.is_accepting()


def test_copy_is_independent() -> None:
    tok = byte_tokenizer()
    m = corral.compile_regex(r"(ab|cd)+", tok).matcher()
    assert m.accept_bytes(b"ab")
    c = m.copy()
    assert c.accept_bytes(b"cd")
    assert m.num_steps == 1 and c.num_steps == 2
    assert allowed(m, tok) == allowed(c, tok)  # same language position (both after a full pair)
    assert m.accept_bytes(b"a")
    assert allowed(m, tok) == [ord("b")]
    assert ord("a") in allowed(c, tok)


def test_batch_fill_equals_row_fill(llama32: corral.Tokenizer) -> None:
    g = corral.compile_json(llama32)
    docs = ['{"a": 1', "[true, ", '"str', "", "12", '{"k": [1, {"z": "é']
    matchers = []
    for d in docs:
        m = g.matcher()
        assert m.accept_bytes(d.encode())
        matchers.append(m)
    batch = corral.allocate_bitmask(len(docs) + 2, llama32)
    rows = [2, 0, 5, 1, 7, 3]
    corral.fill_next_token_bitmasks(matchers, batch, rows=rows, threads=2)
    for m, r in zip(matchers, rows, strict=True):
        single = corral.allocate_bitmask(1, llama32)
        m.fill_next_token_bitmask(single, 0)
        assert np.array_equal(single[0], batch[r])
    assert not batch[4].any() and not batch[6].any()
    with pytest.raises(ValueError):
        corral.fill_next_token_bitmasks(matchers + [matchers[0]], corral.allocate_bitmask(7, llama32))


def test_torch_bitmask_if_available() -> None:
    torch = pytest.importorskip("torch")
    tok = byte_tokenizer()
    m = corral.compile_regex("a|b", tok).matcher()
    t = torch.zeros((2, (tok.width + 31) // 32), dtype=torch.int32)
    m.fill_next_token_bitmask(t, 1)
    assert t[0].sum() == 0
    assert corral.allowed_tokens(t[1].numpy(), tok) == [ord("a"), ord("b")]


def test_forced_bytes_and_shortest_completion() -> None:
    tok = byte_tokenizer()
    g = corral.compile_grammar(
        r'''root ::= "{\"name\": \"" [a-z]+ "\", \"kind\": " ("\"cat\"" | "\"dog\"") "}"''', tok
    )
    m = g.matcher()
    assert m.forced_bytes() == b'{"name": "'
    assert m.shortest_completion() == b'{"name": "a", "kind": "cat"}'
    assert m.accept_bytes(b'{"name": "x')
    assert m.forced_bytes() == b""
    assert m.accept_bytes(b'"')
    assert m.forced_bytes() == b', "kind": "'
    assert m.accept_bytes(b', "kind": "d')
    assert m.forced_bytes() == b'og"}'
    done = m.copy()
    assert done.accept_bytes(done.shortest_completion()) and done.is_accepting()
    # already complete: nothing forced, empty completion
    m2 = corral.compile_regex("abc", tok).matcher()
    assert m2.accept_bytes(b"abc")
    assert m2.forced_bytes() == b"" and m2.shortest_completion() == b""


def test_shortest_completion_nested_recursion() -> None:
    tok = byte_tokenizer()
    g = corral.compile_json(tok)
    m = g.matcher()
    assert m.accept_bytes(b'{"a": [[{"b": [1, {"c": "x')
    comp = m.shortest_completion()
    assert comp == b'"}]}]]}'
    assert m.accept_bytes(comp) and m.is_accepting()


def test_accept_bytes_rejects_without_changing_state() -> None:
    tok = byte_tokenizer()
    m = corral.compile_regex(r"\d+-\d+", tok).matcher()
    assert m.accept_bytes(b"12")
    before = allowed(m, tok)
    assert not m.accept_bytes(b"3x")
    assert allowed(m, tok) == before and m.num_steps == 1
    assert not m.accept_token(10_000)  # out of range id
    assert not m.accept_token(-1)


def test_bitmask_shape_errors() -> None:
    tok = byte_tokenizer()
    m = corral.compile_regex("a", tok).matcher()
    with pytest.raises(ValueError):
        m.fill_next_token_bitmask(np.zeros((1, 2), dtype=np.int32), 0)
    with pytest.raises(IndexError):
        m.fill_next_token_bitmask(corral.allocate_bitmask(1, tok), 3)
    with pytest.raises(TypeError):
        m.fill_next_token_bitmask(np.zeros((1, 20), dtype=np.int64), 0)


def test_thread_safety_many_matchers_one_grammar(llama32: corral.Tokenizer) -> None:
    import threading

    g = corral.compile_json(llama32)
    doc = '{"key": [1, 2.5, "text ü", {"x": null}], "other": false}'
    ids = llama32.encode(doc)
    ref = []
    m = g.matcher()
    for t in ids:
        mask = corral.allocate_bitmask(1, llama32)
        m.fill_next_token_bitmask(mask, 0)
        ref.append(mask.copy())
        assert m.accept_token(t)
    errors: list[str] = []
    fresh = corral.compile_json(llama32)  # empty cache: the threads race to fill it

    def worker() -> None:
        mm = fresh.matcher()
        for k, t in enumerate(ids):
            mask = corral.allocate_bitmask(1, llama32)
            mm.fill_next_token_bitmask(mask, 0)
            if not np.array_equal(mask, ref[k]):
                errors.append(f"step {k}")
            mm.accept_token(t)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors


def test_memoised_masks_equal_computed_masks(llama32: corral.Tokenizer) -> None:
    # Masks served from the parser-state memo must equal masks computed from scratch, in
    # recurring states (second pass, repeated structure) and at every nesting depth.
    memo = corral.compile_json(llama32)
    fresh = corral.compile_json(llama32, max_mask_memo_mb=0)
    doc = '[{"a": "x", "b": [1, {"c": "y"}]}, {"a": "z", "b": [2, {"c": "w"}]}, {"a": "q", "b": []}]'
    ids = llama32.encode(doc)
    for _ in range(2):
        m1, m2 = memo.matcher(), fresh.matcher()
        for t in ids:
            b1, b2 = corral.allocate_bitmask(1, llama32), corral.allocate_bitmask(1, llama32)
            m1.fill_next_token_bitmask(b1, 0)
            m2.fill_next_token_bitmask(b2, 0)
            assert np.array_equal(b1, b2)
            assert m1.accept_token(t) and m2.accept_token(t)
    assert memo.cache_stats()["memo_entries"] > 0
    assert fresh.cache_stats()["memo_entries"] == 0


def test_grammar_named_special_tokens(llama32: corral.Tokenizer) -> None:
    # Special tokens are never allowed unless the grammar names them: by text or by id.
    eot = llama32.ids_of("<|eot_id|>")[0]
    g = corral.compile_grammar('root ::= "ok" <|eot_id|> "done" | "x" <[128001]>', llama32)
    m = g.matcher()
    assert eot not in allowed(m, llama32)
    assert m.accept_bytes(b"ok")
    a = allowed(m, llama32)
    assert eot in a and not m.is_accepting()
    assert [t for t in a if t in llama32.special_ids] == [eot]
    assert m.accept_token(eot)
    assert eot not in allowed(m, llama32)
    assert m.accept_bytes(b"done") and m.is_accepting()
    m.rollback(2)
    assert eot in allowed(m, llama32)  # rollback over a named token
    m2 = g.matcher()
    assert m2.accept_bytes(b"x") and 128001 in allowed(m2, llama32)
    assert m2.accept_token(128001) and m2.is_accepting()
    assert "<|eot_id|>" in g.grammar_text
    with pytest.raises(corral.CompileError, match="not in the vocabulary") as ei:
        corral.compile_grammar('root ::= "a"\n  <|no_such_token|>', llama32)
    assert (ei.value.line, ei.value.column) == (2, 3)
    with pytest.raises(corral.CompileError, match="outside the vocabulary"):
        corral.compile_grammar("root ::= <[999999]>", llama32)
    with pytest.raises(corral.CompileError, match="unterminated token reference"):
        corral.compile_grammar("root ::= <|eot_id", llama32)


def test_typed_probe_and_regex_check() -> None:
    """The converter's questions to the engine come back as values (no exception as answer)."""
    from corral import _native
    from corral.grammar import probe

    assert _native.probe_expression("/[a-z]{1,5}/ & /ab.*/", 1000, {}) == 6
    assert probe.dfa_states("/a/ - /a/", 1000) == probe.EMPTY
    assert probe.dfa_states("/[a-z]{1,300}/", 50) == probe.TOO_BIG
    with pytest.raises(corral.CompileError):
        _native.probe_expression("/(ab/", 100, {})
    _native.check_regex("[a-z]+", {})
    with pytest.raises(corral.CompileError):
        _native.check_regex("(?=a)b", {})
    with pytest.raises(corral.LimitExceeded):
        _native.check_regex("a{0,100000}", {})
