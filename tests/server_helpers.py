"""A real ``corral serve`` process on loopback for the server tests, and a client for it."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai

try:  # the openai client's HTTP library: httpx, or its successor httpx2 in newer releases
    import httpx
except ImportError:  # pragma: no cover
    import httpx2 as httpx  # type: ignore[no-redef]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A started server: its URL, process, log file, an ``openai`` client and an HTTP client."""

    def __init__(self, url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.url = url
        self.proc = proc
        self.log = log
        self.client = openai.OpenAI(api_key="unused", base_url=url + "/v1", max_retries=0, timeout=120)
        self.http = httpx.Client(base_url=url, timeout=120)

    def metrics(self) -> str:
        return str(self.http.get("/metrics").text)

    def metric(self, name: str) -> float:
        """Sum of a metric's samples (all label sets)."""
        total = 0.0
        for line in self.metrics().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def healthy(self) -> dict[str, Any]:
        r = self.http.get("/health")
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        assert body["status"] == "ok"
        return body

    def stop(self, timeout: float = 10) -> int:
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:  # pragma: no cover
            self.proc.kill()
            return self.proc.wait()


def start_server(tmp: Path, *args: str, startup_s: float = 120) -> Server:
    """``python -m corral serve --threads 1 --port <free> *args``, waiting for ``/health``;
    fails the test (with the server's log) if it exits or does not come up."""
    import pytest

    port = free_port()
    log = tmp / f"server-{port}.log"
    cmd = [sys.executable, "-m", "corral", "serve", "--threads", "1", "--port", str(port), *args]
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + startup_s
    while True:
        if proc.poll() is not None:
            pytest.fail(f"server exited with {proc.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return Server(url, proc, log)
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"server did not start:\n{log.read_text()}")
        time.sleep(0.25)


@contextlib.contextmanager
def serve_in_thread(app: Any, start_timeout: float = 120) -> Iterator[str]:
    """Run a Starlette ``app`` with uvicorn on a free loopback port in a daemon thread (for tests
    that need the server in this process: in-memory span exporters, the model already loaded);
    yields its base URL and stops it on exit."""
    import threading

    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def serve_bundled(tmp_path_factory: Any, name: str, *args: str) -> Iterator[Server]:
    """A ``corral serve`` subprocess on the bundled SmolLM2 (``*args`` as for
    :func:`start_server`), for a module-scoped fixture to ``yield from``; skips when the model
    package is not installed (CI installs it)."""
    import pytest

    from corral import models

    try:
        models.smollm2_gguf_path()
    except models.ModelNotFoundError as e:  # pragma: no cover - CI installs it
        pytest.skip(str(e))
    srv = start_server(tmp_path_factory.mktemp(name), *args)
    try:
        yield srv
    finally:
        srv.stop()
