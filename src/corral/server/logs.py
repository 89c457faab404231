"""Structured logs: one JSON object per line on stderr, each request's lines carrying its id.

``log_event("request", request_id=..., status=200, ...)`` writes
``{"ts": ..., "level": "info", "event": "request", "request_id": ..., "status": 200, ...}``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import uuid
from typing import Any

__all__ = ["configure_logging", "log_event", "new_request_id"]

log = logging.getLogger("corral.server")


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = getattr(record, "fields", None) or {}
        out: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "event": fields.get("event", "message"),
        }
        if "event" not in fields:
            out["message"] = record.getMessage()
        out.update({k: v for k, v in fields.items() if k != "event"})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def configure_logging(level: str = "info") -> None:
    """Send ``corral.server`` logs to stderr as JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter())
    log.handlers[:] = [handler]
    log.setLevel(level.upper())
    log.propagate = False


def new_request_id() -> str:
    """A short unique id (also the suffix of the completion's ``id``)."""
    return uuid.uuid4().hex[:24]


def log_event(event: str, level: int = logging.INFO, exc_info: Any = None, **fields: Any) -> None:
    """Log one structured event (``exc_info``: an exception whose traceback goes with it)."""
    if log.isEnabledFor(level):
        log.log(level, event, exc_info=exc_info, extra={"fields": {"event": event, **fields}})


def now() -> float:
    return time.time()
