"""What corral reports about its constraints while it runs: OpenTelemetry spans
(:mod:`~corral.telemetry.tracing`, a no-op without ``opentelemetry-api``) and the
constraint-quality metric set every host exposes (:mod:`~corral.telemetry.quality`).

Low in the layering (next to :mod:`corral.errors`): imports nothing else from corral, so the
compile cache, the decode loop, the server and the vLLM processor can all report through it.
"""

from __future__ import annotations

from corral.telemetry.quality import QualityMetrics
from corral.telemetry.tracing import ATTRIBUTES, SPANS, tracing_available

__all__ = ["ATTRIBUTES", "SPANS", "QualityMetrics", "tracing_available"]
