"""Trial compiles of one regular expression in grammar syntax, for the JSON Schema converter.

In:  grammar text for one regular expression, typically a product of ``/…/j`` terminals with the
     operators ``&`` and ``-`` (``/[a-z]+/j & /(?s:.){0,64}/j - /id|name/j``), and a state budget.
Out: the number of states of its minimal DFA, :data:`EMPTY` when it matches no string, or
     :data:`TOO_BIG` when it needs more states than the budget (or another engine limit).

The converter writes such products only after a probe: an empty one would make the grammar
unable to complete where it is the only way on, and a product's size is only known once built
(it counts against ``max_dfa_states`` at compile time). The probe compiles the expression alone
against a one-token vocabulary, so it costs the automaton construction and nothing else; results
are memoised per text.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

__all__ = ["EMPTY", "TOO_BIG", "dfa_states"]

EMPTY = 0
TOO_BIG = -1

_VOCAB: Any = None


@lru_cache(maxsize=4096)
def dfa_states(expression: str, budget: int) -> int:
    """States of the DFA for `expression` (a grammar right-hand side without rule references),
    EMPTY or TOO_BIG (see the module docstring)."""
    global _VOCAB
    from corral import _core
    from corral.errors import CompileError, LimitExceeded

    if _VOCAB is None:
        _VOCAB = _core.Vocabulary([b"a"], [], [], 1)
    # max_total_dfa_states 1 stops right after the one terminal is built and reports its size.
    limits = {"max_dfa_states": budget, "max_total_dfa_states": 1}
    try:
        _core.compile_grammar(f"root ::= {expression}\n", "root", _VOCAB, limits)
    except LimitExceeded as e:
        if e.limit == "max_total_dfa_states":
            return int(e.given)
        return TOO_BIG
    except CompileError as e:
        if "matches no string" in str(e):
            return EMPTY
        raise
    return 1  # (a one-state automaton fits under the total limit of 1)
