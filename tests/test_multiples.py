"""corral.grammar.multiples: the integer-multiples automaton, with and without excluded steps
(the complement of ``multipleOf``), must accept exactly the canonical integers it documents.

Truth is computed by enumerating every canonical integer spelling up to a length and testing
the residues with Python's ``%``; the automaton is run character by character over its edges.
"""

from __future__ import annotations

import itertools

import pytest

from corral.grammar.multiples import Automaton, integer_multiples


def _accepts(a: Automaton, text: str) -> bool:
    state = a.start
    for ch in text:
        nxt = [t for chars, t in a.edges.get(state, []) if ch in chars]
        if not nxt:
            return False
        state = nxt[0]
    return state in a.accepting


def _canonical_integers(max_len: int) -> list[str]:
    out = ["0"]
    for n in range(1, max_len + 1):
        for first in "123456789":
            for rest in itertools.product("0123456789", repeat=n - 1):
                body = first + "".join(rest)
                out += [body, "-" + body]
    return out


@pytest.mark.parametrize(
    ("k", "lo", "hi", "excluded"),
    [
        (1, None, None, (3,)),
        (2, None, None, (3,)),
        (1, -40, 120, (4, 6)),
        (5, 0, None, (2,)),
        (3, None, 50, ()),
        (1, 7, 7, (7,)),  # nothing left: ValueError
    ],
)
def test_integer_multiples_with_excluded_steps_are_exact(
    k: int, lo: int | None, hi: int | None, excluded: tuple[int, ...]
) -> None:
    def wanted(x: int) -> bool:
        in_range = (lo is None or x >= lo) and (hi is None or x <= hi)
        return in_range and x % k == 0 and all(x % e != 0 for e in excluded)

    texts = _canonical_integers(3)
    if not any(wanted(int(t)) for t in texts):
        with pytest.raises(ValueError):
            integer_multiples(k, lo, hi, excluded=excluded)
        return
    a = integer_multiples(k, lo, hi, excluded=excluded)
    assert a is not None
    for t in texts:
        assert _accepts(a, t) == wanted(int(t)), t
    for bad in ("-0", "00", "01", "+1", ""):
        assert not _accepts(a, bad), bad


def test_excluded_steps_count_against_the_state_budget() -> None:
    assert integer_multiples(1, None, 10**12, max_states=200, excluded=(1009,)) is None
    with pytest.raises(ValueError):
        integer_multiples(1, None, None, excluded=(0,))
