"""llama.cpp backend (``pip install 'corral[llama]'``): GGUF models through llama-cpp-python.

Batching: one llama.cpp *sequence* per row, all rows of all live batches sharing one context
with a unified KV cache. :meth:`Batch.forward` packs every row's chunk into a single
``llama_batch`` (token, position, sequence id; logits requested only where they are read), so a
step of the whole batch is one ``llama_decode`` call. ``fork`` copies a sequence with
``llama_memory_seq_cp``, which in a unified cache shares the cells (the prompt's keys and values
are not copied); ``keep`` and garbage-collected batches free their sequences with
``llama_memory_seq_rm``.

Batch invariance: with ``n_ubatch`` below 64 (default 32) llama.cpp's CPU matrix products run
column by column, so a row's logits are bit-identical whichever rows share its steps and however
its prompt is split — batched greedy output equals single-row output. (Measured on SmolLM2 Q4_1,
2-core x86: a step of 4 rows costs ~4.4x one row on 1 thread, ~3x on 2 threads; the time saved
is per-call overhead, not arithmetic.)

The KV cache starts at ``kv_cells`` cells (default: ``context_length``). When a decode finds no
room, the context is rebuilt with twice the cells and every live sequence is re-evaluated from
its recorded tokens (rare), so many long rows never fail for lack of cache.

Only llama-cpp-python's low-level C API (``llama_cpp.llama_*``) is used. Tested with 0.3.36;
the KV-cache and loading calls fall back to their older names (``llama_kv_self_*``,
``llama_load_model_from_file``, ...) where the newer ones are missing.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import sys
import threading
import weakref
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from corral.backends.base import Backend, Batch, default_threads
from corral.errors import CorralError
from corral.tokenizer import Tokenizer, declared_eos_ids

__all__ = ["LlamaCppBackend", "render_chat_template"]

_BACKEND_READY = False


def _llama() -> Any:
    try:
        import llama_cpp
    except ImportError:  # pragma: no cover - loading.py checks first
        raise CorralError(
            "the llama.cpp backend needs llama-cpp-python: pip install 'corral[llama]'"
        ) from None
    return llama_cpp


class LlamaCppBackend(Backend):
    """Decode a GGUF model with llama.cpp (CPU, or whatever llama-cpp-python was built for).

    Parameters
    ----------
    path : str or path-like
        A ``.gguf`` model file.
    threads : int or None
        Threads for the forward pass (``n_threads`` and ``n_threads_batch``); default one less
        than the usable cores (:func:`corral.backends.loading.default_threads`).
    context_length : int or None
        Longest row (prompt + output) accepted; default the smaller of 4096 and the model's
        training context.
    kv_cells : int or None
        Initial KV-cache size in tokens, shared by all rows (grown on demand); default
        ``context_length``.
    max_sequences : int
        Most rows alive at once, over all batches (llama.cpp allows up to 256).
    n_batch : int
        Most tokens per ``llama_decode`` call (longer forwards are split).
    n_ubatch : int
        Most tokens per forward computation inside llama.cpp. The default, 32, keeps every
        matrix product on llama.cpp's per-column CPU kernels, so a row's logits do not depend
        on which other rows share the step or how its prompt is split: batched greedy output
        equals single-row output. From 64 tokens up llama.cpp switches to tiled kernels (about
        6% faster prefill here) whose rounding differs by up to ~1 logit.
    n_gpu_layers : int
        Layers to offload when llama-cpp-python was built with a GPU backend.
    extra_buffer_types : bool or None
        Let llama.cpp repack weights into its CPU "extra" buffer types (AMX tiles, interleaved
        AVX2/AVX-512 layouts). Default: on, unless llama.cpp was built with AMX
        (``AMX_INT8 = 1`` in ``llama_print_system_info``): llama-cpp-python 0.3.36 built natively
        on a CPU with AMX crashes (SIGSEGV in ``ggml_backend_amx_mul_mat``) in the first forward
        pass of a multi-token batch, even in its own ``Llama`` class.
    verbose : bool
        Let llama.cpp log to stderr (off by default).
    """

    name = "llama.cpp"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        threads: int | None = None,
        context_length: int | None = None,
        kv_cells: int | None = None,
        max_sequences: int = 64,
        n_batch: int = 512,
        n_ubatch: int = 32,
        n_gpu_layers: int = 0,
        extra_buffer_types: bool | None = None,
        verbose: bool = False,
    ) -> None:
        global _BACKEND_READY
        lc = _llama()
        self._lc = lc
        if not verbose:
            # llama-cpp-python forwards llama.cpp's log through this logger. Errors are silenced
            # too: a full KV cache is logged as one, and is handled here (the cache grows);
            # other failures surface as CorralError with llama.cpp's status.
            logging.getLogger("llama-cpp-python").setLevel(logging.CRITICAL)
        if threads is None:
            threads = default_threads()
        p = Path(path).expanduser()
        if not p.is_file():
            raise CorralError(f"model not found: {p}")
        self.source = str(p)
        self.threads = int(threads)
        if not _BACKEND_READY:
            lc.llama_backend_init()
            _BACKEND_READY = True
        mparams = lc.llama_model_default_params()
        mparams.n_gpu_layers = int(n_gpu_layers)
        if extra_buffer_types is None:
            extra_buffer_types = extra_buffer_types_safe(_system_info(lc))
        mparams.use_extra_bufts = bool(extra_buffer_types)
        self.extra_buffer_types = bool(extra_buffer_types)
        load = getattr(lc, "llama_model_load_from_file", None) or lc.llama_load_model_from_file
        model = load(str(p).encode(), mparams)
        if not model:
            raise CorralError(f"llama.cpp cannot load {p}")
        self._model = model
        free_model = getattr(lc, "llama_model_free", None) or lc.llama_free_model
        self._holder: list[Any] = []  # the live context (a list, so the finalizer sees swaps)
        self._finalizer = weakref.finalize(self, _free_all, lc, free_model, model, self._holder)
        self._vocab = lc.llama_model_get_vocab(model)
        n_vocab = int(lc.llama_vocab_n_tokens(self._vocab))
        self.n_vocab = n_vocab

        # End of generation: the GGUF's EOS and end-of-turn tokens, plus llama.cpp's own EOS /
        # EOT when the metadata names others, under the one EOS policy (corral.tokenizer.eos).
        # (llama.cpp also ends generation at a few more tokens, e.g. fill-in-the-middle markers;
        # those are not EOS here, as in the transformers backend.)
        declared = declared_eos_ids(*(int(f(self._vocab)) for f in (lc.llama_vocab_eos, lc.llama_vocab_eot)))
        tok = Tokenizer.from_gguf(p, width=n_vocab, extra_eos_ids=declared)
        if len(tok) > n_vocab:
            raise CorralError(f"tokenizer does not match the model: {len(tok)} tokens but {n_vocab} logits")
        # The same vocabulary (same hash: grammars compiled for Tokenizer.from_gguf(path) fit),
        # encoding with llama.cpp's own tokenizer: forced and completion text is split the way
        # the model's tokenizer splits it, SentencePiece GGUFs get an encoder too, and the
        # `tokenizers` package is not needed.
        self.tokenizer = Tokenizer(
            tok.token_bytes,
            special_ids=tok.special_ids,
            eos_ids=tok.eos_ids,
            width=n_vocab,
            name=tok.name,
            encoder=_LlamaEncoder(self, tok),
        )

        n_train = getattr(lc, "llama_model_n_ctx_train", None) or lc.llama_n_ctx_train
        train = int(n_train(model)) or 4096
        self.context_length = int(context_length) if context_length else min(4096, train)
        self.max_sequences = int(max_sequences)
        if not 1 <= self.max_sequences <= 256:
            raise ValueError(f"max_sequences must be in [1, 256], got {max_sequences}")
        self.n_batch = int(n_batch)
        self.n_ubatch = max(1, min(int(n_ubatch), self.n_batch))
        raw = lc.llama_model_chat_template(model, None)
        self.chat_template: str | None = raw.decode("utf-8") if raw else None
        self._template: Any = None
        self._bos_text = self._piece(int(lc.llama_vocab_bos(self._vocab)))
        self._eos_text = self._piece(int(lc.llama_vocab_eos(self._vocab)))
        self._add_bos = bool(lc.llama_vocab_get_add_bos(self._vocab))

        self._lock = threading.RLock()
        self._free_seqs = list(range(self.max_sequences - 1, -1, -1))  # pop() hands out 0 first
        self._history: dict[int, list[int]] = {}  # tokens in the cache, per live sequence
        self._cells = 0
        self.decode_calls = 0  # llama_decode calls made (for tests and benchmarks)
        self._new_context(int(kv_cells) if kv_cells else self.context_length)

    # ------------------------------------------------------------------ prompts

    @property
    def has_chat_template(self) -> bool:
        return bool(self.chat_template)

    @property
    def chat_template_source(self) -> str | None:
        return self.chat_template

    def apply_chat_template(self, messages: list[dict[str, Any]], **variables: Any) -> str:
        if self._template is None:
            if not self.chat_template:
                return super().apply_chat_template(messages)  # raises: no template
            self._template = _compile_template(self.chat_template)
        return str(
            self._template.render(
                messages=messages,
                add_generation_prompt=True,
                bos_token=self._bos_text,
                eos_token=self._eos_text,
                **variables,
            )
        )

    def encode(self, text: str, *, add_special: bool = False) -> list[int]:
        return self._tokenize(text, add_special, True)

    def _tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        self._check_open()
        lc = self._lc
        data = text.encode("utf-8")
        cap = len(data) + 8
        for _ in range(2):
            buf = (lc.llama_token * cap)()
            n = int(lc.llama_tokenize(self._vocab, data, len(data), buf, cap, add_special, parse_special))
            if n >= 0:
                return list(buf[:n])
            cap = -n
        raise CorralError("llama.cpp could not tokenize the prompt")  # pragma: no cover

    def _piece(self, token: int) -> str:
        if token < 0:
            return ""
        buf = ctypes.create_string_buffer(256)
        n = int(self._lc.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, True))
        return buf.raw[: max(n, 0)].decode("utf-8", errors="replace")

    def token_piece(self, token: int) -> bytes:
        """The bytes llama.cpp gives for one token (special tokens as their text)."""
        self._check_open()
        buf = ctypes.create_string_buffer(256)
        n = int(self._lc.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, True))
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = int(self._lc.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, True))
        return buf.raw[:n]

    # ------------------------------------------------------------------ batches

    def new_batch(self) -> Batch:
        return _LlamaBatch(self)

    def describe(self) -> str:
        return f"{self.name}:{self.source} (threads={self.threads})"

    def _new_context(self, cells: int) -> None:
        """(Re)create the decoding context with ``cells`` KV cells; the old one is freed."""
        lc = self._lc
        cp = lc.llama_context_default_params()
        cells = max(256, -(-cells // 256) * 256)
        cp.n_ctx = cells
        cp.n_batch = self.n_batch
        cp.n_ubatch = self.n_ubatch
        cp.n_seq_max = self.max_sequences
        cp.n_threads = self.threads
        cp.n_threads_batch = self.threads
        cp.no_perf = True
        if hasattr(cp, "kv_unified"):
            cp.kv_unified = True  # one cache for all rows: fork shares cells, any row may grow
        make = getattr(lc, "llama_init_from_model", None) or lc.llama_new_context_with_model
        ctx = make(self._model, cp)
        if not ctx:
            raise CorralError(f"llama.cpp could not create a context of {cells} tokens (out of memory?)")
        self._drop_context()
        self._holder.append(ctx)
        self._ctx = ctx
        self._cells = cells
        self._mem = lc.llama_get_memory(ctx) if hasattr(lc, "llama_get_memory") else None

    def _drop_context(self) -> None:
        while self._holder:
            self._lc.llama_free(self._holder.pop())

    def _check_open(self) -> None:
        if not self._holder:
            raise CorralError("the llama.cpp backend was closed")

    def close(self) -> None:
        """Free the model and its context now (otherwise when the backend is collected)."""
        self._finalizer()

    # KV-cache calls under either API generation.
    def _seq_rm(self, seq: int) -> None:
        lc = self._lc
        if self._mem is not None:
            lc.llama_memory_seq_rm(self._mem, seq, -1, -1)
        elif hasattr(lc, "llama_kv_self_seq_rm"):  # pragma: no cover - older versions
            lc.llama_kv_self_seq_rm(self._ctx, seq, -1, -1)
        else:  # pragma: no cover
            lc.llama_kv_cache_seq_rm(self._ctx, seq, -1, -1)

    def _seq_cp(self, src: int, dst: int) -> None:
        lc = self._lc
        if self._mem is not None:
            lc.llama_memory_seq_cp(self._mem, src, dst, -1, -1)
        elif hasattr(lc, "llama_kv_self_seq_cp"):  # pragma: no cover
            lc.llama_kv_self_seq_cp(self._ctx, src, dst, -1, -1)
        else:  # pragma: no cover
            lc.llama_kv_cache_seq_cp(self._ctx, src, dst, -1, -1)

    def _acquire(self, n: int) -> list[int]:
        if n > len(self._free_seqs):
            raise CorralError(
                f"the llama.cpp backend decodes at most {self.max_sequences} sequences at once "
                f"({self.max_sequences - len(self._free_seqs)} in use, {n} more asked): "
                "load it with a larger max_sequences (up to 256)"
            )
        seqs = [self._free_seqs.pop() for _ in range(n)]
        for s in seqs:
            self._history[s] = []
        return seqs

    def _release(self, seqs: Sequence[int]) -> None:
        with self._lock:
            for s in seqs:
                if s in self._history:
                    del self._history[s]
                    if self._holder:
                        self._seq_rm(s)
                    self._free_seqs.append(s)

    def _decode(self, items: list[tuple[int, int, int, bool]]) -> tuple[int, list[np.ndarray]]:
        """Run ``(token, position, sequence, want_logits)`` items through llama_decode in
        pieces of ``n_batch``; returns the status of the first failure (0 when all succeeded)
        and the logits of the items that asked for them, in order."""
        lc = self._lc
        out: list[np.ndarray] = []
        width = self.n_vocab
        for start in range(0, len(items), self.n_batch):
            piece = items[start : start + self.n_batch]
            batch = lc.llama_batch_init(len(piece), 0, 1)
            try:
                n_out = 0
                for i, (t, pos, seq, want) in enumerate(piece):
                    batch.token[i] = t
                    batch.pos[i] = pos
                    batch.n_seq_id[i] = 1
                    batch.seq_id[i][0] = seq
                    batch.logits[i] = 1 if want else 0
                    n_out += want
                batch.n_tokens = len(piece)
                rc = int(lc.llama_decode(self._ctx, batch))
                self.decode_calls += 1
                if rc != 0:
                    return rc, out
                if n_out:
                    ptr = lc.llama_get_logits(self._ctx)
                    block = np.ctypeslib.as_array(ptr, shape=(n_out * width,)).reshape(n_out, width)
                    out.extend(block.copy())
            finally:
                lc.llama_batch_free(batch)
        return 0, out

    def _grow(self, needed: int) -> None:
        """A bigger cache: new context, every live sequence re-evaluated from its tokens."""
        cells = max(2 * self._cells, needed + 256)
        self._new_context(cells)
        items = [(t, j, s, False) for s, toks in self._history.items() for j, t in enumerate(toks)]
        rc, _ = self._decode(items)
        if rc != 0:
            raise CorralError(f"llama.cpp failed to rebuild its KV cache ({cells} cells): status {rc}")

    def _forward(self, seqs: Sequence[int], chunks: Sequence[Sequence[int]], all_positions: bool) -> Any:
        with self._lock:
            self._check_open()
            items: list[tuple[int, int, int, bool]] = []
            for s, chunk in zip(seqs, chunks, strict=True):
                base = len(self._history[s])
                last = len(chunk) - 1
                items.extend((int(t), base + j, s, all_positions or j == last) for j, t in enumerate(chunk))
            for _ in range(8):
                rc, logits = self._decode(items)
                if rc == 0:
                    break
                if rc != 1:
                    raise CorralError(f"llama_decode failed with status {rc}")
                # No room in the KV cache (or it is too fragmented): grow it and retry.
                used = sum(len(h) for h in self._history.values())
                self._grow(used + len(items))
            else:  # pragma: no cover
                raise CorralError("llama.cpp found no room in its KV cache")
            for s, chunk in zip(seqs, chunks, strict=True):
                self._history[s].extend(int(t) for t in chunk)
        if all_positions:
            n = max(len(c) for c in chunks)
            arr = np.zeros((len(chunks), n, self.n_vocab), dtype=np.float32)
            k = 0
            for i, c in enumerate(chunks):
                for j in range(n - len(c), n):
                    arr[i, j] = logits[k]
                    k += 1
        else:
            arr = np.stack(logits).astype(np.float32, copy=False)
        return _as_tensor(arr)


class _LlamaEncoder:
    """``Tokenizer.encode`` through llama.cpp (no BOS, special-token text kept as text); once
    the backend is gone, the GGUF tokenizer's own encoder."""

    def __init__(self, backend: LlamaCppBackend, fallback: Tokenizer) -> None:
        self._backend = weakref.ref(backend)
        self._fallback = fallback

    def __call__(self, text: str) -> list[int]:
        b = self._backend()
        if b is None or not b._holder:
            return self._fallback.encode(text)
        return b._tokenize(text, False, False)


