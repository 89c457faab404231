"""corral as a vLLM v1 custom logits processor (imports vLLM; see :mod:`corral.vllm`).

Lifecycle inside vLLM's model-runner process (one instance per worker, i.e. per TP rank):

* ``validate_params`` (API process, at admission): parse the request's corral arguments and
  compile them against a byte vocabulary, so a malformed or over-limit constraint is refused
  with a clear error (HTTP 400 on the server) instead of reaching the engine.
* ``update_state`` (before each forward pass): follow the persistent batch — removed, added,
  moved rows. An added row keeps a *reference* to the request's output-token list (vLLM keeps it
  current) and starts compiling its constraint on a helper thread, overlapping the forward pass.
  A preempted request that resumes is simply added again: its matcher is rebuilt from the
  output tokens it already has.
* ``apply`` (after the forward pass, before sampling): advance each constrained row's matcher by
  its new output tokens (read here, not in ``update_state``, because under async scheduling the
  newest token is a placeholder until just before sampling), fill all masks in one call
  (``fill_next_token_bitmasks``, threads, GIL released), steer rows near ``max_tokens`` to a
  complete output, and mask the logits on their device in one vectorised operation.

Nothing here may raise inside the engine (it would fail every request in the batch): a row
whose constraint fails to compile in the worker, or whose output stops matching (another
processor or a stop-string edit interfered), is ended with EOS and logged.
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from corral.compile import Constraint, compile_constraint_async, default_cache
from corral.engine import Matcher
from corral.runtime.kernel import MaskKernel, MaskRow
from corral.runtime.thinking import ThinkBudget, think_budget
from corral.telemetry.quality import thinking_tokens
from corral.vllm._adapter import load_tokenizer, schema_converter
from corral.vllm._spec import (
    BACKEND_NAME,
    RequestConstraint,
    check_spec,
    from_structured_outputs,
    parse_request,
)
from corral.vllm.metrics import quality_metrics

if TYPE_CHECKING:
    from vllm.config import VllmConfig

__all__ = [
    "CorralLogitsProcessor",
    "CorralLogitsProcessorV1",
    "CorralLogitsProcessorV2",
    "load_tokenizer",
    "validate_corral_params",
]

log = logging.getLogger("corral.vllm")

_ENV_THREADS = "CORRAL_MASK_THREADS"
_ENV_MARGIN = "CORRAL_BUDGET_MARGIN"
_ENV_STRUCTURED = "CORRAL_VLLM_STRUCTURED_OUTPUTS"


@dataclass(eq=False)
class _Row:
    """One constrained request in the persistent batch."""

    request: RequestConstraint | None
    max_tokens: int | None
    output: list[int]  # vLLM's live list of the request's output tokens (a reference)
    pending: Future[Constraint] | None
    constraint: Constraint | None = None
    matcher: Matcher | None = None
    consumed: int = 0  # output tokens the matcher has accepted
    think: ThinkBudget | None = None  # the constraint's think-block budget, fed the same tokens
    failed: str = ""  # why the row is being ended with EOS ("" while healthy)
    hit: bool = False  # the compile cache had the constraint (or was compiling it)


def validate_corral_params(sampling_params: SamplingParams) -> None:
    """Refuse malformed corral arguments at admission (ValueError → HTTP 400); with
    ``CORRAL_VLLM_STRUCTURED_OUTPUTS=1``, hand ``structured_outputs`` requests to corral. A
    refusal is counted in ``corral_constraint_refusals_total`` by corral's error code."""
    try:
        _validate(sampling_params)
    except ValueError as e:
        cause = e.__context__  # check_spec re-raises corral's error as a ValueError (from None)
        quality_metrics().refusal(str(getattr(cause, "code", "invalid_request")))
        raise


def _validate(sampling_params: SamplingParams) -> None:
    so = sampling_params.structured_outputs
    if so is not None and getattr(so, "_backend", None) == BACKEND_NAME:
        return  # corral's structured-output backend has it (checked by corral.vllm.plugin)
    spec = parse_request(sampling_params.extra_args)
    if spec is not None and so is not None:
        raise ValueError(
            "corral: a request cannot ask for both corral's constraint and "
            "vLLM's structured outputs (response_format / structured_outputs)"
        )
    if spec is None and so is not None and os.environ.get(_ENV_STRUCTURED, "") not in ("", "0"):
        args = from_structured_outputs(so)
        if args is not None:
            # Hand the constraint to corral: vLLM's backend never sees the request. The params
            # object is the request's own (the server builds one per request; the engine clones
            # it after validation).
            sampling_params.extra_args = {**(sampling_params.extra_args or {}), "corral": args}
            sampling_params.structured_outputs = None
            spec = parse_request(sampling_params.extra_args)
    if spec is not None:
        check_spec(spec)


