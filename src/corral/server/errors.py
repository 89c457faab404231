"""Errors a request can get, in the OpenAI wire format.

Every failure a client can cause becomes an :class:`APIError` with an HTTP status and the body
OpenAI's API sends (``{"error": {"message", "type", "param", "code"}}``), so the official
clients raise their usual exception classes (``BadRequestError``, ``RateLimitError``, ...).
corral adds ``pointer`` (the JSON pointer of the offending schema keyword) where it knows one.
"""

from __future__ import annotations

from typing import Any

from corral.errors import CorralError, SchemaError, ToolError

__all__ = ["APIError", "STATUS_BY_CODE", "error_from_exception"]

# OpenAI's error "type" per status.
_TYPES = {
    400: "invalid_request_error",
    404: "invalid_request_error",
    408: "timeout_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "server_error",
    504: "timeout_error",
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


#: corral error ``code`` -> (HTTP status, OpenAI-style error ``code``). A corral error is mapped
#: by the first class in its MRO whose code is listed, so a new subclass gets its parent's
#: answer until it is given its own row. Whatever the request caused is a 4xx; what the server
#: caused (its model, its tokenizer, a bug) is a 5xx — an internal error is never a 400.
STATUS_BY_CODE: dict[str, tuple[int, str]] = {
    "corral_error": (400, "invalid_request"),
    "compile_error": (400, "invalid_constraint"),
    "schema_error": (400, "invalid_schema"),
    "unsupported_schema": (400, "unsupported_schema"),
    "limit_exceeded": (400, "constraint_too_complex"),
    "slot_error": (400, "invalid_slots"),
    "budget_error": (400, "max_tokens_too_small"),
    "output_validation_error": (500, "output_validation_error"),
    "tokenizer_error": (500, "tokenizer_error"),
    "model_error": (500, "model_error"),
    "model_not_found": (404, "model_not_found"),
    "internal_error": (500, "internal_error"),
    "tool_error": (400, "invalid_tools"),
    "artifact_error": (400, "invalid_artifact"),
}


def _row(e: CorralError) -> tuple[int, str]:
    for cls in type(e).__mro__:
        code = cls.__dict__.get("code")
        if isinstance(code, str) and code in STATUS_BY_CODE:
            return STATUS_BY_CODE[code]
    return STATUS_BY_CODE["internal_error"]  # pragma: no cover - CorralError itself is listed


def error_from_exception(e: BaseException, param: str | None = None) -> APIError:
    """Map an exception raised while compiling or checking a constraint to an APIError.

    corral errors get the status and code :data:`STATUS_BY_CODE` gives their ``code`` (schema
    errors also carry their JSON pointer); a ``ValueError`` / ``TypeError`` is a 400; anything
    else is a bug, a 500.
    """
    if isinstance(e, APIError):
        return e
    if isinstance(e, CorralError):
        status, code = _row(e)
        if status >= 500:  # not the request's fault: no param, and the class is named
            prefix = "internal error: " if code == "internal_error" else ""
            return APIError(status, f"{prefix}{type(e).__name__}: {e}", code)
        message = f"constraint too complex: {e}" if code == "constraint_too_complex" else str(e)
        pointer = e.pointer if isinstance(e, (SchemaError, ToolError)) else None
        if isinstance(e, ToolError):  # names the tool's own field; its schema's keyword kind
            param = e.param
            code = "unsupported_schema" if e.unsupported else code
        return APIError(status, message, code, param, pointer=pointer)
    if isinstance(e, (ValueError, TypeError)):
        return APIError(400, str(e), "invalid_request", param)
    return APIError(500, f"internal error: {type(e).__name__}: {e}", "internal_error")
