"""Composition: ``anyOf``/``oneOf`` disjointness and exclusivity, ``if``/``then``/``else``, ``not``.

In:  a schema with ``if`` (rewritten here), ``oneOf`` branches (told apart or made exclusive
     here), ``not`` (rewritten here), or a schema whose negation is wanted (``contains``
     counted up to ``maxContains``, an ``if`` condition).
Out: ``if_then_else``: the schema as ``anyOf: [if ∧ then, not-if ∧ else]``; ``negation``: the
     schema with ``not S`` replaced by ``anyOf`` of S's complement (an ``enum`` filtered by S);
     ``exclusive_one_of``: ``oneOf`` as ``anyOf`` of "branch i ∧ complement of every other
     branch it may overlap"; ``provably_disjoint``: True only when no JSON value can match two
     branches; ``_complement``: schemas whose union is exactly the values that do not match
     (De Morgan over the keywords, see there), or None. Each rewrite returns None when a
     complement is not expressible; the keyword is then checked after decoding.

Invariants: a negation is exact or absent — never an approximation (where the converter then
writes a complement branch only approximately, it reports that keyword as checked after
decoding, so ``validate`` covers it). Numbers outside a value set or bound become open intervals
written in plain decimal spellings (``_PLAIN_NUMBERS``), since an exponent spelling near a bound
could parse to the bound itself; strings outside a pattern or value set are the string automaton
minus that pattern (``_NOT_MATCHING``, the grammar's ``-``), read with Python's Unicode classes.
A complement has at most _MAX_BRANCHES branches and follows _MAX_DEPTH levels, so compile cost
stays bounded. ``provably_disjoint`` answers False whenever it cannot prove disjointness
(including on malformed branches).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from corral.errors import SchemaError
from corral.grammar import formats
from corral.grammar.json_schema.core import ConverterCore
from corral.grammar.json_schema.keywords import (
    _ANNOTATIONS,
    _FRACTION,
    _KNOWN,
    _NOT_MATCHING,
    _NOT_MULTIPLE_OF,
    _PLAIN_NUMBERS,
)
from corral.grammar.json_schema.literals import _satisfies
from corral.grammar.json_schema.util import _has_ref, _json_equal, _kind, _NoValue, _ptr


class CompositionMixin(ConverterCore):
    def if_then_else(self, schema: dict[str, Any], pointer: str) -> dict[str, Any] | None:
        """`schema` with if/then/else rewritten as ``anyOf: [if ∧ then, not-if ∧ else]`` when
        "not-if" is expressible (see _not_if); None otherwise (then they are checked after
        decoding)."""
        cond = self.deref(schema["if"], _ptr(pointer, "if"))
        not_if = _not_if(cond, self.resolver(pointer))
        if not_if is None:
            return None
        rest = {k: v for k, v in schema.items() if k not in ("if", "then", "else")}
        branches = [
            {"allOf": [schema["if"], schema.get("then", True)]},
            {"allOf": [not_if, schema.get("else", True)]},
        ]
        for key in ("if", "then", "else"):
            if key in schema:
                self.note(_ptr(pointer, key), key, "enforced", "rewritten as anyOf: [if+then, not-if+else]")
        if "anyOf" in rest or "oneOf" in rest:
            return {**rest, "allOf": [*rest.get("allOf", []), {"anyOf": branches}]}
        return {**rest, "anyOf": branches}

    def resolver(self, pointer: str) -> Resolve:
        """A `$ref` resolver for _complement (errors name `pointer`)."""
        return lambda ref: self.resolve_ref(ref, pointer)[0]

    def before_draft6(self) -> bool:
        """Is the document draft-04 or older? Then ``const``, ``contains`` and ``propertyNames``
        are no keywords, so complements (which read them as keywords) are not written."""
        uri = self.root.get("$schema") if isinstance(self.root, dict) else None
        return isinstance(uri, str) and re.search(r"draft-0[0-5]", uri) is not None

    def negation(self, schema: dict[str, Any], pointer: str) -> dict[str, Any] | None:
        """`schema` with ``not`` rewritten as what the grammar enforces: an ``enum``/``const``
        filtered by it, or ``anyOf`` of the complement branches (see _complement); None when the
        complement is not expressible (then ``not`` is checked after decoding). Raises _NoValue
        when nothing is left."""
        where = _ptr(pointer, "not")
        if self.before_draft6():
            return None
        sub = schema["not"]
        rest = {k: v for k, v in schema.items() if k != "not"}
        if "enum" in rest or "const" in rest:
            values = [rest["const"]] if "const" in rest else rest["enum"]
            if not isinstance(values, list) or _has_ref(sub) or not isinstance(sub, (bool, dict)):
                return None  # (a $ref cannot be followed by the filter's validator)
            if "const" in rest and "enum" in rest and isinstance(rest["enum"], list):
                values = [v for v in values if any(_json_equal(v, e) for e in rest["enum"])]
            kept = [v for v in values if sub is False or (sub is not True and not _satisfies(sub, v, where))]
            if not kept:
                raise _NoValue("every enum/const value matches the schema under not", where)
            self.note(where, "not", "enforced", "enum/const values that match it are left out")
            rest.pop("const", None)
            return {**rest, "enum": kept}
        branches = _complement(sub, self.resolver(where))
        if branches is None:
            return None
        if not branches:
            raise _NoValue("every value matches the schema under not", where)
        self.note(where, "not", "enforced", f"its complement: {len(branches)} alternatives")
        if "anyOf" in rest or "oneOf" in rest:
            return {**rest, "allOf": [*rest.get("allOf", []), {"anyOf": branches}]}
        return {**rest, "anyOf": branches}

    def needs_exclusion(self, schema: dict[str, Any], pointer: str) -> bool:
        """Does `schema`'s ``oneOf`` need more than ``anyOf`` (two or more branches not proven
        disjoint)? False for a malformed ``oneOf`` (the caller reports it)."""
        branches = schema.get("oneOf")
        if not isinstance(branches, list) or len(branches) < 2:
            return False
        return not self.provably_disjoint(branches, _ptr(pointer, "oneOf"))

    def exclusive_one_of(self, schema: dict[str, Any], pointer: str) -> dict[str, Any] | None:
        """`schema` with its ``oneOf`` rewritten as ``anyOf`` of "branch i and none of the others"
        (each other branch's complement, see _complement; pairs proven disjoint are skipped), or
        None when a complement is not expressible or the alternatives would exceed
        _MAX_BRANCHES (then exactly-one is checked after decoding). Raises _NoValue when no value
        can match exactly one branch."""
        where = _ptr(pointer, "oneOf")
        branches = schema["oneOf"]
        if len(branches) > _MAX_BRANCHES or self.before_draft6():
            return None
        resolve = self.resolver(where)
        comps: dict[int, list[Any] | None] = {}
        out = []
        for i, b in enumerate(branches):
            parts = [b]
            size = 1
            for j, other in enumerate(branches):
                if j == i or self.provably_disjoint([b, other], where):
                    continue
                if j not in comps:
                    comps[j] = _complement(other, resolve)
                c = comps[j]
                if c is None:
                    return None
                if not c:
                    parts = []  # the other branch matches every value: i is never alone
                    break
                parts.append(_any_of(c))
                size *= len(c)
                if size > _MAX_BRANCHES:
                    return None
            if parts:
                out.append(_all_of(*parts))
        if not out:
            raise _NoValue("no value matches exactly one branch of oneOf", where)
        self.note(where, "oneOf", "enforced", "each branch without the values of the others")
        rest = {k: v for k, v in schema.items() if k != "oneOf"}
        if "anyOf" in rest:
            return {**rest, "allOf": [*rest.get("allOf", []), {"anyOf": out}]}
        return {**rest, "anyOf": out}

    def value_kinds(self, schema: Any, pointer: str) -> set[str] | None:
        """The JSON types a schema can match (integer counted as number), or None if unknown."""
        schema = self.deref(schema, pointer)
        if not isinstance(schema, dict):
            return None
        if "const" in schema:
            return {_kind(schema["const"])}
        if "enum" in schema and isinstance(schema["enum"], list):
            return {_kind(v) for v in schema["enum"]}
        t = schema.get("type")
        if t is None:
            return None
        listed = {t} if isinstance(t, str) else set(t)
        return {"number" if x == "integer" else x for x in listed}

    def discriminators(self, schema: Any, pointer: str) -> dict[str, list[Any]]:
        """Required properties with const/enum values: name -> allowed values."""
        schema = self.deref(schema, pointer)
        if not isinstance(schema, dict) or schema.get("type") not in ("object", ["object"]):
            return {}  # a branch that also matches non-objects is not told apart by a property
        out: dict[str, list[Any]] = {}
        props = schema.get("properties", {})
        for name in schema.get("required", []):
            sub = self.deref(props.get(name), pointer) if isinstance(props, dict) else None
            if isinstance(sub, dict) and "const" in sub:
                out[name] = [sub["const"]]
            elif isinstance(sub, dict) and isinstance(sub.get("enum"), list):
                out[name] = list(sub["enum"])
        return out

    def provably_disjoint(self, branches: list[Any], pointer: str) -> bool:
        """Can no JSON value match two branches? (Then oneOf is anyOf, enforced exactly.)"""
        try:
            kinds = [self.value_kinds(b, pointer) for b in branches]
            if all(k is not None for k in kinds):
                pairs_ok = all(not (kinds[i] & kinds[j]) for i in range(len(kinds)) for j in range(i))  # type: ignore[operator]
                if pairs_ok:
                    return True
            discs = [self.discriminators(b, pointer) for b in branches]
            common = set.intersection(*(set(d) for d in discs)) if discs else set()
            for name in common:
                if all(
                    not any(_json_equal(x, y) for x in discs[i][name] for y in discs[j][name])
                    for i in range(len(discs))
                    for j in range(i)
                ):
                    return True
        except SchemaError:
            return False
        return False


# Bounds of one complement: branches it may produce (allOf of anyOf distributes, so the branch
# count is what the conversion pays), and $ref/not/properties levels it follows.
_MAX_BRANCHES = 64
_MAX_DEPTH = 8
# Most declared properties beside an ``additionalProperties: false`` that is negated (its
# violators are one branch per subset of them, _extra_violators).
_MAX_EXTRA_DECLARED = 5
# Most characters of the strings a complement excludes (one automaton of about that many states).
_MAX_EXCLUDED_CHARS = 20000
_FLIPPED = {
    "minimum": "exclusiveMaximum",
    "exclusiveMinimum": "maximum",
    "maximum": "exclusiveMinimum",
    "exclusiveMaximum": "minimum",
}
_KINDS = ("null", "boolean", "object", "array", "string", "number")
# Count keywords: (keyword, the type it counts, the keyword its violators satisfy, offset).
_COUNTS = {
    "minLength": ("string", "maxLength", -1),
    "maxLength": ("string", "minLength", 1),
    "minItems": ("array", "maxItems", -1),
    "maxItems": ("array", "minItems", 1),
    "minProperties": ("object", "maxProperties", -1),
    "maxProperties": ("object", "minProperties", 1),
}

Resolve = Callable[[str], Any]


def _complement(c_schema: Any, resolve: Resolve | None = None, depth: int = 0) -> list[Any] | None:
    """Schemas whose union is exactly the values that do NOT match `c_schema`, or None when that
    is not expressible (or past _MAX_BRANCHES / _MAX_DEPTH). De Morgan over the keywords: a value
    fails a schema iff it violates one of its keywords, and each keyword's violators are written
    when they are a schema — ``type``, ``const``/``enum`` of scalars, numeric bounds, the
    counts, ``pattern`` (via the grammar's ``-``, keyword _NOT_MATCHING), an integer
    ``multipleOf`` (fractions and the integers of _NOT_MULTIPLE_OF), ``required``,
    ``properties``, ``additionalProperties`` (when it admits no value: _extra_violators), a
    ``format`` the grammar has a regex for, ``items``, ``prefixItems`` (without ``items``),
    ``contains``, ``not``, ``allOf``, ``anyOf`` and ``$ref`` (with `resolve`). Numbers outside
    a value set or bound are written in plain decimal spellings."""
    if depth > _MAX_DEPTH:
        return None
    if c_schema is True:
        return []
    if c_schema is False:
        return [True]
    if not isinstance(c_schema, dict):
        return None
    if "$ref" in c_schema and any(k not in _ANNOTATIONS and k != "$ref" for k in c_schema):
        return None  # (before 2019-09 a $ref's siblings are ignored: a complement would differ)
    out: list[Any] = []
    for key, value in c_schema.items():
        if key in _ANNOTATIONS or (key not in _KNOWN and not key.startswith("$corral:")):
            continue  # an annotation (unknown keywords included): nothing violates it
        if key in ("then", "else") and "if" not in c_schema:
            continue
        if key in ("minContains", "maxContains") and "contains" not in c_schema:
            continue
        got = _violators(key, value, c_schema, resolve, depth)
        if got is None:
            return None
        out.extend(got)
        if len(out) > _MAX_BRANCHES:
            return None
    seen: set[str] = set()
    unique = []
    for b in out:
        k = json.dumps(b, sort_keys=True, default=str)
        if k not in seen:
            seen.add(k)
            unique.append(b)
    return unique


def _violators(
    key: str, value: Any, schema: dict[str, Any], resolve: Resolve | None, depth: int
) -> list[Any] | None:
    """The values that violate one keyword of `schema` (see _complement), or None."""
    if key == "type":
        listed = {value} if isinstance(value, str) else set(value) if isinstance(value, list) else None
        if listed is None or not all(isinstance(x, str) for x in listed):
            return None
        fractions = "integer" in listed and "number" not in listed
        others = [x for x in _KINDS if x not in listed and not (fractions and x == "number")]
        # Numbers that are not integers are no type, but a number terminal (_FRACTION).
        return [{"type": others}] * bool(others) + [{"type": "number", _FRACTION: True}] * fractions
    if key in ("const", "enum"):
        if key == "enum" and "const" in schema:
            return []  # written with the const
        return _not_values(schema)
    if key in _FLIPPED:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None
        return [{"type": "number", _FLIPPED[key]: value, _PLAIN_NUMBERS: True}]
    if key in _COUNTS:
        kind, other, step = _COUNTS[key]
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return None
        if step < 0 and value == 0:
            return []  # every count is at least 0
        return [{"type": kind, other: value + step}]
    if key == "pattern":
        return [{"type": "string", _NOT_MATCHING: [value]}] if isinstance(value, str) else None
    if key == "multipleOf":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return None  # (a decimal step: validators divide in floating point, no exact set)
        # Non-integral numbers are multiples of no integer (their 15-digit spellings stay
        # non-integral as floats, see _FRACTION); integers are judged exactly (Python's %).
        parts: list[Any] = [{"type": "number", _FRACTION: True}]
        if value > 1:  # (every integer is a multiple of 1)
            parts.append({"type": "integer", _NOT_MULTIPLE_OF: [value]})
        return parts
    if key == "required":
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            return None
        return [{"type": "object", "properties": {name: False}} for name in dict.fromkeys(value)]
    if key == "properties":
        if not isinstance(value, dict):
            return None
        out: list[Any] = []
        for name, sub in value.items():
            c = _complement(sub, resolve, depth + 1)
            if c is None:
                return None
            if c:
                out.append({"type": "object", "required": [name], "properties": {name: _any_of(c)}})
        return out
    if key == "items":
        if "prefixItems" in schema or not isinstance(value, (bool, dict)):
            return None  # (draft-04 array form, or positions after prefixItems)
        c = _complement(value, resolve, depth + 1)
        if c is None:
            return None
        return [{"type": "array", "contains": _any_of(c)}] if c else []
    if key == "prefixItems":
        if "items" in schema or not isinstance(value, list):
            return None  # (with items: "a later item fails items" has no schema)
        out = []
        for i, sub in enumerate(value):
            c = _complement(sub, resolve, depth + 1)
            if c is None:
                return None
            if c:  # an array long enough to have item i, and item i fails its schema
                out.append({"type": "array", "minItems": i + 1, "prefixItems": [True] * i + [_any_of(c)]})
        return out
    if key == "contains":
        if "minContains" in schema or "maxContains" in schema:
            return None
        c = _complement(value, resolve, depth + 1)
        if c is None:
            return None
        return [{"type": "array", "items": _any_of(c)}] if c else [{"type": "array", "maxItems": 0}]
    if key == "not":
        return [value]
    if key == "additionalProperties":
        return _extra_violators(value, schema, resolve, depth)
    if key == "format":
        # The grammar asserts the formats it has a regex for (strings.py; validate and the enum
        # filter check them with the same regexes), so their violators are the other strings.
        # Another format may be checked by validate's own checker: left to it.
        rx = formats.format_regex(value) if isinstance(value, str) else None
        if rx is None:
            return None
        return [{"type": "string", _NOT_MATCHING: ["^(?:" + rx + ")\\Z"]}]
    if key == "allOf":
        if not isinstance(value, list):
            return None
        out = []
        for part in value:
            c = _complement(part, resolve, depth + 1)
            if c is None:
                return None
            out.extend(c)
        return out
    if key == "anyOf" or (key == "oneOf" and isinstance(value, list) and len(value) == 1):
        if not isinstance(value, list) or not value:
            return None
        comps = []
        size = 1
        for part in value:
            c = _complement(part, resolve, depth + 1)
            if c is None:
                return None
            if not c:
                return []  # one branch matches every value
            comps.append(c)
            size *= len(c)
            if size > _MAX_BRANCHES:
                return None
        return [_all_of(*(_any_of(c) for c in comps))]
    if key == "$ref":
        if resolve is None or not isinstance(value, str):
            return None
        try:
            target = resolve(value)
        except SchemaError:
            return None
        return _complement(target, resolve, depth + 1)
    return None


def _extra_violators(
    value: Any, schema: dict[str, Any], resolve: Resolve | None, depth: int
) -> list[Any] | None:
    """The objects that violate ``additionalProperties: value`` beside `schema`'s ``properties``,
    or None. Written only when `value` admits no value (``false``, or a schema whose complement
    is everything) and there are no ``patternProperties``: then a violator is an object with a
    key outside the declared names D, and "some key outside D" is counted, not quantified —
    one branch per subset T of D: exactly the keys T of D present and more than |T| keys in
    all (2**|D| branches, so at most _MAX_EXTRA_DECLARED names). For any other `value`, "one
    undeclared key whose value fails it" has no schema (keywords constrain every key)."""
    comp = _complement(value, resolve, depth + 1)
    if comp is None:
        return None
    if not comp:
        return []  # every value is allowed: nothing violates it
    admits_nothing = any(b is True or (isinstance(b, dict) and set(b) <= _ANNOTATIONS) for b in comp)
    if not admits_nothing or schema.get("patternProperties", {}) != {}:
        return None
    declared = schema.get("properties", {})
    if not isinstance(declared, dict) or len(declared) > _MAX_EXTRA_DECLARED:
        return None
    names = list(declared)
    out: list[Any] = []
    for bits in range(1 << len(names)):
        present = [n for i, n in enumerate(names) if bits >> i & 1]
        branch: dict[str, Any] = {"type": "object", "minProperties": len(present) + 1}
        if names:
            branch["properties"] = {n: n in present for n in names}
        if present:
            branch["required"] = present
        # Explicit: with extra_properties="schema" undeclared keys are written only when allowed.
        branch["additionalProperties"] = True
        out.append(branch)
    return out


def _not_values(schema: dict[str, Any]) -> list[Any] | None:
    """The values outside a ``const``/``enum`` of scalars (None for containers or bad values)."""
    values = [schema["const"]] if "const" in schema else schema["enum"]
    if not isinstance(values, list):
        return None
    if "const" in schema and "enum" in schema:
        if not isinstance(schema["enum"], list):
            return None
        values = [v for v in values if any(_json_equal(v, e) for e in schema["enum"])]
    if any(isinstance(v, (list, dict)) for v in values):
        return None
    if any(isinstance(v, float) and not math.isfinite(v) for v in values):
        return None
    present = {_kind(v) for v in values}
    out: list[Any] = []
    others = [x for x in _KINDS if x not in present]
    if others:
        out.append({"type": others})
    if "boolean" in present:
        rest = [b for b in (True, False) if not any(v is b for v in values)]
        if rest:
            out.append({"enum": rest})
    if "string" in present:
        strs = list(dict.fromkeys(v for v in values if isinstance(v, str)))
        if sum(len(v) for v in strs) > _MAX_EXCLUDED_CHARS:
            return None  # (its automaton would be over the product budget anyway)
        listed = "|".join(re.escape(v) for v in strs)
        out.append({"type": "string", _NOT_MATCHING: ["^(?:" + listed + ")\\Z"]})
    if "number" in present:
        nums = sorted({Decimal(str(v)) for v in values if _kind(v) == "number"})
        bounds = [None, *nums, None]
        for a, b in zip(bounds, bounds[1:], strict=False):
            interval: dict[str, Any] = {"type": "number", _PLAIN_NUMBERS: True}
            if a is not None:
                interval["exclusiveMinimum"] = _plain_number(a)
            if b is not None:
                interval["exclusiveMaximum"] = _plain_number(b)
            out.append(interval)
    return out


def _any_of(branches: list[Any]) -> Any:
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


def _all_of(*parts: Any) -> Any:
    return parts[0] if len(parts) == 1 else {"allOf": list(parts)}


def _not_if(cond: Any, resolve: Resolve | None = None) -> Any:
    """A schema for exactly the values that do NOT match `cond` (an if/then/else condition), or
    None when not expressible (see _complement)."""
    branches = _complement(cond, resolve)
    if branches is None:
        return None
    return False if not branches else _any_of(branches)


def _plain_number(d: Decimal) -> int | float:
    """A JSON number value for a bound (an int when integral, so no precision is lost)."""
    return int(d) if d == d.to_integral_value() else float(d)
