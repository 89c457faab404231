"""``enum`` and ``const``: a finite set of JSON values as grammar alternatives.

In:  a schema with ``enum`` and/or ``const`` (and possibly sibling keywords).
Out: one alternative per kept value, each accepting every JSON spelling of that value (up to
     whitespace, number spelling and string escapes, per the options): ``1`` also matches
     ``1.0`` and ``1e0``; under an integer-only ``type``, integers get their canonical spelling.

Invariants: a value is kept only if the whole schema accepts it — sibling keywords filter the
list with a draft 2020-12 validator (``_quick_check``), which checks the formats the grammar
enforces with the grammar's own regexes. Object members are written in the listed order
(noted in the report). Non-finite numbers are a ``SchemaError``.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from functools import lru_cache
from typing import Any

from corral.errors import SchemaError
from corral.grammar import formats, numbers
from corral.grammar.json_schema.core import ConverterCore
from corral.grammar.json_schema.keywords import (
    _ANNOTATIONS,
    _FRACTION,
    _NOT_MATCHING,
    _NOT_MULTIPLE_OF,
    _steps_ok,
)
from corral.grammar.json_schema.util import _json_equal, _NoValue, _ptr, _regex_terminal


class LiteralsMixin(ConverterCore):
    def enum_body(self, schema: dict[str, Any], pointer: str) -> str:
        if "const" in schema:
            values = [schema["const"]]
            where = _ptr(pointer, "const")
        else:
            values = schema["enum"]
            where = _ptr(pointer, "enum")
            if not isinstance(values, list) or not values:
                raise SchemaError("enum must be a non-empty array", where)
        if "enum" in schema and "const" in schema:
            values = [v for v in values if any(_json_equal(v, e) for e in schema["enum"])]
        # Keep the values the rest of the schema allows (type and simple bounds), report others.
        rest = {k: v for k, v in schema.items() if k not in ("enum", "const") and k not in _ANNOTATIONS}
        kept = []
        for i, v in enumerate(values):
            if i % 256 == 255:  # a long enum is one subschema: the time limit applies inside it
                self.check_time(_ptr(where, i))
            if not rest or _satisfies(rest, v, pointer):
                kept.append(v)
        if not kept:
            raise _NoValue("no enum/const value satisfies the rest of the schema (e.g. its type)", where)
        if rest:
            self.note(where, "enum", "enforced", "values filtered by the sibling keywords")
        types = self.types_of(schema, pointer) if "type" in schema else []
        integer_only = "integer" in types and "number" not in types
        alts = []
        for i, v in enumerate(kept):
            if i % 256 == 255:
                self.check_time(_ptr(where, i))
            alts.append(self.literal_value(v, where, integer_only))
        return " | ".join(alts)

    def literal_value(self, v: Any, pointer: str, integer_only: bool = False) -> str:
        """Every JSON spelling of one value (up to whitespace, number spelling and escapes)."""
        if v is None:
            return '"null"'
        if v is True:
            return '"true"'
        if v is False:
            return '"false"'
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if isinstance(v, float) and not math.isfinite(v):
                raise SchemaError("enum/const number is not finite", pointer)
            text = str(v)
            # (Memoised for short spellings only: a cache entry's size follows the number's.)
            return (_number_literal_memo if len(text) <= 40 else _number_literal)(text, integer_only)
        if isinstance(v, str):
            return self.jstr(re.escape(v))
        ws = self.ws
        if isinstance(v, list):
            if not v:
                return f'"[" {ws} "]"'
            items = f' {ws} "," {ws} '.join(self.literal_value(x, pointer) for x in v)
            return f'"[" {ws} {items} {ws} "]"'
        if isinstance(v, dict):
            if not v:
                return f'"{{" {ws} "}}"'
            # Members in the given order (object key order is free in JSON; other orders are
            # accepted after decoding only if generated — noted in the report).
            self.note(pointer, "enum", "enforced", "object members in the listed order")
            members = f' {ws} "," {ws} '.join(
                f'{self.jstr(re.escape(k))} {ws} ":" {ws} {self.literal_value(x, pointer)}'
                for k, x in v.items()
            )
            return f'"{{" {ws} {members} {ws} "}}"'
        raise SchemaError(f"unsupported enum/const value {v!r}", pointer)


def _number_literal(text: str, integer_only: bool) -> str:
    """The terminal for every JSON spelling of the number ``Decimal(text)``."""
    d = Decimal(text)
    # Under an integer type only the canonical integer spelling is generated (older drafts do
    # not count 2.0 as an integer).
    as_integer = integer_only and d == d.to_integral_value()
    return _regex_terminal(numbers.number_regex(d, d, integer=as_integer))


# By its text (the same values, 0, 1, 100, come back in enum after enum, and the range regex
# builder was a tenth of converting them); the text determines the Decimal exactly.
_number_literal_memo = lru_cache(maxsize=4096)(_number_literal)


def _satisfies(schema: dict[str, Any], value: Any, pointer: str = "#") -> bool:
    """Does `value` satisfy `schema`? The common siblings of an enum (a type, keywords no
    validator reads) are answered here as draft 2020-12 does, without building a validator per
    value (nor importing jsonschema, ~0.3 s in a fresh process); the rest by _quick_check."""
    if isinstance(schema, dict) and len(schema) == 1 and "type" in schema:
        # (The usual sibling: the checks below would all pass but the type's.)
        known = _type_check(schema["type"], value)
        return known if known is not None else _quick_check(schema, value, pointer)
    if isinstance(schema, dict) and _VALIDATING.isdisjoint(k for k in schema if k not in _DIRECT):
        known = _type_check(schema["type"], value) if "type" in schema else True
        internal = _internal_check(schema, value)
        listed = _listed_check(schema, value)
        bounds = _bounds_check(schema, value)
        if known is not None and internal is not None and listed is not None and bounds is not None:
            return known and internal and listed and bounds
    return _quick_check(schema, value, pointer)


_BOUNDS: dict[str, Any] = {
    "minimum": lambda v, b: v >= b,
    "maximum": lambda v, b: v <= b,
    "exclusiveMinimum": lambda v, b: v > b,
    "exclusiveMaximum": lambda v, b: v < b,
    "minLength": lambda n, b: n >= b,
    "maxLength": lambda n, b: n <= b,
    "minItems": lambda n, b: n >= b,
    "maxItems": lambda n, b: n <= b,
    "minProperties": lambda n, b: n >= b,
    "maxProperties": lambda n, b: n <= b,
}
# The length bounds, by the kind of value they count (code points, items, members).
_COUNTED: dict[str, type] = {
    **dict.fromkeys(("minLength", "maxLength"), str),
    **dict.fromkeys(("minItems", "maxItems"), list),
    **dict.fromkeys(("minProperties", "maxProperties"), dict),
}

# Keywords _satisfies answers itself: `type`, `const`/`enum` (a oneOf of consts filters each
# branch's value by the others') and the converter's internal ones (oneOf exclusivity puts
# _NOT_MATCHING beside every enum of a branch).
_DIRECT = frozenset({"type", "const", "enum", *_BOUNDS, _NOT_MATCHING, _FRACTION, _NOT_MULTIPLE_OF})


def _bounds_check(schema: dict[str, Any], value: Any) -> bool | None:
    """`value` against the numeric bounds (the complement of a const number is a pair of
    exclusive bounds) and the length bounds (``minItems`` beside a string enum), each of which
    applies to one kind of value only. None when a bound is not a number."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = True
    for k, holds in _BOUNDS.items():
        if k not in schema:
            continue
        b = schema[k]
        if isinstance(b, bool) or not isinstance(b, (int, float)):
            return None
        if k in _COUNTED:
            applies = isinstance(value, _COUNTED[k]) and isinstance(value, (str, list, dict))
            ok = ok and (not applies or holds(len(value), b))
        else:
            ok = ok and (not number or holds(value, b))
    return ok


