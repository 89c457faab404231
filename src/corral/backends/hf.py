"""Hugging Face transformers backend: a causal LM with a KV cache, batched with padding.

Each forward call left-pads the rows' chunks to a common length and passes an explicit
``attention_mask`` (pads masked out, wherever they fall in the cache) and ``position_ids`` (each
row's own positions), so rows of different lengths — and jump-ahead chunks of different sizes —
share one forward pass and still compute exactly what they would alone.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence
from typing import Any

from corral.backends.base import Backend, Batch
from corral.errors import CorralError
from corral.tokenizer import Tokenizer, declared_eos_ids

__all__ = ["TransformersBackend"]


class TransformersBackend(Backend):
    """Decode with a transformers ``PreTrainedModel`` (causal LM) and its fast tokenizer.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal language model (``AutoModelForCausalLM``), on any device.
    hf_tokenizer : transformers.PreTrainedTokenizerFast
        Its tokenizer.
    source : str
        Where it came from (for messages).
    """

    name = "transformers"

    def __init__(self, model: Any, hf_tokenizer: Any, source: str = "") -> None:
        import torch

        self.model = model.eval()
        self.hf_tokenizer = hf_tokenizer
        self.source = source or str(getattr(model, "name_or_path", "") or "model")
        out = model.get_output_embeddings()
        width = int(out.weight.shape[0]) if out is not None else int(model.config.vocab_size)
        size = len(hf_tokenizer)
        if size > width:
            raise CorralError(
                f"tokenizer does not match the model: {size} tokens but the model produces {width} logits"
            )
        # EOS: the generation config's (instruct models often list the chat end-of-turn token
        # there) and the tokenizer's, under the one EOS policy (corral.tokenizer.eos).
        gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        eos = declared_eos_ids(gen_eos, getattr(hf_tokenizer, "eos_token_id", None))
        self.tokenizer = Tokenizer.from_hf(hf_tokenizer, width=width, extra_eos_ids=eos)
        cfg = model.config
        self.context_length = int(
            getattr(cfg, "max_position_embeddings", 0) or getattr(hf_tokenizer, "model_max_length", 2048)
        )
        self.device = next(model.parameters()).device
        self._pad = int(
            hf_tokenizer.pad_token_id if hf_tokenizer.pad_token_id is not None else eos[0] if eos else 0
        )
        self._torch = torch
        # transformers 5.2x renamed `past_key_values` to `cache` (argument and output field).
        params = inspect.signature(model.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.hf_tokenizer, "chat_template", None))

    @property
    def chat_template_source(self) -> str | None:
        t = getattr(self.hf_tokenizer, "chat_template", None)
        return t if isinstance(t, str) else None

    def apply_chat_template(self, messages: list[dict[str, Any]], **variables: Any) -> str:
        text = self.hf_tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False, **variables
        )
        return str(text)

    def encode(self, text: str, *, add_special: bool = False) -> list[int]:
        return [int(i) for i in self.hf_tokenizer(text, add_special_tokens=add_special)["input_ids"]]

    def new_batch(self) -> Batch:
        return _HFBatch(self)


class _HFBatch(Batch):
    def __init__(self, backend: TransformersBackend) -> None:
        self.b = backend
        self.cache: Any = None
        self.mask: Any = None  # (rows, cached length) 1 = real token, 0 = pad
        self.pos: Any = None  # (rows,) position of each row's next token

    def forward(self, chunks: Sequence[Sequence[int]], *, all_positions: bool = False) -> Any:
        torch = self.b._torch
        rows = len(chunks)
        n = max(len(c) for c in chunks)
        if min(len(c) for c in chunks) < 1:
            raise ValueError("every row needs at least one new token")
        ids = torch.full((rows, n), self.b._pad, dtype=torch.long)
        chunk_mask = torch.zeros((rows, n), dtype=torch.long)
        for i, c in enumerate(chunks):
            ids[i, n - len(c) :] = torch.tensor(list(c), dtype=torch.long)
            chunk_mask[i, n - len(c) :] = 1
        if self.pos is None:
            self.pos = torch.zeros(rows, dtype=torch.long)
            self.mask = torch.zeros((rows, 0), dtype=torch.long)
        positions = (self.pos[:, None] + torch.cumsum(chunk_mask, dim=1) - 1).clamp_(min=0)
        mask = torch.cat([self.mask, chunk_mask], dim=1)
        dev = self.b.device
        with torch.no_grad():
            out = self.b.model(
                input_ids=ids.to(dev),
                attention_mask=mask.to(dev),
                position_ids=positions.to(dev),
                use_cache=True,
                logits_to_keep=0 if all_positions else 1,
                **{self.b._cache_arg: self.cache},
            )
        self.cache = getattr(out, self.b._cache_arg)
        self.mask = mask
        self.pos = self.pos + chunk_mask.sum(dim=1)
        return out.logits.float() if all_positions else out.logits[:, -1, :].float()

    def fork(self, rows: Sequence[int]) -> Batch:
        new = _HFBatch(self.b)
        if self.pos is None:
            return new
        torch = self.b._torch
        index = torch.tensor(list(rows), dtype=torch.long)
        new.cache = copy.deepcopy(self.cache)
        new.cache.batch_select_indices(index.to(self.b.device))
        new.mask = self.mask[index]
        new.pos = self.pos[index]
        return new

    def extend(self, other: Batch) -> None:
        if not isinstance(other, _HFBatch) or other.b is not self.b:
            raise ValueError("extend() takes a batch of the same backend")
        if other.pos is None:
            return
        if self.pos is None:
            self.cache, self.mask, self.pos = other.cache, other.mask, other.pos
            other.cache = other.mask = other.pos = None
            return
        mine, theirs = _dynamic_layers(self.cache), _dynamic_layers(other.cache)
        if mine is None or theirs is None or len(mine) != len(theirs):
            raise NotImplementedError("only plain dynamic KV caches can be merged")
        torch = self.b._torch
        # Left-pad the shorter cache so the columns line up at the right (the newest token of
        # every row is the last column); the padding is masked out like any other pad, and each
        # row keeps its own positions, so nothing a row computes changes.
        length = max(self.mask.shape[1], other.mask.shape[1])
        for a, b in zip(mine, theirs, strict=True):
            a.keys = torch.cat([_left_pad(a.keys, length), _left_pad(b.keys, length)], dim=0)
            a.values = torch.cat([_left_pad(a.values, length), _left_pad(b.values, length)], dim=0)
        self.mask = torch.cat([_left_pad(self.mask, length, dim=1), _left_pad(other.mask, length, dim=1)])
        self.pos = torch.cat([self.pos, other.pos])
        other.cache = other.mask = other.pos = None

    def keep(self, rows: Sequence[int]) -> None:
        if self.pos is None or list(rows) == list(range(self.pos.shape[0])):
            return
        torch = self.b._torch
        index = torch.tensor(list(rows), dtype=torch.long)
        self.cache.batch_select_indices(index.to(self.b.device))
        self.mask = self.mask[index]
        self.pos = self.pos[index]
        # Columns that are padding in every remaining row carry nothing: trim leading ones.
        live = self.mask.any(dim=0).nonzero()
        start = int(live[0]) if live.numel() else 0
        if start > 0 and _trim_cache_front(self.cache, start):
            self.mask = self.mask[:, start:]


def _dynamic_layers(cache: Any) -> list[Any] | None:
    """The cache's layers when all are plain ``DynamicLayer``s holding keys, else None."""
    layers = getattr(cache, "layers", None)
    if not layers or any(type(layer).__name__ != "DynamicLayer" for layer in layers):
        return None
    if any(getattr(layer, "keys", None) is None or layer.keys.dim() != 4 for layer in layers):
        return None
    return list(layers)


def _left_pad(t: Any, length: int, dim: int = 2) -> Any:
    """``t`` with zeros prepended along ``dim`` up to ``length``."""
    missing = length - t.shape[dim]
    if missing <= 0:
        return t
    shape = list(t.shape)
    shape[dim] = missing
    import torch

    return torch.cat([t.new_zeros(shape), t], dim=dim)


def _trim_cache_front(cache: Any, start: int) -> bool:
    """Drop the first ``start`` cached positions of every layer (they are padding in all rows);
    False when the cache is of a kind this does not know how to trim."""
    layers = getattr(cache, "layers", None)
    if not layers or any(type(layer).__name__ != "DynamicLayer" for layer in layers):
        return False  # sliding-window or quantized layers keep their own bookkeeping
    for layer in layers:
        if getattr(layer, "keys", None) is not None and layer.keys.numel():
            layer.keys = layer.keys[:, :, start:, :]
            layer.values = layer.values[:, :, start:, :]
    return True