def _system_info(lc: Any) -> str:
    fn = getattr(lc, "llama_print_system_info", None)
    if fn is None:  # pragma: no cover - every supported llama-cpp-python has it
        return ""
    raw = fn()
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def extra_buffer_types_safe(system_info: str) -> bool:
    """Whether llama.cpp's CPU extra buffer types may be used, from its system-info line.

    False for a build with AMX kernels (``AMX_INT8 = 1``): their matrix product crashes on
    the first multi-token batch (llama-cpp-python 0.3.36 built on a CPU with AMX). Other
    repacked layouts stay on: they are the fast path on AVX2 / AVX-512 CPUs.
    """
    # "CPU : SSE3 = 1 | ... | AMX_INT8 = 1 | ...": the backend's name comes before the first flag.
    fields = (f.partition("=") for f in system_info.split("|"))
    flags = {k.split(":")[-1].strip(): v.strip() for k, _, v in fields}
    return flags.get("AMX_INT8", "0") != "1"


def _free_all(lc: Any, free_model: Any, model: Any, holder: list[Any]) -> None:
    while holder:
        lc.llama_free(holder.pop())
    free_model(model)


def _as_tensor(arr: np.ndarray) -> Any:
    """A torch tensor when torch is already imported (by scoring or seeded sampling, which work
    in torch), else the numpy array itself: greedy decoding handles arrays, and importing torch
    just for it would cost seconds per command (most of a short ``corral generate``)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return arr
    return torch.from_numpy(arr)


class _LlamaBatch(Batch):
    """Rows of a batch, each a llama.cpp sequence id in the backend's shared context."""

    def __init__(self, backend: LlamaCppBackend, seqs: list[int] | None = None) -> None:
        self.b = backend
        self.seqs: list[int] = seqs if seqs is not None else []
        self.started = seqs is not None
        # Free the sequences when the batch is dropped (the list is updated in place).
        self._finalizer = weakref.finalize(self, backend._release, self.seqs)
        self._finalizer.atexit = False

    def forward(self, chunks: Sequence[Sequence[int]], *, all_positions: bool = False) -> Any:
        if not chunks or min(len(c) for c in chunks) < 1:
            raise ValueError("every row needs at least one new token")
        b = self.b
        with b._lock:
            if not self.started:
                self.seqs.extend(b._acquire(len(chunks)))
                self.started = True
            elif len(chunks) != len(self.seqs):
                raise ValueError(f"{len(chunks)} chunks for a batch of {len(self.seqs)} rows")
            for s, c in zip(self.seqs, chunks, strict=True):
                if len(b._history[s]) + len(c) > b.context_length:
                    raise CorralError(
                        f"a row would exceed the context of {b.context_length} tokens "
                        "(load the model with a larger context_length)"
                    )
            return b._forward(self.seqs, chunks, all_positions)

    def keep(self, rows: Sequence[int]) -> None:
        rows = list(rows)
        if rows == list(range(len(self.seqs))):
            return
        with self.b._lock:
            kept = [self.seqs[r] for r in rows]
            if len(set(kept)) != len(kept):
                raise ValueError("keep() takes distinct rows")
            dropped = [s for s in self.seqs if s not in set(kept)]
            self.b._release(dropped)
            self.seqs[:] = kept

    def extend(self, other: Batch) -> None:
        if not isinstance(other, _LlamaBatch) or other.b is not self.b:
            raise ValueError("extend() takes a batch of the same llama.cpp backend")
        with self.b._lock:
            if other is self:
                raise ValueError("a batch cannot extend itself")
            self.seqs.extend(other.seqs)  # the sequences (and their caches) change owner
            self.started = self.started or other.started
            other.seqs.clear()
            other.started = True  # empty for good: a later forward() is an error

    def fork(self, rows: Sequence[int]) -> Batch:
        b = self.b
        with b._lock:
            if not self.started:
                return _LlamaBatch(b)
            new = b._acquire(len(rows))
            for r, dst in zip(rows, new, strict=True):
                src = self.seqs[r]
                b._seq_cp(src, dst)
                b._history[dst] = list(b._history[src])
            return _LlamaBatch(b, new)


