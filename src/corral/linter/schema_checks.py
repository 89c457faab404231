"""Static checks of a JSON Schema: contradictions, exclusions and shapes that hurt small models.

Invariants: the walk is iterative (a schema thousands of levels deep or wide is walked without
Python recursion) and reads the schema only; every finding names the JSON pointer of the keyword
it is about. Checks that could be wrong report nothing rather than a false positive: a pattern
Python's ``re`` cannot read, a remote ``$ref`` or a value of an unexpected type is skipped (the
compile step reports what it refuses).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Finding", "SchemaThresholds", "check_schema", "resolve_pointer"]

# Keywords whose value is one subschema / a map of subschemas / a list of subschemas.
_ONE = (
    "additionalProperties", "items", "contains", "not", "if", "then", "else", "propertyNames",
    "unevaluatedProperties", "unevaluatedItems", "additionalItems",
)  # fmt: skip
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems")
_ALLOF_PART = re.compile(r"/allOf/\d+$")
_UNDER_NOT = re.compile(r"/not(/|$)")
_JSON_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
# Formats whose strings have a bounded length (a model cannot run on inside them).
_BOUNDED_FORMATS = {"date", "time", "date-time", "uuid", "ipv4", "ipv6", "duration"}
_PER_REQUEST = [
    ("a UUID", re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")),
    ("an email address", re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")),
    ("a timestamp", re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")),
    ("a hex id or hash", re.compile(r"^[0-9a-fA-F]{16,}$")),
]


@dataclass(frozen=True)
class Finding:
    """One thing lint found: a rule code, a message, and where (JSON pointer or line/column)."""

    code: str
    message: str
    pointer: str | None = None
    line: int | None = None
    column: int | None = None


@dataclass(frozen=True)
class SchemaThresholds:
    """Where the shape warnings start (W205, W207, W208)."""

    large_enum: int = 64
    max_depth: int = 32
    wide_object: int = 1000


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def resolve_pointer(root: Any, ref: str) -> tuple[bool, Any]:
    """(found, target) for a local ``$ref`` (``#``, ``#/a/b``, ``#anchor``)."""
    if ref in ("#", ""):
        return True, root
    if not ref.startswith("#/"):
        anchor = ref[1:]
        for node, _ in _nodes(root):
            if isinstance(node, dict) and node.get("$anchor") == anchor:
                return True, node
        return False, None
    node = root
    for raw in ref[2:].split("/"):
        part = _unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False, None
    return True, node


def _unquote(s: str) -> str:
    from urllib.parse import unquote

    return unquote(s)


def _nodes(root: Any) -> Iterator[tuple[Any, str]]:
    """Every subschema with its pointer and depth-first order, without recursion."""
    stack: list[tuple[Any, str]] = [(root, "#")]
    while stack:
        node, ptr = stack.pop()
        yield node, ptr
        if not isinstance(node, dict):
            continue
        for k in _ONE:
            v = node.get(k)
            if isinstance(v, (dict, bool)):
                stack.append((v, f"{ptr}/{k}"))
        for k in _MAP:
            v = node.get(k)
            if isinstance(v, dict):
                for name, sub in v.items():
                    if isinstance(sub, (dict, bool)):
                        stack.append((sub, f"{ptr}/{k}/{_escape(str(name))}"))
        for k in _LIST + ("items",):
            v = node.get(k)
            if isinstance(v, list):
                for i, sub in enumerate(v):
                    if isinstance(sub, (dict, bool)):
                        stack.append((sub, f"{ptr}/{k}/{i}"))


def _depth(ptr: str) -> int:
    return ptr.count("/")


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "integer" if v.is_integer() else "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "?"


def _types(node: dict[str, Any]) -> set[str] | None:
    t = node.get("type")
    if isinstance(t, str) and t in _JSON_TYPES:
        return {t}
    if isinstance(t, list) and t and all(isinstance(x, str) and x in _JSON_TYPES for x in t):
        return set(t)
    return None


def _type_allows(types: set[str], v: Any) -> bool:
    jt = _json_type(v)
    return jt in types or (jt == "integer" and "number" in types)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _merged_parts(node: dict[str, Any], ptr: str) -> list[tuple[dict[str, Any], str]]:
    """The node and every allOf part under it (allOf of allOf too), without following $ref."""
    out: list[tuple[dict[str, Any], str]] = []
    stack = [(node, ptr)]
    while stack:
        n, p = stack.pop()
        out.append((n, p))
        parts = n.get("allOf")
        if isinstance(parts, list):
            stack.extend((s, f"{p}/allOf/{i}") for i, s in enumerate(parts) if isinstance(s, dict))
    return out


def _bounds(parts: list[tuple[dict[str, Any], str]]) -> Iterator[Finding]:
    lo: tuple[float, bool, str] | None = None  # (value, exclusive, pointer)
    hi: tuple[float, bool, str] | None = None
    types: set[str] | None = None
    types_ptr = ""
    pairs = {
        "minLength": "maxLength",
        "minItems": "maxItems",
        "minProperties": "maxProperties",
        "minContains": "maxContains",
    }
    mins: dict[str, tuple[int, str]] = {}
    maxs: dict[str, tuple[int, str]] = {}
    for n, p in parts:
        for key, excl in (("minimum", False), ("exclusiveMinimum", True)):
            v = n.get(key)
            if isinstance(v, (int, float)) and _is_num(v):
                e = excl or (key == "minimum" and n.get("exclusiveMinimum") is True)
                if lo is None or (v, e) > (lo[0], lo[1]):
                    lo = (v, e, f"{p}/{key}")
        for key, excl in (("maximum", False), ("exclusiveMaximum", True)):
            v = n.get(key)
            if isinstance(v, (int, float)) and _is_num(v):
                e = excl or (key == "maximum" and n.get("exclusiveMaximum") is True)
                if hi is None or (-v, e) > (-hi[0], hi[1]):
                    hi = (v, e, f"{p}/{key}")
        for lo_key, hi_key in pairs.items():
            v = n.get(lo_key)
            if isinstance(v, int) and not isinstance(v, bool) and (lo_key not in mins or v > mins[lo_key][0]):
                mins[lo_key] = (v, f"{p}/{lo_key}")
            w = n.get(hi_key)
            if isinstance(w, int) and not isinstance(w, bool) and (hi_key not in maxs or w < maxs[hi_key][0]):
                maxs[hi_key] = (w, f"{p}/{hi_key}")
        t = _types(n)
        if t is not None:
            widened = t | ({"integer"} if "number" in t else set())
            if types is None:
                types, types_ptr = widened, f"{p}/type"
            else:
                types = types & widened
                if not types:
                    yield Finding(
                        "E101",
                        f"allOf parts declare types with nothing in common (here and at {types_ptr})",
                        f"{p}/type",
                    )
                    return
    if lo is not None and hi is not None:
        if lo[0] > hi[0] or (lo[0] == hi[0] and (lo[1] or hi[1])):
            yield Finding(
                "E101",
                f"no number satisfies {lo[2].rsplit('/', 1)[1]} {lo[0]} and "
                f"{hi[2].rsplit('/', 1)[1]} {hi[0]} (at {hi[2]})",
                lo[2],
            )
            return
        if types == {"integer"}:
            first = math.floor(lo[0]) + 1 if (lo[1] and float(lo[0]).is_integer()) else math.ceil(lo[0])
            last = math.ceil(hi[0]) - 1 if (hi[1] and float(hi[0]).is_integer()) else math.floor(hi[0])
            if first > last:
                yield Finding("E101", f"no integer lies between {lo[0]} and {hi[0]}", lo[2])
    for lo_key, hi_key in pairs.items():
        if lo_key in mins and hi_key in maxs and mins[lo_key][0] > maxs[hi_key][0]:
            yield Finding(
                "E101",
                f"{lo_key} {mins[lo_key][0]} is greater than {hi_key} {maxs[hi_key][0]} "
                f"(at {maxs[hi_key][1]})",
                mins[lo_key][1],
            )


def _name_allowed(name: str, part: dict[str, Any]) -> bool:
    props = part.get("properties")
    if isinstance(props, dict) and name in props:
        return True
    pats = part.get("patternProperties")
    if isinstance(pats, dict):
        for pat in pats:
            try:
                if re.search(pat, name):
                    return True
            except re.error:
                return True  # cannot tell: no finding
    return False


def _name_excluded_by(name: str, names: Any) -> str | None:
    """Why ``propertyNames`` (a schema for the names) excludes ``name``, or None."""
    if names is False:
        return "propertyNames is false"
    if not isinstance(names, dict):
        return None
    if "const" in names and names["const"] != name:
        return f"propertyNames const is {names['const']!r}"
    enum = names.get("enum")
    if isinstance(enum, list) and name not in enum:
        return "it is not in the propertyNames enum"
    pat = names.get("pattern")
    if isinstance(pat, str):
        try:
            if not re.search(pat, name):
                return f"it does not match the propertyNames pattern {pat!r}"
        except re.error:
            pass
    ml = names.get("maxLength")
    if isinstance(ml, int) and not isinstance(ml, bool) and len(name) > ml:
        return f"it is longer than the propertyNames maxLength {ml}"
    return None


def _required(parts: list[tuple[dict[str, Any], str]]) -> Iterator[Finding]:
    required: list[tuple[str, str]] = []
    for n, p in parts:
        req = n.get("required")
        if isinstance(req, list):
            required += [(r, f"{p}/required/{i}") for i, r in enumerate(req) if isinstance(r, str)]
    for name, rptr in required:
        for n, p in parts:
            props = n.get("properties")
            if isinstance(props, dict) and props.get(name) is False:
                yield Finding("E102", f"required property {name!r} has the schema false", rptr)
                break
            if n.get("additionalProperties") is False and not _name_allowed(name, n):
                yield Finding(
                    "E102",
                    f"required property {name!r} is not declared and additionalProperties is false (at {p})",
                    rptr,
                )
                break
            why = _name_excluded_by(name, n.get("propertyNames"))
            if why is not None:
                yield Finding("E102", f"required property {name!r} is excluded: {why}", rptr)
                break


_LOCAL_BOUNDS = (
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength",
    "maxLength", "pattern", "minItems", "maxItems", "minProperties", "maxProperties", "required",
)  # fmt: skip


def _values(node: dict[str, Any], ptr: str) -> Iterator[Finding]:
    if "const" in node:
        values, where = [node["const"]], f"{ptr}/const"
    elif isinstance(node.get("enum"), list):
        values, where = list(node["enum"]), f"{ptr}/enum"
    else:
        return
    if not values:
        yield Finding("E103", "an empty enum allows no value", where)
        return
    types = _types(node)
    if types is not None and not any(_type_allows(types, v) for v in values):
        what = "const" if where.endswith("const") else "no enum value"
        yield Finding("E103", f"{what} has the declared type {' or '.join(sorted(types))}", where)
        return
    local = {k: node[k] for k in _LOCAL_BOUNDS if k in node}
    if not local:
        return
    import jsonschema

    try:
        check = jsonschema.Draft202012Validator(local)
        if not any(check.is_valid(v) for v in values):
            kws = ", ".join(sorted(local))
            yield Finding(
                "E104", f"no {'value' if len(values) > 1 else 'const'} meets the schema's own {kws}", where
            )
    except (jsonschema.SchemaError, re.error, TypeError, ValueError):
        return


def _shape(node: dict[str, Any], ptr: str, th: SchemaThresholds, in_not: bool) -> Iterator[Finding]:
    types = _types(node) or set()
    bounded_by_values = "const" in node or "enum" in node
    if not in_not and not bounded_by_values:
        if (
            "string" in types
            and "maxLength" not in node
            and "pattern" not in node
            and node.get("format") not in _BOUNDED_FORMATS
        ):
            yield Finding("W203", "string without maxLength (or an enum, pattern or bounded format)", ptr)
        if (
            "array" in types
            and "maxItems" not in node
            and not (node.get("items") is False and "prefixItems" in node)
        ):
            yield Finding("W204", "array without maxItems", ptr)
    enum = node.get("enum")
    if isinstance(enum, list) and len(enum) > th.large_enum:
        yield Finding(
            "W205",
            f"enum of {len(enum)} values (more than {th.large_enum}): bind it per request with x-corral-slot",
            f"{ptr}/enum",
        )
    props = node.get("properties")
    if isinstance(props, dict) and len(props) > th.wide_object:
        yield Finding(
            "W208", f"object with {len(props)} properties (more than {th.wide_object})", f"{ptr}/properties"
        )
    values = [node["const"]] if "const" in node else enum if isinstance(enum, list) else []
    for i, v in enumerate(values[:1000]):
        if not isinstance(v, str):
            continue
        for what, rx in _PER_REQUEST:
            if rx.search(v) or (what == "a hex id or hash" and _opaque(v)):
                where = f"{ptr}/const" if "const" in node else f"{ptr}/enum/{i}"
                yield Finding(
                    "W209",
                    f"{v[:40]!r} looks like {what}: a schema that changes per request "
                    "compiles per request (use an x-corral-slot)",
                    where,
                )
                break


def _opaque(v: str) -> bool:
    """A random-looking token (an API key, a base64 id): long, mixed case, many digits."""
    return (
        len(v) >= 20
        and re.fullmatch(r"[A-Za-z0-9_-]+", v) is not None
        and sum(c.isdigit() for c in v) >= len(v) // 5
        and any(c.islower() for c in v)
        and any(c.isupper() for c in v)
    )


def _ref_cycles(root: Any) -> Iterator[Finding]:
    """W206 for each $ref whose target reaches it again (direct or through other $refs)."""
    refs: list[tuple[str, str]] = []  # (pointer of the $ref keyword's node, target)
    for node, ptr in _nodes(root):
        if isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#"):
            refs.append((ptr, node["$ref"]))
    targets = {t for _, t in refs}
    # Edge: target T -> target U when a $ref to U lies inside T's subtree.
    tptr = {t: ("#" + t[1:]) if t.startswith("#/") or t == "#" else None for t in targets}
    edges: dict[str, set[str]] = {t: set() for t in targets}
    for ptr, t in refs:
        for owner, op in tptr.items():
            if op is not None and (ptr == op or ptr.startswith(op.rstrip("/") + "/") or op == "#"):
                edges[owner].add(t)
    on_cycle: set[str] = set()
    for start in targets:
        seen = {start}
        stack = list(edges[start])
        while stack:
            u = stack.pop()
            if u == start:
                on_cycle.add(start)
                break
            if u not in seen:
                seen.add(u)
                stack.extend(edges.get(u, ()))
    reported = set()
    for ptr, t in refs:
        if t in on_cycle and t not in reported:
            reported.add(t)
            yield Finding(
                "W206",
                f"$ref {t!r} reaches itself again: nesting is unbounded "
                "(a small model can recurse until max_tokens)",
                f"{ptr}/$ref",
            )


def check_schema(root: Any, thresholds: SchemaThresholds | None = None) -> list[Finding]:
    """Every static finding for the schema ``root`` (a dict or bool), in pointer order."""
    th = thresholds or SchemaThresholds()
    out: list[Finding] = []
    deepest = ("#", 0)
    for node, ptr in _nodes(root):
        if not isinstance(node, dict):
            continue
        if _depth(ptr) > deepest[1]:
            deepest = (ptr, _depth(ptr))
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#") and not resolve_pointer(root, ref)[0]:
            out.append(Finding("E106", f"$ref {ref!r} points to nothing in this schema", f"{ptr}/$ref"))
        parts = _merged_parts(node, ptr)
        if not _ALLOF_PART.search(ptr):  # each allOf group is checked once, from its top
            out += _bounds(parts)
            out += _required(parts)
        out += _values(node, ptr)
        out += _shape(node, ptr, th, in_not=_UNDER_NOT.search(ptr) is not None)
    if deepest[1] > th.max_depth:
        out.append(
            Finding("W207", f"schema nested {deepest[1]} levels deep (more than {th.max_depth})", deepest[0])
        )
    out += _ref_cycles(root)
    out.sort(key=lambda f: (f.pointer or "", f.code))
    return out
