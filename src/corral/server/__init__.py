"""``corral serve``: an OpenAI-compatible HTTP server with constrained decoding.

Modules: :mod:`~corral.server.app` (endpoints), :mod:`~corral.server.scheduler` (the model
thread: continuous batching), :mod:`~corral.server.tools` (a request's ``tools`` checked),
:mod:`~corral.server.protocol` (the OpenAI wire format → :class:`corral.compile.ConstraintSpec`),
:mod:`~corral.server.metrics` (Prometheus text), :mod:`~corral.server.errors`,
:mod:`~corral.server.logs`, :mod:`~corral.server.config`, :mod:`~corral.server.registry` (named,
versioned constraints from ``--schema-dir``) and :mod:`~corral.server.admin` (its admin API).

Constraints compile through :mod:`corral.compile` (the one compile path and cache the library
and vLLM use too), in background threads; schema conversion runs in a converter process.

Needs ``pip install 'corral[server]'`` (starlette, uvicorn).
"""

from __future__ import annotations

from typing import Any

from corral.server.config import ServerConfig

__all__ = ["ServerConfig", "create_server", "serve"]


def create_server(backend: Any, config: ServerConfig | None = None) -> Any:
    """A :class:`corral.server.app.CorralServer` for a loaded backend (its ``.app`` is the
    ASGI application)."""
    from corral.server.app import CorralServer

    return CorralServer(backend, config or ServerConfig())


def serve(backend: Any, config: ServerConfig, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run the server until SIGTERM/SIGINT (uvicorn, one process: the model lives in it).

    On the signal the listening socket closes (nothing new is admitted), requests in flight get
    ``config.shutdown_timeout`` seconds to finish (then they are cancelled and their rows freed),
    the scheduler stops, and this returns normally, so ``corral serve`` exits 0 — a stop asked
    for is not a failure (uvicorn would re-raise the signal and die by it)."""
    import contextlib
    import signal
    import threading
    from collections.abc import Iterator

    import uvicorn

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            sigs = (signal.SIGINT, signal.SIGTERM)
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in sigs}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    server = create_server(backend, config)
    uv_config = uvicorn.Config(
        server.app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=max(1, round(config.shutdown_timeout)),
    )
    _Server(uv_config).run()
