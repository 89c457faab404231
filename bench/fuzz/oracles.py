"""The fuzzer's oracles: what must hold for every generated case.

- compile succeeds or raises a corral error (never another exception), within its limits;
- the language's own samples (strings drawn from the generator's tree) are accepted token by
  token, each token allowed by the mask, EOS allowed at the end — the mask never forbids a token
  that leads to valid output;
- along random walks under the mask, every allowed token the walk checks has a completion the
  *reference* accepts (Python's ``re.fullmatch``, the ``lark`` parser, ``jsonschema``): the mask
  never allows a token that leads to invalid output (the completion is the matcher's own
  ``shortest_completion``, validated by the reference, so it is a witness, not a self-check);
- rollback, copy, reset and batch fills equal a fresh matcher replaying the same history.

Each check returns None or a one-line description of the mismatch.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

import numpy as np

import corral
from corral.grammar.formats import FORMAT_REGEXES

Reference = Callable[[str], bool]


def format_checker() -> Any:
    """``format`` as corral asserts it: the regexes of corral.grammar.formats, run by Python's
    ``re`` (plain jsonschema treats format as an annotation, another semantics under
    not/oneOf/if)."""
    import jsonschema

    checker = jsonschema.FormatChecker(formats=())
    for name, rx in FORMAT_REGEXES.items():
        compiled = re.compile(rx)
        checker.checks(name)(lambda v, c=compiled: not isinstance(v, str) or c.fullmatch(v) is not None)
    return checker


def small_vocab() -> corral.Tokenizer:
    """Every byte, the generator's characters merged in pairs, and tokens that split UTF-8."""
    from bench.fuzz.gen import ALPHABET

    toks = [bytes([b]) for b in range(256)]
    toks += [(x + y).encode() for x in ALPHABET for y in ALPHABET]
    toks += [b"abc", "é".encode()[:1] + b"a", b"\xa9-", b"--" * 2]
    toks.append(b"<eos>")
    n = len(toks)
    return corral.Tokenizer.from_tokens(toks, special_ids=[n - 1], eos_ids=[n - 1], name="fuzz")


def _allowed(m: corral.Matcher, tok: corral.Tokenizer, mask: np.ndarray) -> np.ndarray:
    m.fill_next_token_bitmask(mask, 0)
    return np.unpackbits(mask.view(np.uint8), bitorder="little")[: tok.vocab_size].astype(bool)


def _segment(text: bytes, tok: corral.Tokenizer, rng: random.Random, index: dict[bytes, int]) -> list[int]:
    """A random tokenization of ``text`` (every byte is a token, so one always exists)."""
    out, i = [], 0
    while i < len(text):
        choices = [n for n in (3, 2, 1) if text[i : i + n] in index]
        n = rng.choice(choices)
        out.append(index[text[i : i + n]])
        i += n
    return out


def check_samples(
    g: corral.CompiledGrammar, tok: corral.Tokenizer, samples: list[str], rng: random.Random
) -> str | None:
    index = {b: i for i, b in enumerate(tok.token_bytes) if b and i not in tok.eos_ids}
    mask = corral.allocate_bitmask(1, tok)
    eos = tok.eos_ids[0]
    for s in samples:
        m = g.matcher()
        for t in _segment(s.encode(), tok, rng, index):
            if not _allowed(m, tok, mask)[t]:
                return f"sample {s!r}: token {tok.token_bytes[t]!r} forbidden though the sample is valid"
            if not m.accept_token(t):
                return f"sample {s!r}: token {tok.token_bytes[t]!r} allowed but refused"
        if not _allowed(m, tok, mask)[eos] or not m.is_accepting():
            return f"sample {s!r}: EOS forbidden at the end of a valid sample"
    return None


