"""The lint rules: a stable code, a name and a severity for each thing ``corral lint`` reports.

Codes never change meaning between releases (CI jobs filter on them): ``E1xx`` are errors (the
constraint is contradictory, allows nothing it seems to allow, or does not compile), ``W2xx``
warnings about what the constraint does to a model (keywords it does not enforce, values a small
model can run on forever, shapes that defeat the compile cache), ``W3xx`` warnings from what was
measured (cost near a budget, a mask that constrains almost nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]

__all__ = ["RULES", "Rule", "Severity", "rule"]


@dataclass(frozen=True)
class Rule:
    """One lint rule."""

    code: str
    name: str
    severity: Severity
    summary: str


_TABLE = [
    Rule(
        "E100",
        "compile-refused",
        "error",
        "the constraint does not compile (corral's error, with its position)",
    ),
    Rule(
        "E101",
        "contradictory-bounds",
        "error",
        "bounds or types that no value satisfies, after allOf merging",
    ),
    Rule(
        "E102",
        "required-excluded",
        "error",
        "a required property that additionalProperties, propertyNames or a false schema forbids",
    ),
    Rule("E103", "enum-type-mismatch", "error", "an enum/const no value of which has the declared type"),
    Rule(
        "E104",
        "value-out-of-bounds",
        "error",
        "an enum/const no value of which meets the schema's own bounds",
    ),
    Rule("E105", "empty-language", "error", "a pattern or regex that matches no string"),
    Rule("E106", "undefined-ref", "error", "a local $ref that points nowhere"),
    Rule(
        "W201",
        "checked-after-decoding",
        "warning",
        "a keyword the grammar cannot enforce: checked after decoding",
    ),
    Rule(
        "W202", "oneof-overlap", "warning", "a value that matches two oneOf branches (oneOf then rejects it)"
    ),
    Rule(
        "W203",
        "unbounded-string",
        "warning",
        "a string without maxLength: a small model can run on to max_tokens",
    ),
    Rule(
        "W204",
        "unbounded-array",
        "warning",
        "an array without maxItems: a small model can run on to max_tokens",
    ),
    Rule("W205", "large-enum", "warning", "a large inline enum: bind it per request as an x-corral-slot"),
    Rule("W206", "recursive-schema", "warning", "a $ref cycle: nesting is unbounded"),
    Rule("W207", "deep-schema", "warning", "schema nesting deeper than the lint threshold"),
    Rule("W208", "wide-object", "warning", "an object with more properties than the lint threshold"),
    Rule(
        "W209",
        "per-request-value",
        "warning",
        "a value that looks per-request (id, email, timestamp): every request compiles anew",
    ),
    Rule(
        "W210",
        "capped-unique-array",
        "warning",
        "a uniqueItems array the mask closes at max_unique_items items (no maxItems within it)",
    ),
    Rule("W301", "near-budget", "warning", "conversion or compile time at least half of its limit"),
    Rule(
        "W302",
        "loose-constraint",
        "warning",
        "a regex or grammar whose mask allows over 90% of the vocabulary along a walk",
    ),
]

RULES: dict[str, Rule] = {r.code: r for r in _TABLE}
"""Every rule by code."""


def rule(code: str) -> Rule:
    """The rule with this code (a KeyError here is a bug in corral, not bad input)."""
    return RULES[code]
