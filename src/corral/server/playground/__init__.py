"""The playground page that ``corral serve`` serves at ``/playground`` (off: ``--no-playground``).

Plain HTML, CSS and JavaScript shipped as package data (``static/``; no CDN, nothing fetched from
elsewhere): the page sends the server's own OpenAI-compatible requests with the ``corral_trace``
extension (:mod:`corral.server.logprobs`) and renders each output token coloured by how it came
(sampled under the mask or forced by jump-ahead), the allowed-token count per step, the model's
top choices that the mask removed, and the post-decode validation result.

The files are read once, at start-up, from the installed package (:mod:`importlib.resources`),
and only these names are served: no path from the request ever reaches the file system.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

__all__ = ["FILES", "routes"]

FILES = {
    "index.html": "text/html; charset=utf-8",
    "playground.js": "text/javascript; charset=utf-8",
    "playground.css": "text/css; charset=utf-8",
}
"""The page's files (in ``static/``) and their media types."""


def _read(name: str) -> bytes:
    return (resources.files(__name__) / "static" / name).read_bytes()


def routes() -> list[Any]:
    """Starlette routes: ``/playground`` (the page) and ``/playground/<file>``."""
    from starlette.requests import Request
    from starlette.responses import RedirectResponse, Response
    from starlette.routing import Route

    bodies = {name: _read(name) for name in FILES}
    # The page may change between releases; a browser keeps no stale copy across upgrades.
    headers = {"cache-control": "no-cache", "x-content-type-options": "nosniff"}

    def endpoint(name: str) -> Any:
        async def serve_file(request: Request) -> Response:
            return Response(bodies[name], media_type=FILES[name], headers=headers)

        return serve_file

    async def slash(request: Request) -> Response:
        return RedirectResponse("/playground", status_code=308)

    out = [Route("/playground", endpoint("index.html"), methods=["GET"])]
    out.append(Route("/playground/", slash, methods=["GET"]))
    out += [Route(f"/playground/{n}", endpoint(n), methods=["GET"]) for n in FILES if n != "index.html"]
    return out
