"""Errors a request can get, in the OpenAI wire format.

Every failure a client can cause becomes an :class:`APIError` with an HTTP status and the body
OpenAI's API sends (``{"error": {"message", "type", "param", "code"}}``), so the official
clients raise their usual exception classes (``BadRequestError``, ``RateLimitError``, ...).
corral adds ``pointer`` (the JSON pointer of the offending schema keyword) where it knows one.
"""

from __future__ import annotations

from typing import Any

from corral.errors import CompileError, CorralError, LimitExceeded, SchemaError

__all__ = ["APIError", "error_from_exception"]

# OpenAI's error "type" per status.
_TYPES = {
    400: "invalid_request_error",
    404: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "server_error",
}


class APIError(Exception):
    """A request that fails with ``status`` and an OpenAI-style error body.

    Parameters
    ----------
    status : int
        HTTP status.
    message : str
        What went wrong, for a person.
    code : str
        A stable machine-readable kind (also the ``kind`` label of ``corral_errors_total``).
    param : str or None
        The request field at fault (dotted path), as OpenAI reports it.
    pointer : str or None
        JSON pointer inside a schema (schemas only).
    """

    def __init__(
        self,
        status: int,
        message: str,
        code: str,
        param: str | None = None,
        pointer: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.pointer = pointer

    def body(self) -> dict[str, Any]:
        """The JSON body of the error response."""
        err: dict[str, Any] = {
            "message": self.message,
            "type": _TYPES.get(self.status, "invalid_request_error"),
            "param": self.param,
            "code": self.code,
        }
        if self.pointer is not None:
            err["pointer"] = self.pointer
        return {"error": err}


def error_from_exception(e: BaseException, param: str | None = None) -> APIError:
    """Map an exception raised while compiling or checking a constraint to an APIError (400 for
    whatever the request caused; 500 for the rest)."""
    if isinstance(e, APIError):
        return e
    if isinstance(e, SchemaError):
        kind = "unsupported_schema" if type(e).__name__ == "UnsupportedSchemaError" else "invalid_schema"
        return APIError(400, str(e), kind, param, pointer=e.pointer)
    if isinstance(e, LimitExceeded):
        return APIError(400, f"constraint too complex: {e}", "constraint_too_complex", param)
    if isinstance(e, CompileError):
        return APIError(400, str(e), "invalid_constraint", param)
    if isinstance(e, CorralError):
        return APIError(400, str(e), "invalid_request", param)
    if isinstance(e, (ValueError, TypeError)):
        return APIError(400, str(e), "invalid_request", param)
    return APIError(500, f"internal error: {type(e).__name__}: {e}", "internal_error")
