"""The JSON Schema vocabulary the converter reads: keyword tables and internal marker keywords.

In:  nothing (constants only).
Out: which keywords constrain which type, which are annotations, which the grammar never
     enforces (checked after decoding), the slot keyword, and the two keywords the converter
     writes into intermediate schemas (never present in user input: they start with
     ``$corral:``).

Invariants: every keyword with validation meaning is in ``_KNOWN``; anything else is an
annotation and constrains nothing. The tables are frozen; no module mutates them.
"""

from __future__ import annotations

import re

# A string schema whose allowed values are supplied per request: ``{"type": "string",
# "x-corral-slot": "cost_center"}`` becomes the grammar slot ``${cost_center:json}`` (a JSON
# string, values spelled canonically), bound with ``JsonSchemaGrammar.bind``. It constrains
# strings only, like ``pattern``; with it a string allows no other string keyword.
SLOT_KEYWORD = "x-corral-slot"
_SLOT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")

# Keywords that never constrain a value.
_ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "$anchor",
        "$vocabulary",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$defs",
        "definitions",
        "contentMediaType",
        "contentEncoding",
        "contentSchema",
    }
)
_TYPES = ("null", "boolean", "object", "array", "string", "number")
_NUMBER_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_STRING_KEYS = ("minLength", "maxLength", "pattern", "format")
_ARRAY_KEYS = (
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "additionalItems",
    "unevaluatedItems",
)
_OBJECT_KEYS = (
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "dependencies",
)
# Every keyword with validation meaning (anything else is an annotation).
_KNOWN = frozenset(
    {
        "type",
        "enum",
        "const",
        "$ref",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "$dynamicRef",
        "$recursiveRef",
        *_NUMBER_KEYS,
        *_STRING_KEYS,
        *_ARRAY_KEYS,
        *_OBJECT_KEYS,
    }
)
# Keywords the grammar cannot (yet) express: kept for the post-decoding check. (multipleOf,
# contains/minContains/maxContains, minProperties/maxProperties, dependentRequired,
# dependentSchemas, dependencies, patternProperties and propertyNames are enforced where
# expressible and reported by the type that uses them, uniqueItems by arrays (unique_items.py:
# in the mask for small finite item sets); if/then/else and not are enforced when
# the complement of the condition / negated schema is expressible, see composition.py.)
_POST_CHECKED = frozenset(
    {
        "not",
        "if",
        "then",
        "else",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)


# Keywords of an allOf part that could not be merged (see _merge_groups): checked after decoding.
_UNMERGED = "$corral:unmerged"
# Internal keyword: numbers in plain decimal notation only. Set on the intervals _complement
# makes: an exponent spelling near a zero bound (1e-400) would parse to 0.0 in a validator.
_PLAIN_NUMBERS = "$corral:plain-numbers"
# Internal keyword: ECMA/Python search patterns a string must NOT match (each subtracted from the
# string's automaton with the grammar's ``-``). Set on the string branches of a complement.
_NOT_MATCHING = "$corral:not-matching"
# Internal keyword: numbers that are not integers, in plain spellings of at most 15 significant
# digits (so a validator's float is not integral either: 15 digits survive the round trip).
# Set on the number branch of the complement of ``type: integer``.
_FRACTION = "$corral:fraction"
# Internal keyword: positive integers an integer must NOT be a multiple of (the integer branch of
# the complement of an integer ``multipleOf``; 0 is a multiple of every one, so it is out too).
_NOT_MULTIPLE_OF = "$corral:not-multiple-of"


def _steps_ok(steps: object) -> bool:
    """Is `steps` a well-formed _NOT_MULTIPLE_OF value: a list of positive integers (no bools)?"""
    return isinstance(steps, list) and all(
        isinstance(e, int) and not isinstance(e, bool) and e >= 1 for e in steps
    )
