"""Refuse bad input before a model loads: the commands' "fast by default" checks.

Loading a model costs seconds (weights, and the import of torch/transformers or llama.cpp);
compiling a constraint costs milliseconds and needs only the model's vocabulary, which
:func:`corral.load_tokenizer` reads from a GGUF file's metadata or a ``tokenizer.json`` without
any weights. So a command compiles its constraint *first*, on that vocabulary: a schema, regex or
grammar that corral refuses is reported in well under a second, with the same error the
generation itself would raise. The compiled constraint lands in the process-wide compile cache,
keyed by the vocabulary's hash, so the generation that follows reuses it instead of compiling
again (the llama.cpp backend's vocabulary hashes the same as ``Tokenizer.from_gguf``).

This module imports nothing heavy: no torch, transformers or llama_cpp
(``tests/test_cli_latency.py`` fails if a refused schema imports any of them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["HEAVY_MODULES", "check_constraint", "check_sampling"]

HEAVY_MODULES = ("torch", "transformers", "llama_cpp")
"""Modules a command must not import before its input has been checked."""


def check_constraint(model: str | os.PathLike[str] | None, kw: Mapping[str, Any]) -> None:
    """Compile the constraint named by ``kw`` (``corral.generate`` keyword arguments) on
    ``model``'s vocabulary, without loading the model. Raises corral's compile errors."""
    from corral.compile import compile_constraint, spec_from_args

    spec = spec_from_args(dict(kw))
    if spec is None:
        return
    if spec.kind == "json_schema" and spec.thinking is None:
        # Schema conversion needs no vocabulary: a bad schema is refused before the vocabulary
        # is even read (a few hundred ms for a large GGUF).
        from corral.compile.converter import IN_PROCESS

        IN_PROCESS.convert(spec.schema, spec.options)
    from corral.backends.loading import load_tokenizer

    compile_constraint(spec, load_tokenizer(model))


def check_sampling(temperature: float, top_p: float, top_k: int, seed: int | None) -> None:
    """Refuse sampling settings :class:`corral.SamplingParams` would refuse (a ValueError)."""
    from corral.runtime.sampling import SamplingParams

    SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k, seed=seed)
