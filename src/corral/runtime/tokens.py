"""Turning bytes the constraint dictates into tokens the model would produce.

Used by jump-ahead (forced bytes) and by the token-budget finish (the shortest completion):
both must append tokens whose bytes are *exactly* the dictated bytes, never a special token,
and — for jump-ahead — must not cut a token the model would rather have continued.
"""

from __future__ import annotations

import bisect

import numpy as np

from corral.tokenizer import Tokenizer

__all__ = ["TokenTools", "any_allowed", "tools_for"]


class TokenTools:
    """Per-tokenizer helpers, built once and shared by every row of every request."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        special = tokenizer.special_ids
        toks = tokenizer.token_bytes
        pairs = sorted((b, i) for i, b in enumerate(toks) if i not in special and b)
        self._keys = [b for b, _ in pairs]
        self._ids = np.array([i for _, i in pairs], dtype=np.int64)
        self._by_bytes: dict[bytes, int] = {}
        for b, i in pairs:
            self._by_bytes.setdefault(b, i)  # lowest id for duplicated byte strings
        self.max_token_len = max((len(b) for b in self._keys), default=1)
        self._ext_cache: dict[bytes, np.ndarray] = {}

    # ------------------------------------------------------------------ encoding

    def encode_exact(self, data: bytes) -> list[int]:
        """Non-special tokens whose bytes concatenate to exactly ``data``.

        The tokenizer's own encoding is used when it reproduces ``data`` (it is what the model
        saw in training); otherwise — text that is not valid UTF-8 on its own, an encoder that
        adds a leading space or maps text to a special token — a greedy longest-match over the
        vocabulary. Raises ValueError when the vocabulary cannot spell ``data`` at all.
        """
        if not data:
            return []
        tok = self.tokenizer
        if tok.has_encoder:
            try:
                ids = tok.encode(data.decode("utf-8"))
            except UnicodeDecodeError:
                ids = None
            if ids is not None and tok.decode(ids) == data and not (set(ids) & tok.special_ids):
                return ids
        return self._greedy(data)

    def _greedy(self, data: bytes) -> list[int]:
        out: list[int] = []
        pos = 0
        while pos < len(data):
            for n in range(min(self.max_token_len, len(data) - pos), 0, -1):
                i = self._by_bytes.get(data[pos : pos + n])
                if i is not None:
                    out.append(i)
                    pos += n
                    break
            else:
                raise ValueError(f"the vocabulary has no token for byte {data[pos]:#04x}")
        return out

    # ------------------------------------------------------------------ token boundaries

    def extensions(self, prefix: bytes) -> np.ndarray:
        """Ids of the non-special tokens whose bytes strictly extend ``prefix``."""
        hit = self._ext_cache.get(prefix)
        if hit is not None:
            return hit
        lo = bisect.bisect_right(self._keys, prefix)  # skips prefix itself
        hi = lo
        keys = self._keys
        while hi < len(keys) and keys[hi].startswith(prefix):
            hi += 1
        ids = self._ids[lo:hi]
        if len(self._ext_cache) < 100_000:
            self._ext_cache[prefix] = ids
        return ids


def any_allowed(bitmask_row: np.ndarray, ids: np.ndarray) -> bool:
    """Is any of ``ids`` allowed by a packed bitmask row?"""
    if ids.size == 0:
        return False
    words = bitmask_row.view(np.uint32)[ids >> 5]
    return bool(np.any((words >> (ids & 31).astype(np.uint32)) & 1))


_TOOLS: dict[int, tuple[Tokenizer, TokenTools]] = {}


def tools_for(tokenizer: Tokenizer) -> TokenTools:
    """The TokenTools of a tokenizer, built once and shared by every host and row (sorting the
    vocabulary costs ~50 ms at 49k tokens, more at 152k; a processor made per request must not
    pay it each time)."""
    key = id(tokenizer)
    hit = _TOOLS.get(key)
    if hit is None or hit[0] is not tokenizer:
        hit = (tokenizer, TokenTools(tokenizer))
        _TOOLS[key] = hit
    return hit[1]
