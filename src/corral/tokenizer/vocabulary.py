"""The normalised vocabulary type: :class:`Tokenizer`.

In: per-id byte strings plus special ids, EOS ids and a logits width — given directly
(:meth:`Tokenizer.from_tokens`) or read by an adapter (``hf.py``: ``tokenizer.json`` and
Hugging Face objects; ``gguf.py``: GGUF metadata). Out: one immutable vocabulary — bytes per id,
special ids, EOS ids (decided once, by ``eos.py``), logits width, a stable content hash, an
optional encoder, and :attr:`Tokenizer.core`, the engine's native vocabulary built from it.

Invariants (checked by the constructor, so every ``Tokenizer`` keeps them)
-------------------------------------------------------------------------
- the vocabulary is non-empty and ``width >= vocab_size``; ids ``vocab_size .. width - 1``
  (padding of the logits) have no bytes and are never allowed;
- every special id and every EOS id is in ``[0, vocab_size)``, and there is at least one EOS id;
- tokens without bytes (``b""``) can never advance a constraint, so the engine never allows
  them;
- :attr:`Tokenizer.hash` covers the bytes, the special flags, the EOS ids and the width — and
  nothing else (not the name, not the encoder).

This layer knows nothing about grammars: the engine reads a vocabulary, never the reverse.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Iterable, Sequence
from typing import Any

from corral.errors import TokenizerError
from corral.tokenizer.bpe import utf8
from corral.tokenizer.gguf import read_gguf_vocab
from corral.tokenizer.hf import read_hf_file, read_hf_object
from corral.tokenizer.source import Encoder, VocabSource

__all__ = ["Encoder", "Tokenizer"]

_HASH_DOMAIN = b"corral.vocabulary.v1\x00"


class Tokenizer:
    """A model vocabulary as exact byte strings.

    Build one with :meth:`from_tokens`, :meth:`from_hf`, :meth:`from_file` or
    :meth:`from_gguf`; the constructor takes the same arguments as
    :meth:`from_tokens`.

    Parameters
    ----------
    token_bytes : sequence of bytes
        ``token_bytes[i]`` is the text, as bytes, that token ``i``
        contributes to the output.  ``b""`` marks a token that can never be
        allowed.
    special_ids : iterable of int, optional
        Ids of special/control tokens.  The engine never allows them unless
        a grammar names them.
    eos_ids : iterable of int, optional
        Ids of the end-of-sequence token(s).  At least one is required.
    width : int or None, optional
        Width of the model's logits; defaults to ``len(token_bytes)``.  Ids
        from ``len(token_bytes)`` to ``width - 1`` are never allowed.
    name : str, optional
        A label used in ``repr``; not part of :attr:`hash`.
    encoder : callable or None, optional
        ``encoder(text) -> list of ids`` used by :meth:`encode`.

    Raises
    ------
    TokenizerError
        If ``width`` is smaller than the vocabulary, an id is out of range,
        or no EOS id is given.
    """

    def __init__(
        self,
        token_bytes: Sequence[bytes],
        *,
        special_ids: Iterable[int] = (),
        eos_ids: Iterable[int] = (),
        width: int | None = None,
        name: str = "custom",
        encoder: Encoder | None = None,
    ) -> None:
        tokens = [bytes(t) for t in token_bytes]
        n = len(tokens)
        if n == 0:
            raise TokenizerError("the vocabulary is empty")
        if width is None:
            width = n
        if isinstance(width, bool) or not isinstance(width, int):
            raise TokenizerError(f"width must be an int, got {width!r}")
        if width < n:
            raise TokenizerError(
                f"width {width} is smaller than the vocabulary size {n}: the logits "
                "must have at least one entry per token"
            )
        specials = frozenset(int(i) for i in special_ids)
        bad = sorted(i for i in specials if not 0 <= i < n)
        if bad:
            raise TokenizerError(f"special ids out of range [0, {n}): {bad[:10]}")
        eos = tuple(sorted({int(i) for i in eos_ids}))
        if not eos:
            raise TokenizerError("no EOS token id: pass eos_ids=[...] with the id(s) that end generation")
        bad = [i for i in eos if not 0 <= i < n]
        if bad:
            raise TokenizerError(f"EOS ids out of range [0, {n}): {bad}")
        self._tokens = tokens
        self._width = width
        self._special = specials
        self._eos = eos
        self._name = str(name)
        self._encoder = encoder
        self._hash: str | None = None
        self._core: Any = None
        self._index: dict[bytes, list[int]] | None = None

    # ------------------------------------------------------------------ #
    # constructors

    @classmethod
    def from_tokens(
        cls,
        token_bytes: Sequence[bytes],
        *,
        special_ids: Iterable[int] = (),
        eos_ids: Iterable[int] = (),
        width: int | None = None,
        name: str = "custom",
        encoder: Encoder | None = None,
    ) -> Tokenizer:
        """Build a tokenizer from per-id byte strings.

        Parameters
        ----------
        token_bytes : sequence of bytes
            Bytes of each token, indexed by id.
        special_ids : iterable of int, optional
            Ids of special/control tokens.
        eos_ids : iterable of int, optional
            End-of-sequence ids; at least one is required.
        width : int or None, optional
            Logits width; defaults to ``len(token_bytes)``.
        name : str, optional
            Label for ``repr``.
        encoder : callable or None, optional
            ``encoder(text) -> ids``; enables :meth:`encode`.

        Returns
        -------
        Tokenizer

        Raises
        ------
        TokenizerError
            If the arguments are inconsistent (see :class:`Tokenizer`).
        """
        return cls(
            token_bytes,
            special_ids=special_ids,
            eos_ids=eos_ids,
            width=width,
            name=name,
            encoder=encoder,
        )

    @classmethod
    def from_hf(
        cls,
        tokenizer: Any,
        *,
        width: int | None = None,
        eos_ids: Iterable[int] | None = None,
        extra_eos_ids: Iterable[int] = (),
    ) -> Tokenizer:
        """Build a tokenizer from a Hugging Face tokenizer object.

        Parameters
        ----------
        tokenizer : tokenizers.Tokenizer or transformers fast tokenizer
            A ``tokenizers.Tokenizer``, or any object with a
            ``backend_tokenizer`` attribute holding one (a
            ``transformers.PreTrainedTokenizerFast``).  For the latter, the
            object's ``eos_token_id`` is used as the source EOS.
        width : int or None, optional
            Logits width; defaults to the vocabulary size.
        eos_ids : iterable of int or None, optional
            EOS ids; overrides every other source.
        extra_eos_ids : iterable of int, optional
            More ids that end a sequence, declared by the host (a model's
            generation config, llama.cpp's EOS/EOT); joined to the source's
            own under the EOS policy (:mod:`corral.tokenizer.eos`).

        Returns
        -------
        Tokenizer

        Raises
        ------
        TokenizerError
            If the object is not a supported tokenizer, its decoding scheme
            is not supported, or no EOS id can be found.
        """
        return cls._from_source(read_hf_object(tokenizer, width, eos_ids, extra_eos_ids))

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        *,
        width: int | None = None,
        eos_ids: Iterable[int] | None = None,
        extra_eos_ids: Iterable[int] = (),
    ) -> Tokenizer:
        """Build a tokenizer from a Hugging Face ``tokenizer.json``.

        Parameters
        ----------
        path : str or path-like
            A ``tokenizer.json`` file, or a directory containing one.
            ``tokenizer_config.json`` (``eos_token``), ``generation_config.json``
            (``eos_token_id``) and ``config.json`` (``eos_token_id``,
            ``vocab_size``) next to it are read when present.
        width : int or None, optional
            Logits width; defaults to ``config.json``'s ``vocab_size`` when
            present, else the vocabulary size.
        eos_ids : iterable of int or None, optional
            EOS ids; overrides every other source.
        extra_eos_ids : iterable of int, optional
            More ids that end a sequence, declared by the host (a model's
            generation config, llama.cpp's EOS/EOT); joined to the source's
            own under the EOS policy (:mod:`corral.tokenizer.eos`).

        Returns
        -------
        Tokenizer
            With an encoder when the ``tokenizers`` package is installed
            (built on the first :meth:`encode`).

        Raises
        ------
        TokenizerError
            If the file is missing or malformed, its decoding scheme is not
            supported, or no EOS id can be found.
        """
        return cls._from_source(read_hf_file(path, width, eos_ids, extra_eos_ids))

    @classmethod
    def from_gguf(
        cls,
        path: str | os.PathLike[str],
        *,
        width: int | None = None,
        eos_ids: Iterable[int] | None = None,
        extra_eos_ids: Iterable[int] = (),
    ) -> Tokenizer:
        """Build a tokenizer from the metadata of a GGUF model file.

        Only the metadata header (and the tensor table, for the logits
        width) is read; tensor data is never touched.

        Parameters
        ----------
        path : str or path-like
            A ``.gguf`` file whose ``tokenizer.ggml.model`` is ``"gpt2"``
            (byte-level BPE) or ``"llama"`` / ``"t5"`` (SentencePiece).
        width : int or None, optional
            Logits width; defaults to ``<arch>.vocab_size``, else the row
            count of the ``output`` / ``token_embd`` tensor, else the
            vocabulary size.
        eos_ids : iterable of int or None, optional
            EOS ids; overrides every other source.
        extra_eos_ids : iterable of int, optional
            More ids that end a sequence, declared by the host (a model's
            generation config, llama.cpp's EOS/EOT); joined to the source's
            own under the EOS policy (:mod:`corral.tokenizer.eos`).

        Returns
        -------
        Tokenizer
            For ``"gpt2"`` vocabularies with merges, with an encoder (a
            ``tokenizers`` BPE model built on the first :meth:`encode`; needs
            the ``tokenizers`` package).  SentencePiece vocabularies have no
            encoder.

        Raises
        ------
        TokenizerError
            If the file is not a readable GGUF, has no tokenizer metadata,
            uses an unsupported tokenizer model, or no EOS id can be found.
        """
        return cls._from_source(read_gguf_vocab(path, width, eos_ids, extra_eos_ids))

    @classmethod
    def _from_source(cls, source: VocabSource) -> Tokenizer:
        """Build a tokenizer from what an adapter read."""
        return cls(
            source.tokens,
            special_ids=source.special_ids,
            eos_ids=source.eos_ids,
            width=source.width,
            name=source.name,
            encoder=source.encoder,
        )

    # ------------------------------------------------------------------ #
    # properties

    @property
    def token_bytes(self) -> list[bytes]:
        """Bytes of each token, indexed by id.

        This is the tokenizer's own list, returned without a copy; do not
        modify it.
        """
        return self._tokens

    @property
    def vocab_size(self) -> int:
        """Number of token ids with a vocabulary entry (``len(token_bytes)``)."""
        return len(self._tokens)

    @property
    def width(self) -> int:
        """Width of the model's logits (``>= vocab_size``)."""
        return self._width

    @property
    def special_ids(self) -> frozenset[int]:
        """Ids of special/control tokens."""
        return self._special

    @property
    def eos_ids(self) -> tuple[int, ...]:
        """End-of-sequence ids, sorted ascending."""
        return self._eos

    @property
    def name(self) -> str:
        """Label of the tokenizer (model name or file); not part of :attr:`hash`."""
        return self._name

    @property
    def has_encoder(self) -> bool:
        """Whether :meth:`encode` is available."""
        return self._encoder is not None

    @property
    def hash(self) -> str:
        """Stable SHA-256 hex digest of the vocabulary.

        The digest covers, in this order: the ASCII domain tag
        ``b"corral.vocabulary.v1\\0"``; ``width`` and ``vocab_size`` as
        unsigned 64-bit little-endian integers; for each token id in order,
        its byte length (u64 LE), its bytes and one flag byte (1 if special,
        else 0); the number of EOS ids (u64 LE) followed by each EOS id in
        ascending order (u64 LE).  The name and the encoder are not covered.
        The value is the same in every process and on every platform.
        """
        if self._hash is None:
            parts: list[bytes] = [
                _HASH_DOMAIN,
                struct.pack("<QQ", self._width, len(self._tokens)),
            ]
            special = self._special
            for i, tok in enumerate(self._tokens):
                parts.append(struct.pack("<Q", len(tok)))
                parts.append(tok)
                parts.append(b"\x01" if i in special else b"\x00")
            parts.append(struct.pack(f"<Q{len(self._eos)}Q", len(self._eos), *self._eos))
            self._hash = hashlib.sha256(b"".join(parts)).hexdigest()
        return self._hash

    @property
    def core(self) -> Any:
        """The engine's vocabulary object, created on first access and cached.

        ``corral._core.Vocabulary(token_bytes, sorted(special_ids),
        list(eos_ids), width)``; the extension module is imported on first
        access only.
        """
        if self._core is None:
            from corral import _native

            self._core = _native.Vocabulary(self._tokens, sorted(self._special), list(self._eos), self._width)
        return self._core

    # ------------------------------------------------------------------ #
    # methods

    def decode(self, ids: Iterable[int]) -> bytes:
        """Concatenate the bytes of the given token ids.

        Parameters
        ----------
        ids : iterable of int
            Token ids.

        Returns
        -------
        bytes
            The bytes of the tokens, special ones included, in order.

        Raises
        ------
        TokenizerError
            If an id is outside ``[0, vocab_size)``.
        """
        tokens = self._tokens
        n = len(tokens)
        out: list[bytes] = []
        for i in ids:
            if not 0 <= i < n:
                raise TokenizerError(f"token id {i} out of range [0, {n})")
            out.append(tokens[i])
        return b"".join(out)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, without BOS/EOS.

        Parameters
        ----------
        text : str
            Text to tokenize.

        Returns
        -------
        list of int

        Notes
        -----
        The ids come from the underlying encoder unchanged.  A byte-level BPE
        vocabulary without byte fallback silently drops characters it has no
        token for (SmolLM2 has no token for ``\x04``, ``\x06``, ``\x13``,
        ``\x14``, ``\x16`` or ``\x1d``), and SentencePiece encoders may
        prepend a space; compare ``decode(ids)`` with the text when exactness
        matters.

        Raises
        ------
        TokenizerError
            If this tokenizer has no encoder (e.g. a SentencePiece GGUF
            vocabulary, or :meth:`from_tokens` without ``encoder``).
        """
        if self._encoder is None:
            raise TokenizerError(
                f"tokenizer {self._name!r} has no encoder: encoding is only available "
                "for Hugging Face tokenizers, byte-level BPE GGUF vocabularies, or "
                "from_tokens(..., encoder=...)"
            )
        return [int(i) for i in self._encoder(text)]

    def ids_of(self, content: bytes | str) -> tuple[int, ...]:
        """Ids of the tokens whose bytes are exactly ``content``.

        Parameters
        ----------
        content : bytes or str
            Token bytes (a ``str`` is UTF-8 encoded), e.g. ``"<|im_end|>"``.

        Returns
        -------
        tuple of int
            Matching ids in ascending order; empty if none.
        """
        if isinstance(content, str):
            content = utf8(content)
        if self._index is None:
            index: dict[bytes, list[int]] = {}
            for i, tok in enumerate(self._tokens):
                index.setdefault(tok, []).append(i)
            self._index = index
        return tuple(self._index.get(content, ()))

    def __len__(self) -> int:
        return len(self._tokens)

    def __repr__(self) -> str:
        return (
            f"Tokenizer(name={self._name!r}, vocab_size={len(self._tokens)}, "
            f"width={self._width}, special={len(self._special)}, eos_ids={self._eos})"
        )
