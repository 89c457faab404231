"""corral inside other hosts' decode loops: one module per host, all on the shared runtime kernel
(:mod:`corral.runtime.kernel`).

* :mod:`corral.integrations.transformers` — ``TransformersLogitsProcessor`` for
  ``model.generate()``;
* :mod:`corral.integrations.llama_cpp` — ``LlamaCppLogitsProcessor`` for llama-cpp-python's
  ``create_completion``;
* :mod:`corral.vllm` — vLLM's per-request logits processor (imports vLLM).

Modules are imported on use: importing this package imports no host library.
"""
