"""``allOf``: merging the parts of a conjunction into one schema, keyword by keyword.

In:  a schema with ``allOf`` (parts may be ``$ref``s, booleans or schemas with their own
     ``allOf``).
Out: one equivalent schema without ``allOf`` at the top, in which bounds are intersected
     (max of minimums, min of maximums, union of ``required``, intersection of ``type`` and
     ``enum``), ``properties``/``items`` merged pointwise, and alternations (``anyOf``/``oneOf``)
     kept or distributed; keywords that cannot be intersected exactly are listed under the
     internal keyword ``_UNMERGED`` (the grammar enforces one value and the report marks the
     keyword as checked after decoding), and ``UnsupportedSchemaError`` is raised for the rest.

Invariants: the merge never widens the schema; where it cannot be exact it says so
(``_UNMERGED``) rather than drop a keyword. The scope of ``additionalProperties`` (names its
own schema object does not declare) and of ``items`` (positions after its own
``prefixItems``) is kept across the merge. An empty intersection raises ``_NoValue``.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from corral.errors import SchemaError, UnsupportedSchemaError
from corral.grammar.json_schema.core import ConverterCore
from corral.grammar.json_schema.keywords import (
    _ANNOTATIONS,
    _KNOWN,
    _NOT_MATCHING,
    _NOT_MULTIPLE_OF,
    _UNMERGED,
)
from corral.grammar.json_schema.patterns import _safe_search
from corral.grammar.json_schema.util import _json_equal, _NoValue, _ptr


class AllOfMixin(ConverterCore):
    def merge_all_of(self, schema: dict[str, Any], pointer: str) -> dict[str, Any]:
        if "allOf" not in schema:
            return schema
        parts = schema["allOf"]
        if not isinstance(parts, list) or not parts:
            raise SchemaError("allOf must be a non-empty array", _ptr(pointer, "allOf"))
        self.descend(_ptr(pointer, "allOf"))  # parts reached through $ref chains nest here
        try:
            return self._merge_parts(schema, parts, pointer)
        finally:
            self.nesting -= 1

    def _merge_parts(self, schema: dict[str, Any], parts: list[Any], pointer: str) -> dict[str, Any]:
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for i, part in enumerate(parts):
            p = _ptr(pointer, "allOf", i)
            self.check_time(p)
            if part is True:
                continue
            if part is False:
                raise _NoValue("allOf contains false: no value is allowed", p)
            if not isinstance(part, dict):
                raise SchemaError("allOf entries must be schemas", p)
            while "$ref" in part:
                target, _ = self.resolve_ref(part["$ref"], _ptr(p, "$ref"))
                extra = {k: v for k, v in part.items() if k != "$ref"}
                if target is True:
                    part = extra
                    break
                if not isinstance(target, dict):
                    raise SchemaError("allOf: $ref to a false schema", p)
                if "$ref" in target and target.get("$ref") == part["$ref"]:
                    raise UnsupportedSchemaError("allOf with a self-referencing $ref", p)
                part = {**extra, "allOf": [target]} if extra else target
                part = self.merge_all_of(part, p)
            part = self.merge_all_of(part, p)
            merged = _merge(merged, part, p)
        return merged


def _merge(a: dict[str, Any], b: dict[str, Any], pointer: str) -> dict[str, Any]:
    """Intersect two schemas keyword by keyword (for allOf). Keywords that cannot be merged
    exactly stay as an allOf pair the post-decoding check verifies."""
    out = dict(a)
    b = dict(b)
    _merge_groups(out, b)
    # `additionalProperties` applies to the names its own schema object does not declare (in
    # `properties` or by a `patternProperties` pattern), and `items` to the positions after its
    # own `prefixItems`: merging two objects must keep that.
    object_keys = {"properties", "additionalProperties", "patternProperties"}
    if (object_keys & a.keys()) and (object_keys & b.keys()):
        _merge_objects(out, a, b)
        for key in object_keys:
            b.pop(key, None)
    if (
        ({"prefixItems", "items"} & a.keys())
        and ({"prefixItems", "items"} & b.keys())
        and ("prefixItems" in a or "prefixItems" in b)
    ):
        xa, xb = a.get("prefixItems", []), b.get("prefixItems", [])
        ia, ib = a.get("items", True), b.get("items", True)
        n = max(len(xa), len(xb))
        out["prefixItems"] = [
            _all_of(xa[i] if i < len(xa) else ia, xb[i] if i < len(xb) else ib) for i in range(n)
        ]
        if "items" in a or "items" in b:
            out["items"] = _all_of(ia, ib)
        b.pop("prefixItems", None)
        b.pop("items", None)
    for key, vb in b.items():
        if key not in out:
            out[key] = vb
            continue
        va = out[key]
        if key in _ANNOTATIONS or _json_equal(va, vb):
            continue
        if key in ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains"):
            out[key] = max(va, vb)
        elif key in ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains"):
            out[key] = min(va, vb)
        elif key == "required":
            out[key] = list(dict.fromkeys([*va, *vb]))
        elif key == "type":
            ta = {va} if isinstance(va, str) else set(va)
            tb = {vb} if isinstance(vb, str) else set(vb)
            both = (ta & tb) | (
                {"integer"}
                if ("integer" in ta and "number" in tb) or ("number" in ta and "integer" in tb)
                else set()
            )
            if not both:
                raise _NoValue(f"allOf: types {sorted(ta)} and {sorted(tb)} have nothing in common", pointer)
            out[key] = sorted(both)
        elif key == "properties":
            merged = dict(va)
            for name, s in vb.items():
                merged[name] = _conjoin(merged[name], s) if name in merged else s
            out[key] = merged
        elif key == "enum":
            keep = [x for x in va if any(_json_equal(x, y) for y in vb)]
            if not keep:
                raise _NoValue("allOf: the enums have no value in common", pointer)
            out[key] = keep
        elif key in ("items", "additionalProperties", "contains", "propertyNames"):
            out[key] = _conjoin(va, vb)
        elif key == "not":
            out[key] = {"anyOf": [va, vb]}  # not A and not B = not (A or B)
        elif key in (_NOT_MATCHING, _NOT_MULTIPLE_OF):
            out[key] = [*va, *(p for p in vb if p not in va)]
        elif key in ("anyOf", "oneOf"):
            out.setdefault("allOf", [])
            out["allOf"] = [*out.get("allOf", []), {key: vb}]
        elif key not in _KNOWN:
            continue  # an unknown keyword is an annotation: it constrains nothing
        else:
            raise UnsupportedSchemaError(
                f"allOf: cannot merge two different {key!r} values", _ptr(pointer, key)
            )
    props, required = out.get("properties"), out.get("required")
    if isinstance(props, dict) and isinstance(required, list):
        for name in required:
            if isinstance(name, str) and props.get(name) is False:
                # (a complement's "objects without name" met a part that requires it)
                raise _NoValue(f"allOf: required property {name!r} is forbidden (false)", pointer)
    if "allOf" in out and out["allOf"]:
        pending = out.pop("allOf")
        for p in pending:
            out = _merge(out, p, pointer) if not ("anyOf" in p or "oneOf" in p) else _wrap_branch(out, p)
    return out


def _merge_objects(out: dict[str, Any], a: dict[str, Any], b: dict[str, Any]) -> None:
    """`properties`/`patternProperties`/`additionalProperties` of ``allOf: [a, b]`` as one
    schema (into `out`). A name declared on one side gets that side's schema there, and on the
    other side the other's declared schema, else its patterns' (applied by the merged
    patternProperties), else its additionalProperties. Patterns of one side get the other
    side's additionalProperties folded in when that side has no patterns and declares no name
    they match; otherwise (both sides have patterns and one has a restrictive
    additionalProperties) the second side's patterns are checked after decoding."""
    pa, pb = a.get("properties", {}), b.get("properties", {})
    aa, ab = a.get("additionalProperties", True), b.get("additionalProperties", True)
    xa, xb = a.get("patternProperties", {}), b.get("patternProperties", {})
    if not all(isinstance(x, dict) for x in (pa, pb, xa, xb)):
        raise SchemaError("properties and patternProperties must be objects", "#")

    def own(props: dict[str, Any], pats: dict[str, Any], addl: Any, name: str) -> Any:
        if name in props:
            return props[name]
        return True if any(_safe_search(p, name) for p in pats) else addl

    names = [*pa, *[n for n in pb if n not in pa]]
    if names:
        out["properties"] = {n: _all_of(own(pa, xa, aa, n), own(pb, xb, ab, n)) for n in names}

    def foldable(pats: dict[str, Any], other_props: dict[str, Any], other_addl: Any) -> bool:
        return _trivial(other_addl) or not any(_safe_search(p, n) for p in pats for n in other_props)

    pats: dict[str, Any] = {}
    if xa and xb and not (_trivial(aa) and _trivial(ab)):
        pats = dict(xa)
        out[_UNMERGED] = _unmerged(out, "patternProperties")
    elif (xa and not foldable(xa, pb, ab)) or (xb and not foldable(xb, pa, aa)):
        pats = dict(xa)
        if xb:
            out[_UNMERGED] = _unmerged(out, "patternProperties")
    else:
        pats = {p: _all_of(s, ab) if not xb else s for p, s in xa.items()}
        for p, s in xb.items():
            s = _all_of(s, aa) if not xa else s
            pats[p] = _all_of(pats[p], s) if p in pats else s
    if pats:
        out["patternProperties"] = pats
    else:
        out.pop("patternProperties", None)
    if "additionalProperties" in a or "additionalProperties" in b:
        out["additionalProperties"] = _all_of(aa, ab)


