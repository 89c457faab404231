"""Counting state machines for JSON object members and array items, written as grammar rules.

In:  grammar text for each member (``"name" : value``) or item, plus what to count: the number
     of members (``minProperties``/``maxProperties``), which members require or forbid others
     (``dependentRequired``), how many items match ``contains`` (``minContains``/
     ``maxContains``) and how many items there are (``minItems``/``maxItems``).
Out: the name of a start rule; one rule per reachable state, written into a rules dict.

Objects: members are emitted in schema order (the caller's order), optional ones may be
skipped, and the additional (undeclared) members come last. The state after deciding member
``i`` is (i, members so far (capped where the bounds stop caring), which later members are now
required, which later members are now forbidden, whether a separator is needed). Arrays: the
state is (position (capped where the bounds stop caring), matches of ``contains`` so far
(capped likewise), whether a separator is needed).

Both raise :class:`TooManyStates` when the machine would exceed ``max_states`` rules: the caller
then drops a dimension and checks that keyword after decoding. States that cannot reach an end
are never written, so the grammar has no dead ends.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field

__all__ = ["ArrayItems", "Member", "ObjectMembers", "TooManyStates"]

# Separator modes: AFTER (a separator comes before the next member), FIRST (nothing emitted yet;
# the container may stay empty), NONEMPTY (nothing emitted yet; at least one must follow).
AFTER, FIRST, NONEMPTY = 0, 1, 2


class TooManyStates(Exception):
    """The machine needs more rules than allowed."""


# Most additional members an object path may *need* (to reach minProperties) with pairwise
# distinct keys; each needs its own key automaton. Paths needing more are not generated, and
# when no path is left, TooManyStates says the count cannot be enforced.
MAX_DISTINCT_EXTRAS = 8


@dataclass
class Member:
    """A declared object member: its grammar text and how it must appear."""

    text: str
    required: bool = False
    never: bool = False  # can never be present (its dependencies cannot be met)


@dataclass
class ObjectMembers:
    """The members of an object, in emission order, and the constraints between them."""

    members: list[Member]
    extra: str | None  # grammar text of one additional member, or None (none allowed)
    sep: str
    # distinct(j, n): the j-th of n additional members that must all be present, with keys no
    # other of the n can have (a repeated key would count once in the parsed object); None when
    # such keys cannot be written (then the count is not enforced: TooManyStates).
    distinct: Callable[[int, int], str | None] | None = None
    min_count: int = 0
    max_count: int | None = None
    # deps[i]: members that must be present when member i is present.
    deps: dict[int, set[int]] = field(default_factory=dict)
    max_states: int = 5000
    cut: bool = False

    def build(self, new_rule: Callable[[str], str], rules: dict[str, str], mode: int) -> str | None:
        """The start rule for the members (None: no member list satisfies the constraints)."""
        n = len(self.members)
        dependents: dict[int, set[int]] = {}
        for key, targets in self.deps.items():
            for t in targets:
                if t != key:
                    dependents.setdefault(t, set()).add(key)
        cap = self.max_count if self.max_count is not None else self.min_count
        memo: dict[tuple[object, ...], str | None] = {}
        by_body: dict[str, str] = {}

        def name_for(body: str) -> str:
            hit = by_body.get(body)
            if hit is None:
                if len(by_body) >= self.max_states:
                    raise TooManyStates
                hit = new_rule("members")
                rules[hit] = body
                by_body[body] = hit
            return hit

        # One state per (member index, count, layout mode, required set, forbidden set); a
        # state's rule needs the rules of the states after it. Written as a generator that
        # yields the state it needs next (run by `solve` with an explicit stack), so an object
        # with thousands of members never recurses thousands of frames deep; the evaluation
        # order, and so every rule name, is the recursive one.
        Key = tuple[int, int, int, frozenset[int], frozenset[int]]

        def state(
            i: int, c: int, md: int, req: frozenset[int], forb: frozenset[int]
        ) -> Generator[Key, str | None, str | None]:
            key = (i, c, md, req, forb)
            if key in memo:
                return memo[key]
            if len(memo) >= self.max_states:
                raise TooManyStates
            alts: list[str] = []
            if i == n:
                tail = self._extras(c, md, name_for)
                out = None if tail is None else name_for(tail)
                memo[key] = out
                return out
            m = self.members[i]
            sep = self.sep if md == AFTER else ""
            if not m.never and i not in forb and (self.max_count is None or c < self.max_count):
                req2 = frozenset(x for x in req | self.deps.get(i, set()) if x > i)
                forb2 = frozenset(x for x in forb if x > i)
                if not req2 & forb2:
                    c2 = c + 1 if self.max_count is not None else min(c + 1, cap)
                    nxt = yield (i + 1, c2, AFTER, req2, forb2)
                    if nxt is not None:
                        alts.append(f"{sep} {m.text} {nxt}".strip())
            if not m.required and i not in req:
                forb2 = frozenset(x for x in forb | dependents.get(i, set()) if x > i)
                req2 = frozenset(x for x in req if x > i)
                if not req2 & forb2:
                    nxt = yield (i + 1, c, md, req2, forb2)
                    if nxt is not None:
                        alts.append(nxt)
            if not alts:
                out = None
            elif len(alts) == 1 and " " not in alts[0]:
                out = alts[0]  # only one way on: no rule of its own
            else:
                out = name_for(" | ".join(alts))
            memo[key] = out
            return out

        def solve(first: Key) -> str | None:
            stack = [state(*first)]
            value: str | None = None
            while stack:
                try:
                    need = stack[-1].send(value)
                except StopIteration as done:
                    stack.pop()
                    value = done.value
                    continue
                stack.append(state(*need))
                value = None
            return value

        self.cut = False
        start = solve((0, 0, mode, frozenset(), frozenset()))
        if start is None and self.cut:
            raise TooManyStates
        return start

    def _extras(self, c: int, md: int, name_for: Callable[[str], str]) -> str | None:
        """Additional members after the declared ones, given `c` members so far."""
        need = max(0, self.min_count - c)
        if md == NONEMPTY:
            need = max(need, 1)
        more = None if self.max_count is None else self.max_count - c - need
        if more is not None and more < 0:
            return None
        item, sep = self.extra, self.sep
        if item is None:
            return None if need else '""'
        if need > 1 and self.distinct is None:
            return None
        if need > MAX_DISTINCT_EXTRAS:
            self.cut = True
            return None
        needed: list[str] = [item] * need
        if need > 1 and self.distinct:
            keyed = [self.distinct(j, need) for j in range(need)]
            if any(x is None for x in keyed):
                self.cut = True
                return None
            needed = [x for x in keyed if x is not None]
        first = md != AFTER
        parts = [x if first and i == 0 else f"{sep} {x}" for i, x in enumerate(needed)]
        if more is None:
            parts.append(f"( {item} ( {sep} {item} )* )?" if first and not needed else f"( {sep} {item} )*")
        elif more > 0:
            # Up to `more` optional members as a chain of shared rules (one per count left), not
            # a counted repetition: each count of members so far would otherwise get its own copy
            # of the repeated automaton.
            chain = ""
            for _ in range(more - 1):
                chain = name_for(f"( {sep} {item} {chain} )?")
            parts.append(f"( {item} {chain} )?" if first and not needed else f"( {sep} {item} {chain} )?")
        return " ".join(parts) if parts else '""'


@dataclass
class ArrayItems:
    """Array items by position, split into items that match ``contains`` and items that do not.

    ``plain(i)``/``match(i)`` give the grammar text of an item at position ``i`` that does not /
    does count as a match (None: no such item). With ``exact`` false, plain items may match too
    (then only a lower bound on matches is enforced: ``max_matches`` must be None).
    ``any(i)`` is the text of any item at position ``i`` (plain or match).
    """

    plain: Callable[[int], str | None]
    match: Callable[[int], str | None]
    any: Callable[[int], str | None]
    positions: int  # positions after which every position behaves the same (prefix length)
    sep: str
    min_items: int = 0
    max_items: int | None = None
    min_matches: int = 1
    max_matches: int | None = None
    max_states: int = 5000

    def build(self, new_rule: Callable[[str], str], rules: dict[str, str], mode: int) -> str | None:
        lo, hi = self.min_items, self.max_items
        kmin, kmax = self.min_matches, self.max_matches
        top = max(self.positions, lo) if hi is None else hi  # positions are capped here
        mcap = kmax if kmax is not None else kmin
        if (top + 1) * (mcap + 1) * 2 > self.max_states:
            raise TooManyStates

        def saturated(m: int) -> bool:
            return kmax is None and m >= kmin

        # alive[(pos, m)]: an end is reachable. With no maxItems, the last position loops on
        # itself (matches can only grow there), so filling m downwards sees every successor.
        alive: dict[tuple[int, int], bool] = {}
        for pos in range(top, -1, -1):
            for m in range(mcap, -1, -1):
                ok = pos >= lo and m >= kmin
                if not ok and (hi is None or pos < hi):
                    nxt = pos if pos == top else pos + 1
                    m2 = min(m + 1, mcap)
                    if self.match(pos) is not None and (kmax is None or m < kmax) and (nxt, m2) != (pos, m):
                        ok = alive[(nxt, m2)]
                    if not ok and self.plain(pos) is not None and nxt != pos:
                        ok = alive[(nxt, m)]
                alive[(pos, m)] = ok
        names: dict[tuple[int, int, int], str] = {}

        def state(pos: int, m: int, md: int) -> str | None:
            if not alive[(pos, m)]:
                return None
            key = (pos, m, md)
            if key in names:
                return names[key]
            name = new_rule("items")
            names[key] = name
            rules[name] = ""  # reserved: the last position refers to itself
            sep = self.sep if md == AFTER else ""
            alts: list[str] = []
            if pos >= lo and m >= kmin and not (md == NONEMPTY and pos == 0):
                alts.append('""')
            if hi is None or pos < hi:
                nxt = pos if pos == top else pos + 1
                if saturated(m):
                    item = self.any(pos)
                    if item is not None and alive[(nxt, m)]:
                        alts.append(f"{sep} {item} {state(nxt, m, AFTER)}".strip())
                else:
                    plain = self.plain(pos)
                    if plain is not None and alive[(nxt, m)]:
                        alts.append(f"{sep} {plain} {state(nxt, m, AFTER)}".strip())
                    match = self.match(pos)
                    m2 = min(m + 1, mcap)
                    if match is not None and (kmax is None or m < kmax) and alive[(nxt, m2)]:
                        alts.append(f"{sep} {match} {state(nxt, m2, AFTER)}".strip())
            if not alts:
                del names[key]
                del rules[name]
                return None
            rules[name] = " | ".join(alts)
            return name

        return state(0, 0, mode)
