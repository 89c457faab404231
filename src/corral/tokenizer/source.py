"""What a vocabulary adapter hands to :class:`~corral.tokenizer.Tokenizer`.

In: nothing of its own; ``hf.py`` and ``gguf.py`` fill a :class:`VocabSource` from their input.
Out: the normalised parts of a vocabulary — bytes per id, special ids, EOS ids (already decided
by ``eos.py``), logits width, a label and an optional encoder — that ``Tokenizer`` validates and
owns. Adapters never build a ``Tokenizer`` themselves, so they do not depend on it.

Invariants: an encoder maps text to ids of the same vocabulary and adds no BOS/EOS; a
:class:`LazyEncoder` builds its encoder at most once, on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

__all__ = ["Encoder", "LazyEncoder", "VocabSource", "hf_encoder"]

#: ``encoder(text) -> ids``: tokenizes text without adding BOS/EOS.
Encoder = Callable[[str], Sequence[int]]


class VocabSource(NamedTuple):
    """The parts of a vocabulary, as an adapter read them (validated by ``Tokenizer``)."""

    tokens: list[bytes]
    special_ids: set[int]
    eos_ids: list[int]
    width: int | None
    name: str
    encoder: Encoder | None


class LazyEncoder:
    """An encoder built on first use (building one can take a while)."""

    def __init__(self, factory: Callable[[], Encoder]) -> None:
        self._factory = factory
        self._encoder: Encoder | None = None

    def __call__(self, text: str) -> Sequence[int]:
        if self._encoder is None:
            self._encoder = self._factory()
        return self._encoder(text)


def hf_encoder(backend: Any) -> Encoder:
    """Wrap a ``tokenizers.Tokenizer`` as an encoder (no BOS/EOS added)."""

    def encode(text: str) -> Sequence[int]:
        return list(backend.encode(text, add_special_tokens=False).ids)

    return encode
