"""GGUF vocabularies: the tokenizer metadata of a ``.gguf`` model file.

In: the path of a GGUF file (versions 2 and 3, little-endian). Only the header — metadata
key/values and the tensor table — is read, through a memory map; tensor data is never touched.
Out: a :class:`~corral.tokenizer.source.VocabSource` — bytes per id (decoded by ``bpe.py``:
byte-level BPE for ``tokenizer.ggml.model == "gpt2"``, SentencePiece for ``"llama"`` /
``"t5"``), the special ids (token types unknown, control and unused), the EOS ids (decided by
``eos.py`` from ``tokenizer.ggml.eos_token_id`` / ``eot_token_id`` / ``eom_token_id``), the
logits width (``<arch>.vocab_size``, else the ``output`` / ``token_embd`` tensor's rows), and for
byte-level vocabularies with merges an encoder rebuilt as a ``tokenizers`` BPE model.

Invariants: the reader never reads past the end of the file (a truncated header is a
:class:`~corral.errors.TokenizerError`, not an ``IndexError``); strings that are not valid UTF-8
keep their bytes (``surrogateescape``), so a token's bytes are exactly those in the file.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from corral.errors import TokenizerError
from corral.tokenizer.bpe import byte_fallback, byte_level_bytes, sentencepiece_bytes, utf8
from corral.tokenizer.eos import declared_eos_ids, resolve_eos_ids
from corral.tokenizer.source import Encoder, LazyEncoder, VocabSource, hf_encoder

__all__ = ["read_gguf_header", "read_gguf_vocab"]

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

# tokenizer.ggml.token_type values
_TYPE_UNKNOWN, _TYPE_CONTROL, _TYPE_USER, _TYPE_UNUSED, _TYPE_BYTE = 2, 3, 4, 5, 6


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


def read_gguf_header(path: Path) -> tuple[dict[str, Any], dict[str, list[int]]]:
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


def read_gguf_vocab(
    path: str | os.PathLike[str],
    width: int | None,
    eos_ids: Iterable[int] | None,
    extra_eos_ids: Iterable[int] = (),
) -> VocabSource:
    """Read the vocabulary of a GGUF file
    (see :meth:`Tokenizer.from_gguf <corral.tokenizer.Tokenizer.from_gguf>`)."""
    p = Path(path)
    meta, tensors = read_gguf_header(p)
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
        if ttype in (_TYPE_UNKNOWN, _TYPE_CONTROL, _TYPE_UNUSED):
            specials.add(i)
            tokens.append(utf8(piece))
        elif ttype == _TYPE_USER:  # literal content
            tokens.append(utf8(piece))
        elif ttype == _TYPE_BYTE:
            b = byte_fallback(piece)
            if b is not None:
                tokens.append(bytes((b,)))
            elif byte_level:
                tokens.append(byte_level_bytes(piece))
            else:
                tokens.append(sentencepiece_bytes(piece))
        elif byte_level:
            tokens.append(byte_level_bytes(piece))
        else:
            tokens.append(sentencepiece_bytes(piece))

    source_eos = declared_eos_ids(
        meta.get("tokenizer.ggml.eos_token_id"),
        meta.get("tokenizer.ggml.eot_token_id"),
        meta.get("tokenizer.ggml.eom_token_id"),
    )
    source_eos.extend(extra_eos_ids)
    by_content: dict[str, int] = {}
    for i in sorted(specials):
        by_content.setdefault(pieces[i], i)
    eos = resolve_eos_ids(eos_ids, source_eos, len(tokens), specials, by_content)

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
        encoder = LazyEncoder(lambda: _gguf_bpe_encoder(pieces, types, merges, pre_name))
    name = meta.get("general.name")
    label = str(name) if isinstance(name, str) and name else p.name
    return VocabSource(tokens, specials, eos, width, label, encoder)


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
        if t == _TYPE_CONTROL and pieces[i]
    ]
    user = [
        AddedToken(pieces[i], special=False, normalized=False)
        for i, t in enumerate(types)
        if t == _TYPE_USER and pieces[i]
    ]
    if special:
        tok.add_special_tokens(special)
    if user:
        tok.add_tokens(user)
    return hf_encoder(tok)