# ---------------------------------------------------------------------- chat templates


def _raise(message: str) -> None:
    raise CorralError(f"chat template: {message}")


def _tojson(
    value: Any,
    indent: int | None = None,
    separators: Any = None,
    sort_keys: bool = False,
    ensure_ascii: bool = False,
) -> str:
    return json.dumps(
        value, indent=indent, separators=separators, sort_keys=sort_keys, ensure_ascii=ensure_ascii
    )


def _compile_template(source: str) -> Any:
    """A chat template compiled the way transformers does it (sandboxed jinja2, trimmed
    blocks, ``raise_exception``, ``tojson``, ``strftime_now``)."""
    try:
        from jinja2.exceptions import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:  # pragma: no cover - jinja2 comes with llama-cpp-python
        raise CorralError("rendering a chat template needs jinja2: pip install jinja2") from None
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    try:
        return env.from_string(source)
    except TemplateError as e:
        raise CorralError(f"cannot read the model's chat template: {e}") from None


def render_chat_template(template: str, messages: Sequence[Any], **variables: Any) -> str:
    """Render chat ``messages`` with a GGUF ``tokenizer.chat_template`` (generation prompt
    appended), e.g. for a prompt passed to ``Llama.create_completion``."""
    variables.setdefault("add_generation_prompt", True)
    return str(_compile_template(template).render(messages=[dict(m) for m in messages], **variables))
