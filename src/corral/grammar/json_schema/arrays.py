"""Arrays: ``prefixItems``/``items`` (and draft-07 array ``items``/``additionalItems``),
``minItems``/``maxItems``, ``contains`` with ``minContains``/``maxContains``, and
``uniqueItems`` (unique_items.py: in the mask for small finite item sets, for free strings and
integers, and for strings, bounded integers and numbers whose values the engine counts).

In:  a schema's array keywords.
Out: the grammar of the array: positions in order, each a child rule one container level
     deeper, with the bounds written as repetition (``{n}``, ``{0,m}``, ``*``), or, with
     ``contains``, a counting machine (containers.ArrayItems, capped at
     ``SchemaOptions.max_machine_states``) over matching and non-matching items.

Invariants: a position no value fits ends the array there (or, when ``minItems`` needs it, the
whole array is impossible: ``_NoValue``). ``contains`` counts only items whose schema is
enforced exactly; ``maxContains`` needs the exact complement of ``contains`` (composition's
``_complement``), else it is checked after decoding. In pretty mode the empty array is
``[]`` with no inner whitespace.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from corral.errors import SchemaError, UnsupportedSchemaError
from corral.grammar.containers import FIRST, NONEMPTY, ArrayItems, TooManyStates
from corral.grammar.json_schema.composition import _complement
from corral.grammar.json_schema.unique_items import UniqueItemsMixin
from corral.grammar.json_schema.util import _count, _NoValue, _ptr


class ArraysMixin(UniqueItemsMixin):
    def array_body(self, schema: dict[str, Any], pointer: str) -> str:
        ws = self.ws
        prefix = schema.get("prefixItems", [])
        items: Any = schema.get("items", True)
        if isinstance(items, list):  # draft-07 array form
            prefix, items = items, schema.get("additionalItems", True)
        if not isinstance(prefix, list):
            raise SchemaError("prefixItems must be an array", _ptr(pointer, "prefixItems"))
        lo = _count(schema, "minItems", pointer, 0) or 0
        hi = _count(schema, "maxItems", pointer, None)
        if hi is not None and lo > hi:
            raise SchemaError(f"minItems {lo} > maxItems {hi}", _ptr(pointer, "minItems"))
        k = len(prefix)
        if items is False:
            hi = k if hi is None else min(hi, k)
            if lo > hi:
                raise SchemaError(
                    f"minItems {lo} needs more items than prefixItems allows", _ptr(pointer, "minItems")
                )
        if self.unique_check(schema, pointer, hi is not None and hi <= 1):
            # uniqueItems: in the mask when the items come from a small finite set (unique_items).
            # Positions that all share one schema (prefixItems equal to each other, and items
            # false or equal to them too) are one unique group: where an item stands then
            # says nothing about which values it may take.
            shared = _one_item_schema(prefix, items)
            plain = shared is None or "contains" in schema
            body = None if plain else self.unique_array(schema, pointer, shared, lo, hi)
            if body is None and not plain and not prefix:  # free strings and integers (unique_items)
                body = self.distinct_array(schema, pointer, items, lo, hi)
            if body is not None:
                return body
            detail = (
                "with prefixItems or contains"
                if plain
                else "the items are neither a small finite set of values nor free strings (or open-ended"
                " patterns, or strings whose values the engine counts) or integers or numbers (free,"
                " or bounded to one terminal the engine counts) (max_unique_items"
                f" {self.opt.max_unique_items})"
            )
            self.cannot_enforce(
                _ptr(pointer, "uniqueItems"), "uniqueItems", f"checked after decoding ({detail})"
            )
        elems: list[str] = []
        for i, p in enumerate(prefix):
            try:
                elems.append(self.child_rule(p, _ptr(pointer, "prefixItems", i)))
            except _NoValue:
                if lo > i:
                    raise
                # No value fits position i: arrays end before it.
                hi = i if hi is None else min(hi, i)
                break
        rest = None
        if items is not False and len(elems) == k:
            try:
                rest = self.child_rule(items, _ptr(pointer, "items"))
            except _NoValue:
                if lo > k:
                    raise
                # No value fits an item past the prefix: arrays end with it (as items: false).
                hi = k if hi is None else min(hi, k)
        k = len(elems)
        prefix = prefix[:k]
        opening, sep, closing, _ = self.layout()

        def elem(i: int) -> str | None:
            return elems[i] if i < k else rest

        for key in ("minItems", "maxItems", "prefixItems", "items"):
            if key in schema:
                self.note(_ptr(pointer, key), key, "enforced")
        if "contains" in schema and hi != 0:
            base = [*prefix, items if rest is not None else False]
            start = self.contains_items(schema, pointer, base, elem, (lo, hi), sep)
            if start is not None:
                if self.pretty:
                    filled = f'"[" {opening} {start[0]} {closing} "]"' if start[0] else None
                    alts = ['"[" "]"'] if start[1] else []
                    alts += [filled] if filled else []
                    if not alts:
                        raise _NoValue("no array satisfies contains", _ptr(pointer, "contains"))
                    return " | ".join(alts)
                return f'"[" {ws} {start[0]} {ws} "]"'
        elif "contains" in schema:
            raise _NoValue("contains needs an item but maxItems is 0", _ptr(pointer, "contains"))

        # tail(i): the elements from position i on, each preceded by a separator.
        def tail(i: int) -> str:
            if hi is not None and i >= hi:
                return ""
            if i >= k:
                need = max(0, lo - i)
                more = None if hi is None else hi - i - need
                out = f"( {sep} {rest} ){{{need}}}" if need else ""
                if more is None:
                    out += f" ( {sep} {rest} )*"
                elif more > 0:
                    out += f" ( {sep} {rest} ){{0,{more}}}"
                return out.strip()
            body = f"{sep} {elem(i)} {tail(i + 1)}".strip()
            return body if i < lo else f"( {body} )?"

        if hi == 0:
            return f'"[" {ws} "]"'
        first = f"{elem(0)} {tail(1)}".strip() if (k > 0 or rest is not None) else ""
        if not first:
            return f'"[" {ws} "]"'
        if self.pretty:
            filled = f'"[" {opening} {first} {closing} "]"'
            return filled if lo > 0 else f'"[" "]" | {filled}'
        content = first if lo > 0 else f"( {first} )?"
        return f'"[" {ws} {content} {ws} "]"'

    def contains_items(
        self,
        schema: dict[str, Any],
        pointer: str,
        base: list[Any],
        elem: Callable[[int], str | None],
        bounds: tuple[int, int | None],
        sep: str,
    ) -> tuple[str | None, bool] | None:
        """The items of an array with `contains`, counted: (start rule or None when only the
        empty array fits, whether the empty array fits). None: no count is needed (minContains
        0) or it cannot be enforced (then reported as checked after decoding).

        At least minContains items match: each position holds either any item or a *matching*
        item (the item schema merged with contains), and matching items are counted up to
        minContains. With maxContains, the non-matching items must be told apart exactly: the
        complement of contains is expressible when contains is a type, const or enum of scalars,
        and then each item is either matching or non-matching, never both."""
        lo, hi = bounds
        k = len(base) - 1  # base[i]: schema of position i; base[k]: every later position
        c_schema = schema["contains"]
        keys = ["contains"]
        if self.old_draft:
            for key in ("minContains", "maxContains"):
                if key in schema:
                    self.note(_ptr(pointer, key), key, "ignored", "not a keyword before draft 2019-09")
            kmin: int = 1
            kmax: int | None = None
        else:
            kmin = _count(schema, "minContains", pointer, 1) or 0
            kmax = _count(schema, "maxContains", pointer, None)
            keys += [key for key in ("minContains", "maxContains") if key in schema]
        if kmax is not None and kmin > kmax:
            raise _NoValue(f"minContains {kmin} > maxContains {kmax}", _ptr(pointer, "minContains"))
        if hi is not None and kmin > hi:
            raise _NoValue(f"minContains {kmin} needs more items than maxItems", _ptr(pointer, "minContains"))

        def give_up(detail: str) -> None:
            for key in keys:
                self.cannot_enforce(_ptr(pointer, key), key, detail)

        if kmin == 0 and kmax is None:
            for key in keys:
                self.note(_ptr(pointer, key), key, "enforced", "minContains 0: no constraint")
            return None

        def where(i: int) -> str:
            return _ptr(pointer, "prefixItems", i) if i < k else _ptr(pointer, "items")

        match: list[str | None] = []
        try:
            for i, b in enumerate(base):
                if b is False:
                    match.append(None)
                    continue
                try:
                    rule, exact = self.exact_child({"allOf": [b, c_schema]}, where(i) + "&contains")
                except _NoValue:
                    match.append(None)
                    continue
                if not exact:
                    give_up("the contains schema is not enforced exactly")
                    return None
                match.append(rule)
        except UnsupportedSchemaError:
            give_up("contains cannot be merged with the item schema")
            return None
        plain: list[str | None] = [elem(i) for i in range(k + 1)]
        if kmax is not None:
            split = self.non_matching(base, c_schema, where)
            if split is None:
                self.cannot_enforce(
                    _ptr(pointer, "maxContains"),
                    "maxContains",
                    "items that match contains cannot be told apart from the others",
                )
                keys.remove("maxContains")
                kmax = None
                if kmin == 0:
                    for key in keys:
                        self.note(_ptr(pointer, key), key, "enforced", "minContains 0: no lower bound")
                    return None
            else:
                plain = split
        machine = ArrayItems(
            plain=lambda i: plain[min(i, k)],
            match=lambda i: match[min(i, k)],
            any=lambda i: elem(min(i, k)),
            positions=k,
            sep=sep,
            min_items=lo,
            max_items=hi,
            min_matches=kmin,
            max_matches=kmax,
            max_states=self.opt.max_machine_states,
        )
        rules: dict[str, str] = {}
        try:
            start = machine.build(self.new_rule, rules, NONEMPTY if self.pretty else FIRST)
        except TooManyStates:
            give_up("too many states to count the matching items")
            return None
        self.rules.update(rules)
        empty_ok = lo == 0 and kmin == 0
        if start is None and (not self.pretty or not empty_ok):
            raise _NoValue("no array satisfies contains", _ptr(pointer, "contains"))
        for key in keys:
            self.note(_ptr(pointer, key), key, "enforced")
        return start, empty_ok

    def non_matching(
        self, base: list[Any], c_schema: Any, where: Callable[[int], str]
    ) -> list[str | None] | None:
        """Per position, the items that do NOT match `c_schema` (exactly), or None when that
        complement is not expressible."""
        branches = _complement(self.deref(c_schema, "#"))
        if branches is None:
            return None
        out: list[str | None] = []
        try:
            for i, b in enumerate(base):
                alts = []
                if b is not False:
                    for j, branch in enumerate(branches):
                        try:
                            rule, exact = self.exact_child(
                                {"allOf": [b, branch]}, f"{where(i)}&not-contains-{j}"
                            )
                        except _NoValue:
                            continue
                        if not exact:
                            return None
                        alts.append(rule)
                out.append(
                    None if not alts else alts[0] if len(alts) == 1 else "( " + " | ".join(alts) + " )"
                )
        except UnsupportedSchemaError:
            return None
        return out


def _one_item_schema(prefix: list[Any], items: Any) -> Any:
    """The one schema every position of an array is under, when there is one: ``items`` without
    ``prefixItems``; else the prefix schemas when they are all equal and ``items`` is false or
    equal to them too; None otherwise. (``items`` false bounds the array to the prefix.)"""
    if not prefix:
        return None if items is False else items
    # Compared as JSON text: Python's == has True == 1, and {"const": true} is no {"const": 1}.
    texts = {json.dumps(p, sort_keys=True, default=str) for p in prefix}
    if len(texts) > 1 or (items is not False and json.dumps(items, sort_keys=True, default=str) not in texts):
        return None
    return prefix[0]
