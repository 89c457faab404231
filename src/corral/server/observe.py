"""One request's trace and constraint-quality figures, for ``corral serve``.

A :class:`RequestObserver` is made when a generation request arrives. It opens the request's
``corral.request`` span (child of the caller's W3C ``traceparent``) when a recording OpenTelemetry
provider is configured, and records the constraint-quality metrics
(:mod:`corral.telemetry.quality`) whether or not anything traces:

* the HTTP side reports the compile (:meth:`compiled`), the slot binding (:meth:`bound`), each
  post-decode validation (:meth:`validated`), the end (:meth:`finish`) or a failure
  (:meth:`failed`);
* the scheduler thread calls :meth:`on_step` after each engine step, only for requests whose
  span records (so tracing off adds nothing per token): it notes when the rows' prefill ran and
  keeps sampled ``corral.decode.step`` events (tokens, forced tokens, the batch's mask time).

Prefill and decode spans are written after the fact from those timestamps, on the HTTP side.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from corral.compile import Constraint, ConstraintSpec
from corral.generation.decode import RowOutput
from corral.schema import JsonSchemaGrammar
from corral.server.metrics import ServerMetrics
from corral.telemetry import tracing
from corral.telemetry.quality import REFUSAL_CODES, thinking_tokens

__all__ = ["RequestObserver", "failed_keywords"]

# Step events kept per request: every step up to _DENSE_STEPS, then every _EVERY-th, at most _MAX.
_DENSE_STEPS = 64
_EVERY = 16
_MAX_EVENTS = 256
# Error codes only the constraint's budget checks give (counted as refusals whatever the stage).
_BUDGET_CODES = frozenset({"max_tokens_too_small", "thinking_budget_too_small"})


def failed_keywords(constraint: Constraint, text: str, error: str) -> list[str]:
    """The keywords a decoded output violated (``error``: what :meth:`Constraint.read` said)."""
    c = constraint
    if constraint.think is not None:
        _, text = constraint.split(text)
        if constraint.answer is not None:
            c = constraint.answer
    if "max_output_depth" in error:
        return ["max_output_depth"]
    if error.startswith("output fails the model's validation"):
        return ["pydantic"]
    if isinstance(c.grammar, JsonSchemaGrammar):
        return c.grammar.failed_keywords(text) or ["other"]
    kind = c.spec.kind
    if kind in ("json", "json_object"):
        return ["not_json"]
    return ["tool_call"] if kind == "tools" else ["other"]


def _mask_figures(out: RowOutput) -> tuple[int, int]:
    """(masked steps, tokens their masks allowed) of a row (the decode loop's counters)."""
    return out.masked_steps, out.allowed_total


class RequestObserver:
    """One generation request's span and quality metrics (see the module doc)."""

    def __init__(self, metrics: ServerMetrics, tokenizer: Any, headers: Any, endpoint: str, rid: str) -> None:
        self.metrics = metrics
        self.quality = metrics.quality
        self.tokenizer = tokenizer
        parent = tracing.extract(headers) if tracing.tracing_available() else None
        attrs = {"corral.request.id": rid, "corral.endpoint": endpoint}
        self.span = tracing.start("corral.request", parent, attrs, server=True)
        self.recording = self.span is not None
        self.stage = ""  # "constraint" while the constraint is compiled and bound
        self.kind = "none"
        self.ended = False
        self.validations: list[tuple[float, float, list[str]]] = []
        # Written by the scheduler thread (on_step), read when the request ends.
        self.events: list[tuple[str, float, dict[str, Any]]] = []
        self.steps = 0
        self.t_prefilled: float | None = None
        self.t_done: float | None = None
        self._seen = (0, 0)

    # ---------------------------------------------------------------- HTTP side

    def compiled(self, spec: ConstraintSpec, tokenizer_hash: str, hit: bool, waited: bool, t0: float) -> None:
        """The constraint arrived ``t0``..now (``waited``: on a compile thread, not the cache)."""
        t1 = time.perf_counter()
        self.kind = spec.kind
        self.quality.compile_wait(t1 - t0, hit)
        if self.span is not None:
            attrs = {
                "corral.constraint.kind": spec.kind,
                "corral.constraint.key": spec.key(tokenizer_hash)[:16],
                "corral.cache.hit": hit,
                "corral.compile.wait_s": t1 - t0,
                "corral.compile.background": waited,
            }
            tracing.record("corral.constraint.compile", self.span, t0, t1, attrs)

    def bound(self, names: Sequence[str], t0: float) -> None:
        """Slot values were bound ``t0``..now."""
        if self.span is not None:
            attrs = {"corral.slots": list(names), "corral.constraint.kind": self.kind}
            tracing.record("corral.constraint.bind", self.span, t0, time.perf_counter(), attrs)

    def validated(self, constraint: Constraint, text: str, error: str | None, t0: float) -> None:
        """One output was read back (``t0``..now) with this validation error (None: valid)."""
        kws = [] if error is None else failed_keywords(constraint, text, error)
        if error is not None:
            self.quality.validation_failure(kws)
        self.validations.append((t0, time.perf_counter(), kws))

    def failed(self, code: str, status: int) -> None:
        """The request failed with ``code``: a refusal when its constraint caused it."""
        if code in _BUDGET_CODES or (self.stage == "constraint" and code in REFUSAL_CODES):
            self.quality.refusal(code)
        self.close({"corral.error.code": code, "http.response.status_code": status}, code)

    def finish(self, job: Any, outs: Sequence[RowOutput], validate: bool = False) -> None:
        """The request's rows are done: quality metrics per row, then the spans. ``validate``:
        read the outputs back now (a streamed reply was not validated while it streamed)."""
        c: Constraint | None = job.constraint
        t_end = time.perf_counter()
        width = int(self.tokenizer.width)
        thinking_total = 0
        if c is not None:
            if validate and not self.validations:
                for out in outs:
                    t0 = time.perf_counter()
                    text = self.tokenizer.decode(out.tokens).decode("utf-8", errors="replace")
                    self.validated(c, text, c.read(text)[1], t0)
            for row, out in zip(job.rows, outs, strict=False):
                if out.truncated:
                    self.quality.truncation("max_tokens")
                if row.think is not None and row.think.hit_budget:
                    self.quality.truncation("thinking")
                thinking = None
                if c.think is not None:
                    thinking = thinking_tokens(out.tokens, self.tokenizer.token_bytes, c.think)
                    thinking_total += thinking
                masked, allowed = _mask_figures(out)
                self.quality.row(
                    tokens=len(out.tokens),
                    forced=out.forced_tokens,
                    masked_steps=masked,
                    allowed_total=allowed,
                    vocab=width,
                    thinking=thinking,
                )
        if self.span is None:
            return
        self._record_spans(job, outs, t_end)
        masked = sum(_mask_figures(o)[0] for o in outs)
        attrs: dict[str, Any] = {
            "corral.constraint.kind": self.kind,
            "corral.rows": len(job.prompts),
            "corral.prompt_tokens": sum(o.prompt_tokens for o in outs),
            "corral.completion_tokens": sum(len(o.tokens) for o in outs),
            "corral.forced_tokens": sum(o.forced_tokens for o in outs),
            "corral.forward_passes": max((o.forward_passes for o in outs), default=0),
            "corral.stop_reasons": [o.stop_reason for o in outs],
            "corral.truncated": any(o.truncated for o in outs),
            "corral.mask.steps": masked,
            "http.response.status_code": 200,
        }
        if masked:
            attrs["corral.mask.density"] = sum(_mask_figures(o)[1] for o in outs) / (masked * width)
        if c is not None and c.think is not None:
            attrs["corral.thinking_tokens"] = thinking_total
        self.close(attrs)

    def close(self, attributes: dict[str, Any] | None = None, error: str | None = None) -> None:
        """End the request span (once; later calls do nothing)."""
        if self.ended:
            return
        self.ended = True
        tracing.end(self.span, attributes, error)

    def _record_spans(self, job: Any, outs: Sequence[RowOutput], t_end: float) -> None:
        t_admit = job.t_admitted if job.t_admitted is not None else t_end
        t_pre = self.t_prefilled if self.t_prefilled is not None else t_admit
        kind = {"corral.constraint.kind": self.kind}
        queue_s = t_admit - job.t_submitted if job.t_submitted is not None else 0.0
        prompt = sum(o.prompt_tokens for o in outs)
        prefill = {**kind, "corral.prompt_tokens": prompt, "corral.queue_s": queue_s}
        tracing.record("corral.prefill", self.span, t_admit, t_pre, prefill)
        decode = {
            **kind,
            "corral.completion_tokens": sum(len(o.tokens) for o in outs),
            "corral.forced_tokens": sum(o.forced_tokens for o in outs),
            "corral.mask.steps": sum(_mask_figures(o)[0] for o in outs),
        }
        t_done = self.t_done if self.t_done is not None else t_end
        if self.validations:  # the scheduler notes the end after posting it: reading may start first
            t_done = min(t_done, self.validations[0][0])
        tracing.record("corral.decode", self.span, t_pre, t_done, decode, list(self.events))
        if self.validations:
            kws = sorted({k for _, _, ks in self.validations for k in ks})
            attrs = {**kind, "corral.validation.ok": not kws, "corral.validation.keywords": kws}
            first, last = self.validations[0][0], self.validations[-1][1]
            tracing.record("corral.validate", self.span, first, last, attrs, error="; ".join(kws) or None)

    # ---------------------------------------------------------------- scheduler thread

    def on_step(self, job: Any, t: float, mask_s: float, batch_rows: int) -> bool:
        """After an engine step (recording requests only): note the prefill, keep a sampled step
        event. Returns whether the request still has rows decoding."""
        tokens = sum(len(r.out.tokens) for r in job.rows)
        forced = sum(r.out.forced_tokens for r in job.rows)
        if self.t_prefilled is None:
            if any(r.out.forward_passes for r in job.rows):
                self.t_prefilled = t
        else:
            self.steps += 1
            n = self.steps
            if (n <= _DENSE_STEPS or n % _EVERY == 0) and len(self.events) < _MAX_EVENTS:
                attrs = {
                    "corral.step": n,
                    "corral.step.tokens": tokens - self._seen[0],
                    "corral.step.forced": forced - self._seen[1],
                    "corral.step.mask_s": mask_s,
                    "corral.step.rows": batch_rows,
                }
                self.events.append(("corral.decode.step", t, attrs))
        self._seen = (tokens, forced)
        if not job.rows or job.cancelled or all(r.done for r in job.rows):
            self.t_done = t
            return False
        return True
