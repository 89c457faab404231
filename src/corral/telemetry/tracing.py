"""OpenTelemetry spans for corral, and nothing at all without ``opentelemetry-api``.

corral uses only the OpenTelemetry *API*: the application chooses the SDK, exporter and sampler
(``opentelemetry-instrument corral serve ...``, or its own ``TracerProvider``). Without the
package, or with no provider configured (the API's default proxy hands out non-recording spans),
every function here returns at once and callers skip the work they would record — so tracing
costs nothing per token when it is off: per-step data is gathered only for a span that
:func:`recording` says is recorded.

Spans are created two ways: live (:func:`start`, the request span, whose context parents the
rest), or after the fact with explicit times (:func:`record`), because prefill and decoding run
on the server's scheduler thread and are known only as timestamps on the request's job.
Timestamps are ``time.perf_counter()`` values, converted to the epoch nanoseconds OpenTelemetry
wants by :func:`epoch_ns`.

Names: :data:`SPANS` and :data:`ATTRIBUTES` list every span and attribute corral emits (the
observability guide prints them); attribute names all start with ``corral.``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

try:
    from opentelemetry import propagate as _propagate
    from opentelemetry import trace as _trace
    from opentelemetry.trace import SpanKind as _SpanKind
    from opentelemetry.trace import Status as _Status
    from opentelemetry.trace import StatusCode as _StatusCode
except ImportError:  # the optional dependency is absent: every call below is a no-op
    _trace = None  # type: ignore[assignment]

__all__ = [
    "ATTRIBUTES",
    "SPANS",
    "context_of",
    "end",
    "epoch_ns",
    "extract",
    "record",
    "recording",
    "set_tracer_provider",
    "start",
    "tracing_available",
]

TRACER_NAME = "corral"

#: Every span corral emits: name -> what it covers.
SPANS: dict[str, str] = {
    "corral.request": "One HTTP generation request, arrival to last byte (server kind; its parent "
    "is the caller's W3C traceparent when the request carries one).",
    "corral.constraint.compile": "Fetching the request's compiled constraint: a cache hit, a wait "
    "for a compile already running, or a compile in a background thread.",
    "corral.constraint.bind": "Binding the request's slot values to the cached skeleton.",
    "corral.prefill": "Waiting for a batch slot and the prompt's prefill, to the first forward pass "
    "done for the request's rows.",
    "corral.decode": "Decoding, first forward pass to the last row finished; sampled "
    "corral.decode.step events.",
    "corral.validate": "Post-decode validation of each output against the keywords the grammar "
    "leaves to validation.",
}

#: Every attribute corral sets: name -> meaning. Values are strings, booleans, ints or floats.
ATTRIBUTES: dict[str, str] = {
    "corral.request.id": "The request id (also the x-request-id header and the log line's id).",
    "corral.endpoint": "chat or completions.",
    "corral.rows": "Sequences decoded for the request (prompts x n).",
    "corral.constraint.kind": "json_schema, regex, grammar, choices, json, tools, structural_tag, "
    "... (none: unconstrained).",
    "corral.constraint.key": "The compile cache's content key (SHA-256 of the constraint and the "
    "vocabulary, first 16 hex digits): equal keys share one compiled grammar.",
    "corral.cache.hit": "The compiled constraint was cached or already compiling (true), or was "
    "compiled for this request (false).",
    "corral.compile.wait_s": "Seconds the request waited for its constraint (0 on a cached hit).",
    "corral.compile.background": "The request waited on a background compile thread (a miss, or a "
    "hit on a compile still running).",
    "corral.slots": "Slot names bound for the request.",
    "corral.prompt_tokens": "Prompt tokens of the request's rows.",
    "corral.completion_tokens": "Output tokens of the request's rows (sampled and forced).",
    "corral.forced_tokens": "Output tokens appended by jump-ahead (no forward pass of their own).",
    "corral.forward_passes": "Forward passes of the request's longest row.",
    "corral.stop_reasons": "Why each row stopped (complete, max_tokens, error, cancelled).",
    "corral.truncated": "Some row was finished early with its shortest completion (budget).",
    "corral.mask.steps": "Decode steps that computed a mask for the request's rows.",
    "corral.mask.density": "Mean share of the vocabulary the mask allowed per masked step.",
    "corral.thinking_tokens": "Output tokens inside the think block.",
    "corral.queue_s": "Seconds the request waited for room in the batch.",
    "corral.step": "(event) Decode step index for the request.",
    "corral.step.tokens": "(event) Tokens the step appended to the request's rows.",
    "corral.step.forced": "(event) Of those, tokens appended by jump-ahead.",
    "corral.step.mask_s": "(event) Seconds the whole batch spent on masks in the step.",
    "corral.step.rows": "(event) Rows in the step's batch.",
    "corral.validation.ok": "Every output validated.",
    "corral.validation.keywords": "Schema keywords the failing outputs violated.",
    "corral.error.code": "The error code a failed request got (the body's error.code).",
    "http.response.status_code": "The HTTP status sent.",
}


def tracing_available() -> bool:
    """Whether ``opentelemetry-api`` is importable (spans may still be non-recording)."""
    return _trace is not None


_PROVIDER: Any = None  # set_tracer_provider's; None: OpenTelemetry's global provider


def set_tracer_provider(provider: Any) -> None:
    """Trace corral through ``provider`` instead of OpenTelemetry's global one (None: back to the
    global). For applications and tests that keep corral's spans apart; OpenTelemetry lets the
    global provider be set only once per process."""
    global _PROVIDER
    _PROVIDER = provider


def _tracer() -> Any:
    from corral import __version__

    if _PROVIDER is not None:
        return _PROVIDER.get_tracer(TRACER_NAME, __version__)
    return _trace.get_tracer(TRACER_NAME, __version__)


# One mapping from perf_counter to the epoch for the whole process: every corral span's times go
# through it, so a child never appears to start before its parent by the jitter of two readings.
_EPOCH_OFFSET_NS = time.time_ns() - time.perf_counter_ns()


def epoch_ns(perf_t: float) -> int:
    """A ``time.perf_counter()`` instant as epoch nanoseconds (OpenTelemetry's clock)."""
    return int(perf_t * 1e9) + _EPOCH_OFFSET_NS


def extract(headers: Mapping[str, str]) -> Any:
    """The parent context in incoming request headers (W3C ``traceparent``/``tracestate``, or
    whatever propagator the application set), or None."""
    if _trace is None:
        return None
    return _propagate.extract(headers)


def start(
    name: str, parent: Any = None, attributes: Mapping[str, Any] | None = None, *, server: bool = False
) -> Any:
    """A live span (None without the package, or when the configured provider does not record:
    the caller then skips what it would add to it). ``parent``: a context (:func:`extract`,
    :func:`context_of`)."""
    if _trace is None:
        return None
    kind = _SpanKind.SERVER if server else _SpanKind.INTERNAL
    span = _tracer().start_span(
        name,
        context=parent,
        kind=kind,
        attributes=dict(attributes or {}),
        start_time=epoch_ns(time.perf_counter()),
    )
    if not span.is_recording():
        return None
    return span


def recording(span: Any) -> bool:
    """Whether ``span`` (from :func:`start`) records: per-step data is worth gathering."""
    return span is not None and bool(span.is_recording())


def context_of(span: Any) -> Any:
    """The context whose parent is ``span`` (for children of it), or None."""
    if span is None or _trace is None:
        return None
    return _trace.set_span_in_context(span)


def record(
    name: str,
    parent: Any,
    t_start: float,
    t_end: float,
    attributes: Mapping[str, Any] | None = None,
    events: Sequence[tuple[str, float, Mapping[str, Any]]] = (),
    error: str | None = None,
) -> None:
    """A finished child span of ``parent`` (a span from :func:`start`; nothing when it is None)
    from ``t_start`` to ``t_end`` (perf_counter instants), with ``events`` as (name, instant,
    attributes) and an error status when ``error`` is given."""
    if parent is None or _trace is None:
        return
    span = _tracer().start_span(
        name,
        context=_trace.set_span_in_context(parent),
        attributes=dict(attributes or {}),
        start_time=epoch_ns(t_start),
    )
    for ev_name, t, attrs in events:
        span.add_event(ev_name, dict(attrs), timestamp=epoch_ns(t))
    if error is not None:
        span.set_status(_Status(_StatusCode.ERROR, error))
    span.end(end_time=epoch_ns(max(t_end, t_start)))


def end(span: Any, attributes: Mapping[str, Any] | None = None, error: str | None = None) -> None:
    """Set the last attributes of a live span and end it (nothing when it is None)."""
    if span is None:
        return
    for k, v in (attributes or {}).items():
        if v is not None:
            span.set_attribute(k, v)
    if error is not None:
        span.set_status(_Status(_StatusCode.ERROR, error))
    span.end(end_time=epoch_ns(time.perf_counter()))
