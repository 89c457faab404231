"""Composition: ``anyOf``/``oneOf`` disjointness, ``if``/``then``/``else``, and negation.

In:  a schema with ``if`` (rewritten here), ``oneOf`` branches (told apart here), or a schema
     whose negation is wanted (``contains`` counted up to ``maxContains``, an ``if`` condition).
Out: ``if_then_else``: the schema as ``anyOf: [if ∧ then, not-if ∧ else]`` when not-if is
     expressible, else None (then the three keywords are checked after decoding);
     ``provably_disjoint``: True only when no JSON value can match two branches (then ``oneOf``
     is enforced as ``anyOf``); ``_complement``/``_not_if``: schemas for exactly the values that
     do not match, or None.

Invariants: a negation is exact or absent — never an approximation. Numbers outside a value
set become open intervals written in plain decimal spellings (``_PLAIN_NUMBERS``), since an
exponent spelling near a bound could parse to the bound itself. ``provably_disjoint`` answers
False whenever it cannot prove disjointness (including on malformed branches).
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from corral.errors import SchemaError
from corral.grammar.json_schema.core import ConverterCore
from corral.grammar.json_schema.keywords import _ANNOTATIONS, _PLAIN_NUMBERS
from corral.grammar.json_schema.patterns import _not_in_regex
from corral.grammar.json_schema.util import _json_equal, _kind, _ptr


class CompositionMixin(ConverterCore):
    def if_then_else(self, schema: dict[str, Any], pointer: str) -> dict[str, Any] | None:
        """`schema` with if/then/else rewritten as ``anyOf: [if ∧ then, not-if ∧ else]`` when
        "not-if" is expressible (see _not_if); None otherwise (then they are checked after
        decoding)."""
        cond = self.deref(schema["if"], _ptr(pointer, "if"))
        not_if = _not_if(cond)
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


def _complement(c_schema: Any) -> list[Any] | None:
    """Schemas whose union is exactly the values that do NOT match `c_schema`, for the shapes
    where that is expressible (true, false, a ``type``, a ``const``/``enum`` of scalars); None
    otherwise. Numbers outside a value set are open intervals (plain decimal spellings)."""
    if c_schema is True or c_schema == {}:
        return []
    if c_schema is False:
        return [True]
    if not isinstance(c_schema, dict):
        return None
    keys = {k for k in c_schema if k not in _ANNOTATIONS}
    kinds = ("null", "boolean", "object", "array", "string", "number")
    flipped = {
        "minimum": "exclusiveMaximum",
        "exclusiveMinimum": "maximum",
        "maximum": "exclusiveMinimum",
        "exclusiveMaximum": "minimum",
    }
    if len(keys) == 1 and next(iter(keys)) in flipped:
        # One bound on numbers (every non-number matches it): the numbers on the other side.
        (key,) = keys
        bound = c_schema[key]
        if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not math.isfinite(bound):
            return None
        return [{"type": "number", flipped[key]: bound, _PLAIN_NUMBERS: True}]
    if keys == {"type"}:
        t = c_schema["type"]
        listed = {t} if isinstance(t, str) else set(t) if isinstance(t, list) else None
        if listed is None or ("integer" in listed and "number" not in listed):
            return None  # "numbers that are not integers" is not a type
        others = [x for x in kinds if x not in listed]
        return [{"type": others}] if others else []
    if not keys or not keys <= {"const", "enum"}:
        return None
    values = [c_schema["const"]] if "const" in c_schema else c_schema["enum"]
    if not isinstance(values, list):
        return None
    if "const" in c_schema and "enum" in c_schema:
        values = [v for v in values if any(_json_equal(v, e) for e in c_schema["enum"])]
    if any(isinstance(v, (list, dict)) for v in values):
        return None
    if any(isinstance(v, float) and not math.isfinite(v) for v in values):
        return None
    present = {_kind(v) for v in values}
    out: list[Any] = []
    others = [x for x in kinds if x not in present]
    if others:
        out.append({"type": others})
    if "boolean" in present:
        rest = [b for b in (True, False) if not any(v is b for v in values)]
        if rest:
            out.append({"enum": rest})
    if "string" in present:
        strs = list(dict.fromkeys(v for v in values if isinstance(v, str)))
        out.append({"type": "string", "pattern": "^(?:" + _not_in_regex(strs) + ")\\Z"})
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


def _not_if(cond: Any) -> Any:
    """A schema for exactly the values that do NOT match `cond` (an if/then/else condition), or
    None when not expressible: the shapes of _complement, and an object discriminator — one
    property (with a schema _complement handles) in ``properties``, optionally ``required``,
    optionally ``type: object``."""
    branches = _complement(cond)
    if branches is not None:
        return False if not branches else branches[0] if len(branches) == 1 else {"anyOf": branches}
    if not isinstance(cond, dict):
        return None
    keys = {k for k in cond if k not in _ANNOTATIONS}
    props = cond.get("properties", {})
    required = cond.get("required", [])
    if not keys <= {"properties", "required", "type"} or not isinstance(props, dict):
        return None
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        return None
    names = set(props) | set(required)
    if len(names) != 1 or cond.get("type", "object") not in ("object", ["object"]):
        return None
    (name,) = names
    value_not = _complement(props.get(name, True))
    if value_not is None:
        return None
    out: list[Any] = []
    if "type" in cond:
        out.append({"type": ["null", "boolean", "array", "string", "number"]})
    if value_not:
        sub = value_not[0] if len(value_not) == 1 else {"anyOf": value_not}
        out.append({"type": "object", "required": [name], "properties": {name: sub}})
    if name in required:
        out.append({"type": "object", "properties": {name: False}})
    return False if not out else out[0] if len(out) == 1 else {"anyOf": out}


def _plain_number(d: Decimal) -> int | float:
    """A JSON number value for a bound (an int when integral, so no precision is lost)."""
    return int(d) if d == d.to_integral_value() else float(d)
