"""The admin API of ``corral serve``: the constraint registry (:mod:`corral.server.registry`)
read and changed over HTTP.

    GET    /v1/corral/constraints                    every live version (no sources)
    GET    /v1/corral/constraints/{name}             the live versions of one name
    GET    /v1/corral/constraints/{name}/{version}   one version, with its source
    PUT    /v1/corral/constraints/{name}/{version}   add it: {"schema": {...}, "strict": true},
                                                     {"regex": "..."} or {"grammar": "...",
                                                     "syntax": "gbnf"|"lark"} as JSON, or a
                                                     signed .corral as application/octet-stream
                                                     (with --trusted-keys); 201 new, 200 same
                                                     content already there, 409 other content
    DELETE /v1/corral/constraints/{name}/{version}   take it out of service

Access, checked in this order (each a JSON error body in OpenAI's shape):
1. the API is off unless the server was given a token (``--admin-token`` or
   ``CORRAL_ADMIN_TOKEN``): 404 saying how to turn it on;
2. only loopback clients, unless ``--admin-allow-remote``: 403 ``admin_remote_refused``
   (uvicorn takes the client from ``X-Forwarded-For`` when the peer is 127.0.0.1, so a client
   behind a local reverse proxy is refused too);
3. ``Authorization: Bearer <token>``: 401 ``missing_token`` without one (with
   ``WWW-Authenticate``), 403 ``invalid_token`` for another (compared in constant time).

Invariant: nothing here compiles or decodes on the event loop — a PUT awaits its compile on the
compile cache's threads, and requests being decoded keep stepping meanwhile.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from corral.server.constraint_files import source_from_body
from corral.server.deadlines import within
from corral.server.errors import APIError, error_from_exception
from corral.server.logs import log_event, new_request_id
from corral.server.registry import ConstraintRegistry

if TYPE_CHECKING:
    from corral.server.app import CorralServer

__all__ = ["PREFIX", "AdminAPI", "check_access", "is_loopback"]

PREFIX = "/v1/corral/constraints"


def is_loopback(host: str | None) -> bool:
    """Whether a client address is this machine (127.0.0.0/8, ::1, IPv4-mapped 127.x)."""
    if not host:
        return False
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))


def check_access(
    token: str | None, allow_remote: bool, client: str | None, authorization: str | None
) -> None:
    """Raise the APIError an admin request gets, or return if it may proceed (order in the
    module docstring)."""
    if not token:
        raise APIError(
            404,
            "the admin API is off: start corral serve with --admin-token or CORRAL_ADMIN_TOKEN",
            "admin_api_off",
        )
    if not allow_remote and not is_loopback(client):
        raise APIError(
            403,
            f"the admin API answers loopback clients only (this one is {client}); "
            "start corral serve with --admin-allow-remote to lift that",
            "admin_remote_refused",
        )
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        raise APIError(401, "the admin API needs an Authorization: Bearer <token> header", "missing_token")
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise APIError(403, "the admin token is not valid", "invalid_token")


class AdminAPI:
    """The admin routes of a :class:`~corral.server.app.CorralServer`."""

    def __init__(self, server: CorralServer, registry: ConstraintRegistry) -> None:
        self.server = server
        self.registry = registry

    def routes(self) -> list[Route]:
        return [
            Route(PREFIX, self.list_all, methods=["GET"]),
            Route(PREFIX + "/{name}", self.list_name, methods=["GET"]),
            Route(PREFIX + "/{name}/{version}", self.one, methods=["GET", "PUT", "DELETE"]),
        ]

    async def _answer(self, request: Request, work: Any) -> Response:
        """Check access, run ``work()`` (an awaitable factory returning (status, body)), and count
        and log the outcome."""
        rid = new_request_id()
        t0 = time.perf_counter()
        cfg = self.server.config
        headers = {"x-request-id": rid}
        try:
            client = request.client.host if request.client is not None else None
            check_access(
                cfg.admin_token, cfg.admin_allow_remote, client, request.headers.get("authorization")
            )
            status, body = await work()
        except Exception as e:
            err = error_from_exception(e)
            if err.status == 401:
                headers["WWW-Authenticate"] = 'Bearer realm="corral admin"'
            status, body = err.status, err.body()
            if status >= 500:
                body["error"]["request_id"] = rid
                log_event(
                    "admin", logging.ERROR, exc_info=e, request_id=rid, method=request.method, status=status
                )
        self.server.metrics.requests.inc(endpoint="admin", status=str(status))
        log_event(
            "admin",
            request_id=rid,
            method=request.method,
            path=request.url.path,
            status=status,
            seconds=round(time.perf_counter() - t0, 4),
        )
        return JSONResponse(body, status_code=status, headers=headers)

    async def _read_bytes(self, request: Request) -> bytes:
        limit = self.server.config.max_body_bytes
        data = bytearray()
        async for chunk in request.stream():
            data += chunk
            if len(data) > limit:
                raise APIError(413, f"request body exceeds {limit} bytes", "request_too_large")
        return bytes(data)

    async def list_all(self, request: Request) -> Response:
        async def work() -> tuple[int, Any]:
            return 200, {"object": "list", "data": self.registry.listing()}

        return await self._answer(request, work)

    async def list_name(self, request: Request) -> Response:
        name = request.path_params["name"]

        async def work() -> tuple[int, Any]:
            versions = self.registry.versions(name)
            if not versions:
                raise APIError(404, self.registry.missing(name), "constraint_not_found", "name")
            latest = max(versions)
            data = [v.as_json(latest=n == latest) for n, v in sorted(versions.items())]
            return 200, {"object": "list", "name": name, "latest": latest, "data": data}

        return await self._answer(request, work)

    async def one(self, request: Request) -> Response:
        name, version = request.path_params["name"], request.path_params["version"]
        reg = self.registry

        async def work() -> tuple[int, Any]:
            if request.method == "GET":
                found = reg.lookup(f"{name}@{version}", "version")
                if found is None:
                    raise APIError(404, reg.missing(f"{name}@{version}"), "constraint_not_found", "version")
                return 200, found.as_json(latest=found.version == reg.latest(name), source=True)
            if request.method == "DELETE":
                gone = reg.delete(name, version)
                return 200, {"object": "corral.constraint.deleted", "id": gone.ref, "deleted": True}
            kind = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
            deadline = time.perf_counter() + self.server.config.request_timeout
            if kind == "application/octet-stream":  # a signed .corral artifact
                data = await within(self._read_bytes(request), deadline, 408, "reading the body")
                source = await asyncio.to_thread(reg.load_artifact, data)
            elif kind == "application/json":
                body = await within(self.server._read_json(request), deadline, 408, "reading the body")
                source = source_from_body(body)
            else:
                raise APIError(
                    415,
                    'PUT takes application/json ({"schema": ...}, {"regex": ...} or {"grammar": ...}) '
                    f"or application/octet-stream (a signed .corral), not {kind}",
                    "unsupported_media_type",
                )
            live, new = await within(reg.put(name, version, source), deadline, 504, "compiling")
            return (201 if new else 200), live.as_json(latest=live.version == reg.latest(name))

        return await self._answer(request, work)
