"""GGUF weights for transformers: de-quantized once into a safetensors directory, then reused.

transformers de-quantizes a GGUF file on every load (~13 s for SmolLM2 on a 2-core CPU), so the
first load converts it once and saves the weights as safetensors in the user's cache directory,
keyed by the file's SHA-256; later loads read that copy (well under a second). Set
``CORRAL_CACHE_DIR`` to move the cache. The conversion writes into a temporary directory and
renames it into place, so a concurrent or interrupted conversion never leaves a half-written
entry behind.
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

__all__ = ["cache_dir", "converted_gguf", "file_sha256"]


def cache_dir() -> Path:
    """Where converted weights are kept: ``$CORRAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/corral``,
    else ``~/.cache/corral``."""
    env = os.environ.get("CORRAL_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "corral"


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, streamed."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def converted_gguf(path: Path, verbose: bool, digest: str | None = None) -> Path:
    """A transformers directory holding the de-quantized weights of a GGUF file (converted once,
    then reused). ``digest``: the file's SHA-256 when the caller already knows it."""
    digest = digest or file_sha256(path)
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