def check_walks(
    g: corral.CompiledGrammar,
    tok: corral.Tokenizer,
    ref: Reference,
    rng: random.Random,
    walks: int = 4,
    steps: int = 12,
) -> str | None:
    mask = corral.allocate_bitmask(1, tok)
    eos = set(tok.eos_ids)
    pieces = tok.token_bytes
    for _ in range(walks):
        m = g.matcher()
        out = b""
        for _step in range(steps):
            allowed = np.flatnonzero(_allowed(m, tok, mask))
            if allowed.size == 0:
                return f"after {out!r}: no token allowed (a live matcher must allow one)"
            if any(int(t) in eos for t in allowed) and not ref(out.decode("utf-8", "replace")):
                return f"after {out!r}: EOS allowed but the reference rejects the output"
            ordinary = [int(t) for t in allowed if int(t) not in eos]
            if not ordinary:
                break
            for t in rng.sample(ordinary, min(3, len(ordinary))):
                c = m.copy()
                if not c.accept_token(t):
                    return f"after {out!r}: token {pieces[t]!r} allowed but refused"
                done = out + pieces[t] + c.shortest_completion()
                try:
                    text = done.decode("utf-8")
                except UnicodeDecodeError:
                    return f"after {out!r}: token {pieces[t]!r} completes to invalid UTF-8 {done!r}"
                if not ref(text):
                    return (
                        f"after {out!r}: token {pieces[t]!r} allowed, but its completion {text!r} "
                        "is rejected by the reference"
                    )
            t = rng.choice(ordinary)
            m.accept_token(t)
            out += pieces[t]
    return None


def _state(m: corral.Matcher, tok: corral.Tokenizer, mask: np.ndarray) -> tuple[bytes, bool, bool, bytes]:
    return (_allowed(m, tok, mask).tobytes(), m.is_accepting(), m.is_terminated(), m.forced_bytes(64))


def check_operations(
    g: corral.CompiledGrammar, tok: corral.Tokenizer, rng: random.Random, ops: int = 30
) -> str | None:
    """Random accept/rollback/copy/reset/batch-fill sequences equal a fresh replay."""
    mask = corral.allocate_bitmask(1, tok)
    m = g.matcher()
    history: list[tuple[str, object]] = []  # the steps that took effect
    log: list[str] = []
    for _ in range(ops):
        op = rng.choice(["token", "token", "token", "any", "bytes", "rollback", "copy", "reset", "batch"])
        if op in ("token", "any"):
            allowed = np.flatnonzero(_allowed(m, tok, mask))
            if op == "token" and allowed.size:
                t = int(rng.choice(list(allowed)))
            else:
                t = rng.randrange(tok.width)
            if m.accept_token(t):
                history.append(("t", t))
        elif op == "bytes":
            data = rng.choice(["a", "b", "é", "-", "ab", " c", "\xff"]).encode("utf-8", "surrogatepass")
            if m.accept_bytes(data):
                history.append(("b", data))
        elif op == "rollback":
            k = rng.randint(0, 3)
            m.rollback(k)
            del history[max(0, len(history) - k) :]
        elif op == "copy":
            m = m.copy()
        elif op == "reset":
            m.reset()
            history.clear()
        else:  # batch: the pooled fill must write what the matcher's own fill writes
            rows = corral.allocate_bitmask(2, tok)
            other = g.matcher()
            corral.fill_next_token_bitmasks([m, other], rows)
            mine = np.unpackbits(rows[0:1].view(np.uint8), bitorder="little")[: tok.vocab_size].astype(bool)
            if mine.tobytes() != _allowed(m, tok, mask).tobytes():
                return f"after {' '.join(log)}: batch fill differs from the matcher's own fill"
        log.append(op)
        if m.is_terminated():
            m.reset()
            history.clear()
            log.append("(reset after EOS)")
        fresh = g.matcher()
        for kind, v in history:
            ok = fresh.accept_token(v) if kind == "t" else fresh.accept_bytes(v)  # type: ignore[arg-type]
            if not ok:
                return f"after {' '.join(log)}: replaying the history fails at {v!r}"
        if _state(m, tok, mask) != _state(fresh, tok, mask):
            return f"after {' '.join(log)}: state differs from a fresh replay of {history!r}"
    return None
