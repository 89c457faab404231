"""Deprecated location: use :mod:`corral.integrations.llama_cpp` (``LlamaCppLogitsProcessor``)."""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["CorralLlamaLogitsProcessor"]  # noqa: F822  (served by __getattr__, deprecated)


def __getattr__(name: str) -> Any:
    if name == "CorralLlamaLogitsProcessor":
        from corral.integrations.llama_cpp import LlamaCppLogitsProcessor

        warnings.warn(
            "corral.generation.llamacpp_processor.CorralLlamaLogitsProcessor is deprecated: use "
            "corral.integrations.llama_cpp.LlamaCppLogitsProcessor (corral.LlamaCppLogitsProcessor)",
            DeprecationWarning,
            stacklevel=2,
        )
        return LlamaCppLogitsProcessor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
