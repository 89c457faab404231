"""Hugging Face vocabularies: ``tokenizer.json`` and ``tokenizers`` / ``transformers`` objects.

In: a parsed ``tokenizer.json`` (from a file, with the ``tokenizer_config.json``,
``generation_config.json`` and ``config.json`` next to it, or from a live ``tokenizers.Tokenizer``
/ fast ``transformers`` tokenizer). Out: a :class:`~corral.tokenizer.source.VocabSource` — bytes
per id (decoded by ``bpe.py``), the ids of added tokens marked ``special``, the EOS ids (decided
by ``eos.py``), the logits width when a config names it, and an encoder.

Supported decoding schemes: byte-level BPE (a ``ByteLevel`` decoder, or pre-tokenizer when
there is no decoder) and SentencePiece style (``Metaspace``, ``ByteFallback``, or ``▁``
replaced by a space in the decoder or the normalizer). Anything else is refused with a
:class:`~corral.errors.TokenizerError`, never guessed.

Invariants: ids that no token uses get ``b""``; an added token's bytes are its literal content
and override the model vocabulary's piece for that id; the files are only read, never written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from corral.errors import TokenizerError
from corral.tokenizer.bpe import (
    SPIECE_UNDERLINE,
    byte_fallback,
    byte_level_bytes,
    sentencepiece_bytes,
    utf8,
)
from corral.tokenizer.eos import declared_eos_ids, resolve_eos_ids
from corral.tokenizer.source import Encoder, LazyEncoder, VocabSource, hf_encoder

__all__ = ["parse_hf_json", "read_hf_file", "read_hf_object"]


def read_hf_object(
    tokenizer: Any,
    width: int | None,
    eos_ids: Iterable[int] | None,
    extra_eos_ids: Iterable[int] = (),
) -> VocabSource:
    """Read a ``tokenizers.Tokenizer`` or a fast ``transformers`` tokenizer
    (see :meth:`Tokenizer.from_hf <corral.tokenizer.Tokenizer.from_hf>`)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    source_eos: list[int] = []
    name = "hf"
    if backend is not None:
        source_eos.extend(declared_eos_ids(getattr(tokenizer, "eos_token_id", None)))
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
    tokens, specials, by_content = parse_hf_json(spec)
    source_eos.extend(extra_eos_ids)
    eos = resolve_eos_ids(eos_ids, source_eos, len(tokens), specials, by_content)
    return VocabSource(tokens, specials, eos, width, name, hf_encoder(backend))


def read_hf_file(
    path: str | os.PathLike[str],
    width: int | None,
    eos_ids: Iterable[int] | None,
    extra_eos_ids: Iterable[int] = (),
) -> VocabSource:
    """Read a ``tokenizer.json`` (or a folder holding one) and the configs next to it
    (see :meth:`Tokenizer.from_file <corral.tokenizer.Tokenizer.from_file>`)."""
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
    tokens, specials, by_content = parse_hf_json(spec)

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
        source_eos.extend(declared_eos_ids(cfg.get("eos_token_id")))
        if fname == "config.json":
            vs = cfg.get("vocab_size")
            text_cfg = cfg.get("text_config")
            if vs is None and isinstance(text_cfg, dict):
                vs = text_cfg.get("vocab_size")
                source_eos.extend(declared_eos_ids(text_cfg.get("eos_token_id")))
            if isinstance(vs, int) and not isinstance(vs, bool):
                config_width = vs
    source_eos.extend(extra_eos_ids)
    eos = resolve_eos_ids(eos_ids, source_eos, len(tokens), specials, by_content)
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
        return hf_encoder(tokenizers.Tokenizer.from_file(str(p)))

    return VocabSource(tokens, specials, eos, width, str(p), LazyEncoder(factory))


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


def parse_hf_json(
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

    Raises
    ------
    TokenizerError
        If there is no readable model vocabulary, or the decoding scheme is not supported.
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

    replacement = SPIECE_UNDERLINE
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
        and d["pattern"].get("String") == SPIECE_UNDERLINE
        for d in decoders
    ):
        scheme = "sentencepiece"
    elif "Metaspace" in pre_types or any(
        n.get("type") == "Replace" and n.get("content") == SPIECE_UNDERLINE for n in normalizers
    ):
        scheme = "sentencepiece"
    else:
        raise TokenizerError(
            f"unsupported tokenizer.json decoding scheme (model {mtype!r}, decoder "
            f"{sorted(str(t) for t in dec_types)}, pre-tokenizer "
            f"{sorted(str(t) for t in pre_types)}): only byte-level BPE and "
            "SentencePiece-style vocabularies are supported"
        )
    has_byte_fallback = bool(model.get("byte_fallback")) or "ByteFallback" in dec_types

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
            tokens[idx] = byte_level_bytes(piece)
        else:
            b = byte_fallback(piece) if has_byte_fallback else None
            tokens[idx] = bytes((b,)) if b is not None else sentencepiece_bytes(piece, replacement)
    specials: set[int] = set()
    for idx, (content, special) in added.items():
        if idx < 0:
            continue
        tokens[idx] = utf8(content)
        by_content[content] = idx
        if special:
            specials.add(idx)
    return tokens, specials, by_content
