"""Model vocabularies as exact byte strings.

The constraint engine works on bytes, not on token strings. This package turns the vocabulary
of a model (a Hugging Face ``tokenizer.json``, a ``tokenizers`` or ``transformers`` tokenizer
object, or the metadata of a GGUF file) into a :class:`Tokenizer`: for each token id, the exact
bytes that token contributes to the output text, the set of special (control) token ids, the
EOS token id(s) and the width of the model's logits. It knows nothing about grammars.

Modules, in the order data flows through them:

=================  ==========================================================================
``bpe``            token strings to bytes: byte-level BPE (GPT-2 map), SentencePiece (``▁``,
                   ``<0xNN>`` byte fallback), literal added tokens
``eos``            the one EOS policy: which ids end a sequence (every adapter and host)
``source``         :class:`~corral.tokenizer.source.VocabSource`, what an adapter returns;
                   encoders
``hf``             ``tokenizer.json`` files and Hugging Face tokenizer objects
``gguf``           GGUF metadata (header only, memory-mapped); BPE encoder rebuilt from merges
``vocabulary``     :class:`Tokenizer`: validation, hash, ``decode``/``encode``, the native
                   vocabulary (``core``)
=================  ==========================================================================

Special tokens (HF ``"special": true``; GGUF token types control, unknown and unused) are put
in :attr:`Tokenizer.special_ids`; their bytes are still recorded. Tokens without bytes (an
empty string, or an id that no token uses) are kept as ``b""``; they can never advance a
constraint, so the engine never allows them. See :mod:`corral.tokenizer.eos` for how EOS ids
are chosen, and :mod:`corral.tokenizer.bpe` for the decoding rules.
"""

from __future__ import annotations

from corral.tokenizer.bpe import BYTE_TO_UNICODE, UNICODE_TO_BYTE, bytes_to_unicode
from corral.tokenizer.bpe import byte_level_bytes as _byte_level_bytes  # noqa: F401 (tests)
from corral.tokenizer.eos import END_OF_TURN_TOKENS, declared_eos_ids, resolve_eos_ids
from corral.tokenizer.gguf import read_gguf_header as _read_gguf_header  # noqa: F401 (tests)
from corral.tokenizer.source import Encoder
from corral.tokenizer.vocabulary import Tokenizer

__all__ = [
    "BYTE_TO_UNICODE",
    "END_OF_TURN_TOKENS",
    "UNICODE_TO_BYTE",
    "Encoder",
    "Tokenizer",
    "bytes_to_unicode",
    "declared_eos_ids",
    "resolve_eos_ids",
]