class _Core:
    """What both vLLM interfaces share: the tokenizer, the constrained rows (keyed by batch index
    for the v1 runner, by request slot for the v2 runner) and the per-step masking."""

    def __init__(self, vllm_config: VllmConfig, device: torch.device) -> None:
        self.tokenizer = load_tokenizer(vllm_config)
        self.kernel = MaskKernel(
            self.tokenizer,
            threads=int(os.environ.get(_ENV_THREADS, "0")),
            margin=int(os.environ.get(_ENV_MARGIN, "16")),
        )
        self.tools = self.kernel.tools
        self.eos = self.kernel.eos
        self.rows: dict[int, _Row] = {}
        # Schema conversion (Python) off this process where it may start one (vLLM's workers
        # are daemonic: there it runs on the compile thread).
        self.converter = schema_converter()
        self.quality = quality_metrics()
        disk = default_cache().disk  # CORRAL_CACHE_DIR: a new worker loads what others compiled
        if disk is not None:
            disk.subscribe(self.quality.disk_cache)

    def new_row(self, params: SamplingParams, output: list[int]) -> _Row | None:
        """A row for a request (None: not constrained); compiling starts in corral's compile
        cache (a background thread on a miss)."""
        try:
            request = parse_request(params.extra_args)
        except ValueError as e:  # validate_params refuses these; be safe if it was bypassed
            log.error("%s", e)
            return _Row(None, params.max_tokens, output, None, failed=str(e))
        if request is None:
            return None
        pending, hit = compile_constraint_async(request.spec, self.tokenizer, converter=self.converter)
        return _Row(request, params.max_tokens, output, pending, hit=hit)

    def retire(self, row: _Row | None) -> None:
        """A row left the batch: count its thinking/answer split and a thinking-budget cut."""
        if row is None or row.constraint is None or row.constraint.think is None:
            return
        out = row.output[: row.consumed]
        thinking = thinking_tokens(out, self.tokenizer.token_bytes, row.constraint.think)
        self.quality.tokens("thinking", thinking)
        self.quality.tokens("answer", len(out) - thinking)
        if row.think is not None and row.think.hit_budget:
            self.quality.truncation("thinking")

    def mask(self, logits: torch.Tensor, pairs: list[tuple[int, int]]) -> None:
        """Mask logits rows in place: ``pairs`` holds (logits row, row key) for every constrained
        row in this step's batch, in ascending logits-row order."""
        if not pairs:
            return
        rows: list[MaskRow] = []
        for i, key in pairs:
            row = self.rows[key]
            self._advance(row)
            m = None if row.failed else row.matcher
            remaining = None if row.max_tokens is None else row.max_tokens - len(row.output)
            rows.append(MaskRow(i, m, remaining, None if row.failed else row.think))
        allowed: list[int] = []
        self.kernel.mask(logits, rows, allowed)
        # One token per row this step; a mask that allows one token forces it.
        self.quality.steps(len(allowed), sum(allowed), sum(n == 1 for n in allowed), len(allowed))

    def _advance(self, row: _Row) -> None:
        """Bring the row's matcher up to the request's output tokens."""
        if row.failed:
            return
        if row.matcher is None:
            try:
                assert row.pending is not None and row.request is not None
                t0 = time.perf_counter()
                compiled = row.pending.result()  # the step waits here for a compile still running
                self.quality.compile_wait(time.perf_counter() - t0, row.hit)
                row.constraint = compiled.bind(row.request.slots)
            except Exception as e:
                what = row.request.describe() if row.request is not None else "?"
                row.failed = f"constraint {what} did not compile: {type(e).__name__}: {e}"
                log.error("corral: %s; ending the request", row.failed)
                return
            row.pending = None
            row.matcher = row.constraint.grammar.matcher()
            try:
                row.think = think_budget(row.constraint.think, self.tools)
            except Exception as e:  # a budget too small for the markers (validate_params refuses it)
                row.failed = f"{type(e).__name__}: {e}"
                log.error("corral: %s; ending the request", row.failed)
                return
            row.consumed = 0
        out = row.output
        if len(out) < row.consumed:  # tokens were discarded (KV-load failure): replay
            row.matcher.reset()
            if row.think is not None:
                row.think.reset()
            row.consumed = 0
        m = row.matcher
        while row.consumed < len(out):
            t = out[row.consumed]
            if t < 0:  # an async-scheduling placeholder not yet filled in
                break
            if m.is_terminated():
                row.consumed = len(out)  # ignore_eos: vLLM goes on past EOS; only EOS stays allowed
                break
            if not m.accept_token(int(t)):
                what = row.request.describe() if row.request is not None else "?"
                row.failed = f"output token {t} does not match {what}"
                log.error(
                    "corral: %s (another processor or a stop edit interfered); ending the request",
                    row.failed,
                )
                return
            if row.think is not None:
                row.think.accept([int(t)])
            row.consumed += 1


