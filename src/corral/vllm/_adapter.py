"""What corral's two vLLM hosts share (the structured-output backend and the logits processor):
corral's view of the served model's tokenizer. Request parsing and compiling are in
:mod:`corral.vllm._spec`, also shared; this module reads vLLM's config but imports no vLLM.
"""

from __future__ import annotations

from typing import Any

from corral.tokenizer import Tokenizer, declared_eos_ids

__all__ = ["load_tokenizer"]


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
