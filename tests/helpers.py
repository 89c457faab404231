"""Shared test helpers: small synthetic vocabularies, random tokenizations, masked random walks."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

import numpy as np

import corral


def byte_tokenizer(extra: Iterable[bytes] = ()) -> corral.Tokenizer:
    """Every single byte as a token, plus `extra` multi-byte tokens, plus a special EOS."""
    toks = [bytes([b]) for b in range(256)] + list(extra) + [b"<|eos|>", b"<|special|>"]
    n = len(toks)
    return corral.Tokenizer.from_tokens(toks, special_ids=[n - 2, n - 1], eos_ids=[n - 2], width=n + 5)


def allowed(matcher: corral.Matcher, tok: corral.Tokenizer) -> list[int]:
    mask = corral.allocate_bitmask(1, tok)
    matcher.fill_next_token_bitmask(mask, 0)
    return corral.allowed_tokens(mask[0], tok)


def bytes_index(tok: corral.Tokenizer) -> dict[bytes, int]:
    """bytes → one ordinary token id with exactly those bytes."""
    out: dict[bytes, int] = {}
    for i, b in enumerate(tok.token_bytes):
        if b and i not in tok.special_ids and i not in tok.eos_ids and b not in out:
            out[b] = i
    return out


def random_tokenization(
    data: bytes, index: dict[bytes, int], rng: random.Random, max_len: int = 16
) -> list[int]:
    """A random segmentation of `data` into tokens of the vocabulary (not the canonical one).
    Requires every single byte (or enough pieces) to be in the vocabulary."""
    n = len(data)
    # reachable[i]: can data[i:] be segmented?
    reachable = [False] * (n + 1)
    reachable[n] = True
    for i in range(n - 1, -1, -1):
        for j in range(i + 1, min(n, i + max_len) + 1):
            if reachable[j] and data[i:j] in index:
                reachable[i] = True
                break
    assert reachable[0], "data cannot be segmented with this vocabulary"
    out: list[int] = []
    i = 0
    while i < n:
        options = [j for j in range(i + 1, min(n, i + max_len) + 1) if reachable[j] and data[i:j] in index]
        j = rng.choice(options)
        out.append(index[data[i:j]])
        i = j
    return out


def random_walk(
    compiled: corral.CompiledGrammar, rng: random.Random, max_steps: int = 60, eos_weight: float = 0.15
) -> tuple[bytes, bool]:
    """Sample tokens uniformly from the mask until EOS or `max_steps`; then finish with the
    shortest completion. Returns (output bytes, whether EOS was sampled by the walk).
    Asserts the mask is never empty (no dead ends)."""
    tok = compiled.tokenizer
    m = compiled.matcher()
    mask = corral.allocate_bitmask(1, tok)
    out = bytearray()
    eos = set(tok.eos_ids)
    for _ in range(max_steps):
        m.fill_next_token_bitmask(mask, 0)
        ids = corral.allowed_tokens(mask[0], tok)
        assert ids, f"dead end after {bytes(out)!r}"
        non_eos = [i for i in ids if i not in eos]
        if not non_eos or (len(non_eos) < len(ids) and rng.random() < eos_weight):
            assert m.is_accepting()
            assert m.accept_token(next(i for i in ids if i in eos))
            assert m.is_terminated()
            return bytes(out), True
        t = rng.choice(non_eos)
        assert m.accept_token(t), f"mask allowed {t} ({tok.token_bytes[t]!r}) but accept_token refused"
        out += tok.token_bytes[t]
    rest = m.shortest_completion()
    assert m.accept_bytes(rest)
    assert m.is_accepting()
    return bytes(out) + rest, False


def mask_matches_accept(
    m: corral.Matcher, tok: corral.Tokenizer, sample: Iterable[int] | None = None
) -> None:
    """Both directions of exactness against the parser: token t's bit is set iff accepting t
    succeeds from this state (the parser only keeps completable prefixes)."""
    mask = corral.allocate_bitmask(1, tok)
    m.fill_next_token_bitmask(mask, 0)
    bits = set(corral.allowed_tokens(mask[0], tok))
    ids = range(tok.width) if sample is None else sample
    for t in ids:
        c = m.copy()
        ok = t < tok.vocab_size and c.accept_token(t)
        assert ok == (t in bits), (
            f"token {t} {tok.token_bytes[t] if t < tok.vocab_size else None!r}: mask={t in bits} accept={ok}"
        )


def row_bits(mask: np.ndarray) -> np.ndarray:
    return np.unpackbits(mask.view(np.uint8), bitorder="little")


def twin_walk_step(
    a: corral.Matcher,
    b: corral.Matcher,
    tok: corral.Tokenizer,
    ids: np.ndarray,
    rng: random.Random,
    preferred: np.ndarray,
    p_preferred: float,
    checks: int,
) -> None:
    """One step of a walk comparing two matchers of the same language whose masks were just
    found equal (``ids``: the allowed tokens, end tokens removed): spot-check the mask against
    ``a``'s parser both ways (``checks`` allowed tokens accepted, up to ``checks`` refused ones
    rejected), then advance both by one token, drawn from ``preferred`` (a boolean per token id)
    with probability ``p_preferred``, else from any allowed token."""
    allowed = set(ids.tolist())
    for t in [int(x) for x in rng.sample(list(ids), min(checks, ids.size))]:
        assert a.copy().accept_token(t), t
    refused = [t for t in rng.sample(range(len(tok.token_bytes)), 40) if t not in allowed]
    for t in refused[:checks]:
        assert not a.copy().accept_token(t), t
    pool = ids[preferred[ids]]
    if pool.size and rng.random() < p_preferred:
        pick = int(pool[rng.randrange(pool.size)])
    else:
        pick = int(ids[rng.randrange(ids.size)])
    assert a.accept_token(pick) and b.accept_token(pick)


def llama_cpp_llama(**kwargs: object) -> object:
    """``llama_cpp.Llama(**kwargs)``, with llama.cpp's extra weight buffers off where corral's
    backend turns them off (a build with AMX kernels, which crash on multi-token batches: see
    ``corral.backends.llama_cpp.extra_buffer_types_safe``). ``Llama`` has no parameter for it,
    so its default model parameters are patched while it loads."""
    import llama_cpp
    import llama_cpp.llama as llama_module

    from corral.backends.llama_cpp import _system_info, extra_buffer_types_safe

    llama_cpp.llama_backend_init()
    if extra_buffer_types_safe(_system_info(llama_cpp)):
        return llama_cpp.Llama(**kwargs)  # type: ignore[arg-type]
    lib = llama_module.llama_cpp
    default = lib.llama_model_default_params

    def params() -> object:
        p = default()
        p.use_extra_bufts = False
        return p

    lib.llama_model_default_params = params
    try:
        return llama_cpp.Llama(**kwargs)  # type: ignore[arg-type]
    finally:
        lib.llama_model_default_params = default


def accepts_text(g: corral.CompiledGrammar, tok: corral.Tokenizer, text: str) -> bool:
    """Does a fresh matcher of `g` take `text` (as `tok` encodes it) and end accepting?"""
    m = g.matcher()
    return all(m.accept_token(t) for t in tok.encode(text)) and m.is_accepting()


def unique_entry(g: corral.CompiledGrammar) -> corral.ReportEntry:
    """The grammar's one ``uniqueItems`` report entry."""
    (e,) = [e for e in g.report.entries if e.keyword == "uniqueItems"]
    return e


def checked_walk(
    g: corral.CompiledGrammar,
    tok: corral.Tokenizer,
    steps: int,
    sample: list[int],
    choose: Callable[[list[int]], int | None],
) -> bytes:
    """A walk of at most `steps` tokens, each `choose(allowed non-EOS ids)` (None: stop), with
    the mask equal to the parser on `sample` (both directions) and never empty at every step;
    then the shortest completion, which must complete the sentence. Returns the whole output."""
    m = g.matcher()
    mask = corral.allocate_bitmask(1, tok)
    out = bytearray()
    eos = set(tok.eos_ids)
    for _ in range(steps):
        mask_matches_accept(m, tok, sample=sample)
        m.fill_next_token_bitmask(mask, 0)
        ids = corral.allowed_tokens(mask[0], tok)
        assert ids, f"dead end after {bytes(out)!r}"
        t = choose([i for i in ids if i not in eos])
        if t is None:
            break
        assert m.accept_token(t)
        out += tok.token_bytes[t]
    rest = m.shortest_completion()
    assert m.accept_bytes(rest) and m.is_accepting()
    return bytes(out) + rest
