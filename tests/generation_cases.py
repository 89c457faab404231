"""Prompts and constraints shared by the real-model generation tests (transformers, llama.cpp,
server): one set of cases, so every backend is held to the same outputs."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}

# (prompt, schema) pairs: varied keywords — enums, bounds, arrays, nesting, optional fields,
# formats, patterns, anyOf, nullable, const, recursion.
SCHEMA_CASES: list[tuple[str, dict[str, Any]]] = [
    ("Extract the person as JSON: John Smith is 42 years old.", PERSON),
    ("Extract the person as JSON: Mary, aged 7.", PERSON),
    (
        "Classify the sentiment of: 'I love this phone'. JSON with a label.",
        {
            "type": "object",
            "properties": {"label": {"enum": ["positive", "negative", "neutral"]}},
            "required": ["label"],
        },
    ),
    (
        "List three fruits as JSON.",
        {
            "type": "object",
            "properties": {
                "fruits": {
                    "type": "array",
                    "items": {"type": "string", "maxLength": 12},
                    "minItems": 3,
                    "maxItems": 3,
                }
            },
            "required": ["fruits"],
        },
    ),
    (
        "Give a rating from 1 to 5 for a good movie, as JSON.",
        {
            "type": "object",
            "properties": {
                "rating": {"type": "integer", "minimum": 1, "maximum": 5},
                "comment": {"type": "string", "maxLength": 20},
            },
            "required": ["rating"],
        },
    ),
    (
        "What is the date of the first moon landing? JSON with a date field.",
        {
            "type": "object",
            "properties": {"date": {"type": "string", "format": "date"}},
            "required": ["date"],
        },
    ),
    (
        "Give the temperature in Paris as JSON (celsius, a decimal number).",
        {
            "type": "object",
            "properties": {"celsius": {"type": "number", "minimum": -50, "exclusiveMaximum": 60}},
            "required": ["celsius"],
        },
    ),
    (
        "Describe a book as JSON with title, author and year.",
        {
            "type": "object",
            "properties": {
                "title": {"type": "string", "maxLength": 30},
                "author": {
                    "type": "object",
                    "properties": {
                        "first": {"type": "string", "maxLength": 15},
                        "last": {"type": "string", "maxLength": 15},
                    },
                    "required": ["first", "last"],
                },
                "year": {"type": ["integer", "null"], "minimum": 1000, "maximum": 2030},
            },
            "required": ["title", "author", "year"],
        },
    ),
    (
        "Give a product code as JSON.",
        {
            "type": "object",
            "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{3}$"}},
            "required": ["code"],
        },
    ),
    (
        "Is water wet? Answer as JSON.",
        {
            "type": "object",
            "properties": {"answer": {"type": "boolean"}, "why": {"type": "string", "maxLength": 25}},
            "required": ["answer", "why"],
        },
    ),
    (
        "A shape as JSON: a circle of radius 2 or a square of side 3.",
        {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"kind": {"const": "circle"}, "radius": {"type": "number", "minimum": 0}},
                    "required": ["kind", "radius"],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {"kind": {"const": "square"}, "side": {"type": "number", "minimum": 0}},
                    "required": ["kind", "side"],
                    "additionalProperties": False,
                },
            ]
        },
    ),
    (
        "A tiny family tree as JSON: a person with children.",
        {
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "maxLength": 10},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2},
                    },
                    "required": ["name", "children"],
                    "additionalProperties": False,
                }
            },
            "$ref": "#/$defs/node",
        },
    ),
]

REGEX_CASES = [
    (
        "What is the order number in 'parcel for order ORD-58213-KX'? Answer with it only.",
        r"ORD-[0-9]{5}-[A-Z]{2}",
    ),
    ("Write today's date.", r"20[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"),
    ("Answer yes or no: is the sky blue?", r"(yes|no)"),
    ("Give a US phone number.", r"\([0-9]{3}\) [0-9]{3}-[0-9]{4}"),
    ("Name a colour in lower case.", r"[a-z]{3,10}"),
    ("What is 12 times 12?", r"[0-9]{1,4}"),
]

GRAMMAR = r"""
root ::= "SELECT " cols " FROM " ident (" WHERE " ident " = " num)?
cols ::= ident (", " ident)*
ident ::= [a-z_]{1,12}
num ::= [0-9]{1,4}
"""
GRAMMAR_RE = re.compile(
    r"SELECT [a-z_]{1,12}(, [a-z_]{1,12})* FROM [a-z_]{1,12}( WHERE [a-z_]{1,12} = [0-9]{1,4})?"
)


def valid_json(text: str, schema: Any) -> bool:
    try:
        jsonschema.validate(json.loads(text), schema)
        return True
    except (ValueError, jsonschema.ValidationError):
        return False
