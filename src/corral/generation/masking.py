"""Apply packed token bitmasks to logits, vectorised (never a Python loop over the vocabulary).

In:  logits of shape ``(rows, width)`` (torch tensor or numpy array) and an int32 bitmask of shape
     ``(rows, ceil(width / 32))`` as written by :meth:`corral.Matcher.fill_next_token_bitmask`
     (bit ``t % 32`` of word ``t // 32`` set when token ``t`` is allowed).
Out: logits with every disallowed entry set to ``-inf`` (in place).

Shared by corral's own decode loop, the transformers ``LogitsProcessor`` and the server, so there
is one place where "allowed" is turned into "sampleable".
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["bitmask_to_bool", "apply_token_bitmask_"]


def bitmask_to_bool(bitmask: np.ndarray, width: int) -> np.ndarray:
    """Unpack an int32 bitmask ``(rows, words)`` into a bool array ``(rows, width)``."""
    words = np.ascontiguousarray(bitmask, dtype=np.int32)
    if words.ndim == 1:
        words = words[None, :]
    # Little-endian word layout: byte k of word w holds tokens 32w+8k .. 32w+8k+7, low bit first.
    bits = np.unpackbits(words.view(np.uint8), axis=1, bitorder="little")
    if bits.shape[1] < width:
        raise ValueError(f"bitmask covers {bits.shape[1]} tokens, logits have {width}")
    return bits[:, :width].astype(bool)


def apply_token_bitmask_(logits: Any, bitmask: np.ndarray) -> Any:
    """Set the logits of disallowed tokens to ``-inf``, in place; returns ``logits``.

    ``logits`` is a torch tensor (any float dtype, any device) or a numpy float array of shape
    ``(rows, width)`` or ``(width,)``; ``bitmask`` has one row per logits row. Columns past the
    bitmask's coverage are never allowed (a model whose logits are wider than its vocabulary).
    """
    one_row = logits.ndim == 1
    width = int(logits.shape[-1])
    words = np.asarray(bitmask)
    if words.ndim == 1:
        words = words[None, :]
    covered = min(width, words.shape[1] * 32)
    allowed = np.zeros((words.shape[0], width), dtype=bool)
    allowed[:, :covered] = bitmask_to_bool(words, covered)
    if isinstance(logits, np.ndarray):
        view = logits[None, :] if one_row else logits
        view[~allowed] = -np.inf
        return logits
    import torch  # only reached with a torch tensor

    numpy_ok = logits.dtype in (torch.float32, torch.float64, torch.float16)  # not bfloat16
    if logits.device.type == "cpu" and numpy_ok and not logits.requires_grad:
        # A CPU tensor shares its memory with a numpy view: one single-threaded pass, where
        # torch's masked_fill_ would wake its thread pool (slow beside a busy model's threads:
        # measured 5-10 ms per call next to llama.cpp against ~0.1 ms this way).
        arr = logits.numpy()
        (arr[None, :] if one_row else arr)[~allowed] = -np.inf
        return logits
    mask = torch.from_numpy(allowed).to(logits.device)
    view = logits.unsqueeze(0) if one_row else logits
    view.masked_fill_(~mask, float("-inf"))
    return logits
