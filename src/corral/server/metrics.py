"""Prometheus metrics without a dependency: counters, gauges and histograms with labels,
rendered in the text exposition format (version 0.0.4) for ``GET /metrics``.

Thread-safe: the HTTP loop, the scheduler thread and compile workers all record.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from corral.telemetry.quality import MetricDef, QualityMetrics

__all__ = ["Counter", "Gauge", "Histogram", "Registry", "ServerMetrics"]

Labels = tuple[str, ...]
_M = TypeVar("_M", bound="_Metric")


def _fmt(v: float) -> str:
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if float(v).is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(float(v))


def _labels(names: Sequence[str], values: Labels, extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class _Metric:
    kind = ""

    def __init__(self, name: str, help: str, labelnames: Sequence[str] = ()) -> None:
        self.name = name
        self.help = help
        self.labelnames = tuple(labelnames)
        self._lock = threading.Lock()

    def _key(self, labels: dict[str, str]) -> Labels:
        return tuple(str(labels.get(n, "")) for n in self.labelnames)

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]

    def render(self) -> list[str]:
        raise NotImplementedError


class Counter(_Metric):
    """A monotonically increasing count."""

    kind = "counter"

    def __init__(self, name: str, help: str, labelnames: Sequence[str] = ()) -> None:
        super().__init__(name, help, labelnames)
        self._values: dict[Labels, float] = {}

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        with self._lock:
            return self._values.get(self._key(labels), 0.0)

    def render(self) -> list[str]:
        with self._lock:
            items = sorted(self._values.items())
        if not items and not self.labelnames:
            items = [((), 0.0)]
        return self.header() + [f"{self.name}{_labels(self.labelnames, k)} {_fmt(v)}" for k, v in items]


class Gauge(_Metric):
    """A value read when the metrics are rendered (``fn``) or set directly."""

    kind = "gauge"

    def __init__(self, name: str, help: str, fn: Callable[[], float] | None = None) -> None:
        super().__init__(name, help)
        self._fn = fn
        self._value = 0.0

    def set(self, v: float) -> None:
        self._value = v

    def value(self) -> float:
        return float(self._fn()) if self._fn is not None else self._value

    def render(self) -> list[str]:
        return self.header() + [f"{self.name} {_fmt(self.value())}"]


class Histogram(_Metric):
    """Observations counted into cumulative buckets (plus their sum and count)."""

    kind = "histogram"

    def __init__(
        self, name: str, help: str, buckets: Sequence[float], labelnames: Sequence[str] = ()
    ) -> None:
        super().__init__(name, help, labelnames)
        self.buckets = sorted(float(b) for b in buckets)
        self._data: dict[Labels, tuple[list[int], list[float]]] = {}

    def observe(self, v: float, **labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            counts, total = self._data.setdefault(key, ([0] * (len(self.buckets) + 1), [0.0]))
            counts[bisect.bisect_left(self.buckets, v)] += 1
            total[0] += v

    def count(self, **labels: str) -> int:
        with self._lock:
            d = self._data.get(self._key(labels))
            return sum(d[0]) if d else 0

    def render(self) -> list[str]:
        out = self.header()
        with self._lock:
            items = sorted((k, (list(c), t[0])) for k, (c, t) in self._data.items())
        for key, (counts, total) in items:
            running = 0
            for bound, n in zip([*self.buckets, math.inf], counts, strict=True):
                running += n
                le = _labels(self.labelnames, key, f'le="{_fmt(bound)}"')
                out.append(f"{self.name}_bucket{le} {running}")
            out.append(f"{self.name}_sum{_labels(self.labelnames, key)} {_fmt(total)}")
            out.append(f"{self.name}_count{_labels(self.labelnames, key)} {running}")
        return out


class Registry:
    """The metrics of one server, rendered in registration order."""

    def __init__(self) -> None:
        self._metrics: list[_Metric] = []

    def add(self, metric: _M) -> _M:
        self._metrics.append(metric)
        return metric

    def render(self) -> str:
        lines: list[str] = []
        for m in self._metrics:
            lines.extend(m.render())
        return "\n".join(lines) + "\n"


_LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_FAST = (0.00001, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1)


class ServerMetrics:
    """Every metric ``corral serve`` exposes (names start with ``corral_``)."""

    def __init__(self) -> None:
        r = self.registry = Registry()
        self.requests = r.add(
            Counter("corral_requests_total", "HTTP requests by endpoint and status.", ("endpoint", "status"))
        )
        self.latency = r.add(
            Histogram(
                "corral_request_duration_seconds",
                "Request latency, arrival to last byte.",
                _LATENCY,
                ("endpoint",),
            )
        )
        self.ttft = r.add(
            Histogram("corral_time_to_first_token_seconds", "Arrival to the first generated token.", _LATENCY)
        )
        self.prompt_tokens = r.add(Counter("corral_prompt_tokens_total", "Prompt tokens prefilled."))
        self.tokens = r.add(
            Counter("corral_generated_tokens_total", "Tokens generated (sampled and forced).")
        )
        self.forced = r.add(
            Counter(
                "corral_jump_ahead_tokens_total",
                "Tokens appended by jump-ahead: forward passes saved against one pass per token.",
            )
        )
        self.forward_passes = r.add(
            Counter("corral_forward_passes_total", "Batched forward passes run by the scheduler.")
        )
        self.compile_time = r.add(
            Histogram(
                "corral_compile_seconds", "Constraint compile time (cache misses).", _LATENCY, ("kind",)
            )
        )
        self.slot_bind_time = r.add(
            Histogram(
                "corral_slot_bind_seconds", "Binding a request's slot values to a cached skeleton.", _FAST
            )
        )
        self.cache_hits = r.add(Counter("corral_compile_cache_hits_total", "Compile-cache hits."))
        self.cache_misses = r.add(Counter("corral_compile_cache_misses_total", "Compile-cache misses."))
        self.cache_evictions = r.add(
            Counter(
                "corral_compile_cache_evictions_total", "Compiled constraints evicted (LRU, memory bound)."
            )
        )
        self.mask_time = r.add(
            Histogram("corral_mask_seconds", "Mask computation and bookkeeping per decode step.", _FAST)
        )
        self.step_time = r.add(Histogram("corral_step_seconds", "Wall time of one scheduler step.", _LATENCY))
        self.batch_rows = r.add(
            Histogram("corral_batch_rows", "Rows decoded together per step.", (1, 2, 4, 8, 16, 32, 64))
        )
        self.errors = r.add(Counter("corral_errors_total", "Failed requests by kind.", ("kind",)))
        self.cancelled = r.add(
            Counter("corral_cancelled_total", "Sequences freed because the client went away.")
        )
        # The constraint-quality set (corral.telemetry.quality): the vLLM processor exposes it too.
        self.quality = QualityMetrics(self._make)

    def _make(self, d: MetricDef) -> Any:
        if d.kind == "histogram":
            return self.registry.add(Histogram(d.name, d.help, d.buckets, d.labels))
        return self.registry.add(Counter(d.name, d.help, d.labels))

    def gauge(self, name: str, help: str, fn: Callable[[], float]) -> None:
        """Register a gauge read at render time."""
        self.registry.add(Gauge(name, help, fn))

    def render(self) -> str:
        return self.registry.render()
