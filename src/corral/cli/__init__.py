"""The ``corral`` command line: ``corral generate|classify|serve|lint|models|compile|keygen|verify ...``.

Every subcommand module exposes ``add_parser(subparsers)`` and sets ``func`` on its parser;
errors corral raises on bad input become one ``corral: error: ...`` line and exit status 2, never a
traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from corral.errors import CorralError

__all__ = ["MODEL_HELP", "main"]

# The one description of --model, shared by every command that loads a model.
# Deepest JSON a command-line argument may nest (--schema, --choices, ...): below Python's
# recursion limit, so a hostile argument is a "corral: error" line, not a RecursionError.
MAX_ARG_DEPTH = 900

MODEL_HELP = (
    "a preset (smollm2-135m, qwen2.5-coder-0.5b; see: corral models list), a .gguf file or a "
    "transformers directory (default: smollm2-135m)"
)


def build_parser() -> argparse.ArgumentParser:
    from corral import __version__
    from corral.cli import artifact_cmd, classify_cmd, generate_cmd, lint_cmd, models_cmd, serve_cmd

    parser = argparse.ArgumentParser(
        prog="corral",
        description="Output guaranteed to match a JSON Schema, regex or grammar, from small local models.",
    )
    parser.add_argument("--version", action="version", version=f"corral {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    generate_cmd.add_parser(sub)
    classify_cmd.add_parser(sub)
    serve_cmd.add_parser(sub)
    lint_cmd.add_parser(sub)
    models_cmd.add_parser(sub)
    artifact_cmd.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CorralError as e:
        print(f"corral: error: {e}", file=sys.stderr)
        return 2
    except (ValueError, TypeError, OSError) as e:
        # Bad input caught by our own validation (files, options) — reported, not a traceback.
        print(f"corral: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("corral: interrupted", file=sys.stderr)
        return 130
