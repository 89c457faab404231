"""Trial compiles of one regular expression in grammar syntax, for the JSON Schema converter.

In:  grammar text for one regular expression, typically a product of ``/…/j`` terminals with the
     operators ``&`` and ``-`` (``/[a-z]+/j & /(?s:.){0,64}/j - /id|name/j``), and a state budget.
Out: the number of states of its minimal DFA, :data:`EMPTY` when it matches no string, or
     :data:`TOO_BIG` when it needs more states than the budget (or another engine limit).

The converter writes such products only after a probe: an empty one would make the grammar
unable to complete where it is the only way on, and a product's size is only known once built
(it counts against ``max_dfa_states`` at compile time). The probe is one engine call
(``_native.probe_expression``) that builds the expression's automata without a vocabulary, so it
costs the automaton construction and nothing else; results are memoised per text.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["EMPTY", "TOO_BIG", "dfa_states"]

EMPTY = 0
TOO_BIG = -1


@lru_cache(maxsize=4096)
def dfa_states(expression: str, budget: int) -> int:
    """States of the DFA for `expression` (a grammar right-hand side without rule references),
    EMPTY or TOO_BIG (see the module docstring). One typed engine call (no exceptions used as
    answers); malformed text raises CompileError."""
    from corral import _native

    return int(_native.probe_expression(expression, budget, {}))
