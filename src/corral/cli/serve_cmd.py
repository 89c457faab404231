"""``corral serve``: run the OpenAI-compatible server (see :mod:`corral.server`)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from corral.cli import MODEL_HELP
from corral.errors import CorralError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="run an OpenAI-compatible HTTP server with constrained decoding",
        description="Serve /v1/chat/completions, /v1/completions, /v1/models, /health and /metrics.",
    )
    p.add_argument(
        "--model",
        help=MODEL_HELP,
    )
    p.add_argument(
        "--model-name",
        help="the model id clients send (default: the preset's name, else the file name)",
    )
    p.add_argument("--backend", default="auto", choices=("auto", "transformers", "llama.cpp"))
    p.add_argument("--threads", type=int, default=None, help="forward-pass threads (default: cores - 1)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--schema-dir",
        type=Path,
        help="the constraint registry: compile the schemas (name@N.json), regexes (.regex) and "
        "grammars (.gbnf, .lark) in this directory at start-up; requests name them (invoice@3, or "
        "invoice: the latest)",
    )
    p.add_argument(
        "--admin-token",
        default=None,
        help="turn on the admin API (/v1/corral/constraints) with this bearer token, at least 16 "
        "characters (default: $CORRAL_ADMIN_TOKEN; prefer the variable: arguments show in ps)",
    )
    p.add_argument(
        "--admin-allow-remote",
        action="store_true",
        help="let non-loopback clients use the admin API (default: 127.0.0.1 / ::1 only)",
    )
    p.add_argument(
        "--trusted-keys",
        action="append",
        type=Path,
        default=[],
        metavar="KEY.pub",
        help="accept signed .corral artifacts (admin PUT, or in --schema-dir) signed by this Ed25519 "
        "public key (repeatable; corral keygen writes them)",
    )
    p.add_argument(
        "--registry-persist",
        action="store_true",
        help="write versions PUT through the admin API into --schema-dir (atomically) and remove "
        "deleted ones",
    )
    p.add_argument("--max-batch", type=int, default=16, help="most sequences decoded together")
    p.add_argument(
        "--max-queue", type=int, default=64, help="most requests waiting beyond the batch (then 429)"
    )
    p.add_argument("--max-tokens", type=int, default=512, help="default output budget per request")
    p.add_argument("--max-prompt-tokens", type=int, default=None, help="longest prompt (default: context)")
    p.add_argument("--max-body-mb", type=float, default=4.0, help="largest request body, MiB")
    p.add_argument("--max-n", type=int, default=8, help="largest n")
    p.add_argument("--cache-mb", type=int, default=256, help="compile-cache memory bound, MiB")
    p.add_argument("--compile-workers", type=int, default=1, help="compile threads")
    p.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="persist compiled constraints in this directory, shared by processes and restarts "
        "(default: $CORRAL_CACHE_DIR; unset: memory only)",
    )
    p.add_argument(
        "--cache-max-bytes",
        default=None,
        metavar="SIZE",
        help="size bound of --cache-dir, e.g. 1073741824, 512M, 2G; least recently used entries "
        "are deleted first (default: $CORRAL_CACHE_MAX_BYTES, else 1G)",
    )
    p.add_argument(
        "--limit",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an engine limit for every request's constraint, e.g. --limit max_compile_ms=2000 "
        "(repeatable; see corral.DEFAULT_LIMITS)",
    )
    p.add_argument(
        "--schema-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a JSON Schema converter option for every schema, e.g. --schema-option whitespace=flexible "
        "or --schema-option max_convert_ms=2000 (repeatable; values are JSON, bare words are strings)",
    )
    p.add_argument(
        "--request-timeout",
        type=float,
        default=600.0,
        help="deadline of every request in seconds (408 body not received, 504 not finished; default 600)",
    )
    p.add_argument(
        "--shutdown-timeout",
        type=float,
        default=10.0,
        help="on SIGTERM: seconds to finish requests in flight before cancelling them (default 10)",
    )
    p.add_argument(
        "--no-playground",
        action="store_true",
        help="do not serve the playground page at /playground",
    )
    p.add_argument(
        "--tool-format",
        default="auto",
        choices=("auto", "json", "hermes", "llama3", "mistral"),
        help="tool-call format (default auto: the one the chat template declares, else json)",
    )
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    p.set_defaults(func=run)


def parse_schema_options(items: list[str]) -> dict[str, object]:
    """``NAME=VALUE`` strings as checked schema-converter options (VALUE as JSON, else a string)."""
    import json

    from corral.compile import ConstraintSpec

    out: dict[str, object] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--schema-option takes NAME=VALUE, got {item!r}")
        try:
            out[name.strip()] = json.loads(value)
        except ValueError:
            out[name.strip()] = value.strip()
    ConstraintSpec.json_schema({}, out)  # unknown names and bad values are refused now
    return out


def cache_settings(cache_dir: Path | None, max_bytes: str | None) -> tuple[Path | None, int]:
    """(directory, size bound) of the compile cache's directory: the options, else
    ``CORRAL_CACHE_DIR`` / ``CORRAL_CACHE_MAX_BYTES``, else none and 1 GiB."""
    import os

    from corral.compile.disk_cache import DEFAULT_MAX_BYTES, ENV_DIR, ENV_MAX, parse_size

    if cache_dir is None and os.environ.get(ENV_DIR):
        cache_dir = Path(os.environ[ENV_DIR])
    size = max_bytes if max_bytes is not None else os.environ.get(ENV_MAX) or DEFAULT_MAX_BYTES
    try:
        return cache_dir, parse_size(size)
    except ValueError as e:
        raise ValueError(f"--cache-max-bytes: {e}") from None


def parse_limits(items: list[str]) -> dict[str, int]:
    """``NAME=VALUE`` strings as a checked limits dict."""
    from corral.engine import _limits

    out: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not value.strip().lstrip("-").isdigit():
            raise ValueError(f"--limit takes NAME=INTEGER, got {item!r}")
        out[name.strip()] = int(value)
    return _limits(out)


def run(args: argparse.Namespace) -> int:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise CorralError("corral serve needs starlette and uvicorn: pip install 'corral[server]'") from None
    import corral
    from corral.backends.loading import model_name
    from corral.server import ServerConfig, serve
    from corral.server.logs import configure_logging, log_event

    for name in ("max_batch", "max_queue", "max_tokens", "max_n", "cache_mb", "compile_workers"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
    for name in ("request_timeout", "shutdown_timeout"):
        if not getattr(args, name) > 0:
            raise ValueError(f"--{name.replace('_', '-')} must be a positive number of seconds")
    limits = parse_limits(args.limit)
    cache_dir, cache_max_bytes = cache_settings(args.cache_dir, args.cache_max_bytes)
    schema_options = parse_schema_options(args.schema_option)
    if args.schema_dir is not None:  # a missing directory, a bad file or name: before the load
        from corral.server.registry import scan_dir

        scan_dir(args.schema_dir)
    admin_token = args.admin_token or os.environ.get("CORRAL_ADMIN_TOKEN") or None
    if admin_token is not None and len(admin_token) < 16:
        raise ValueError(
            "the admin token (--admin-token / CORRAL_ADMIN_TOKEN) must be at least 16 characters"
        )
    if args.trusted_keys:  # a missing or bad key file, or no cryptography package: before the load
        from corral.compile.signing import public_keys

        public_keys(args.trusted_keys)
    if args.registry_persist and args.schema_dir is None:
        raise ValueError("--registry-persist needs --schema-dir (the directory it writes to)")
    if args.registry_persist and not os.access(args.schema_dir, os.W_OK):
        raise ValueError(f"--registry-persist: cannot write to {args.schema_dir}")
    configure_logging(args.log_level)
    backend = corral.load_model(args.model, backend=args.backend, threads=args.threads)
    name = args.model_name or model_name(args.model)
    config = ServerConfig(
        model_name=name,
        aliases={backend.source, Path(backend.source).name},
        max_batch=args.max_batch,
        max_queue=args.max_queue,
        max_body_bytes=int(args.max_body_mb * 1024 * 1024),
        max_tokens_default=args.max_tokens,
        max_prompt_tokens=args.max_prompt_tokens,
        max_n=args.max_n,
        cache_mb=args.cache_mb,
        compile_workers=args.compile_workers,
        cache_dir=cache_dir,
        cache_max_bytes=cache_max_bytes,
        schema_dir=args.schema_dir,
        limits=limits,
        schema_options=schema_options,
        request_timeout=args.request_timeout,
        shutdown_timeout=args.shutdown_timeout,
        playground=not args.no_playground,
        tool_format=args.tool_format,
        admin_token=admin_token,
        admin_allow_remote=args.admin_allow_remote,
        registry_persist=args.registry_persist,
        trusted_keys=tuple(args.trusted_keys),
    )
    log_event("starting", model=name, backend=backend.describe(), host=args.host, port=args.port)
    serve(backend, config, host=args.host, port=args.port)
    return 0
