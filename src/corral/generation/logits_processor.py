"""A transformers ``LogitsProcessor`` for users who keep calling ``model.generate()``.

    proc = corral.CorralLogitsProcessor(corral.compile_json_schema(schema, tok), max_new_tokens=128)
    model.generate(**inputs, logits_processor=[proc], max_new_tokens=128)

It keeps one matcher per batch row, advances it by each row's newest token, and masks every
token that would break the constraint (vectorised, via :mod:`corral.generation.masking`).
Greedy decoding and sampling are supported; beam search is not (beams reorder rows).
corral's own loop (:func:`corral.generate`) adds jump-ahead and an exact budget finish; here the
budget finish is best-effort (see ``max_new_tokens``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.engine import CompiledGrammar, Matcher, fill_next_token_bitmasks
from corral.generation.decode import needed_tokens
from corral.generation.masking import apply_token_bitmask_
from corral.generation.tokens import TokenTools

__all__ = ["CorralLogitsProcessor", "steer_to_budget"]


class CorralLogitsProcessor:
    """Constrain ``model.generate()`` to a compiled corral grammar.

    Parameters
    ----------
    grammar : CompiledGrammar
        The constraint, compiled for the model's tokenizer (its width must equal the logits
        width: build the tokenizer with ``corral.Tokenizer.from_hf(tok, width=model_vocab)``).
    max_new_tokens : int or None
        The same budget passed to ``generate()``. When given, the output is steered to finish
        within it: once the remaining budget is within ``margin`` tokens of the shortest
        completion, the highest-scoring token that keeps the output completable in time is
        chosen. (A single token that raises the needed length by more than ``margin`` at once
        can defeat this; :func:`corral.generate` is exact.)
    margin : int
        See ``max_new_tokens``.
    """

    def __init__(self, grammar: CompiledGrammar, max_new_tokens: int | None = None, margin: int = 16) -> None:
        self.grammar = grammar
        self.max_new_tokens = max_new_tokens
        self.margin = margin
        self.tok = grammar.tokenizer
        self.tools = TokenTools(self.tok) if max_new_tokens is not None else None
        self.eos = set(self.tok.eos_ids)
        self.matchers: list[Matcher] | None = None
        self.done: list[bool] = []
        self.prompt_len = 0

    def reset(self) -> None:
        """Forget the batch (call between ``generate()`` calls, or use a new processor)."""
        self.matchers = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        rows = int(input_ids.shape[0])
        if self.matchers is None or len(self.matchers) != rows:
            self.matchers = [self.grammar.matcher() for _ in range(rows)]
            self.done = [False] * rows
            self.prompt_len = int(input_ids.shape[1])
        else:
            last = input_ids[:, -1].tolist()
            for i, m in enumerate(self.matchers):
                if self.done[i]:
                    continue
                if not m.accept_token(int(last[i])) or m.is_terminated():
                    self.done[i] = True  # finished (EOS) — generate() pads the row from now on
        words = (self.tok.width + 31) // 32
        mask = np.full((rows, words), -1, dtype=np.int32)
        live = [i for i in range(rows) if not self.done[i]]
        fill_next_token_bitmasks([self.matchers[i] for i in live], mask, live)
        if self.max_new_tokens is not None:
            produced = int(input_ids.shape[1]) - self.prompt_len
            for i in live:
                self._steer(i, mask, scores[i], self.max_new_tokens - produced)
        apply_token_bitmask_(scores, mask)
        return scores

    def _steer(self, i: int, mask: np.ndarray, row_scores: Any, remaining: int) -> None:
        """Near the budget, allow only one token that keeps the output completable in time."""
        assert self.tools is not None and self.matchers is not None
        steer_to_budget(self.matchers[i], self.tools, self.eos, mask[i], row_scores, remaining, self.margin)


def steer_to_budget(
    m: Matcher,
    tools: TokenTools,
    eos: set[int],
    mask_row: np.ndarray,
    row_scores: Any,
    remaining: int,
    margin: int,
) -> bool:
    """Budget steering for logits processors that cannot stop a sequence themselves.

    In:  a row's matcher, its packed mask row (a writable 1-D int32 view, already filled), the
         row's scores (torch tensor or numpy array), the tokens left in its budget (including
         the one about to be sampled).
    Out: when ``remaining`` is within ``margin`` tokens of the shortest completion, ``mask_row``
         is narrowed in place to the single highest-scoring allowed token that keeps the output
         completable in time (else the first token of the shortest completion, or EOS); returns
         whether it did. The matcher is left unchanged.

    Shared by :class:`CorralLogitsProcessor` (transformers, llama.cpp) and the vLLM processor.
    """
    need = needed_tokens(m, tools, remaining)
    if remaining > need + margin:
        return False
    width = tools.tokenizer.width
    allowed = np.flatnonzero(np.unpackbits(mask_row.view(np.uint8), bitorder="little")[:width])
    vals = row_scores[allowed]  # a torch tensor (transformers, vLLM) or a numpy array (llama.cpp)
    vals = vals.float().cpu().numpy() if hasattr(vals, "cpu") else np.asarray(vals, dtype=np.float32)
    order = allowed[np.argsort(-vals)][:32]
    choice = None
    for t in order.tolist():
        if t in eos:
            choice = t if m.is_accepting() else None
        elif m.accept_token(t):
            fits = needed_tokens(m, tools, remaining - 1) <= remaining - 1
            m.rollback(1)
            choice = t if fits else None
        if choice is not None:
            break
    if choice is None:
        tail = m.shortest_completion()
        choice = tools.encode_exact(tail)[0] if tail else sorted(eos)[0]
    mask_row[:] = 0
    mask_row[choice >> 5] = np.int32(np.uint32(1 << (choice & 31)).view(np.int32))
    return True