def _trivial(schema: Any) -> bool:
    return schema is True or schema == {}


def _unmerged(schema: dict[str, Any], key: str) -> list[str]:
    """`schema`'s list of keywords checked after decoding, with `key` added once. A set: a merge
    that met the same unmergeable keyword again at every level (a oneOf distributed through an
    allOf, nested) made a longer list, so a new schema, at each level, and never a repeat the
    converter's memo could see (it nested until max_schema_depth)."""
    return list(dict.fromkeys([*schema.get(_UNMERGED, []), key]))


# The keywords _merge_groups reads (it changes nothing when neither side has one).
_GROUPED = frozenset(
    {
        *(_UNMERGED, "contains", "minContains", "maxContains", "if", "then", "else", "multipleOf"),
        *("dependentRequired", "dependentSchemas", "dependencies"),
    }
)


def _merge_groups(out: dict[str, Any], b: dict[str, Any]) -> None:
    """The keywords _merge cannot intersect key by key: `contains` with its counts (two different
    contains need two different matching items), `multipleOf` (the least common multiple), and
    the dependency maps (per key). What cannot be merged moves from `b` to the _UNMERGED list of
    `out`: the grammar enforces `out`'s value and reports the other as checked after decoding."""
    if _GROUPED.isdisjoint(out) and _GROUPED.isdisjoint(b):
        return  # (most merges: nothing below would change either side)
    unmerged: list[str] = list(out.get(_UNMERGED, [])) + list(b.pop(_UNMERGED, []))
    for side in (out, b):
        if "contains" not in side:  # minContains/maxContains alone constrain nothing
            side.pop("minContains", None)
            side.pop("maxContains", None)
    if "contains" in out and "contains" in b:
        if _json_equal(out["contains"], b["contains"]):
            if "minContains" in out or "minContains" in b:
                out["minContains"] = max(out.get("minContains", 1), b.get("minContains", 1))
            highs = [x for x in (out.get("maxContains"), b.get("maxContains")) if x is not None]
            if highs:
                out["maxContains"] = min(highs)
        else:
            unmerged.append("contains")
        for key in ("contains", "minContains", "maxContains"):
            b.pop(key, None)
    for side in (out, b):
        if "if" not in side:  # then/else alone constrain nothing
            side.pop("then", None)
            side.pop("else", None)
    if "if" in out and "if" in b:
        if not all(_json_equal(out.get(k), b.get(k)) for k in ("if", "then", "else")):
            unmerged.append("if")
        for key in ("if", "then", "else"):
            b.pop(key, None)
    if "multipleOf" in out and "multipleOf" in b:
        x, y = out["multipleOf"], b.pop("multipleOf")
        if (
            isinstance(x, int)
            and isinstance(y, int)
            and not isinstance(x, bool)
            and not isinstance(y, bool)
            and x > 0
            and y > 0
        ):
            out["multipleOf"] = x * y // math.gcd(x, y)
        elif not _json_equal(x, y):
            try:
                dx, dy = Decimal(str(x)), Decimal(str(y))
                if dx % dy == 0:
                    pass
                elif dy % dx == 0:
                    out["multipleOf"] = y
                else:
                    unmerged.append("multipleOf")
            except ArithmeticError:
                unmerged.append("multipleOf")
    if isinstance(out.get("dependentRequired"), dict) and isinstance(b.get("dependentRequired"), dict):
        merged = {k: list(v) for k, v in out["dependentRequired"].items()}
        for key, names in b.pop("dependentRequired").items():
            merged[key] = list(dict.fromkeys([*merged.get(key, []), *names]))
        out["dependentRequired"] = merged
    for kw in ("dependentSchemas", "dependencies"):
        if isinstance(out.get(kw), dict) and isinstance(b.get(kw), dict):
            both = dict(out[kw])
            for key, v in b.pop(kw).items():
                if key not in both:
                    both[key] = v
                elif isinstance(both[key], list) and isinstance(v, list):
                    both[key] = list(dict.fromkeys([*both[key], *v]))
                else:
                    as_schema = [{"required": x} if isinstance(x, list) else x for x in (both[key], v)]
                    both[key] = _all_of(*as_schema)
            out[kw] = both
    if unmerged:
        out[_UNMERGED] = list(dict.fromkeys(unmerged))


