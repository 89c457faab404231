"""Right-linear grammar rules for JSON numbers that are multiples of a step (``multipleOf``).

In:  a step — an integer ``k`` or a decimal ``p / 10**s`` — and optional bounds.
Out: a :class:`Automaton` over the characters of a JSON number text, which
     :meth:`Automaton.rules` writes as right-linear grammar rules (one rule per state). The
     engine inlines the acyclic part into one DFA terminal; the cycles (unbounded digit runs)
     stay rules, which the Earley parser handles.

Languages (exact):
* :func:`integer_multiples`: canonical integers ``-?(0|[1-9][0-9]*)`` (never ``-0``) that are
  multiples of ``k``, of none of ``excluded`` (the complement of a ``multipleOf``, so ``0`` is
  out whenever one is excluded), and lie in ``[lo, hi]`` (either bound may be ``None``). States are
  (digits read, comparison of the prefix with each bound's prefix, residue mod ``k``): the
  usual digit automaton (residues mod the lcm of ``k`` and ``excluded``), so the count grows
  with that lcm times the number of digits of the bounds.
* :func:`decimal_multiples`: plain decimal texts ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?`` (no exponent)
  whose value is an exact multiple of ``p / 10**s``: the digits up to the ``s``-th fractional
  one, read as an integer scaled by ``10**s``, must be a multiple of ``p``; later fractional
  digits must be zeros. No bounds (the caller enforces bounds another way).

Both return ``None`` when the automaton would need more than ``max_states`` states, and raise
``ValueError`` when no number qualifies.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from decimal import Decimal

__all__ = ["Automaton", "decimal_multiples", "integer_multiples", "step_of"]

State = Hashable


@dataclass
class Automaton:
    """A finite automaton over number characters: `edges[state]` lists (characters, target)."""

    start: State
    accepting: set[State] = field(default_factory=set)
    edges: dict[State, list[tuple[str, State]]] = field(default_factory=dict)

    def trim(self) -> None:
        """Drop states from which no accepting state is reachable (and edges into them)."""
        alive = set(self.accepting)
        changed = True
        while changed:
            changed = False
            for s, out in self.edges.items():
                if s not in alive and any(t in alive for _, t in out):
                    alive.add(s)
                    changed = True
        if self.start not in alive:
            raise ValueError("no number satisfies the constraints")
        self.edges = {
            s: [(c, t) for c, t in out if t in alive] for s, out in self.edges.items() if s in alive
        }
        self.accepting &= alive

    def rules(self, new_rule: Callable[[str], str], rules: dict[str, str]) -> str:
        """Write one grammar rule per state into `rules`; returns the start rule's name.
        Edges to the same target are merged into one character class."""
        names: dict[State, str] = {}
        order = [self.start]
        names[self.start] = new_rule("mult")
        i = 0
        while i < len(order):
            s = order[i]
            i += 1
            by_target: dict[State, list[str]] = {}
            for chars, t in self.edges.get(s, []):
                by_target.setdefault(t, []).append(chars)
                if t not in names:
                    names[t] = new_rule("mult")
                    order.append(t)
            alts = [f"{_char_class(''.join(cs))} {names[t]}" for t, cs in by_target.items()]
            if s in self.accepting:
                alts.append('""')
            rules[names[s]] = " | ".join(alts)
        return names[self.start]


def _char_class(chars: str) -> str:
    """A grammar literal or character class for a set of ASCII characters."""
    cs = sorted(set(chars))
    if len(cs) == 1:
        return f'"{cs[0]}"'
    parts: list[str] = []
    j = 0
    while j < len(cs):
        k = j
        while k + 1 < len(cs) and ord(cs[k + 1]) == ord(cs[k]) + 1:
            k += 1
        if k - j >= 2:
            parts.append(f"{cs[j]}-{cs[k]}")
        else:
            parts.extend(cs[j : k + 1])
        j = k + 1
    return "[" + "".join("\\-" if p == "-" else p for p in parts) + "]"


def step_of(value: int | float | Decimal) -> tuple[int, int]:
    """(p, s) with value == p / 10**s, p a positive integer, s >= 0 minimal."""
    d = Decimal(str(value)) if not isinstance(value, Decimal) else value
    if not d.is_finite() or d <= 0:
        raise ValueError("multipleOf must be a positive number")
    sign, digits, exp = d.as_tuple()
    p = int("".join(map(str, digits)))
    s = -int(exp)
    if s < 0:
        p *= 10**-s
        s = 0
    while s > 0 and p % 10 == 0:
        p //= 10
        s -= 1
    return p, s


def _cmp(a: int, b: int) -> int:
    return (a > b) - (a < b)


class _Magnitudes:
    """Canonical digit strings of integers x in [low, high] (high None: unbounded), low >= 1,
    with x % k == 0 and x % e != 0 for every excluded e. States: (digits read (capped when it
    no longer matters), prefix vs low's prefix, prefix vs high's prefix, residue)."""

    def __init__(self, tag: str, low: int, high: int | None, k: int, excluded: tuple[int, ...] = ()) -> None:
        self.tag = tag
        self.low = str(low)
        self.high = None if high is None else str(high)
        self.excluded = excluded
        self.k = math.lcm(k, *excluded)  # (a residue mod the lcm decides both tests)
        self.step_k = k

    def first(self, d: int) -> State | None:
        return self._step((self.tag, 0, 0, 0, 0), d)

    def _step(self, st: tuple[str, int, int, int, int], d: int) -> State | None:
        tag, j, cl, ch, r = st
        low, high = self.low, self.high
        j2 = j + 1
        if j2 > len(low):
            cl2 = 1
        elif j == 0 or cl == 0:
            cl2 = _cmp(d, int(low[j]))
        else:
            cl2 = cl
        if high is None:
            ch2 = -1
        elif j2 > len(high):
            return None
        elif j == 0 or ch == 0:
            ch2 = _cmp(d, int(high[j]))
        else:
            ch2 = ch
        if high is None and j2 > len(low):
            j2 = len(low) + 1  # longer than the lower bound and no upper bound: length is moot
        return (tag, j2, cl2, ch2, (r * 10 + d) % self.k)

    def step(self, st: State, d: int) -> State | None:
        return self._step(st, d)  # type: ignore[arg-type]

    def accepts(self, st: State) -> bool:
        state: tuple[str, int, int, int, int] = st  # type: ignore[assignment]
        _, j, cl, ch, r = state
        if r % self.step_k != 0 or any(r % e == 0 for e in self.excluded):
            return False
        if j < len(self.low) or (j == len(self.low) and cl < 0):
            return False
        return self.high is None or j < len(self.high) or (j == len(self.high) and ch <= 0)


def integer_multiples(
    k: int, lo: int | None, hi: int | None, max_states: int = 5000, excluded: tuple[int, ...] = ()
) -> Automaton | None:
    """Canonical integers in [lo, hi] that are multiples of k and of none of `excluded` (see
    the module docstring)."""
    if k < 1 or any(e < 1 for e in excluded):
        raise ValueError("the step must be positive")
    if lo is not None and hi is not None and lo > hi:
        raise ValueError("empty range")
    a = Automaton(start=("start",))
    a.edges[a.start] = []
    sides: list[tuple[str, _Magnitudes]] = []
    if hi is None or hi >= 1:
        sides.append(("", _Magnitudes("p", max(lo if lo is not None else 1, 1), hi, k, excluded)))
    if lo is None or lo <= -1:
        neg_high = None if lo is None else -lo
        sides.append(("-", _Magnitudes("n", max(1, -hi if hi is not None else 1), neg_high, k, excluded)))
    if (lo is None or lo <= 0) and (hi is None or hi >= 0) and not excluded:  # (0 is a multiple of all)
        a.edges[a.start].append(("0", ("zero",)))
        a.edges[("zero",)] = []
        a.accepting.add(("zero",))
    todo: list[tuple[State, _Magnitudes]] = []
    for sign, mag in sides:
        src: State = a.start
        if sign:
            src = ("neg",)
            a.edges[a.start].append(("-", src))
            a.edges[src] = []
        for d in range(1, 10):
            t = mag.first(d)
            if t is not None:
                a.edges[src].append((str(d), t))
                if t not in a.edges:
                    a.edges[t] = []
                    todo.append((t, mag))
    while todo:
        s, mag = todo.pop()
        if len(a.edges) > max_states:
            return None
        if mag.accepts(s):
            a.accepting.add(s)
        for d in range(10):
            t = mag.step(s, d)
            if t is None:
                continue
            a.edges[s].append((str(d), t))
            if t not in a.edges:
                a.edges[t] = []
                todo.append((t, mag))
    a.trim()
    return a


def decimal_multiples(p: int, s: int, max_states: int = 5000) -> Automaton | None:
    """Plain decimal texts (no exponent) whose value is a multiple of p / 10**s."""
    if p < 1 or s < 0:
        raise ValueError("the step must be positive")
    if p * (s + 2) + 8 > max_states:
        return None
    scale = [pow(10, s - f, p) for f in range(s + 1)]  # 10**(s-f) mod p

    def ok(f: int, r: int) -> bool:
        """Value so far (f fractional digits, prefix residue r) is a multiple, if it ends here."""
        return (r * scale[f]) % p == 0

    a = Automaton(start=("start",))
    digits = "0123456789"
    lead = [("0", ("int", 0, True))] + [(d, ("int", int(d) % p, False)) for d in digits[1:]]
    a.edges[("start",)] = [("-", ("sign",)), *lead]
    a.edges[("sign",)] = list(lead)
    for r in range(p):
        for zero in (True, False):
            if zero and r:
                continue
            st: State = ("int", r, zero)
            a.edges[st] = [(".", ("dot", r))]
            if not zero:
                a.edges[st] += [(d, ("int", (r * 10 + int(d)) % p, False)) for d in digits]
            if ok(0, r):
                a.accepting.add(st)
        if s == 0:
            # Only the integer part counts: a fraction must be all zeros.
            a.edges[("dot", r)] = [("0", ("zeros",))] if ok(0, r) else []
        else:
            a.edges[("dot", r)] = [(d, ("frac", 1, (r * 10 + int(d)) % p)) for d in digits]
    for f in range(1, s + 1):
        for r in range(p):
            st = ("frac", f, r)
            if f < s:
                a.edges[st] = [(d, ("frac", f + 1, (r * 10 + int(d)) % p)) for d in digits]
            else:
                a.edges[st] = [("0", ("zeros",))] if ok(s, r) else []
            if ok(f, r):
                a.accepting.add(st)
    a.edges[("zeros",)] = [("0", ("zeros",))]
    a.accepting.add(("zeros",))
    a.trim()
    return a
