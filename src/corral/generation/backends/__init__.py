"""Model backends for corral's decode loop (see :mod:`corral.generation.backends.base`)."""

from corral.generation.backends.base import Backend, Batch, Prompt

__all__ = ["Backend", "Batch", "Prompt"]
