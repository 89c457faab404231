"""A llama-cpp-python ``logits_processor`` for users who call ``Llama.create_completion`` /
``Llama(...)`` themselves.

    from llama_cpp import Llama, LogitsProcessorList
    llm = Llama(model_path=path, verbose=False)
    tok = corral.Tokenizer.from_gguf(path)
    proc = LlamaCppLogitsProcessor(corral.compile_json_schema(schema, tok), max_new_tokens=128)
    out = llm.create_completion(prompt, max_tokens=128, logits_processor=LogitsProcessorList([proc]))

llama-cpp-python calls the processor before each sampled token with the ids so far (prompt and
output) and the logits as a numpy array; the matcher follows the output and every token that
would break the constraint gets ``-inf``, so greedy decoding and llama.cpp's samplers alike only
pick valid tokens, and the end-of-turn token is allowed exactly when the output is complete.
This is :class:`~corral.integrations.transformers.TransformersLogitsProcessor` for one row, on
numpy; corral's own loop (:func:`corral.generate` with the llama.cpp backend) adds jump-ahead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.compile import Constraint
from corral.engine import CompiledGrammar
from corral.integrations.transformers import TransformersLogitsProcessor

__all__ = ["LlamaCppLogitsProcessor"]


class LlamaCppLogitsProcessor(TransformersLogitsProcessor):
    """Constrain ``Llama.create_completion()`` (llama-cpp-python) to a compiled corral constraint.

    A processor follows one generation at a time. A call whose ids do not continue the previous
    call's ids by exactly one token starts a new generation (so reusing a processor for the
    next ``create_completion`` works); :meth:`reset` forces that.

    Parameters
    ----------
    grammar : CompiledGrammar or Constraint
        The constraint, compiled for ``corral.Tokenizer.from_gguf(model_path)`` (its width is
        the model's vocabulary, the width of llama.cpp's logits).
    max_new_tokens : int or None
        The ``max_tokens`` passed to ``create_completion``: when given, the output is steered to
        finish within it (exact for greedy decoding, best effort when sampling).
    margin : int
        See :class:`~corral.integrations.transformers.TransformersLogitsProcessor`.
    """

    def __init__(
        self, grammar: CompiledGrammar | Constraint, max_new_tokens: int | None = None, margin: int = 16
    ) -> None:
        super().__init__(grammar, max_new_tokens=max_new_tokens, margin=margin, threads=1)
        self._seen: np.ndarray | None = None

    def reset(self) -> None:
        super().reset()
        self._seen = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        ids = np.asarray(input_ids)
        seen = self._seen
        if seen is None or ids.shape[0] != seen.shape[0] + 1 or not np.array_equal(ids[:-1], seen):
            self.reset()  # a new generation: its first call carries only the prompt
        self._seen = ids.copy()
        width = int(scores.shape[-1])
        if width != self.tok.width:
            raise ValueError(
                f"the grammar was compiled for {self.tok.width} tokens but the logits have {width}: "
                "compile it for corral.Tokenizer.from_gguf(model_path)"
            )
        # One batch row, as views: the kernel masks ``scores`` in place.
        super().__call__(ids[None, :], scores[None, :])
        return scores
