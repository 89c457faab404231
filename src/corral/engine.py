"""The engine API: compile a constraint against a tokenizer, then drive per-sequence matchers.

A :class:`CompiledGrammar` is immutable and thread-safe; create it once per (constraint,
tokenizer) and call :meth:`CompiledGrammar.matcher` for every sequence. A :class:`Matcher`
writes packed int32 token bitmasks (bit ``t`` of word ``t // 32`` set when token ``t`` is
allowed) into caller-provided numpy arrays or torch CPU tensors.

Example
-------
>>> import corral
>>> tok = corral.Tokenizer.from_tokens([b"a", b"b", b"ab", b"<eos>"], special_ids=[3], eos_ids=[3])
>>> m = corral.compile_regex(r"(ab)+", tok).matcher()
>>> mask = corral.allocate_bitmask(1, tok)
>>> m.fill_next_token_bitmask(mask, 0)
>>> corral.allowed_tokens(mask[0], tok)
[0, 2]
>>> m.accept_token(2), m.is_accepting()
(True, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from corral import _core
from corral.tokenizer import Tokenizer

__all__ = [
    "DEFAULT_LIMITS",
    "CompiledGrammar",
    "Matcher",
    "allocate_bitmask",
    "allowed_tokens",
    "compile_grammar",
    "compile_json",
    "compile_regex",
    "fill_next_token_bitmasks",
]

from corral._core import Matcher  # noqa: E402  (native per-sequence state, re-exported)

DEFAULT_LIMITS: dict[str, int] = dict(_core.default_limits())
"""Default resource limits. Each may be overridden per compile call as a keyword argument:

``max_nfa_states`` (50,000; NFA states of one terminal, ~40 B each),
``max_dfa_states`` (20,000; DFA states of one terminal, one int32 per byte class each),
``max_total_dfa_states`` (200,000; summed over a grammar's terminals),
``max_nesting`` (200; parenthesis/group nesting in regex and grammar text),
``max_productions`` (100,000; rules and productions after lowering),
``max_compile_ms`` (10,000; wall-clock budget for one compile),
``max_items_per_set`` (50,000; Earley items in one parser step at decode time — past it the
matcher enters its error state instead of exhausting memory),
``max_mask_memo_mb`` (64; memory for whole masks memoised by parser-state signature, per
compiled grammar; 16 KiB per mask at a 128k vocabulary; 0 disables).
"""


def _limits(limits: dict[str, Any]) -> dict[str, int]:
    unknown = sorted(set(limits) - set(DEFAULT_LIMITS))
    if unknown:
        raise TypeError(f"unknown limit(s) {unknown}; valid limits: {sorted(DEFAULT_LIMITS)}")
    out: dict[str, int] = {}
    for k, v in limits.items():
        low = 0 if k == "max_mask_memo_mb" else 1
        if not isinstance(v, int) or isinstance(v, bool) or v < low or v >= 2**32:
            raise ValueError(f"limit {k} must be an integer in [{low}, 2**32), got {v!r}")
        out[k] = v
    return out


class CompiledGrammar:
    """A constraint compiled against one tokenizer; shared by any number of matchers.

    Attributes
    ----------
    tokenizer : Tokenizer
        The tokenizer it was compiled for.
    source : str
        What was compiled (``"regex"``, ``"grammar"`` or ``"json"``).
    """

    def __init__(self, native: Any, tokenizer: Tokenizer, source: str) -> None:
        self._native = native
        self.tokenizer = tokenizer
        self.source = source

    def matcher(self) -> Matcher:
        """A fresh matcher at the start of the output."""
        return self._native.matcher()

    @property
    def grammar_text(self) -> str:
        """The lowered grammar in canonical text form (terminals as ``/regex/``)."""
        return str(self._native.grammar_text)

    def cache_stats(self) -> dict[str, int]:
        """Mask-cache statistics: entries, bytes, hits, misses."""
        return dict(self._native.cache_stats())

    def __repr__(self) -> str:
        return f"CompiledGrammar(source={self.source!r}, tokenizer={self.tokenizer.name!r})"


def _vocab(tokenizer: Tokenizer) -> Any:
    if not isinstance(tokenizer, Tokenizer):
        raise TypeError(f"expected a corral.Tokenizer, got {type(tokenizer).__name__}")
    return tokenizer.core


def compile_regex(pattern: str, tokenizer: Tokenizer, **limits: int) -> CompiledGrammar:
    """Compile a regular expression (Python ``re`` syntax, full-match semantics).

    Raises :class:`corral.CompileError` (with offset/line/column) for malformed or
    non-regular patterns (backreferences, lookaround) and :class:`corral.LimitExceeded` when a
    limit (see :data:`DEFAULT_LIMITS`) is exceeded.
    """
    if not isinstance(pattern, str):
        raise TypeError("pattern must be a str")
    return CompiledGrammar(
        _core.compile_regex(pattern, _vocab(tokenizer), _limits(limits)), tokenizer, "regex"
    )


def compile_grammar(
    text: str, tokenizer: Tokenizer, *, start: str = "root", **limits: int
) -> CompiledGrammar:
    """Compile a grammar in GBNF syntax (plus ``/regex/`` terminals); ``start`` names the rule
    the whole output must match."""
    if not isinstance(text, str):
        raise TypeError("grammar text must be a str")
    return CompiledGrammar(
        _core.compile_grammar(text, start, _vocab(tokenizer), _limits(limits)), tokenizer, "grammar"
    )


def compile_json(tokenizer: Tokenizer, **limits: int) -> CompiledGrammar:
    """Compile the built-in grammar for any JSON value (RFC 8259): "JSON mode"."""
    return CompiledGrammar(_core.compile_json(_vocab(tokenizer), _limits(limits)), tokenizer, "json")


def allocate_bitmask(batch_size: int, tokenizer: Tokenizer) -> np.ndarray:
    """A zeroed int32 bitmask of shape ``(batch_size, ceil(width / 32))``."""
    return np.zeros((batch_size, (tokenizer.width + 31) // 32), dtype=np.int32)


def fill_next_token_bitmasks(
    matchers: Sequence[Matcher], bitmask: Any, rows: Sequence[int] | None = None, threads: int = 0
) -> None:
    """Fill row ``rows[i]`` (default ``i``) of ``bitmask`` for each matcher, in parallel threads
    with the GIL released. ``threads=0`` uses one per core."""
    _core.fill_next_token_bitmasks(list(matchers), bitmask, list(rows) if rows is not None else [], threads)


def allowed_tokens(row: Any, tokenizer: Tokenizer) -> list[int]:
    """The token ids whose bits are set in one bitmask row (a debugging/test helper)."""
    words = np.ascontiguousarray(np.asarray(row), dtype=np.int32).view(np.uint32)
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")[: tokenizer.width]
    return [int(i) for i in np.flatnonzero(bits)]