class CorralLogitsProcessorV1(LogitsProcessor):
    """Enforce per-request corral constraints in vLLM (v1 model runner's logits-processor
    interface; vLLM's CPU build and ``VLLM_USE_V2_MODEL_RUNNER=0``).

    Register with ``LLM(model, logits_processors=[CorralLogitsProcessor])``,
    ``--logits-processors corral.vllm:CorralLogitsProcessor`` or the ``vllm.logits_processors``
    entry point; constrain a request with ``SamplingParams(extra_args={"corral": {...}})``
    (see :mod:`corral.vllm`). Requests without corral arguments are not touched.
    :class:`CorralLogitsProcessor` is this class on the v1 runner and
    :class:`CorralLogitsProcessorV2` on the v2 runner (vLLM's GPU default), whichever vLLM
    builds it for: register that one.

    Environment: ``CORRAL_MASK_THREADS`` (threads for mask filling; default 0 = one per core),
    ``CORRAL_BUDGET_MARGIN`` (steering margin, default 16 tokens),
    ``CORRAL_CACHE_DIR`` / ``CORRAL_CACHE_MAX_BYTES`` (a compile-cache directory the workers
    share: a restarted or new worker loads constraints instead of compiling them),
    ``CORRAL_VLLM_STRUCTURED_OUTPUTS=1`` (read in the API process: route ``response_format`` /
    ``structured_outputs`` requests to corral instead of vLLM's structured-output backend).
    """

    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool) -> None:
        self.core = _Core(vllm_config, device)
        self.tokenizer = self.core.tokenizer
        self.tools = self.core.tools
        self.rows = self.core.rows

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        validate_corral_params(sampling_params)

    def is_argmax_invariant(self) -> bool:
        return False  # masks change the argmax

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        rows = self.rows
        for index in batch_update.removed:
            self.core.retire(rows.pop(index, None))
        for index, params, _prompt, output in batch_update.added:
            row = self.core.new_row(params, output)
            self.core.retire(rows.pop(index, None))
            if row is not None:
                rows[index] = row
        for a, b, direction in batch_update.moved:
            ra, rb = rows.pop(a, None), rows.pop(b, None)
            if ra is not None:
                rows[b] = ra
            if rb is not None and direction == MoveDirectionality.SWAP:
                rows[a] = rb

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if self.rows:
            n = logits.shape[0]
            self.core.mask(logits, [(i, i) for i in sorted(self.rows) if i < n])
        return logits


try:  # vLLM >= 0.2x: the v2 model runner's interface (its GPU default in 0.32)
    from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor as _V2LogitsProcessor

    _HAS_V2 = True
except ImportError:  # pragma: no cover - older vLLM
    _HAS_V2 = False


