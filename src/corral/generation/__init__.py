"""Constrained generation with real models: the decode loop, backends, sampling, streaming.

Public entry points are re-exported from :mod:`corral`: :func:`load_model`, :func:`generate`,
:func:`stream`, :class:`GenerationResult`, :class:`BudgetError`.
"""

from corral.backends.loading import load_model
from corral.errors import BudgetError
from corral.generation.api import GenerationResult, TextStream, generate, stream
from corral.runtime.sampling import SamplingParams

__all__ = [
    "BudgetError",
    "GenerationResult",
    "SamplingParams",
    "TextStream",
    "generate",
    "load_model",
    "stream",
]
