"""``uniqueItems`` enforced in the mask: finite sets of values, free values and counted strings.

In:  an array schema with ``uniqueItems: true``, its ``items`` schema and item-count bounds.
Out: the array's grammar as one unique group (``%unique{min,max}(sep; v0, v1, ...)``,
     cpp/unique.hpp): one member per distinct item value, in any order, each at most once. The
     matcher keeps, per open array, the interned set of the values it has closed, so a token
     that would start a value already written is never allowed, and the array cannot close
     before ``minItems`` distinct values nor grow past ``maxItems``.

Which item schemas: those with a short list of candidates that holds every value they allow
(_finite_candidates): ``enum``/``const`` (scalars, objects, arrays), a ``type`` of finite kinds
(``boolean``, ``null``, ``integer`` between bounds, or a mix of them), ``anyOf``/``oneOf``
whose every branch has such a list, an ``allOf`` with one such branch. Each candidate is kept
when a draft 2020-12 validator accepts it under the whole item schema (as enum_body does), so
any sibling keyword filters exactly — which is why a ``$ref`` anywhere in the item schema (the
validator could not follow it) keeps the keyword off this path. Values are told apart by JSON
equality (``1``, ``1.0`` and ``1e0`` are one value, ``"a"`` and ``"\\u0061"`` too): each
member is ``literal_value`` of one value, which accepts the spellings of that value it writes
for an enum (``1`` and ``1.0``, every string escape; no exponent form), so the members'
languages are disjoint and a duplicate can never hide behind another spelling.

Free values (``distinct_array``): items that are free strings (``{"type": "string"}``, with at
most a ``minLength``), strings whose ``pattern``/``format`` the engine proves open-ended
(``open_string_item``: every live prefix of the content automaton reaches a cycle, so it has
infinitely many continuations: ``^[a-z]+``) or integers (no upper bound; lower bounds at or
above 0) become one distinct group (``%distinct{min,max}(sep; item)``, cpp/distinct.hpp): the
matcher remembers a 128-bit hash of each closed item's value (strings after unescaping,
integers by value; corral writes integers canonically, corral.grammar.numbers) and refuses the
tokens that would close an equal one. For those items a refused close is the only dead end:
every open item can still become infinitely many values.

Counted strings (``bounded_item``): a string with ``maxLength``, or a
``pattern``/``format`` the probe cannot prove open-ended (``maxLength: 1``, ``^[ab]$``,
``^[a-z]+$`` whose Python ``$`` allows a final newline that ends the item, ``format: date``,
``uuid``, ``date-time``, ``time``, ``duration``, ``ipv4``), has prefixes with few values left
(after ``"ab`` under ``maxLength: 2`` only "ab" itself), so refusing the close of a held value
alone would leave a dead end. When its item rule is one quoted JSON string terminal, the
engine counts the values after every state of its automaton (``probe_item_values``,
cpp/item_values.hpp: canonical spellings, capped at 4,097) and the matcher also refuses the
prefixes whose every value the array holds (checked only where that count is at most the number
held) and closes the array once it holds every value; the group's ``maxItems`` is lowered to
the number of values when that is smaller, and a ``minItems`` above it has no value
(``_NoValue``). Formats whose automaton the converter splits into several terminals
(``email``, ``hostname``, ``uri``, ``ipv6``) stay in the report.

Counted integers (``bounded_item`` too): integers below a ``maximum`` or above a negative
``minimum`` with too many values to list (``minimum: -150, maximum: 150``; ``minimum: -20``,
where "-2" can only become -2 or -20) have prefixes with few values left
("15" under ``maximum: 150``: 15 or 150). Their item rule is one terminal of canonical integers
(corral.grammar.numbers), so the engine counts their values as it counts strings' (distinct
spellings are distinct values) and the matcher refuses the prefixes whose every value the array
holds; unlike a string, an integer is a value in the middle of its text ("15" closes as 15 or
goes on to 150), so a held "15" may still go on and a free one may close where it cannot go
on. With a ``multipleOf`` the rule is several rules, and the keyword stays in the report.

Counted numbers (``bounded_item`` as well): a ``number`` with or without bounds (no
``multipleOf``) is written in plain decimal spellings inside a unique array (``_PLAIN_NUMBERS``:
every value keeps one; exponents elsewhere in the schema are untouched) and compared as exact
decimals, as the JSON Schema spec says (``1.5`` = ``1.50``, ``0`` = ``-0.0``). Under exact
equality an exponent prefix like ``1e30`` would still have infinitely many values, but
``0e`` has one, which is why exponents go. A decimal prefix has one value or infinitely many
(the ranges are intervals and decimals are dense): one where a bound pins it (``5`` under
``maximum: 5``, ``-`` under ``minimum: 0``); the engine finds those states
(cpp/item_values.hpp) and the matcher refuses them when that value is held. Python's
``jsonschema`` compares parsed floats instead, so ``[0.1, 0.10000000000000001]`` (17
significant digits) repeats there and not here; the report's detail says so.

How long: the matcher's memory (32 bytes an item, plus the decoded text of counted strings)
and the mask's correction grow with the items, so ``SchemaOptions.max_unique_items`` (default
``MAX_REMEMBERED_ITEMS``, 256) bounds them. A ``maxItems`` at most that (or items with at most
that many values) is enforced exactly; an array without ``maxItems`` (the common case) or with
a larger one is enforced and capped at ``max_unique_items`` items (the mask closes the array
there; the report's detail says so), and ``max_unique_items=0`` keeps such arrays checked
after decoding. A ``minItems`` over the cap keeps the keyword in the report.

Bounds: at most ``MAX_UNIQUE_VALUES`` (32) distinct values: the matcher's per-array set is a
bitset of that many bits and the grammar has two productions per value, but what sets the cap is
the mask: each set of values seen is a new frontier of up to that many member terminals, walked
cold once (``bench/bench_unique_items.py``, Llama 3.2: 32 integers give a mask max of 3.4 ms,
64 give 15 ms, 101 give 34 ms). Past the cap (unless the items are free values or counted
strings), for other item sets (objects that are not enum values, mixed types), with
``contains``, and with ``prefixItems`` unless every position has one schema (arrays.py: then
the group is over that schema, at most the prefix long when ``items`` is false), the keyword
stays in the report as checked after decoding — never silently unenforced.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from corral import errors as corral_errors
from corral.errors import SchemaError
from corral.grammar.json_schema.core import ConverterCore
from corral.grammar.json_schema.keywords import _ANNOTATIONS, _PLAIN_NUMBERS, SLOT_KEYWORD
from corral.grammar.json_schema.util import _NoValue, _ptr

#: The most distinct item values a unique array is enforced for (see the module docstring).
MAX_UNIQUE_VALUES = 32
#: The report detail of a distinct array capped at ``max_unique_items`` items (for people: the
#: linter's W210 reads the entry's ``capped_at`` field, not this text).
CAPPED_AT = "capped at {cap} items (max_unique_items): the mask closes the array there"
#: The default of ``SchemaOptions.max_unique_items``: the most items a distinct group remembers.
MAX_REMEMBERED_ITEMS = 256
# Item-schema keywords of a free string the distinct group handles (no maxLength/pattern/format).
_FREE_STRING = frozenset({"type", "minLength"})
# ... of a string whose pattern/format the engine proves open-ended (open_string_item), or
# whose values the engine counts (bounded_item).
_OPEN_STRING = frozenset({"type", "minLength", "pattern", "format"})
_BOUNDED_STRING = _OPEN_STRING | {"maxLength"}
# probe_item_values' cap: that many values or more (cpp/item_values.hpp).
_MANY_VALUES = 4097
# ... of an integer (lower bounds at or above 0 only: no prefix then has finitely many values).
_FREE_INTEGER = frozenset({"type", "minimum", "exclusiveMinimum"})
# ... of an integer whose values the engine counts (bounded_item: canonical integers).
_BOUNDED_INTEGER = _FREE_INTEGER | {"maximum", "exclusiveMaximum", "multipleOf"}
# ... of a number (bounded_item over its plain decimal spellings).
_NUMBER = frozenset({"type", "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"})
# What bounded_item's items are, for the report.
_COUNTED_STRINGS = "strings with finitely many values after some prefix (the matcher counts them)"
_COUNTED_INTEGERS = "integers with finitely many values after some prefix (the matcher counts them)"
_COUNTED_NUMBERS = (
    "numbers in plain decimal spellings, compared as exact decimals as the JSON Schema spec"
    " says (Python's jsonschema compares parsed floats: 0.1 and 0.10000000000000001 are one"
    " value there)"
)
# Bounded integer ranges wider than this are not enumerated.
_MAX_RANGE = 4 * MAX_UNIQUE_VALUES
# Most anyOf/oneOf/allOf levels followed to find an item schema's finite candidates.
_MAX_DEPTH = 4


def _schema_has_ref(node: Any) -> bool:
    """Is there a ``$ref`` in the schema (not counting ``const``/``enum`` values, which are data)?"""
    if isinstance(node, dict):
        return "$ref" in node or any(
            _schema_has_ref(v) for k, v in node.items() if k not in ("const", "enum")
        )
    if isinstance(node, list):
        return any(_schema_has_ref(v) for v in node)
    return False


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _integer_span(s: dict[str, Any]) -> range | None:
    """The integers between a schema's numeric bounds that are multiples of its ``multipleOf``
    when that is a positive integer (every integer it allows, and maybe others), or None when
    unbounded on a side, malformed, or more than _MAX_RANGE of them."""
    bound = [s.get(k) for k in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")]
    if any(b is not None and (isinstance(b, bool) or not isinstance(b, (int, float))) for b in bound):
        return None
    lows = [math.ceil(b) for b in bound[:2] if b is not None and math.isfinite(b)]
    highs = [math.floor(b) for b in bound[2:] if b is not None and math.isfinite(b)]
    if not lows or not highs:
        return None
    step = s.get("multipleOf")
    k = step if isinstance(step, int) and not isinstance(step, bool) and step > 0 else 1
    first = -(-max(lows) // k) * k  # the first multiple of k from the lower bound
    # (Counted, not len(range): bounds like 1e300 overflow a C size.)
    if (min(highs) - first) // k + 1 > _MAX_RANGE:
        return None
    return range(first, min(highs) + 1, k)


def _integral_step(s: dict[str, Any]) -> bool:
    """Does ``multipleOf`` make every number the schema allows an integer (a positive integer
    step; a float one such as 2.0 counts)?"""
    step = s.get("multipleOf")
    return (
        not isinstance(step, bool)
        and isinstance(step, (int, float))
        and step >= 1
        and float(step).is_integer()
    )


def canonical(v: Any) -> str | None:
    """A text equal for exactly the JSON-equal values (numbers by value, keys in any order), or
    None for a value that is not JSON (a non-finite number)."""
    if v is None or isinstance(v, bool):
        return json.dumps(v)
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        d = Decimal(str(v))
        return "n0" if d == 0 else "n" + str(d.normalize())
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        parts = [canonical(x) for x in v]
        return None if None in parts else "[" + ",".join(p for p in parts if p is not None) + "]"
    if isinstance(v, dict):
        out = []
        for k in sorted(v):
            c = canonical(v[k])
            if c is None or not isinstance(k, str):
                return None
            out.append(json.dumps(k, ensure_ascii=False) + ":" + c)
        return "{" + ",".join(out) + "}"
    return None


class UniqueItemsMixin(ConverterCore):
    if TYPE_CHECKING:
        # literals.py
        def literal_value(self, v: Any, pointer: str, integer_only: bool = False) -> str: ...

    def finite_item_values(self, items: Any, pointer: str) -> tuple[list[list[Any]], bool] | None:
        """The distinct values an item schema allows (each as its listed forms: one value, or an
        object listed with its keys in several orders), when they are few (at most
        MAX_UNIQUE_VALUES), and whether integers take their canonical spelling; None otherwise
        (also when no value fits: the plain path says so). The candidates (_finite_candidates)
        hold every value the schema allows; each is kept when a validator accepts it under the
        whole item schema, so the set is exact."""
        from corral.grammar.json_schema.literals import _quick_check

        s = self.deref(items, pointer)
        if not isinstance(s, dict) or SLOT_KEYWORD in s:
            return None
        found = self._finite_candidates(s, pointer, 0)
        if found is None:
            return None
        candidates, integer_only = found
        # Per distinct value, its listed forms: JSON-equal enum entries are one value, and objects
        # listed twice with their keys in two orders keep both orders (as a plain enum does).
        kept: dict[str, list[Any]] = {}
        for v in candidates:
            key = canonical(v)
            if key is None:
                return None  # (not JSON: the plain path raises the error)
            if key in kept:
                if isinstance(v, dict) and all(list(v) != list(o) for o in kept[key]):
                    kept[key].append(v)
            elif _quick_check(s, v, pointer):
                kept[key] = [v]
        if not kept or len(kept) > MAX_UNIQUE_VALUES:
            return None
        return list(kept.values()), integer_only

    def _finite_candidates(self, s: Any, pointer: str, depth: int) -> tuple[list[Any], bool] | None:
        """A finite list of values holding every value schema `s` allows (not only those), and
        whether its numbers are integers written canonically; None when there is no such short
        list. From ``const``/``enum``, a ``type`` of finite kinds (booleans, null, integers
        between bounds), the union of ``anyOf``/``oneOf`` branches that each have one, or one
        ``allOf`` branch that has one. Only for schemas without ``$ref`` (whose filter,
        _quick_check, could not follow it) and within _MAX_DEPTH levels."""
        if not isinstance(s, dict) or depth > _MAX_DEPTH or (depth == 0 and _schema_has_ref(s)):
            return None
        if SLOT_KEYWORD in s:
            return None  # (its values come with each request)
        types = self.types_of(s, pointer) if "type" in s else []
        integer_only = "integer" in types and "number" not in types
        if "const" in s:
            return [s["const"]], integer_only
        if "enum" in s:
            if not isinstance(s["enum"], list) or len(s["enum"]) > _MAX_RANGE:
                return None
            return list(s["enum"]), integer_only
        for key in ("anyOf", "oneOf"):
            branches = s.get(key)
            if isinstance(branches, list) and branches:
                union: list[Any] = []
                ints = True
                for b in branches:
                    got = self._finite_candidates(b, pointer, depth + 1)
                    if got is None:
                        break
                    union += got[0]
                    ints = ints and (got[1] or not any(_is_number(v) for v in got[0]))
                else:
                    if len(union) <= 2 * _MAX_RANGE:
                        return union, ints or integer_only
        if isinstance(s.get("allOf"), list):
            for b in s["allOf"]:
                got = self._finite_candidates(b, pointer, depth + 1)
                if got is not None:
                    return got[0], got[1] or integer_only
        step = s.get("multipleOf")
        if not types or (
            step is not None
            and (isinstance(step, bool) or not isinstance(step, (int, float)) or not step > 0)
        ):
            return None  # (a malformed multipleOf: the plain path names it)
        out: list[Any] = []
        for t in types:
            if t == "boolean":
                out += [False, True]
            elif t == "null":
                out.append(None)
            elif t == "integer" or (t == "number" and _integral_step(s)):
                # (a number whose multipleOf is an integer is an integer: 4, or 4.0 spelled so)
                span = _integer_span(s)
                if span is None:
                    return None
                out += list(span)
            else:
                return None  # strings, other numbers, arrays, objects: no short list
        return out, integer_only

    def unique_array(
        self, schema: dict[str, Any], pointer: str, items: Any, lo: int, hi: int | None
    ) -> str | None:
        """The array as a unique group (see the module docstring), or None when its item set is
        not finite and small (the caller then reports uniqueItems as checked after decoding).
        Raises _NoValue when minItems needs more distinct values than the items allow."""
        where = _ptr(pointer, "items")
        found = self.finite_item_values(items, where)
        if found is None:
            return None
        values, integer_only = found
        n = len(values)
        if lo > n:
            raise _NoValue(
                f"minItems {lo} needs more distinct items than the {n} values the items schema allows",
                _ptr(pointer, "uniqueItems"),
            )
        top = n if hi is None else min(hi, n)
        self.depth += 1  # the items are one container level deeper (their literals' layout)
        try:
            members = [
                " | ".join(self.literal_value(v, where, integer_only) for v in forms) for forms in values
            ]
        finally:
            self.depth -= 1
        parts = ", ".join(f"( {m} )" for m in members)
        return self._group_array(
            schema, pointer, "unique", f"{{{max(lo, 1)},{top}}}", parts, lo,
            f"{n} distinct item values, kept by the matcher",
        )  # fmt: skip

    def distinct_item(self, items: Any, where: str) -> tuple[str, str, int | None] | None:
        """The item rule of a distinct group, what its items are and how many values they have
        (None: infinitely many), for item schemas from whose every open prefix infinitely many
        values remain, or strings, bounded integers and numbers whose values the engine counts
        (see the module docstring); None for any other item schema."""
        # (the item rule is built from the $ref's target: one terminal, which the engine can
        # probe and the matcher read as the item, rather than a rule naming another)
        s = self.deref(items, where)
        if not isinstance(s, dict):
            return None
        keys = set(s) - _ANNOTATIONS
        kind = s.get("type")
        if isinstance(kind, list) and len(kind) == 1:
            kind = kind[0]
        if kind == "string" and keys <= _FREE_STRING:
            n = s.get("minLength", 0)
            if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= self.opt.max_counted_length:
                return None
            return self.child_rule(s, where), "free strings", None
        if kind == "string" and keys <= _OPEN_STRING:
            found = self.open_string_item(s, where)
            if found is not None:
                return (*found, None)
        if kind == "string" and keys <= _BOUNDED_STRING:
            return self.bounded_item(s, where, _COUNTED_STRINGS)
        if (
            kind == "integer"
            and keys <= _FREE_INTEGER
            and all(
                # A lower bound at or above 0 keeps every prefix open-ended (digits can always be
                # appended); a negative one or an upper bound makes prefixes like "-1" finite.
                not isinstance(s[k], bool) and isinstance(s[k], (int, float)) and 0 <= s[k] < math.inf
                for k in keys - {"type"}
            )
        ):
            return self.child_rule(s, where), "integers", None
        if kind == "integer" and keys <= _BOUNDED_INTEGER:
            return self.bounded_item(s, where, _COUNTED_INTEGERS)
        if kind == "number" and keys <= _NUMBER and not s.get(_PLAIN_NUMBERS):
            # Plain decimal spellings (every value keeps one), whose values the engine tells
            # apart after every prefix: one, or infinitely many.
            return self.bounded_item({**s, _PLAIN_NUMBERS: True}, where, _COUNTED_NUMBERS)
        return None

    def open_string_item(self, items: Any, where: str) -> tuple[str, str] | None:
        """A string item with a ``pattern``/``format`` (no ``maxLength``) whose language has
        infinitely many continuations after every live prefix (``[a-z]+``, not ``^[ab]$`` nor a
        ``$``-anchored one: Python's ``$`` also allows one final newline, after which nothing
        may follow): the item rule, or None. The engine decides on the very content automaton
        the rule uses (``probe_open_ended``); the attempt leaves no trace when it fails."""
        from corral import _native

        saved = self.snapshot()
        item = self.child_rule(items, where)
        body = self.rules.get(item, "")
        quote = '"\\""'
        inner = body[len(quote) + 1 : -len(quote) - 1].strip()
        quoted = body.startswith(quote + " ") and body.endswith(" " + quote)
        if not quoted or not inner.startswith(("/", "(")):
            self.restore(saved)
            return None
        try:
            open_ended = _native.probe_open_ended(inner, self.opt.max_product_states, {}) == 1
        except corral_errors.CompileError:
            open_ended = False
        if not open_ended:
            self.restore(saved)
            return None
        return item, "strings with infinitely many continuations after every prefix"

    def bounded_item(self, items: Any, where: str, what: str) -> tuple[str, str, int | None] | None:
        """A string item with ``maxLength`` or a ``pattern``/``format`` the probe did not prove
        open-ended, or an integer with bounds that leave some prefix finitely many values: the
        item rule, what its items are (``what``) and how many values it has (None: more than
        the engine counts), when the engine can count the values after every prefix of its
        automaton (``probe_item_values``: a quoted JSON string terminal, or a terminal of
        canonical integers; cpp/item_values.hpp) - the matcher then refuses the prefixes whose
        every value the array holds; None otherwise (the attempt leaves no trace)."""
        from corral import _native

        saved = self.snapshot()
        item = self.child_rule(items, where)
        body = self.rules.get(item, "")
        try:
            n = _native.probe_item_values(body, self.opt.max_product_states, {}) if body else -1
        except corral_errors.CompileError:
            n = -1
        if n < 1:
            self.restore(saved)
            return None
        return item, what, (n if n < _MANY_VALUES else None)

    def distinct_array(
        self, schema: dict[str, Any], pointer: str, items: Any, lo: int, hi: int | None
    ) -> str | None:
        """The array as a distinct group when its items are free values or counted strings
        (distinct_item): exact when maxItems is at most ``max_unique_items`` (or the items
        have at most that many values), else capped there; None otherwise (also when minItems
        is over the cap). Raises _NoValue when minItems needs more distinct values than the
        items have."""
        cap = self.opt.max_unique_items
        if hi == 0 or cap == 0 or lo > cap:
            return None
        found = self.distinct_item(items, _ptr(pointer, "items"))
        if found is None:
            return None
        item, what, values = found
        if values is not None:
            if lo > values:
                raise _NoValue(
                    f"minItems {lo} needs more distinct items than the {values} values the items"
                    " schema allows",
                    _ptr(pointer, "uniqueItems"),
                )
            if hi is None or hi > values:
                hi = values  # (every value written: the array can only close)
        detail = f"{what}, kept distinct by the matcher (it remembers each closed item)"
        capped_at = None
        if hi is None or hi > cap:
            detail += f"; {CAPPED_AT.format(cap=cap)}"
            hi = capped_at = cap
        return self._group_array(
            schema, pointer, "distinct", f"{{{max(lo, 1)},{hi}}}", item, lo, detail, capped_at
        )

    def _group_array(
        self,
        schema: dict[str, Any],
        pointer: str,
        kind: str,
        counts: str,
        body: str,
        lo: int,
        detail: str,
        capped_at: int | None = None,
    ) -> str:
        """The array around a ``%unique`` / ``%distinct`` group rule (``kind``) of ``body``, in
        the layout of the whitespace mode, with the keywords it enforces noted (``capped_at``:
        the item count the group closes at below the schema's own bound, see ReportEntry)."""
        opening, sep, closing, _ = self.layout()
        group = self.new_rule(kind)
        self.rules[group] = f"%{kind}{counts}( {sep} ; {body} )"
        for key in ("minItems", "maxItems", "items", "prefixItems", "additionalItems"):
            if key in schema:
                self.note(_ptr(pointer, key), key, "enforced")
        self.note(_ptr(pointer, "uniqueItems"), "uniqueItems", "enforced", detail, capped_at)
        if self.pretty:
            filled = f'"[" {opening} {group} {closing} "]"'
            return filled if lo > 0 else f'"[" "]" | {filled}'
        content = group if lo > 0 else f"( {group} )?"
        return f'"[" {self.ws} {content} {self.ws} "]"'

    def unique_check(self, schema: dict[str, Any], pointer: str, bounded_to_one: bool) -> bool:
        """Read ``uniqueItems``: True when the array must be a unique group (the caller tries
        unique_array); otherwise the keyword is reported here (no constraint, or trivially
        enforced with at most one item)."""
        if "uniqueItems" not in schema:
            return False
        unique = schema["uniqueItems"]
        where = _ptr(pointer, "uniqueItems")
        if not isinstance(unique, bool):
            raise SchemaError("uniqueItems must be a boolean", where)
        if not unique:
            self.note(where, "uniqueItems", "enforced", "false: no constraint")
            return False
        if bounded_to_one:
            self.note(where, "uniqueItems", "enforced", "at most one item")
            return False
        return True
