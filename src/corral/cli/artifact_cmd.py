"""``corral compile``, ``corral keygen`` and ``corral verify``: compiled-constraint artifacts.

``compile`` compiles one constraint for a model's vocabulary and writes the ``.corral`` file
(:mod:`corral.compile.artifact`), signed with ``--sign key`` when given; ``keygen`` writes an
Ed25519 key pair (``key`` and ``key.pub``); ``verify`` checks a file against trusted public keys
and, with ``--tokenizer``, that it loads for that vocabulary. ``verify`` exits 0 when the file is
accepted, 1 when it is refused (the reason and why on one line), 2 for bad arguments.

The compiled constraint's spec uses the same defaults as ``corral generate`` and ``corral
serve`` (:data:`corral.compile.SCHEMA_DEFAULTS`), so an artifact is filed under the same cache key
those hosts compute for the same constraint. Nothing heavy is imported: a vocabulary is read
from a GGUF file's metadata or a ``tokenizer.json``, never a model's weights.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from corral.errors import ArtifactError

__all__ = ["add_parser"]

_TOKENIZER_HELP = (
    "the vocabulary: a model preset (smollm2-135m, ...; see: corral models list), a .gguf file, a "
    "tokenizer.json or a transformers directory"
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "compile",
        help="compile a constraint for a vocabulary into a .corral file (load it instead of compiling)",
        description="Compile a JSON Schema, regex, grammar or choices for one vocabulary and write the "
        "compiled constraint to a .corral file, optionally signed (Ed25519).",
    )
    con = p.add_argument_group("constraint (exactly one)")
    con.add_argument("--schema", help="a JSON Schema: a file path or inline JSON")
    con.add_argument("--regex", help="a regular expression the whole output must match")
    con.add_argument("--grammar", type=Path, help="a grammar file (GBNF + /regex/ terminals, or Lark)")
    con.add_argument("--choices", help="comma-separated allowed outputs (or a JSON array)")
    con.add_argument("--json-mode", action="store_true", help="any JSON value")
    p.add_argument("--tokenizer", required=True, help=_TOKENIZER_HELP)
    p.add_argument("-o", "--output", type=Path, required=True, help="the .corral file to write")
    p.add_argument("--sign", metavar="KEY", help="sign with this Ed25519 private key file (corral keygen)")
    p.add_argument(
        "--whitespace",
        choices=("pretty", "flexible", "compact"),
        help="JSON layout for --schema/--json-mode (default: pretty, as corral generate and serve use)",
    )
    p.add_argument("--no-compress", action="store_true", help="store the body without zlib")
    p.set_defaults(func=run_compile)

    k = sub.add_parser(
        "keygen",
        help="write an Ed25519 key pair for signing .corral files",
        description="Write an Ed25519 private key (PKCS#8 PEM, mode 0600) and its public key (KEY.pub).",
    )
    k.add_argument(
        "-o", "--output", type=Path, required=True, help="the private key file (KEY.pub goes next to it)"
    )
    k.add_argument("--force", action="store_true", help="replace existing key files")
    k.set_defaults(func=run_keygen)

    v = sub.add_parser(
        "verify",
        help="check a .corral file's signature against trusted public keys",
        description="Check a .corral file: format, engine version, content hash and a signature by one "
        "of the trusted keys; with --tokenizer, also that it loads for that vocabulary. Exit status 0: "
        "accepted; 1: refused; 2: bad arguments.",
    )
    v.add_argument("file", type=Path, help="the .corral file")
    v.add_argument(
        "--pubkey", action="append", required=True, type=Path, help="a trusted public key file (repeatable)"
    )
    v.add_argument("--tokenizer", help="also load it for this vocabulary (" + _TOKENIZER_HELP + ")")
    v.set_defaults(func=run_verify)


def _tokenizer(value: str) -> Any:
    path = Path(value)
    if path.suffix.lower() == ".json" and path.is_file():
        from corral.tokenizer import Tokenizer

        return Tokenizer.from_file(path)
    from corral.backends.loading import load_tokenizer

    return load_tokenizer(value, verbose=False)


def _constraint_args(args: argparse.Namespace) -> dict[str, Any]:
    from corral.cli.generate_cmd import constraint_kwargs

    kw = constraint_kwargs(args, exactly_one=True)
    if args.whitespace is not None and "schema_options" not in kw:
        raise ValueError("--whitespace applies to --schema and --json-mode")
    return kw


def _needs_extra(e: ImportError) -> ValueError:
    return ValueError(str(e))


def run_compile(args: argparse.Namespace) -> int:
    from corral.compile import compile_constraint, spec_from_args
    from corral.compile.artifact import save_artifact

    spec = spec_from_args(_constraint_args(args))
    assert spec is not None
    tok = _tokenizer(args.tokenizer)
    t0 = time.perf_counter()
    compiled = compile_constraint(spec, tok)
    ms = (time.perf_counter() - t0) * 1000
    try:
        path = save_artifact(compiled, args.output, signing_key=args.sign, compress=not args.no_compress)
    except ImportError as e:
        raise _needs_extra(e) from None
    signed = ""
    if args.sign:
        from corral.compile.artifact import inspect

        signed = f", signed by {inspect(path.read_bytes()).signer}"
    size = path.stat().st_size
    kib = size / 1024
    print(f"wrote {path} ({kib:.1f} KiB, {spec.kind}, compiled in {ms:.0f} ms for {tok.name}{signed})")
    return 0


def run_keygen(args: argparse.Namespace) -> int:
    from corral.compile.signing import write_keypair

    try:
        priv, pub, fp = write_keypair(args.output, overwrite=args.force)
    except ImportError as e:
        raise _needs_extra(e) from None
    print(f"wrote {priv} (private: keep it secret) and {pub} (public: give it to verifiers); key {fp}")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from corral.compile.artifact import inspect, loads

    data = args.file.read_bytes()
    keys = [p.read_bytes() for p in args.pubkey]
    try:
        info = inspect(data, trusted_keys=keys)
        what = ""
        if args.tokenizer is not None:
            tok = _tokenizer(args.tokenizer)
            c = loads(data, tok, trusted_keys=keys)
            what = f"; loads for {tok.name} as a {c.kind} constraint"
    except ImportError as e:
        raise _needs_extra(e) from None
    except ArtifactError as e:
        print(f"corral: {args.file}: REFUSED ({e.reason}): {e.message}", file=sys.stderr)
        return 1
    digest = info.content_hash[:16]
    print(f"{args.file}: OK: signed by {info.signer} (trusted), content sha256 {digest}{what}")
    return 0
