"""Model vocabularies as exact byte strings.

The constraint engine works on bytes, not on token strings.  This module turns
the vocabulary of a model (a Hugging Face ``tokenizer.json``, a ``tokenizers``
or ``transformers`` tokenizer object, or the metadata of a GGUF file) into a
:class:`Tokenizer`: for each token id, the exact bytes that token contributes
to the output text, the set of special (control) token ids, the EOS token
id(s) and the width of the model's logits.

Decoding rules
--------------
Byte-level BPE (GPT-2 style; Llama 3, Qwen, SmolLM2, ...)
    Every character of a token string stands for one byte through the GPT-2
    bytes-to-unicode map (:data:`BYTE_TO_UNICODE`): printable bytes map to
    themselves, the other 68 bytes to ``U+0100`` onwards, in byte order.
SentencePiece (Llama 2, Gemma, Mistral, ...)
    ``▁`` (U+2581) stands for a space; byte-fallback pieces ``<0xNN>`` stand
    for the single byte ``NN`` (often a *partial* UTF-8 sequence); every other
    piece stands for its UTF-8 encoding.  A leading space that SentencePiece
    tokenizers strip from the first token of a decoded text is **kept**: a
    token's bytes are what it contributes in the middle of a text.
Added / user-defined tokens
    Their bytes are their literal content, UTF-8 encoded, without the
    byte-level or ``▁`` mapping.  Special ones (HF ``"special": true``; GGUF
    token types control, unknown and unused) are put in
    :attr:`Tokenizer.special_ids`; their bytes are still recorded.

Tokens without bytes (an empty string, or an id that no token uses) are kept
as ``b""``.  They can never advance a constraint, so the engine never allows
them.

EOS tokens
----------
An explicit ``eos_ids`` argument is used as given.  Otherwise the EOS ids of
the source (HF ``eos_token_id`` / ``eos_token``, ``generation_config.json``,
``config.json``, GGUF ``tokenizer.ggml.eos_token_id`` / ``eot_token_id`` /
``eom_token_id``) are joined by every *special* token whose content is one of
:data:`END_OF_TURN_TOKENS`.  Chat models end a turn with such a token even
when their tokenizer names another EOS (Llama 3's tokenizer names
``<|end_of_text|>`` while Llama 3 Instruct ends turns with ``<|eot_id|>``),
and letting a constrained generation stop on either is what users expect.
Pass ``eos_ids`` to override.  When nothing is found a
:class:`~corral.errors.TokenizerError` asks for ``eos_ids``.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import re
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from corral.errors import TokenizerError

__all__ = [
    "BYTE_TO_UNICODE",
    "END_OF_TURN_TOKENS",
    "UNICODE_TO_BYTE",
    "Tokenizer",
    "bytes_to_unicode",
]

Encoder = Callable[[str], Sequence[int]]

#: Special-token contents that are treated as EOS when present (and special)
#: in a vocabulary whose EOS ids are not given explicitly.
END_OF_TURN_TOKENS: tuple[str, ...] = (
    "<|eot_id|>",
    "<|eom_id|>",
    "<|im_end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|end_of_text|>",
    "<eos>",
)

_SPIECE_UNDERLINE = "\u2581"
_BYTE_FALLBACK_RE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_HASH_DOMAIN = b"corral.vocabulary.v1\x00"


def bytes_to_unicode() -> dict[int, str]:
    """Return the GPT-2 byte-to-character map used by byte-level BPE.

    Printable bytes (``!``..``~``, ``¡``..``¬``, ``®``..``ÿ``) map to the
    character with the same code point; the remaining 68 bytes map, in
    increasing byte order, to ``U+0100``, ``U+0101``, ...

    Returns
    -------
    dict of int to str
        A bijection from the 256 byte values to 256 one-character strings.
    """
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("\u00a1"), ord("\u00ac") + 1),
        *range(ord("\u00ae"), ord("\u00ff") + 1),
    ]
    mapping = {b: chr(b) for b in printable}
    n = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + n)
            n += 1
    return dict(sorted(mapping.items()))


#: Byte value -> character, for byte-level BPE vocabularies.
BYTE_TO_UNICODE: Mapping[int, str] = bytes_to_unicode()
#: Character -> byte value; the inverse of :data:`BYTE_TO_UNICODE`.
UNICODE_TO_BYTE: Mapping[str, int] = {c: b for b, c in BYTE_TO_UNICODE.items()}

# str.translate table that maps every byte-level character to the latin-1
# character of its byte, and every latin-1 character that is *not* a
# byte-level character to U+FFFF, so that ``.encode("latin-1")`` succeeds
# exactly when the whole token is made of byte-level characters.
_BYTE_LEVEL_TABLE: dict[int, int] = {i: 0xFFFF for i in range(256)}
_BYTE_LEVEL_TABLE.update({ord(c): b for c, b in UNICODE_TO_BYTE.items()})


def _utf8(text: str) -> bytes:
    """UTF-8 bytes of ``text``; lone surrogates from undecodable input bytes
    (``surrogateescape``) turn back into those bytes."""
    return text.encode("utf-8", errors="surrogateescape")


def _byte_level_bytes(piece: str) -> bytes:
    """Bytes of a byte-level BPE token string.

    Characters outside the GPT-2 map (malformed vocabularies) contribute
    their own UTF-8 encoding.
    """
    try:
        return piece.translate(_BYTE_LEVEL_TABLE).encode("latin-1")
    except UnicodeEncodeError:
        out = bytearray()
        for ch in piece:
            b = UNICODE_TO_BYTE.get(ch)
            if b is None:
                out += _utf8(ch)
            else:
                out.append(b)
        return bytes(out)


def _sentencepiece_bytes(piece: str, replacement: str = _SPIECE_UNDERLINE) -> bytes:
    """Bytes of a normal SentencePiece piece (``▁`` becomes a space)."""
    return _utf8(piece.replace(replacement, " "))


def _byte_fallback(piece: str) -> int | None:
    """The byte of a ``<0xNN>`` byte-fallback piece, else ``None``."""
    m = _BYTE_FALLBACK_RE.fullmatch(piece)
    return int(m.group(1), 16) if m else None


class _LazyEncoder:
    """An encoder built on first use (building one can take a while)."""

    def __init__(self, factory: Callable[[], Encoder]) -> None:
        self._factory = factory
        self._encoder: Encoder | None = None

    def __call__(self, text: str) -> Sequence[int]:
        if self._encoder is None:
            self._encoder = self._factory()
        return self._encoder(text)


def _hf_encoder(backend: Any) -> Encoder:
    """Wrap a ``tokenizers.Tokenizer`` as an encoder (no BOS/EOS added)."""

    def encode(text: str) -> Sequence[int]:
        return list(backend.encode(text, add_special_tokens=False).ids)

    return encode


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

        Returns
        -------
        Tokenizer

        Raises
        ------
        TokenizerError
            If the object is not a supported tokenizer, its decoding scheme
            is not supported, or no EOS id can be found.
        """
        backend = getattr(tokenizer, "backend_tokenizer", None)
        source_eos: list[int] = []
        name = "hf"
        if backend is not None:
            eid = getattr(tokenizer, "eos_token_id", None)
            source_eos.extend(_as_id_list(eid))
            name = str(getattr(tokenizer, "name_or_path", "") or name)
        elif callable(getattr(tokenizer, "to_str", None)):
            backend = tokenizer
        else:
            raise TokenizerError(
                f"unsupported tokenizer object {type(tokenizer).__name__}: pass a "
                "tokenizers.Tokenizer or a fast transformers tokenizer (one with "
                "backend_tokenizer)"
            )
        spec = json.loads(backend.to_str())
        tokens, specials, by_content = _parse_hf_json(spec)
        eos = _resolve_eos(eos_ids, source_eos, tokens, specials, by_content)
        return cls(
            tokens,
            special_ids=specials,
            eos_ids=eos,
            width=width,
            name=name,
            encoder=_hf_encoder(backend),
        )

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        *,
        width: int | None = None,
        eos_ids: Iterable[int] | None = None,
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
        p = Path(path)
        if p.is_dir():
            p = p / "tokenizer.json"
        if not p.is_file():
            raise TokenizerError(f"tokenizer file not found: {p}")
        try:
            with p.open("rb") as f:
                spec = json.load(f)
        except (OSError, ValueError) as e:
            raise TokenizerError(f"cannot read {p}: {e}") from e
        tokens, specials, by_content = _parse_hf_json(spec)

        source_eos: list[int] = []
        config_width: int | None = None
        folder = p.parent
        tcfg = _read_json(folder / "tokenizer_config.json")
        if tcfg is not None:
            eos_tok = tcfg.get("eos_token")
            if isinstance(eos_tok, dict):
                eos_tok = eos_tok.get("content")
            if isinstance(eos_tok, str) and eos_tok in by_content:
                source_eos.append(by_content[eos_tok])
        for fname in ("generation_config.json", "config.json"):
            cfg = _read_json(folder / fname)
            if cfg is None:
                continue
            source_eos.extend(_as_id_list(cfg.get("eos_token_id")))
            if fname == "config.json":
                vs = cfg.get("vocab_size")
                text_cfg = cfg.get("text_config")
                if vs is None and isinstance(text_cfg, dict):
                    vs = text_cfg.get("vocab_size")
                    source_eos.extend(_as_id_list(text_cfg.get("eos_token_id")))
                if isinstance(vs, int) and not isinstance(vs, bool):
                    config_width = vs
        eos = _resolve_eos(eos_ids, source_eos, tokens, specials, by_content)
        if width is None and config_width is not None:
            if config_width < len(tokens):
                raise TokenizerError(
                    f"config.json next to {p} says vocab_size={config_width}, smaller "
                    f"than the tokenizer's {len(tokens)} tokens; pass width=..."
                )
            width = config_width

        def factory() -> Encoder:
            try:
                import tokenizers
            except ImportError as e:  # pragma: no cover - depends on environment
                raise TokenizerError("encoding needs the 'tokenizers' package: pip install tokenizers") from e
            return _hf_encoder(tokenizers.Tokenizer.from_file(str(p)))

        return cls(
            tokens,
            special_ids=specials,
            eos_ids=eos,
            width=width,
            name=str(p),
            encoder=_LazyEncoder(factory),
        )

    @classmethod
    def from_gguf(
        cls,
        path: str | os.PathLike[str],
        *,
        width: int | None = None,
        eos_ids: Iterable[int] | None = None,
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
        p = Path(path)
        meta, tensors = _read_gguf_header(p)
        model = meta.get("tokenizer.ggml.model")
        pieces = meta.get("tokenizer.ggml.tokens")
        if not isinstance(model, str) or not isinstance(pieces, list):
            raise TokenizerError(f"{p} has no tokenizer metadata (tokenizer.ggml.*)")
        n = len(pieces)
        types = meta.get("tokenizer.ggml.token_type")
        if not isinstance(types, list) or len(types) != n:
            types = [1] * n
        if model == "gpt2":
            byte_level = True
        elif model in ("llama", "t5"):
            byte_level = False
        else:
            raise TokenizerError(
                f"{p}: unsupported GGUF tokenizer model {model!r} "
                "(supported: 'gpt2' byte-level BPE, 'llama'/'t5' SentencePiece)"
            )
        tokens: list[bytes] = []
        specials: set[int] = set()
        for i, (piece, ttype) in enumerate(zip(pieces, types, strict=True)):
            if ttype in (2, 3, 5):  # unknown, control, unused
                specials.add(i)
                tokens.append(_utf8(piece))
            elif ttype == 4:  # user-defined: literal content
                tokens.append(_utf8(piece))
            elif ttype == 6:  # byte
                b = _byte_fallback(piece)
                if b is not None:
                    tokens.append(bytes((b,)))
                elif byte_level:
                    tokens.append(_byte_level_bytes(piece))
                else:
                    tokens.append(_sentencepiece_bytes(piece))
            elif byte_level:
                tokens.append(_byte_level_bytes(piece))
            else:
                tokens.append(_sentencepiece_bytes(piece))

        source_eos: list[int] = []
        for key in (
            "tokenizer.ggml.eos_token_id",
            "tokenizer.ggml.eot_token_id",
            "tokenizer.ggml.eom_token_id",
        ):
            source_eos.extend(_as_id_list(meta.get(key)))
        by_content: dict[str, int] = {}
        for i in sorted(specials):
            by_content.setdefault(pieces[i], i)
        eos = _resolve_eos(eos_ids, source_eos, tokens, specials, by_content)

        if width is None:
            arch = meta.get("general.architecture")
            vs = meta.get(f"{arch}.vocab_size") if isinstance(arch, str) else None
            if isinstance(vs, int) and vs >= n:
                width = vs
            else:
                for tname in ("output.weight", "token_embd.weight"):
                    dims = tensors.get(tname)
                    if dims is not None and len(dims) >= 2 and dims[1] >= n:
                        width = dims[1]
                        break

        encoder: Encoder | None = None
        merges = meta.get("tokenizer.ggml.merges")
        if byte_level and isinstance(merges, list) and merges:
            pre = meta.get("tokenizer.ggml.pre")
            pre_name = pre if isinstance(pre, str) else "default"
            encoder = _LazyEncoder(lambda: _gguf_bpe_encoder(pieces, types, merges, pre_name))
        name = meta.get("general.name")
        return cls(
            tokens,
            special_ids=specials,
            eos_ids=eos,
            width=width,
            name=str(name) if isinstance(name, str) and name else p.name,
            encoder=encoder,
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
            from corral import _core  # type: ignore[attr-defined,unused-ignore]

            self._core = _core.Vocabulary(self._tokens, sorted(self._special), list(self._eos), self._width)
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
            content = _utf8(content)
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


# ---------------------------------------------------------------------- #
# helpers


def _as_id_list(value: object) -> list[int]:
    """Normalise an EOS id field (int, list of int or None) to a list."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    return []


def _resolve_eos(
    explicit: Iterable[int] | None,
    source: Sequence[int],
    tokens: Sequence[bytes],
    specials: Iterable[int],
    by_content: Mapping[str, int],
) -> list[int]:
    """Apply the EOS policy described in the module docstring."""
    if explicit is not None:
        ids = [int(i) for i in explicit]
        if not ids:
            raise TokenizerError("eos_ids is empty: give at least one EOS token id")
        return ids
    n = len(tokens)
    found = {i for i in source if 0 <= i < n}
    special = set(specials)
    for content in END_OF_TURN_TOKENS:
        i = by_content.get(content)
        if i is not None and i in special:
            found.add(i)
    if not found:
        raise TokenizerError(
            "could not determine the EOS token id(s) of this tokenizer: pass eos_ids=[...] explicitly"
        )
    return sorted(found)


def _read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from ``path``, or ``None`` if absent or unreadable."""
    try:
        with path.open("rb") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _component_types(node: object, list_key: str) -> list[dict[str, Any]]:
    """Flatten a decoder / pre-tokenizer / normalizer tree into its parts."""
    if not isinstance(node, dict):
        return []
    children = node.get(list_key)
    if node.get("type") == "Sequence" and isinstance(children, list):
        out: list[dict[str, Any]] = []
        for child in children:
            out.extend(_component_types(child, list_key))
        return out
    return [node]


def _parse_hf_json(
    spec: Mapping[str, Any],
) -> tuple[list[bytes], set[int], dict[str, int]]:
    """Decode a parsed ``tokenizer.json``.

    Returns
    -------
    tokens : list of bytes
        Bytes per id (``b""`` for ids no token uses).
    specials : set of int
        Ids of added tokens marked ``special``.
    by_content : dict of str to int
        Token content (added tokens) or raw piece (model vocab) to id.
    """
    model = spec.get("model")
    if not isinstance(model, dict):
        raise TokenizerError("tokenizer.json has no 'model' section")
    mtype = model.get("type")
    raw_vocab = model.get("vocab")
    vocab: dict[int, str] = {}
    if isinstance(raw_vocab, dict):
        for piece, idx in raw_vocab.items():
            vocab.setdefault(int(idx), piece)
    elif isinstance(raw_vocab, list):  # Unigram: [[piece, score], ...]
        for idx, entry in enumerate(raw_vocab):
            vocab[idx] = entry[0] if isinstance(entry, list) else str(entry)
    else:
        raise TokenizerError(f"tokenizer.json model {mtype!r} has no readable vocab")

    decoders = _component_types(spec.get("decoder"), "decoders")
    pretoks = _component_types(spec.get("pre_tokenizer"), "pretokenizers")
    normalizers = _component_types(spec.get("normalizer"), "normalizers")
    dec_types = {d.get("type") for d in decoders}
    pre_types = {d.get("type") for d in pretoks}

    replacement = _SPIECE_UNDERLINE
    if "ByteLevel" in dec_types or (not decoders and "ByteLevel" in pre_types):
        scheme = "byte_level"
    elif "Metaspace" in dec_types:
        scheme = "sentencepiece"
        for d in decoders:
            if d.get("type") == "Metaspace" and isinstance(d.get("replacement"), str):
                replacement = d["replacement"]
    elif "ByteFallback" in dec_types or any(
        d.get("type") == "Replace"
        and isinstance(d.get("pattern"), dict)
        and d["pattern"].get("String") == _SPIECE_UNDERLINE
        for d in decoders
    ):
        scheme = "sentencepiece"
    elif "Metaspace" in pre_types or any(
        n.get("type") == "Replace" and n.get("content") == _SPIECE_UNDERLINE for n in normalizers
    ):
        scheme = "sentencepiece"
    else:
        raise TokenizerError(
            f"unsupported tokenizer.json decoding scheme (model {mtype!r}, decoder "
            f"{sorted(str(t) for t in dec_types)}, pre-tokenizer "
            f"{sorted(str(t) for t in pre_types)}): only byte-level BPE and "
            "SentencePiece-style vocabularies are supported"
        )
    byte_fallback = bool(model.get("byte_fallback")) or "ByteFallback" in dec_types

    added: dict[int, tuple[str, bool]] = {}
    for entry in spec.get("added_tokens") or ():
        if isinstance(entry, dict) and isinstance(entry.get("content"), str):
            added[int(entry["id"])] = (entry["content"], bool(entry.get("special")))

    size = max([*vocab, *added]) + 1 if (vocab or added) else 0
    tokens: list[bytes] = [b""] * size
    by_content: dict[str, int] = {}
    for idx, piece in vocab.items():
        if idx < 0:
            continue
        by_content.setdefault(piece, idx)
        if scheme == "byte_level":
            tokens[idx] = _byte_level_bytes(piece)
        else:
            b = _byte_fallback(piece) if byte_fallback else None
            tokens[idx] = bytes((b,)) if b is not None else _sentencepiece_bytes(piece, replacement)
    specials: set[int] = set()
    for idx, (content, special) in added.items():
        if idx < 0:
            continue
        tokens[idx] = _utf8(content)
        by_content[content] = idx
        if special:
            specials.add(idx)
    return tokens, specials, by_content


# ---------------------------------------------------------------------- #
# GGUF

_GGUF_MAGIC = b"GGUF"
# value type -> (struct code, size) for fixed-size scalars
_GGUF_SCALARS: dict[int, tuple[str, int]] = {
    0: ("B", 1),
    1: ("b", 1),
    2: ("H", 2),
    3: ("h", 2),
    4: ("I", 4),
    5: ("i", 4),
    6: ("f", 4),
    7: ("?", 1),
    10: ("Q", 8),
    11: ("q", 8),
    12: ("d", 8),
}
_GGUF_STRING = 8
_GGUF_ARRAY = 9


class _GGUFParser:
    """Sequential little-endian reader over a memory map of a GGUF file."""

    def __init__(self, buf: mmap.mmap, path: Path) -> None:
        self.buf = buf
        self.pos = 0
        self.path = path
        self.size = len(buf)

    def _need(self, n: int) -> None:
        if self.pos + n > self.size:
            raise TokenizerError(f"{self.path}: truncated GGUF header")

    def scalar(self, code: str, size: int) -> Any:
        self._need(size)
        (v,) = struct.unpack_from("<" + code, self.buf, self.pos)
        self.pos += size
        return v

    def string(self) -> str:
        n = self.scalar("Q", 8)
        self._need(n)
        s = self.buf[self.pos : self.pos + n].decode("utf-8", errors="surrogateescape")
        self.pos += n
        return s

    def value(self, vtype: int) -> Any:
        if vtype == _GGUF_STRING:
            return self.string()
        if vtype == _GGUF_ARRAY:
            etype = self.scalar("I", 4)
            count = self.scalar("Q", 8)
            if etype == _GGUF_STRING:
                return self._string_array(count)
            if etype in _GGUF_SCALARS:
                code, size = _GGUF_SCALARS[etype]
                self._need(size * count)
                vals = list(struct.unpack_from(f"<{count}{code}", self.buf, self.pos))
                self.pos += size * count
                return vals
            return [self.value(etype) for _ in range(count)]
        if vtype in _GGUF_SCALARS:
            return self.scalar(*_GGUF_SCALARS[vtype])
        raise TokenizerError(f"{self.path}: unknown GGUF value type {vtype}")

    def _string_array(self, count: int) -> list[str]:
        buf, pos, size = self.buf, self.pos, self.size
        unpack = struct.Struct("<Q").unpack_from
        out: list[str] = []
        append = out.append
        for _ in range(count):
            if pos + 8 > size:
                raise TokenizerError(f"{self.path}: truncated GGUF header")
            (n,) = unpack(buf, pos)
            pos += 8
            if pos + n > size:
                raise TokenizerError(f"{self.path}: truncated GGUF header")
            append(buf[pos : pos + n].decode("utf-8", errors="surrogateescape"))
            pos += n
        self.pos = pos
        return out


def _read_gguf_header(path: Path) -> tuple[dict[str, Any], dict[str, list[int]]]:
    """Read the metadata key/values and tensor shapes of a GGUF file.

    Only the header is parsed (through a memory map, so the tensor data is
    never read).  Supports GGUF versions 2 and 3 (little-endian).

    Returns
    -------
    meta : dict of str to value
    tensors : dict of str to list of int
        Tensor name to dimensions (GGML order: ``dims[0]`` is the row
        length).
    """
    try:
        f = path.open("rb")
    except OSError as e:
        raise TokenizerError(f"cannot open GGUF file {path}: {e}") from e
    with f:
        try:
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as e:
            raise TokenizerError(f"cannot map GGUF file {path}: {e}") from e
        with buf:
            if buf[:4] != _GGUF_MAGIC:
                raise TokenizerError(f"{path} is not a GGUF file (bad magic)")
            r = _GGUFParser(buf, path)
            r.pos = 4
            version = r.scalar("I", 4)
            if version not in (2, 3):
                raise TokenizerError(f"{path}: unsupported GGUF version {version} (or a big-endian file)")
            n_tensors = r.scalar("Q", 8)
            n_kv = r.scalar("Q", 8)
            meta: dict[str, Any] = {}
            for _ in range(n_kv):
                key = r.string()
                vtype = r.scalar("I", 4)
                meta[key] = r.value(vtype)
            tensors: dict[str, list[int]] = {}
            for _ in range(n_tensors):
                tname = r.string()
                n_dims = r.scalar("I", 4)
                r._need(8 * n_dims)
                dims = list(struct.unpack_from(f"<{n_dims}Q", buf, r.pos))
                r.pos += 8 * n_dims + 4 + 8  # dims, ggml type, data offset
                tensors[tname] = dims
    return meta, tensors


# Pre-tokenizer regexes of llama.cpp's ``tokenizer.ggml.pre`` values.
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _gguf_bpe_encoder(
    pieces: Sequence[str], types: Sequence[int], merges: Sequence[str], pre: str
) -> Encoder:
    """Build a ``tokenizers`` BPE encoder for a GGUF byte-level vocabulary.

    The pre-tokenizer follows ``tokenizer.ggml.pre`` for the common values
    (``smollm``, ``llama-bpe``/``llama3``, ``qwen2``) and falls back to the
    GPT-2 regex.  Whatever the segmentation, the tokens' bytes always
    concatenate to the input text.
    """
    try:
        from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers
        from tokenizers import Tokenizer as HFTokenizer
    except ImportError as e:  # pragma: no cover - depends on environment
        raise TokenizerError(
            "encoding a GGUF vocabulary needs the 'tokenizers' package: pip install tokenizers"
        ) from e
    vocab: dict[str, int] = {}
    for i, piece in enumerate(pieces):
        vocab.setdefault(piece, i)
    pairs: list[tuple[str, str]] = []
    for m in merges:
        a, sep, b = m.partition(" ")
        if sep:
            pairs.append((a, b))
    ignore_merges = pre in ("llama3", "llama-bpe")
    model = models.BPE(vocab=vocab, merges=pairs, ignore_merges=ignore_merges)
    tok = HFTokenizer(model)
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    if pre == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        )
    elif pre in ("llama3", "llama-bpe", "qwen2"):
        pattern = _QWEN2_SPLIT if pre == "qwen2" else _LLAMA3_SPLIT
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(pattern), behavior="isolated"), byte_level]
        )
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    special = [
        AddedToken(pieces[i], special=True, normalized=False)
        for i, t in enumerate(types)
        if t == 3 and pieces[i]
    ]
    user = [
        AddedToken(pieces[i], special=False, normalized=False)
        for i, t in enumerate(types)
        if t == 4 and pieces[i]
    ]
    if special:
        tok.add_special_tokens(special)
    if user:
        tok.add_tokens(user)
    return _hf_encoder(tok)
