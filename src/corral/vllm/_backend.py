"""corral as a vLLM structured-output backend (imports vLLM; registered by
:mod:`corral.vllm.plugin`, selected with ``--structured-outputs-config '{"backend": "corral"}'``).

Lifecycle, in vLLM's engine-core process:

* For each request routed to corral, :mod:`corral.vllm.plugin` asks
  :meth:`CorralBackend.grammar_future` for its grammar: ready at once when corral's compile cache
  holds the constraint, else compiled on the backend's own threads. vLLM's scheduler keeps the
  request out of the batch until the grammar is ready, so no batch step waits on a compile, and a
  constraint that does not compile fails its own request only. (:meth:`compile_grammar`, vLLM's
  synchronous entry, gives the same grammar.)
* Compiling goes through corral's one compile cache (:func:`corral.vllm._spec.compile_spec`):
  a schema compiled once is shared by every request that sends the same text.
* Per step the manager asks each grammar for its bitmask row (:meth:`CorralGrammar.fill_bitmask`),
  then feeds it the sampled tokens (:meth:`CorralGrammar.accept_tokens`). With speculative
  decoding it also validates drafts (:meth:`CorralGrammar.validate_tokens`, which never moves the
  state) and rolls back what it tried (:meth:`CorralGrammar.rollback`): the matcher records each
  token as one step, so rollback is exact for every constraint kind, and a think-block budget is
  replayed from the tokens kept.

The request's ``max_tokens`` rides in with its constraint, so the output is complete when the
budget runs out (:meth:`CorralGrammar._steer`). What a backend cannot do, and the logits processor
(:mod:`corral.vllm._processor`) can: pick the best-scoring token that still fits near the budget (a
backend sees no logits).
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import torch
from vllm.v1.structured_output.backend_types import (
    StructuredOutputBackend,
    StructuredOutputGrammar,
    StructuredOutputOptions,
)

from corral.compile import Constraint, default_cache
from corral.engine import Matcher
from corral.runtime.budget import fits_token, needed_tokens
from corral.runtime.masks import allow_only, allowed_ids
from corral.runtime.thinking import ThinkBudget, think_budget
from corral.runtime.tokens import TokenTools, tools_for
from corral.tokenizer import Tokenizer
from corral.vllm._adapter import load_tokenizer, schema_converter
from corral.vllm._spec import BACKEND_NAME, bind_request, compile_spec, request_from_key

__all__ = ["BACKEND_NAME", "CorralBackend", "CorralGrammar"]

_EXACT_CHECKS = 4096
"""Most allowed tokens a budget check tries one by one (a few microseconds each)."""

log = logging.getLogger("corral.vllm")


@dataclass
class CorralBackend(StructuredOutputBackend):
    """vLLM's engine-level structured-output backend on corral's compile layer."""

    def __post_init__(self) -> None:
        self.corral_tokenizer: Tokenizer = load_tokenizer(self.vllm_config, self.tokenizer)
        self.tools: TokenTools = tools_for(self.corral_tokenizer)
        self.words = (self.corral_tokenizer.width + 31) // 32
        self.margin = int(os.environ.get("CORRAL_BUDGET_MARGIN", "16"))
        # Schema conversion is Python: run in this process, it would hold the GIL the engine
        # core's scheduling loop needs, for as long as a big schema converts. A low-priority
        # worker process converts instead; the engine's own compile (C++) releases the GIL.
        self.converter = schema_converter()
        # Misses compile here, at normal priority (beside vLLM's spinning CPU threads a niced
        # compile is starved past its time limits), two at a time: one slow schema does not hold
        # up the next.
        self.pool = ThreadPoolExecutor(2, thread_name_prefix="corral-vllm-compile")

    def compile_grammar(
        self,
        request_type: StructuredOutputOptions,
        grammar_spec: str,
        stop_token_ids: set[int] | None = None,
    ) -> StructuredOutputGrammar:
        # Raising here fails this request only: vLLM's manager keeps the exception in the
        # request's future and the scheduler ends that request with an error.
        return self.grammar_future(request_type, grammar_spec).result()

    def grammar_future(
        self, request_type: StructuredOutputOptions, grammar_spec: str
    ) -> Future[CorralGrammar]:
        """The request's grammar as a future that is already done when corral's compile cache
        holds its constraint, and is completed by the backend's own compile threads on a miss.

        vLLM's manager compiles every structured request, cache hit or not, on a thread pool of
        (cores + 1) // 2 threads: one on a 2-core machine. A request on a cached schema then
        waited in that queue behind a new schema's compile. :mod:`corral.vllm.plugin` uses this
        instead for requests routed to corral."""
        out: Future[CorralGrammar] = Future()
        try:
            request, max_tokens = request_from_key(request_type.name, grammar_spec)
            cached = default_cache().peek(request.spec.key(self.corral_tokenizer.hash))
        except Exception as e:
            out.set_exception(e)
            return out

        def build() -> CorralGrammar:
            c = bind_request(cached, request) if cached is not None else None
            if c is None:  # a miss: compiled (or loaded from the cache directory) on this thread
                c = compile_spec(request, self.corral_tokenizer, self.converter)
            return CorralGrammar(
                c, c.grammar.matcher(), self.tools, max_tokens=max_tokens, margin=self.margin
            )

        if cached is not None:
            try:
                out.set_result(build())
            except Exception as e:  # slot values that do not fit: this request fails alone
                out.set_exception(e)
            return out
        return self.pool.submit(build)

    def allocate_token_bitmask(self, max_num_seqs: int) -> torch.Tensor:
        return torch.full((max_num_seqs, self.words), -1, dtype=torch.int32)

    def destroy(self) -> None:
        # The compile cache is process-wide and bounded; the converter's process is this
        # backend's own.
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.converter.close()


@dataclass
class CorralGrammar(StructuredOutputGrammar):
    """One request's state: corral's matcher, advanced by the tokens vLLM commits."""

    constraint: Constraint
    matcher: Matcher
    tools: TokenTools
    max_tokens: int | None = None  # the request's budget (None: not known)
    margin: int = 16
    # The committed output tokens, for replaying a think-block budget after a rollback.
    tokens: list[int] = field(default_factory=list)
    think: ThinkBudget | None = None

    def __post_init__(self) -> None:
        # A budget too small for the block's markers raises BudgetError: the request fails at
        # compile time, like any constraint that cannot be met.
        self.think = think_budget(self.constraint.think, self.tools)

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        m = self.matcher
        for t in tokens:
            if m.is_terminated():
                return True  # tokens after EOS (ignore_eos) are not the grammar's
            if not m.accept_token(int(t)):
                log.error(
                    "corral: request %s: token %s does not match %s (%s)",
                    request_id,
                    t,
                    self.constraint.spec.describe(),
                    m.error or "not allowed here",
                )
                return False
            self.tokens.append(int(t))
            if self.think is not None:
                self.think.accept((int(t),))
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        m = self.matcher
        n = 0
        for t in tokens:
            if t < 0 or m.is_terminated() or not m.accept_token(int(t)):
                break
            n += 1
        if n:
            m.rollback(n)
        return tokens[:n]

    def rollback(self, num_tokens: int) -> None:
        if num_tokens <= 0:
            return
        num_tokens = min(num_tokens, len(self.tokens))
        self.matcher.rollback(num_tokens)
        del self.tokens[len(self.tokens) - num_tokens :]
        if self.think is not None:
            self.think.reset()
            self.think.accept(self.tokens)

    def fill_bitmask(self, bitmask: torch.Tensor, batch_index: int) -> None:
        m = self.matcher
        m.fill_next_token_bitmask(bitmask, batch_index)  # type: ignore[arg-type]  # torch CPU int32 is accepted
        if self.think is None and self.max_tokens is None:
            return
        row = bitmask[batch_index].numpy()  # a view: narrowing writes the tensor's row
        if self.think is not None:
            self.think.narrow(row)
        if self.max_tokens is not None and not m.is_terminated():
            self._steer(row, self.max_tokens - len(self.tokens))

    def _steer(self, row: np.ndarray, remaining: int) -> None:
        """Keep the output completable within the budget: within ``margin`` tokens of it, clear
        every allowed token after which the shortest completion no longer fits (each checked
        exactly when the mask allows at most ``_EXACT_CHECKS`` tokens). A backend sees no scores,
        so where it cannot check every token (inside free text, tens of thousands allowed) it
        waits until the budget is one token from the completion and then writes the shortest
        completion; there a single token that raises the tokens needed by two or more could
        still overrun, the one inexact case (the logits processor checks the best-scoring token
        instead)."""
        if remaining < 1:
            return
        m = self.matcher
        tail = m.shortest_completion()
        if remaining > len(tail) + self.margin:  # needed tokens <= its bytes: far from the end
            return
        need = needed_tokens(m, self.tools, remaining)
        if remaining > need + self.margin:
            return
        allowed = allowed_ids(row, self.tools.tokenizer.width)
        eos = set(self.tools.tokenizer.eos_ids)
        if len(allowed) <= _EXACT_CHECKS:
            keep = [t for t in allowed.tolist() if fits_token(m, self.tools, eos, t, remaining)]
            if keep:
                if len(keep) < len(allowed):
                    row[:] = 0
                    for t in keep:
                        row[t >> 5] |= np.int32(np.uint32(1 << (t & 31)).view(np.int32))
                return
        elif remaining > need + 1:
            return
        allow_only(row, self.tools.encode_exact(tail)[0] if tail else min(eos))

    def is_terminated(self) -> bool:
        return bool(self.matcher.is_terminated())

    def reset(self) -> None:
        self.matcher.reset()
        self.tokens.clear()
        if self.think is not None:
            self.think.reset()
