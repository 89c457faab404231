"""Constraint-quality metrics: one definition of the set, recorded by every host.

``corral serve`` registers them on its ``/metrics`` registry and the vLLM processor on
``prometheus_client``'s (so they appear on vLLM's own ``/metrics``): same names, same labels,
same meaning. A host hands :class:`QualityMetrics` a factory that makes one metric object per
:class:`MetricDef`; the objects need ``inc(amount, **labels)`` (counters) or
``observe(value, **labels)`` (histograms).

Labels are bounded: a label value outside its closed set (:data:`KEYWORDS`,
:data:`REFUSAL_CODES`, :data:`BUDGETS`, :data:`PARTS`, :data:`CACHE`, :data:`DISK_EVENTS`) is
recorded as ``other``,
so no schema, value or message can grow the number of series.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BUDGETS",
    "CACHE",
    "DEFS",
    "DISK_EVENTS",
    "KEYWORDS",
    "MetricDef",
    "PARTS",
    "QualityMetrics",
    "REFUSAL_CODES",
    "label",
    "thinking_tokens",
]

#: JSON Schema keywords (validation vocabulary, 2020-12 and earlier drafts) plus corral's own
#: reasons an output can fail its post-decode check.
KEYWORDS = frozenset(
    {
        "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
        "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
        "uniqueItems", "maxContains", "minContains", "contains", "maxProperties",
        "minProperties", "required", "dependentRequired", "dependencies", "dependentSchemas",
        "additionalProperties", "properties", "patternProperties", "propertyNames",
        "unevaluatedProperties", "unevaluatedItems", "items", "prefixItems", "additionalItems",
        "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "format", "$ref", "$dynamicRef",
        "x-corral-slot",
        # not keywords: the output is not JSON, nests too deep, fails a Pydantic validator, or
        # is a tool call with unknown arguments
        "not_json", "max_output_depth", "pydantic", "tool_call",
    }
)  # fmt: skip

#: Error codes a constraint can be refused with (the server's ``error.code``; corral's
#: :class:`~corral.errors.CorralError` ``code`` in hosts without HTTP).
REFUSAL_CODES = frozenset(
    {
        "invalid_constraint", "invalid_schema", "unsupported_schema", "constraint_too_complex",
        "invalid_slots", "missing_slots", "max_tokens_too_small", "thinking_budget_too_small",
        "invalid_tools", "invalid_request", "timeout",
        "corral_error", "compile_error", "schema_error", "limit_exceeded", "slot_error",
        "budget_error", "tool_error",
    }
)  # fmt: skip

#: Budgets a row can be truncated by: its output budget (finished with the shortest completion)
#: or its think block's (the block closed by the budget, not by the model).
BUDGETS = frozenset({"max_tokens", "thinking"})
#: Parts of an output with a think block.
PARTS = frozenset({"thinking", "answer"})
#: How a request got its constraint.
CACHE = frozenset({"hit", "miss"})
#: What the compile cache's directory did (:class:`corral.compile.disk_cache.DiskCache`): an
#: entry loaded instead of compiled, not found, written, evicted (size bound), refused and
#: deleted (corrupt, truncated, foreign), or a write that failed.
DISK_EVENTS = frozenset({"hit", "miss", "write", "eviction", "corrupt", "write_error"})

_WAIT = (0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_SHARE = (0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 0.99, 1.0)
_DENSITY = (0.00001, 0.0001, 0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 0.9, 1.0)


@dataclass(frozen=True)
class MetricDef:
    """One metric: Prometheus name, ``counter`` or ``histogram``, help text, label names and
    (histograms) bucket bounds."""

    name: str
    kind: str
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()


#: The constraint-quality metric set (see docs/guides/observability.md).
DEFS: tuple[MetricDef, ...] = (
    MetricDef(
        "corral_validation_failures_total",
        "counter",
        "Outputs that failed post-decode validation, by the schema keyword violated.",
        ("keyword",),
    ),
    MetricDef(
        "corral_truncations_total",
        "counter",
        "Rows whose output (max_tokens) or think block (thinking) was ended by its budget.",
        ("budget",),
    ),
    MetricDef(
        "corral_constraint_refusals_total",
        "counter",
        "Requests refused because of their constraint (compile, limits, slots, budget), by error code.",
        ("code",),
    ),
    MetricDef(
        "corral_compile_wait_seconds",
        "histogram",
        "Per constrained request: seconds waited for the compiled constraint (hit: cached or already "
        "compiling; miss: compiled for it).",
        ("cache",),
        _WAIT,
    ),
    MetricDef(
        "corral_compile_cache_disk_total",
        "counter",
        "Compile-cache directory events: hit (loaded instead of compiled), miss, write, eviction "
        "(size bound, LRU), corrupt (entry refused, deleted and recompiled), write_error.",
        ("event",),
    ),
    MetricDef(
        "corral_constrained_tokens_total",
        "counter",
        "Output tokens of constrained rows (the denominator of the forced-token share).",
    ),
    MetricDef(
        "corral_forced_tokens_total",
        "counter",
        "Output tokens of constrained rows the constraint left one choice for (jump-ahead; in vLLM, "
        "steps whose mask allowed one token).",
    ),
    MetricDef(
        "corral_forced_token_share",
        "histogram",
        "Per constrained row: the share of its output tokens that were forced.",
        (),
        _SHARE,
    ),
    MetricDef(
        "corral_masked_steps_total",
        "counter",
        "Decode steps that computed a mask for a row (the denominator of mask density).",
    ),
    MetricDef(
        "corral_mask_allowed_tokens_total",
        "counter",
        "Tokens the masks allowed, summed over masked steps (divide by steps x vocabulary for the "
        "mean density).",
    ),
    MetricDef(
        "corral_mask_density",
        "histogram",
        "Per constrained row: the mean share of the vocabulary its mask allowed (1 = constrains "
        "nothing; 1/vocabulary = fully forced).",
        (),
        _DENSITY,
    ),
    MetricDef(
        "corral_output_tokens_total",
        "counter",
        "Output tokens of rows with a think block, by part (thinking: inside the block).",
        ("part",),
    ),
)


def label(value: str, allowed: frozenset[str]) -> str:
    """``value`` when it is in ``allowed``, else ``other`` (bounded label sets)."""
    return value if value in allowed else "other"


class QualityMetrics:
    """The constraint-quality metrics of one host (see the module doc).

    Parameters
    ----------
    make : callable
        ``make(MetricDef) -> metric``: the host's counter / histogram for each definition.
    """

    def __init__(self, make: Callable[[MetricDef], Any]) -> None:
        self.metrics: dict[str, Any] = {d.name: make(d) for d in DEFS}

    def _inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        if amount:
            self.metrics[name].inc(amount, **labels)

    def validation_failure(self, keywords: Iterable[str]) -> None:
        """One output failed validation; ``keywords``: the keywords it violated."""
        for k in sorted({label(k, KEYWORDS) for k in keywords} or {"other"}):
            self._inc("corral_validation_failures_total", keyword=k)

    def truncation(self, budget: str) -> None:
        """A row ended by a budget (``max_tokens`` or ``thinking``)."""
        self._inc("corral_truncations_total", budget=label(budget, BUDGETS))

    def refusal(self, code: str) -> None:
        """A request refused because of its constraint, with this error code."""
        self._inc("corral_constraint_refusals_total", code=label(code, REFUSAL_CODES))

    def compile_wait(self, seconds: float, hit: bool) -> None:
        """A constrained request waited ``seconds`` for its compiled constraint."""
        self.metrics["corral_compile_wait_seconds"].observe(max(0.0, seconds), cache="hit" if hit else "miss")

    def disk_cache(self, event: str) -> None:
        """The compile cache's directory had one ``event`` (see :data:`DISK_EVENTS`)."""
        self._inc("corral_compile_cache_disk_total", event=label(event, DISK_EVENTS))

    def steps(self, masked: int, allowed: int, forced: int = 0, tokens: int = 0) -> None:
        """Aggregate per-step figures (hosts that see steps, not rows: vLLM)."""
        self._inc("corral_masked_steps_total", masked)
        self._inc("corral_mask_allowed_tokens_total", allowed)
        self._inc("corral_forced_tokens_total", forced)
        self._inc("corral_constrained_tokens_total", tokens)

    def tokens(self, part: str, n: int) -> None:
        """``n`` output tokens of a think-block row went to ``part`` (thinking / answer)."""
        self._inc("corral_output_tokens_total", n, part=label(part, PARTS))

    def row(
        self,
        *,
        tokens: int,
        forced: int,
        masked_steps: int = 0,
        allowed_total: int = 0,
        vocab: int = 0,
        thinking: int | None = None,
    ) -> None:
        """One finished constrained row: its output tokens, how many were forced, its masked steps
        and the tokens their masks allowed (over a vocabulary of ``vocab``), and its thinking
        tokens (None: no think block)."""
        self._inc("corral_constrained_tokens_total", tokens)
        self._inc("corral_forced_tokens_total", forced)
        if tokens:
            self.metrics["corral_forced_token_share"].observe(forced / tokens)
        self._inc("corral_masked_steps_total", masked_steps)
        self._inc("corral_mask_allowed_tokens_total", allowed_total)
        if masked_steps and vocab:
            self.metrics["corral_mask_density"].observe(allowed_total / (masked_steps * vocab))
        if thinking is not None:
            self.tokens("thinking", thinking)
            self.tokens("answer", tokens - thinking)


def thinking_tokens(tokens: Sequence[int], token_bytes: Sequence[bytes], fmt: Any) -> int:
    """Output tokens inside the think block, its markers included (0 when an optional block was
    skipped; all of them when the output stops inside the block). ``fmt``: the constraint's
    :class:`~corral.compile.thinking.ThinkFormat`."""
    open_b, close_b = fmt.open.text.encode("utf-8"), fmt.close.text.encode("utf-8")
    buf = b""
    for i, t in enumerate(tokens):
        piece = token_bytes[t]
        buf += piece
        if len(buf) <= len(open_b):
            if not open_b.startswith(buf):
                return 0
            continue
        if not buf.startswith(open_b):
            return 0
        tail = buf[max(len(open_b), len(buf) - len(piece) - len(close_b)) :]
        if close_b in tail:
            return i + 1
    return len(tokens)