def _all_of(x: Any, y: Any) -> Any:
    """The conjunction of two schemas, dropping `true`."""
    if x is True or x == {}:
        return y
    if y is True or y == {}:
        return x
    return _conjoin(x, y)


def _conjoin(x: Any, y: Any) -> Any:
    """``{"allOf": [x, y]}``, or `x` when `y` is already one of its conjuncts (A ∧ A = A and
    (A ∧ B) ∧ B = A ∧ B). Nested merges (a $ref target merged into an anyOf branch whose
    siblings already hold it) otherwise conjoin one schema with itself again at every level, and
    each copy's alternatives multiply with the others' when distributed."""
    if _conjunct_of(x, y):
        return x
    return {"allOf": [x, y]}


def _conjunct_of(x: Any, y: Any) -> bool:
    """Is `y` one of the conjuncts of `x` (x itself, or a part of an ``allOf``-only x, nested)?"""
    stack = [x]
    while stack:
        node = stack.pop()
        if node is y or _json_equal(node, y):
            return True
        if isinstance(node, dict) and len(node) == 1 and isinstance(node.get("allOf"), list):
            stack.extend(node["allOf"])
    return False


def _wrap_branch(base: dict[str, Any], branch: dict[str, Any]) -> dict[str, Any]:
    """`base` conjoined with the alternation of `branch` (an ``anyOf`` or a ``oneOf``)."""
    key = "anyOf" if "anyOf" in branch else "oneOf"
    if key not in base:
        return {**base, key: branch[key]}
    # Two alternations: distribute (anyOf of the pairwise merges). The pairs of a oneOf with
    # several branches lose its exactly-one (two of its branches may both match one value), so
    # that stays a check after decoding, never silently unenforced.
    pairs = [_conjoin(x, y) for x in base[key] for y in branch[key]]
    if key == "oneOf" and "anyOf" in base:
        # base's own anyOf holds too: each of its branches with each pair (the pairs must not
        # replace it, or a value of neither of its branches would pass).
        pairs = [_conjoin(a, pair) for a in base["anyOf"] for pair in pairs]
    out: dict[str, Any] = {**base, "anyOf": pairs}
    if key == "oneOf":
        # The pairs hold all the grammar can say of both oneOfs: a value matches one of them only
        # if it matches a branch of each. What they lose is each oneOf's exactly-one, which stays
        # checked after decoding (with one branch each there is nothing to lose). Base's oneOf
        # is not kept beside them: converting a pair next to it conjoined the pair's branch with
        # that oneOf again, distributed again, and met the same merged schema at the same
        # position (a rule that is only itself: no value at all, where values are valid).
        if len(base[key]) > 1 or len(branch[key]) > 1:
            out[_UNMERGED] = _unmerged(base, "oneOf")
        del out[key]
    return out