if _HAS_V2:

    class CorralLogitsProcessorV2(_V2LogitsProcessor):
        """:class:`CorralLogitsProcessor` for vLLM's v2 model runner (the GPU default in vLLM
        0.32): ``--logits-processors corral.vllm:CorralLogitsProcessorV2``. Same requests, same
        guarantees; the output tokens are read from the runner's token history each step."""

        def __init__(self, vllm_config: VllmConfig, req_states: Any) -> None:
            if vllm_config.speculative_config is not None:
                raise ValueError("corral's logits processor does not support speculative decoding")
            self.core = _Core(vllm_config, req_states.device)
            self.req_states = req_states
            self.tokenizer = self.core.tokenizer
            self.rows = self.core.rows

        @classmethod
        def validate_params(cls, sampling_params: SamplingParams) -> None:
            validate_corral_params(sampling_params)

        def add_request(self, req_idx: int, sampling_params: SamplingParams) -> bool:
            row = self.core.new_row(sampling_params, [])
            self.core.retire(self.rows.pop(req_idx, None))  # the slot's previous request ended
            if row is None:
                return False
            self.rows[req_idx] = row  # a resumed request catches up from the token history
            return True

        def apply(self, logits: torch.Tensor, ctx: Any) -> torch.Tensor:
            if not self.rows:
                return logits
            slots = [int(s) for s in ctx.idx_mapping_np.tolist()]
            pairs = [(r, s) for r, s in enumerate(slots) if s in self.rows and r < logits.shape[0]]
            if not pairs:
                return logits
            self._sync_outputs([s for _, s in pairs])
            self.core.mask(logits, pairs)
            return logits

        def _sync_outputs(self, slots: list[int]) -> None:
            """Append each row's new output tokens from the runner's history (one device read
            for the common case of one new token per row)."""
            rs = self.req_states
            dev = rs.all_token_ids.gpu.device
            st = torch.tensor(slots, dtype=torch.long, device=dev)
            total = rs.total_len.gpu[st].tolist()
            prompt = rs.prompt_len.gpu[st].tolist()
            one_r: list[int] = []
            one_s: list[int] = []
            one_p: list[int] = []
            for s, t, p in zip(slots, total, prompt, strict=True):
                out = self.rows[s].output
                have = int(p) + len(out)
                if int(t) < have:  # tokens discarded: keep what is still there
                    del out[max(0, int(t) - int(p)) :]
                elif int(t) == have + 1:
                    one_r.append(s)
                    one_s.append(s)
                    one_p.append(have)
                elif int(t) > have:
                    out.extend(int(x) for x in rs.all_token_ids.gpu[s, have : int(t)].tolist())
            if one_s:
                idx_s = torch.tensor(one_s, dtype=torch.long, device=dev)
                idx_p = torch.tensor(one_p, dtype=torch.long, device=dev)
                for s, tok in zip(one_r, rs.all_token_ids.gpu[idx_s, idx_p].tolist(), strict=True):
                    self.rows[s].output.append(int(tok))


if _HAS_V2:

    class CorralLogitsProcessor(CorralLogitsProcessorV1, _V2LogitsProcessor):  # type: ignore[misc]
        """corral's vLLM logits processor for either model runner: it passes both runners'
        class checks and becomes :class:`CorralLogitsProcessorV1` or
        :class:`CorralLogitsProcessorV2` by the arguments vLLM constructs it with (v1:
        ``(vllm_config, device, is_pin_memory)``; v2: ``(vllm_config, req_states)``). The name to
        register: ``--logits-processors corral.vllm:CorralLogitsProcessor``."""

        def __init__(self, vllm_config: VllmConfig, *args: Any) -> None:
            self._v2: CorralLogitsProcessorV2 | None = None
            if len(args) == 1:  # the v2 runner
                self._v2 = CorralLogitsProcessorV2(vllm_config, args[0])
                self.core = self._v2.core
                self.tokenizer = self.core.tokenizer
                self.tools = self.core.tools
                self.rows = self.core.rows
            else:
                CorralLogitsProcessorV1.__init__(self, vllm_config, *args)

        def add_request(self, req_idx: int, sampling_params: SamplingParams) -> bool:
            assert self._v2 is not None, "add_request is the v2 runner's hook"
            return self._v2.add_request(req_idx, sampling_params)

        def apply(self, logits: torch.Tensor, ctx: Any = None) -> torch.Tensor:
            if self._v2 is not None:
                return self._v2.apply(logits, ctx)
            return CorralLogitsProcessorV1.apply(self, logits)

else:  # pragma: no cover - vLLM without the v2 runner
    CorralLogitsProcessor = CorralLogitsProcessorV1  # type: ignore[misc,assignment]
