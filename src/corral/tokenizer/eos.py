"""The one EOS policy: which token ids end a sequence.

In: what the sources of a vocabulary *declare* as end-of-sequence (the tokenizer's
``eos_token_id`` / ``eos_token``, ``generation_config.json``, ``config.json``, the GGUF keys
``tokenizer.ggml.eos_token_id`` / ``eot_token_id`` / ``eom_token_id``, and whatever a host adds:
a model's generation config, llama.cpp's own EOS / EOT), the vocabulary's special ids and the
content of its special tokens, and an explicit override. Out: the sorted EOS ids of a
:class:`~corral.tokenizer.Tokenizer`. Every adapter (``hf.py``, ``gguf.py``) and every host
(corral's backends, the vLLM processor) decides EOS through :func:`resolve_eos_ids`; hosts
normalise the fields they read with :func:`declared_eos_ids`.

The policy
----------
1. **An explicit list wins, as given.** ``eos_ids=[...]`` is used exactly: a host that stops
   generation itself (vLLM stops on its tokenizer's and generation config's EOS) passes its own
   stop ids, so corral never lets a sequence "end" on a token the host would not stop on.
2. **Otherwise: every declared id, plus every end-of-turn special token.** The declared ids
   that lie inside the vocabulary are joined by every *special* token whose content is one of
   :data:`END_OF_TURN_TOKENS`. Chat models end a turn with such a token even when their
   tokenizer names another EOS (Llama 3's tokenizer names ``<|end_of_text|>`` while Llama 3
   Instruct ends turns with ``<|eot_id|>``), and letting a constrained generation stop on
   either is what users expect. Hosts that run corral's own decode loop (the transformers and
   llama.cpp backends) add their declared ids here (``extra_eos_ids=``), so the same model
   gets the same EOS set — and the same vocabulary hash — whichever backend loads it.
3. **Nothing found is an error**: a :class:`~corral.errors.TokenizerError` asks for
   ``eos_ids``.

Invariants: the result is non-empty, sorted, free of duplicates, and every id is in
``[0, vocab_size)``; an id that is not special is EOS only if some source declared it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from corral.errors import TokenizerError

__all__ = ["END_OF_TURN_TOKENS", "declared_eos_ids", "resolve_eos_ids"]

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


def declared_eos_ids(*fields: object) -> list[int]:
    """The ids named by EOS fields, in order of first appearance, without duplicates.

    Parameters
    ----------
    *fields : int, list of int, tuple of int or None
        Values of fields such as ``eos_token_id`` (a config may hold one id or a list).
        ``None``, booleans and non-integer entries are skipped.

    Returns
    -------
    list of int
    """
    out: list[int] = []
    for value in fields:
        if isinstance(value, bool) or value is None:
            continue
        items = value if isinstance(value, (list, tuple)) else [value]
        for v in items:
            if isinstance(v, int) and not isinstance(v, bool) and v not in out:
                out.append(int(v))
    return out


def resolve_eos_ids(
    explicit: Iterable[int] | None,
    declared: Iterable[int],
    vocab_size: int,
    special_ids: Iterable[int],
    by_content: Mapping[str, int],
) -> list[int]:
    """Apply the EOS policy (see the module docstring).

    Parameters
    ----------
    explicit : iterable of int or None
        An override; used exactly as given (range-checked later by the ``Tokenizer``).
    declared : iterable of int
        Ids the sources declare; those outside ``[0, vocab_size)`` are dropped.
    vocab_size : int
        Number of token ids.
    special_ids : iterable of int
        Ids of special tokens.
    by_content : mapping of str to int
        Token content to id, for finding the end-of-turn tokens.

    Returns
    -------
    list of int
        Sorted EOS ids (``explicit`` in the order given).

    Raises
    ------
    TokenizerError
        If ``explicit`` is empty, or nothing is found.
    """
    if explicit is not None:
        ids = [int(i) for i in explicit]
        if not ids:
            raise TokenizerError("eos_ids is empty: give at least one EOS token id")
        return ids
    found = {i for i in declared if 0 <= i < vocab_size}
    special = set(special_ids)
    for content in END_OF_TURN_TOKENS:
        i = by_content.get(content)
        if i is not None and i in special:
            found.add(i)
    if not found:
        raise TokenizerError(
            "could not determine the EOS token id(s) of this tokenizer: pass eos_ids=[...] explicitly"
        )
    return sorted(found)