def _listed_check(schema: dict[str, Any], value: Any) -> bool | None:
    """`value` against ``const`` and ``enum`` with JSON equality (as jsonschema's: 1 == 1.0,
    true != 1); None when ``enum`` is not a list (the validator then reports it)."""
    if "const" in schema and not _json_equal(value, schema["const"]):
        return False
    if "enum" in schema:
        if not isinstance(schema["enum"], list):
            return None
        return any(_json_equal(value, e) for e in schema["enum"])
    return True


def _internal_check(schema: dict[str, Any], value: Any) -> bool | None:
    """`value` against the internal keywords as _validator's handlers judge them (each runs
    whenever its keyword is present); None when _NOT_MATCHING is not a list of strings or
    _NOT_MULTIPLE_OF not one of positive integers."""
    patterns = schema.get(_NOT_MATCHING, [])
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        return None
    if isinstance(value, str) and any(_search(p, value) for p in patterns):
        return False
    steps = schema.get(_NOT_MULTIPLE_OF, [])
    if not _steps_ok(steps):
        return None
    if _multiple_of_one(value, steps):
        return False
    integral = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    return not (_FRACTION in schema and integral)


def _is_integer(v: Any) -> bool:
    """Draft 2020-12's integer (and jsonschema's checker for it): a number with a zero fraction."""
    return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer())


