"""Apply packed token bitmasks to logits, vectorised (never a Python loop over the vocabulary).

In:  logits of shape ``(rows, width)`` or ``(width,)`` (torch tensor on any device, or numpy
     array) and an int32 bitmask of shape ``(k, ceil(width / 32))`` as written by
     :meth:`corral.Matcher.fill_next_token_bitmask` (bit ``t % 32`` of word ``t // 32`` set when
     token ``t`` is allowed), one row per masked logits row.
Out: logits with every disallowed entry set to ``-inf`` (in place).

The one place where "allowed" becomes "sampleable", shared by corral's decode loop, the server,
the transformers and llama-cpp-python processors and the vLLM processor:

* numpy logits, and float32/float16/float64 torch CPU tensors: through a numpy view, one
  single-threaded pass. torch's ``masked_fill_`` would wake its thread pool, which is slow beside
  a busy model's threads (measured 5-10 ms per call next to llama.cpp against ~0.1 ms this way).
* torch tensors on a device (and bfloat16 on CPU): the *packed* int32 mask is copied to the
  logits' device (32x smaller than a bool mask) and unpacked there with shifts.

Columns past the bitmask's coverage are never allowed (a model whose logits are wider than its
vocabulary: padding ids).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["allow_only", "allowed_ids", "apply_token_bitmask_", "bitmask_to_bool", "full_bitmask"]


def full_bitmask(rows: int, width: int) -> np.ndarray:
    """An all-allowed int32 bitmask ``(rows, ceil(width / 32))``."""
    return np.full((rows, (width + 31) // 32), -1, dtype=np.int32)


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


def allowed_ids(mask_row: np.ndarray, width: int) -> np.ndarray:
    """The token ids allowed by one packed mask row (int64 array, ascending)."""
    row = np.ascontiguousarray(mask_row, dtype=np.int32)
    return np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")[:width])


def allow_only(mask_row: np.ndarray, token: int) -> None:
    """Narrow one packed mask row (a writable int32 view) to the single ``token``."""
    mask_row[:] = 0
    mask_row[token >> 5] = np.int32(np.uint32(1 << (token & 31)).view(np.int32))


def apply_token_bitmask_(logits: Any, bitmask: np.ndarray, indices: Sequence[int] | None = None) -> Any:
    """Set the logits of disallowed tokens to ``-inf``, in place; returns ``logits``.

    ``bitmask`` row ``k`` masks logits row ``indices[k]`` (default: row ``k``); other rows are
    left as they are.
    """
    one_row = logits.ndim == 1
    width = int(logits.shape[-1])
    words = np.asarray(bitmask)
    if words.ndim == 1:
        words = words[None, :]
    rows = list(range(words.shape[0])) if indices is None else list(indices)
    if len(rows) != words.shape[0]:
        raise ValueError(f"{words.shape[0]} mask rows for {len(rows)} logits rows")
    if not rows:
        return logits
    if isinstance(logits, np.ndarray):
        _apply_numpy(logits[None, :] if one_row else logits, words, rows, width)
        return logits
    import torch  # only reached with a torch tensor

    view = logits.unsqueeze(0) if one_row else logits
    numpy_ok = logits.dtype in (torch.float32, torch.float64, torch.float16)  # not bfloat16
    if logits.device.type == "cpu" and numpy_ok and not logits.requires_grad:
        _apply_numpy(view.numpy(), words, rows, width)
        return logits
    _apply_device(view, words, rows, width)
    return logits


def _allowed_bool(words: np.ndarray, width: int) -> np.ndarray:
    covered = min(width, words.shape[1] * 32)
    allowed = np.zeros((words.shape[0], width), dtype=bool)
    allowed[:, :covered] = bitmask_to_bool(words, covered)
    return allowed


def _apply_numpy(arr: np.ndarray, words: np.ndarray, rows: list[int], width: int) -> None:
    allowed = _allowed_bool(words, width)
    if len(rows) == arr.shape[0] and rows == list(range(arr.shape[0])):
        arr[~allowed] = -np.inf
        return
    for k, r in enumerate(rows):
        arr[r, ~allowed[k]] = -np.inf


_BITS: dict[Any, Any] = {}


def _apply_device(view: Any, words: np.ndarray, rows: list[int], width: int) -> None:
    import torch

    device = view.device
    packed = torch.from_numpy(np.ascontiguousarray(words, dtype=np.int32)).to(device, non_blocking=True)
    bits = _BITS.get(device)
    if bits is None:
        bits = _BITS[device] = torch.arange(32, dtype=torch.int32, device=device)
    allowed = ((packed.unsqueeze(-1) >> bits) & 1).bool().reshape(len(rows), -1)
    covered = min(width, allowed.shape[1])
    if covered < width:  # logits wider than the vocabulary: the extra columns are never allowed
        pad = torch.zeros((len(rows), width - covered), dtype=torch.bool, device=device)
        allowed = torch.cat([allowed[:, :covered], pad], dim=1)
    else:
        allowed = allowed[:, :width]
    if rows == list(range(view.shape[0])):
        view.masked_fill_(~allowed, float("-inf"))
    else:
        idx = torch.tensor(rows, dtype=torch.long, device=device)
        view[idx] = view[idx].masked_fill(~allowed, float("-inf"))
