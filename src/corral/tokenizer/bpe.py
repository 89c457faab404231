"""Token strings to the exact bytes they stand for.

In: one token string of a vocabulary (a byte-level BPE piece, a SentencePiece piece, an added
token's content). Out: the bytes that token contributes to the output text. Nothing here knows
where the vocabulary came from (``hf.py`` and ``gguf.py`` call in) or what a grammar is.

Decoding rules
--------------
Byte-level BPE (GPT-2 style; Llama 3, Qwen, SmolLM2, ...)
    Every character of a token string stands for one byte through the GPT-2 bytes-to-unicode
    map (:data:`BYTE_TO_UNICODE`): printable bytes map to themselves, the other 68 bytes to
    ``U+0100`` onwards, in byte order.
SentencePiece (Llama 2, Gemma, Mistral, ...)
    ``▁`` (U+2581) stands for a space; byte-fallback pieces ``<0xNN>`` stand for the single byte
    ``NN`` (often a *partial* UTF-8 sequence); every other piece stands for its UTF-8 encoding.
    A leading space that SentencePiece tokenizers strip from the first token of a decoded text
    is **kept**: a token's bytes are what it contributes in the middle of a text.
Added / user-defined tokens
    Their bytes are their literal content, UTF-8 encoded (:func:`utf8`), without the byte-level
    or ``▁`` mapping.

Invariants
----------
- :data:`BYTE_TO_UNICODE` is a bijection between the 256 byte values and 256 characters, and
  :data:`UNICODE_TO_BYTE` is its inverse.
- Every function is total: a malformed piece (a character outside the byte-level map, a lone
  surrogate from undecodable input) still yields bytes, never an exception.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = [
    "BYTE_TO_UNICODE",
    "SPIECE_UNDERLINE",
    "UNICODE_TO_BYTE",
    "byte_fallback",
    "byte_level_bytes",
    "bytes_to_unicode",
    "sentencepiece_bytes",
    "utf8",
]

#: The SentencePiece word-boundary marker ``▁`` (U+2581), which stands for a space.
SPIECE_UNDERLINE = "\u2581"
_BYTE_FALLBACK_RE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


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


def utf8(text: str) -> bytes:
    """UTF-8 bytes of ``text``; lone surrogates from undecodable input bytes
    (``surrogateescape``) turn back into those bytes."""
    return text.encode("utf-8", errors="surrogateescape")


def byte_level_bytes(piece: str) -> bytes:
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
                out += utf8(ch)
            else:
                out.append(b)
        return bytes(out)


def sentencepiece_bytes(piece: str, replacement: str = SPIECE_UNDERLINE) -> bytes:
    """Bytes of a normal SentencePiece piece (``replacement``, by default ``▁``, becomes a space)."""
    return utf8(piece.replace(replacement, " "))


def byte_fallback(piece: str) -> int | None:
    """The byte of a ``<0xNN>`` byte-fallback piece, else ``None``."""
    m = _BYTE_FALLBACK_RE.fullmatch(piece)
    return int(m.group(1), 16) if m else None