def _multiple_of_one(value: Any, steps: list[int]) -> bool:
    """Is `value` an integer that one of the positive integers `steps` divides? Exact, as
    jsonschema judges an integer ``multipleOf`` (``%``, on a float's exact value too)."""
    return _is_integer(value) and any(int(value) % e == 0 for e in steps)


def _quick_check(schema: dict[str, Any], value: Any, pointer: str = "#") -> bool:
    """Does `value` satisfy `schema`? (Used to filter enum values; jsonschema does the work.)
    Formats the grammar enforces are checked with the grammar's regexes (the post-decoding
    validation skips them), also inside the value (``propertyNames``, ``items``, ...)."""
    import jsonschema
    from referencing.exceptions import Unresolvable  # jsonschema >= 4.18 raises this kind

    try:
        _validator()(schema, format_checker=_format_checker()).validate(value)
    except jsonschema.ValidationError:
        return False
    except Unresolvable:  # a $ref the validator cannot follow: the grammar decides instead
        return True
    except (TypeError, ValueError, ArithmeticError) as e:
        # A malformed keyword the validator trips on ({"minimum": "x"}): name it, never crash.
        raise SchemaError(f"a keyword beside enum/const (or under not) is malformed: {e}", pointer) from None
    return True


# Every keyword jsonschema's Draft202012Validator reads, and the converter's own: a schema
# without any of them (but ``type``) is decided by _type_check. (tests/test_compile_masks.py
# checks the set against jsonschema's.)
_VALIDATING = frozenset(
    {
        *("$dynamicRef", "$ref", "additionalProperties", "allOf", "anyOf", "const", "contains"),
        *("dependentRequired", "dependentSchemas", "enum", "exclusiveMaximum", "exclusiveMinimum"),
        *("format", "if", "items", "maxItems", "maxLength", "maxProperties", "maximum", "minItems"),
        *("minLength", "minProperties", "minimum", "multipleOf", "not", "oneOf", "pattern"),
        *("patternProperties", "prefixItems", "properties", "propertyNames", "required"),
        *("unevaluatedItems", "unevaluatedProperties", "uniqueItems", "type"),
        _NOT_MATCHING,
        _FRACTION,
        _NOT_MULTIPLE_OF,
    }
)

_TYPE_TESTS: dict[str, Any] = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": _is_integer,
}


def _type_check(types: Any, value: Any) -> bool | None:
    """`value` against a ``type`` keyword; None when the keyword is not a plain, well-formed
    one (the validator then decides and reports it)."""
    if isinstance(types, str):  # (the usual form: one name)
        test = _TYPE_TESTS.get(types)
        return None if test is None else bool(test(value))
    names = types
    if not isinstance(names, list) or not names:
        return None
    tests = [_TYPE_TESTS.get(n) for n in names if isinstance(n, str)]
    if len(tests) != len(names) or None in tests:
        return None
    return any(t(value) for t in tests if t is not None)


@lru_cache(maxsize=1)
def _validator() -> Any:
    """Draft 2020-12 with the converter's internal _NOT_MATCHING keyword (set on complements):
    a string must not match any of its patterns."""
    import jsonschema

    def not_matching(validator: Any, patterns: Any, instance: Any, schema: Any) -> Any:
        if isinstance(instance, str) and any(_search(p, instance) for p in patterns):
            yield jsonschema.ValidationError(f"{instance!r} matches an excluded pattern")

    def fraction(validator: Any, flag: Any, instance: Any, schema: Any) -> Any:
        if isinstance(instance, int) or (isinstance(instance, float) and instance.is_integer()):
            yield jsonschema.ValidationError(f"{instance!r} is an integer")

    def not_multiple_of(validator: Any, steps: Any, instance: Any, schema: Any) -> Any:
        if _multiple_of_one(instance, steps):
            yield jsonschema.ValidationError(f"{instance!r} is a multiple of one of {steps!r}")

    return jsonschema.validators.extend(
        jsonschema.Draft202012Validator,
        {_NOT_MATCHING: not_matching, _FRACTION: fraction, _NOT_MULTIPLE_OF: not_multiple_of},
    )


def _search(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return True  # (never excluded by the grammar: it refuses such patterns)


@lru_cache(maxsize=1)
def _format_checker() -> Any:
    import jsonschema

    checker = jsonschema.FormatChecker(formats=())
    for name, rx in formats.FORMAT_REGEXES.items():
        compiled = re.compile(rx)
        checker.checks(name)(lambda v, c=compiled: not isinstance(v, str) or c.fullmatch(v) is not None)
    return checker
