"""Per-request deadlines of the HTTP server: how long a request may take, and awaiting within it.

In:  the server's ``request_timeout``, the request (its ``x-stainless-read-timeout`` header) and
     its parsed body (its ``"timeout"`` field), the time it arrived.
Out: ``request_deadline``: the deadline as a ``time.perf_counter()`` value; ``within``: the
     awaited result, or an ``APIError`` with the caller's status (408 while reading the body,
     504 after it) once the deadline passes.

Invariants: a request never gets more time than ``request_timeout``: its own ``timeout`` and
the OpenAI client's read timeout can only shorten it. ``within`` cancels what it awaited when
the deadline passes, so a job waiting in it frees its rows.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from starlette.requests import Request

from corral.server.errors import APIError

__all__ = ["request_deadline", "within"]

# Seconds past the client's x-stainless-read-timeout before its request is ended server-side.
_CLIENT_GRACE_S = 0.5


def request_deadline(
    request_timeout: float, request: Request, body: dict[str, Any] | None, t0: float
) -> float:
    """The request's deadline (perf_counter time): the server's, or less if it asks. Pops the
    body's ``"timeout"`` (400 unless a positive number)."""
    limit = request_timeout
    if body is not None and "timeout" in body:
        asked = body.pop("timeout")
        if isinstance(asked, bool) or not isinstance(asked, (int, float)) or not asked > 0:
            msg = "timeout must be a positive number of seconds"
            raise APIError(400, msg, "invalid_request", "timeout")
        limit = min(limit, float(asked))
    header = request.headers.get("x-stainless-read-timeout")
    if header is not None and not (body or {}).get("stream"):
        try:  # the OpenAI client's own timeout: past it, nobody is waiting for the reply
            if float(header) > 0:  # (a little later, so the client's own timer fires first)
                limit = min(limit, float(header) + _CLIENT_GRACE_S)
        except ValueError:
            pass
    return t0 + limit


async def within(awaitable: Any, deadline: float, status: int, what: str) -> Any:
    """``await awaitable``, or an APIError(status, "timeout") once ``deadline`` passes (the
    awaitable is cancelled: a job waiting in it frees its rows)."""
    try:
        return await asyncio.wait_for(awaitable, timeout=max(0.0, deadline - time.perf_counter()))
    except TimeoutError:
        msg = f"the request did not finish within its deadline ({what})"
        raise APIError(status, msg, "timeout") from None
