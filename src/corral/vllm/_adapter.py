"""What corral's two vLLM hosts share (the structured-output backend and the logits processor):
corral's view of the served model's tokenizer. Request parsing and compiling are in
:mod:`corral.vllm._spec`, also shared; this module reads vLLM's config but imports no vLLM.
"""

from __future__ import annotations

import multiprocessing
import os
from typing import Any

from corral.compile import SchemaConverter
from corral.tokenizer import Tokenizer, declared_eos_ids

__all__ = ["load_tokenizer", "schema_converter"]


def schema_converter(nice: int = 0) -> SchemaConverter:
    """Where a vLLM process converts schemas: a worker process (``CORRAL_COMPILE_WORKERS``,
    default 1), so the conversion (Python) does not hold the GIL that vLLM's scheduling loop or
    forward pass needs; in the calling thread in a daemonic process (vLLM's model-runner
    workers), which may not start processes of its own. By default the worker keeps its
    priority (``nice``): vLLM's CPU build spins its OpenMP threads, and beside them a niced
    worker was starved until its conversions ran past their time limit (measured: a 1 s
    conversion refused after 5 s)."""
    workers = int(os.environ.get("CORRAL_COMPILE_WORKERS", "1"))
    if multiprocessing.current_process().daemon:
        workers = 0
    return SchemaConverter(workers, nice=nice)


def load_tokenizer(vllm_config: Any, hf: Any = None) -> Tokenizer:
    """corral's view of the served model's tokenizer: ``hf`` (the Hugging Face tokenizer vLLM
    already loaded; loaded from the model config when None), at the width of the model's logits,
    with EOS = the tokenizer's EOS plus the generation config's (the tokens vLLM stops on)."""
    mc = vllm_config.model_config
    if hf is None:
        import transformers

        hf = transformers.AutoTokenizer.from_pretrained(
            mc.tokenizer, revision=mc.tokenizer_revision, trust_remote_code=mc.trust_remote_code
        )
    # vLLM stops on these itself, so they are the EOS ids exactly (policy: corral.tokenizer.eos).
    gen_eos = mc.try_get_generation_config().get("eos_token_id")
    eos = declared_eos_ids(getattr(hf, "eos_token_id", None), gen_eos)
    width = max(int(mc.get_vocab_size()), len(hf))
    return Tokenizer.from_hf(hf, width=width, eos_ids=eos or None)
