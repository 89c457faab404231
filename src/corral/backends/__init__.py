"""Model backends for corral's decode loop, behind one ABC (:mod:`corral.backends.base`) and a
registry (:mod:`corral.backends.loading`): llama.cpp (``llama_cpp.py``) and transformers
(``hf.py``). Backends know nothing about constraints: they run forward passes over token ids.
"""

from corral.backends.base import Backend, Batch, Prompt, default_threads
from corral.backends.loading import BackendEntry, available_backends, load_model, register_backend

__all__ = [
    "Backend",
    "BackendEntry",
    "Batch",
    "Prompt",
    "available_backends",
    "default_threads",
    "load_model",
    "register_backend",
]
