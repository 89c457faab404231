"""``corral keygen``, ``corral compile -o x.corral [--sign]`` and ``corral verify``, end to end in
subprocesses; and corral without the ``cryptography`` package (the ``sign`` extra): unsigned
files load, signing and verifying ask for the extra."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import corral
from corral import models
from corral.compile import ConstraintSpec, compile_constraint

pytest.importorskip("cryptography")

HIDE_CRYPTO = "import sys\nsys.modules['cryptography'] = None\n"
RUN_CLI = "import sys\nfrom corral.cli import main\nsys.exit(main(sys.argv[1:]))\n"


def _cli(*args: str, hide_crypto: bool = False, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    code = (HIDE_CRYPTO if hide_crypto else "") + RUN_CLI
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )


def _same_first_masks(a: corral.CompiledGrammar, b: corral.CompiledGrammar, text: bytes) -> None:
    tok = a.tokenizer
    ma, mb = a.matcher(), b.matcher()
    ra, rb = corral.allocate_bitmask(1, tok), corral.allocate_bitmask(1, tok)
    for i in range(len(text) + 1):
        ma.fill_next_token_bitmask(ra, 0)
        mb.fill_next_token_bitmask(rb, 0)
        assert np.array_equal(ra, rb), f"masks differ after {text[:i]!r}"
        if i < len(text):
            assert ma.accept_bytes(text[i : i + 1]) and mb.accept_bytes(text[i : i + 1])


def test_keygen_compile_sign_verify(tmp_path: Path, smollm2: corral.Tokenizer) -> None:
    gguf = str(models.smollm2_gguf_path())
    r = _cli("keygen", "-o", str(tmp_path / "key"))
    assert r.returncode == 0, r.stderr
    assert "ed25519:" in r.stdout and (tmp_path / "key.pub").is_file()
    assert (tmp_path / "key").stat().st_mode & 0o077 == 0  # private key readable by its owner only
    assert _cli("keygen", "-o", str(tmp_path / "other")).returncode == 0
    r = _cli("keygen", "-o", str(tmp_path / "key"))
    assert r.returncode == 2 and "exists" in r.stderr

    schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 99}}, "required": ["n"]}
    (tmp_path / "s.json").write_text(json.dumps(schema))
    out = tmp_path / "s.corral"
    r = _cli(
        "compile",
        "--schema",
        str(tmp_path / "s.json"),
        "--tokenizer",
        gguf,
        "-o",
        str(out),
        "--sign",
        str(tmp_path / "key"),
    )
    assert r.returncode == 0, r.stderr
    assert "signed by ed25519:" in r.stdout and "json_schema" in r.stdout

    # what the library loads is what a fresh compile (with corral generate's defaults) gives
    loaded = corral.load_artifact(out, smollm2, trusted_keys=tmp_path / "key.pub")
    fresh = compile_constraint(ConstraintSpec.json_schema(schema), smollm2)
    assert loaded.spec.key(smollm2.hash) == fresh.spec.key(smollm2.hash)
    _same_first_masks(fresh.grammar, loaded.grammar, b'{\n  "n": 42\n}')

    r = _cli("verify", str(out), "--pubkey", str(tmp_path / "key.pub"), "--tokenizer", gguf)
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout and "json_schema" in r.stdout
    r = _cli("verify", str(out), "--pubkey", str(tmp_path / "other.pub"))
    assert r.returncode == 1 and "REFUSED (wrong_key)" in r.stderr
    r = _cli(
        "verify", str(out), "--pubkey", str(tmp_path / "other.pub"), "--pubkey", str(tmp_path / "key.pub")
    )
    assert r.returncode == 0, r.stderr

    data = bytearray(out.read_bytes())
    data[len(data) // 2] ^= 1
    (tmp_path / "bad.corral").write_bytes(bytes(data))
    r = _cli("verify", str(tmp_path / "bad.corral"), "--pubkey", str(tmp_path / "key.pub"))
    assert r.returncode == 1 and "REFUSED (tampered)" in r.stderr

    llama = str(models.llama32_tokenizer_path())  # a tokenizer.json; unsigned
    r = _cli("compile", "--regex", "[a-z]{2,5}", "--tokenizer", llama, "-o", str(tmp_path / "r.corral"))
    assert r.returncode == 0, r.stderr
    r = _cli("verify", str(tmp_path / "r.corral"), "--pubkey", str(tmp_path / "key.pub"))
    assert r.returncode == 1 and "REFUSED (unsigned)" in r.stderr
    with pytest.raises(corral.ArtifactError) as e:
        corral.load_artifact(tmp_path / "r.corral", smollm2)
    assert e.value.reason == "wrong_vocabulary"


def test_compile_other_kinds_and_bad_arguments(tmp_path: Path, smollm2: corral.Tokenizer) -> None:
    gguf = str(models.smollm2_gguf_path())
    (tmp_path / "g.gbnf").write_text('root ::= "x" [0-9]+')
    cases = {
        "g": (["--grammar", str(tmp_path / "g.gbnf")], ConstraintSpec.grammar('root ::= "x" [0-9]+'), b"x12"),
        "c": (["--choices", "red,green"], ConstraintSpec.choices(["red", "green"]), b"green"),
        "j": (
            ["--json-mode", "--whitespace", "compact"],
            ConstraintSpec.json_value({"whitespace": "compact"}),
            b'{"a":[1]}',
        ),
    }
    for name, (args, spec, text) in cases.items():
        path = tmp_path / f"{name}.corral"
        r = _cli("compile", *args, "--tokenizer", gguf, "-o", str(path))
        assert r.returncode == 0, r.stderr
        loaded = corral.load_artifact(path, smollm2)
        assert loaded.spec == spec
        _same_first_masks(compile_constraint(spec, smollm2).grammar, loaded.grammar, text)
    r = _cli("compile", "--regex", "a", "--choices", "a,b", "--tokenizer", gguf, "-o", str(tmp_path / "x"))
    assert r.returncode == 2 and "exactly one" in r.stderr
    r = _cli("compile", "--regex", "(a", "--tokenizer", gguf, "-o", str(tmp_path / "x"))
    assert r.returncode == 2 and "corral: error:" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "x").exists()
    r = _cli("verify", str(tmp_path / "nothing.corral"), "--pubkey", str(tmp_path / "none.pub"))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_without_cryptography(tmp_path: Path, smollm2: corral.Tokenizer) -> None:
    """Unsigned files save and load without the package; signing, verifying and trusted keys
    name the extra to install."""
    c = compile_constraint(ConstraintSpec.regex("[0-9]{3}"), smollm2)
    corral.save_artifact(c, tmp_path / "u.corral")
    code = HIDE_CRYPTO + (
        "import corral\n"
        "from corral import models\n"
        f"tok = corral.Tokenizer.from_gguf(models.smollm2_gguf_path())\n"
        f"c = corral.load_artifact({str(tmp_path / 'u.corral')!r}, tok)\n"
        "m = c.grammar.matcher()\n"
        "assert m.accept_bytes(b'123') and m.is_accepting()\n"
        f"corral.save_artifact(c, {str(tmp_path / 'v.corral')!r})\n"
        "try:\n"
        f"    corral.load_artifact({str(tmp_path / 'u.corral')!r}, tok, trusted_keys=[b'x' * 32])\n"
        "except ImportError as e:\n"
        "    print('IMPORT', e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "IMPORT" in r.stdout and "corral[sign]" in r.stdout
    assert (tmp_path / "v.corral").read_bytes() == (tmp_path / "u.corral").read_bytes()
    r = _cli("keygen", "-o", str(tmp_path / "k"), hide_crypto=True)
    assert r.returncode == 2 and "corral[sign]" in r.stderr and "Traceback" not in r.stderr
