"""A transformers ``LogitsProcessor`` for users who keep calling ``model.generate()``.

    proc = corral.TransformersLogitsProcessor(corral.compile_json_schema(schema, tok), max_new_tokens=128)
    model.generate(**inputs, logits_processor=[proc], max_new_tokens=128)

It keeps one matcher per batch row, advances it by each row's newest token, and masks every
token that would break the constraint through the shared runtime kernel
(:class:`corral.runtime.kernel.MaskKernel`). Greedy decoding and sampling are supported; beam
search is not (beams reorder rows). corral's own loop (:func:`corral.generate`) adds jump-ahead;
the budget finish here is exact for greedy decoding and best effort when sampling (see
:mod:`corral.runtime.budget`).
"""

from __future__ import annotations

from typing import Any

from corral.compile import Constraint
from corral.engine import CompiledGrammar, Matcher
from corral.runtime.kernel import MaskKernel, MaskRow
from corral.runtime.thinking import ThinkBudget, think_budget

__all__ = ["TransformersLogitsProcessor"]


class TransformersLogitsProcessor:
    """Constrain ``model.generate()`` to a compiled corral constraint.

    Parameters
    ----------
    grammar : CompiledGrammar or Constraint
        The constraint, compiled for the model's tokenizer (its width must equal the logits
        width: build the tokenizer with ``corral.Tokenizer.from_hf(tok, width=model_vocab)``).
        A skeleton with slots must be bound first (``grammar.bind({...})``). A
        :class:`Constraint` with a think block (``thinking=``) also keeps its thinking budget.
    max_new_tokens : int or None
        The same budget passed to ``generate()``. When given, the output is steered to finish
        within it: exact for greedy decoding; best effort with sampling (a sampled token that
        raises the needed length by more than ``margin`` tokens at once can defeat it).
    margin : int
        Tokens before the budget at which the row is narrowed to the best token that fits.
    threads : int
        Threads for filling masks (0: one per core).
    """

    def __init__(
        self,
        grammar: CompiledGrammar | Constraint,
        max_new_tokens: int | None = None,
        margin: int = 16,
        threads: int = 0,
    ) -> None:
        self.grammar = grammar.grammar if isinstance(grammar, Constraint) else grammar
        # A think block's budget (Constraint.think) is kept per row, to the token.
        self.think = grammar.think if isinstance(grammar, Constraint) else None
        self.max_new_tokens = max_new_tokens
        self.tok = self.grammar.tokenizer
        self.kernel = MaskKernel(self.tok, threads=threads, margin=margin)
        self.matchers: list[Matcher] | None = None
        self.thinks: list[ThinkBudget | None] = []
        self.done: list[bool] = []
        self.prompt_len = 0

    def reset(self) -> None:
        """Forget the batch (call between ``generate()`` calls, or use a new processor)."""
        self.matchers = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        rows = int(input_ids.shape[0])
        if self.matchers is None or len(self.matchers) != rows:
            self.matchers = [self.grammar.matcher() for _ in range(rows)]
            self.thinks = [think_budget(self.think, self.kernel.tools) for _ in range(rows)]
            self.done = [False] * rows
            self.prompt_len = int(input_ids.shape[1])
        else:
            last = input_ids[:, -1].tolist()
            for i, m in enumerate(self.matchers):
                if self.done[i]:
                    continue
                if not m.accept_token(int(last[i])) or m.is_terminated():
                    self.done[i] = True  # finished (EOS) — generate() pads the row from now on
                think = self.thinks[i]
                if think is not None:
                    think.accept([int(last[i])])
        remaining = None
        if self.max_new_tokens is not None:
            remaining = self.max_new_tokens - (int(input_ids.shape[1]) - self.prompt_len)
        live = [
            MaskRow(i, self.matchers[i], remaining, self.thinks[i]) for i in range(rows) if not self.done[i]
        ]
        self.kernel.mask(scores, live)
        return scores
