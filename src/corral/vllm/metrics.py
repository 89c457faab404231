"""corral's constraint-quality metrics inside vLLM (:mod:`corral.telemetry.quality`), on
``prometheus_client``'s default registry — the one vLLM's own ``/metrics`` serves.

Which process records what: refusals are counted where vLLM calls ``validate_params`` (the API
server process: they appear on ``/metrics`` as they are); compile waits, masked steps, allowed
tokens, forced steps, constrained tokens, the thinking/answer split and thinking-budget
truncations are counted in the engine process, where the logits processor runs. With vLLM's
default multiprocess engine, those reach the API server's ``/metrics`` through
``prometheus_client``'s multiprocess mode: start vLLM with ``PROMETHEUS_MULTIPROC_DIR`` set (an
empty directory; vLLM then aggregates every process's metrics). Offline (``LLM(...)`` with
``VLLM_ENABLE_V1_MULTIPROCESSING=0``) everything is in one process.

In vLLM a "forced" token is a step whose mask allowed exactly one token (vLLM does not
jump ahead), and figures are aggregated per step, not per row, so the per-row histograms
(``corral_forced_token_share``, ``corral_mask_density``) and ``max_tokens`` truncations are the
server's only. Without ``prometheus_client`` nothing is exposed (the counters still count:
:func:`quality_metrics` ``.metrics``).
"""

from __future__ import annotations

import threading
from typing import Any

from corral.telemetry.quality import MetricDef, QualityMetrics

__all__ = ["quality_metrics"]

_LOCK = threading.Lock()
_QUALITY: QualityMetrics | None = None


class _Prom:
    """A prometheus_client metric behind the ``inc`` / ``observe`` calls QualityMetrics makes."""

    def __init__(self, d: MetricDef) -> None:
        import prometheus_client as pc

        if d.kind == "histogram":
            self.metric: Any = pc.Histogram(d.name, d.help, d.labels, buckets=d.buckets)
        else:
            self.metric = pc.Counter(d.name, d.help, d.labels)
        self.labelled = bool(d.labels)

    def _child(self, labels: dict[str, str]) -> Any:
        return self.metric.labels(**labels) if self.labelled else self.metric

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        self._child(labels).inc(amount)

    def observe(self, value: float, **labels: str) -> None:
        self._child(labels).observe(value)


class _Local:
    """The fallback without prometheus_client: sums kept in memory, keyed by label values."""

    def __init__(self, d: MetricDef) -> None:
        self.values: dict[tuple[tuple[str, str], ...], float] = {}
        self._lock = threading.Lock()

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            self.values[key] = self.values.get(key, 0.0) + amount

    def observe(self, value: float, **labels: str) -> None:
        self.inc(value, **labels)


def quality_metrics() -> QualityMetrics:
    """The process's constraint-quality metrics (created on first use; registered once)."""
    global _QUALITY
    with _LOCK:
        if _QUALITY is None:
            try:
                import prometheus_client  # noqa: F401

                _QUALITY = QualityMetrics(_Prom)
            except ImportError:
                _QUALITY = QualityMetrics(_Local)
        return _QUALITY
