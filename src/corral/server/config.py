"""Settings of ``corral serve`` (each one is a command-line option)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corral.compile.disk_cache import DiskCache

__all__ = ["ServerConfig", "disk_cache"]


@dataclass
class ServerConfig:
    """What the server allows and how it schedules.

    Attributes
    ----------
    model_name : str
        The model id clients send (``GET /v1/models`` lists it).
    aliases : set of str
        Other ids accepted for the same model.
    max_batch : int
        Most rows (sequences) decoded together; requests beyond it wait in the queue.
    max_queue : int
        Most requests waiting beyond the running batch (compiling or queued); more get 429.
    max_body_bytes : int
        Largest request body (413 beyond it).
    max_tokens_default : int
        Output budget when a request gives none (capped by the room left in the context).
    max_prompt_tokens : int or None
        Longest prompt accepted (default: the model's context).
    max_n : int
        Largest ``n``.
    cache_mb : int
        Memory bound of the compile cache (estimated), in MiB.
    compile_workers : int
        Compile threads.
    cache_dir : Path or None
        A directory behind the compile cache (``--cache-dir``, default ``CORRAL_CACHE_DIR``):
        misses load from it instead of compiling, compiles are written to it; shared safely by
        processes (see :mod:`corral.compile.disk_cache`). None: memory only.
    cache_max_bytes : int
        Size bound of ``cache_dir`` (``--cache-max-bytes``; least recently used entries go first).
    schema_dir : Path or None
        The constraint registry's directory (:mod:`corral.server.registry`): JSON Schemas,
        regexes and grammars compiled at start-up and registered by name and version
        (``invoice@3.json``, ``route@2.regex``, ``sql@1.gbnf`` / ``.lark``; a plain
        ``invoice.json`` is version 1). A request names one (``invoice@3``, or ``invoice`` for
        the latest) in ``response_format.json_schema.name`` or ``corral_constraint``.
    admin_token : str or None
        Bearer token of the admin API (``/v1/corral/constraints``; ``--admin-token`` or
        ``CORRAL_ADMIN_TOKEN``). None: the admin API is off.
    admin_allow_remote : bool
        Let non-loopback clients use the admin API (``--admin-allow-remote``).
    registry_persist : bool
        Write versions PUT through the admin API into ``schema_dir`` (atomically) and remove
        deleted ones, so a restart serves the same registry (``--registry-persist``).
    trusted_keys : tuple of Path
        Ed25519 public keys (``corral keygen``'s ``.pub`` files; ``--trusted-keys``): signed
        ``.corral`` artifacts by one of them may be PUT (``application/octet-stream``) or put in
        ``schema_dir``. Empty: artifacts are refused.
    limits : dict
        Engine limits applied to every request's constraint (``corral.DEFAULT_LIMITS`` names;
        ``--limit NAME=VALUE``). Set by the operator, never by a request.
    schema_options : dict
        JSON Schema converter options for every schema (``--schema-option NAME=VALUE``: layout,
        budgets, ``max_convert_ms``), over corral's generation defaults; a request's ``strict``
        still applies.
    request_timeout : float
        Deadline of every request, in seconds from its arrival (``--request-timeout``): a body
        not received by then is a 408; a reply not finished by then is a 504 (a stream ends with
        an error event) and its rows are freed. A request may ask for less: the corral extension
        ``"timeout": seconds`` in the body, or the OpenAI client's ``x-stainless-read-timeout``
        header (non-streaming requests).
    shutdown_timeout : float
        On SIGTERM/SIGINT: seconds to finish the requests in flight (no new ones are admitted)
        before they are cancelled and the process exits 0 (``--shutdown-timeout``).
    retry_after : int
        Seconds a 429 (server full) tells the client to wait (``Retry-After``).
    playground : bool
        Serve the playground page at ``/playground`` (``--no-playground`` turns it off).
    tool_format : str
        The tool-call format (``--tool-format``): ``"auto"`` (default: the one the model's chat
        template declares, else ``"json"``) or a :data:`corral.grammar.tool_formats.FORMATS`
        name; a request may name another (``tool_format``).
    """

    model_name: str = "model"
    aliases: set[str] = field(default_factory=set)
    max_batch: int = 16
    max_queue: int = 64
    max_body_bytes: int = 4 * 1024 * 1024
    max_tokens_default: int = 512
    max_prompt_tokens: int | None = None
    max_n: int = 8
    cache_mb: int = 256
    compile_workers: int = 1
    cache_dir: Path | None = None
    cache_max_bytes: int = 1 << 30
    schema_dir: Path | None = None
    limits: dict[str, int] = field(default_factory=dict)
    schema_options: dict[str, object] = field(default_factory=dict)
    request_timeout: float = 600.0
    shutdown_timeout: float = 10.0
    retry_after: int = 1
    playground: bool = True
    tool_format: str = "auto"
    admin_token: str | None = None
    admin_allow_remote: bool = False
    registry_persist: bool = False
    trusted_keys: tuple[Path, ...] = ()


def disk_cache(config: ServerConfig, metrics: Any) -> DiskCache | None:
    """The compile cache's directory for ``config`` (None without ``cache_dir``), its events
    counted in the server's ``corral_compile_cache_disk_total``."""
    if config.cache_dir is None:
        return None
    from corral.compile.disk_cache import ArtifactCodec, DiskCache

    return DiskCache(config.cache_dir, ArtifactCodec(), config.cache_max_bytes, metrics.quality.disk_cache)
