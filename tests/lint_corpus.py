"""The lint corpus: constraints with the exact rule codes ``corral.lint`` must report.

Written for these tests. The first half (``CLEAN``) is well-formed and bounded: lint must find
nothing there (no false positives). ``FLAWED`` cases each carry the set of codes expected.
"""

from __future__ import annotations

from typing import Any

S = {"type": "string", "maxLength": 40}

# (name, kind, source) — lint must report nothing.
CLEAN: list[tuple[str, str, Any]] = [
    (
        "bounded object",
        "json_schema",
        {
            "type": "object",
            "properties": {"name": S, "age": {"type": "integer", "minimum": 0, "maximum": 150}},
            "required": ["name"],
        },
    ),
    ("enum of labels", "json_schema", {"enum": ["billing", "bug", "feature"]}),
    ("const string", "json_schema", {"const": "v1"}),
    ("bounded array", "json_schema", {"type": "array", "items": {"type": "integer"}, "maxItems": 5}),
    (
        "bounded unique array",
        "json_schema",
        {"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 5},
    ),
    ("date format", "json_schema", {"type": "string", "format": "date"}),
    ("pattern string", "json_schema", {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"}),
    ("allOf agreeing bounds", "json_schema", {"allOf": [{"type": "integer", "minimum": 1}, {"maximum": 10}]}),
    (
        "required declared with additionalProperties false",
        "json_schema",
        {
            "type": "object",
            "properties": {"id": {"type": "integer"}},
            "required": ["id"],
            "additionalProperties": False,
        },
    ),
    (
        "required matched by patternProperties",
        "json_schema",
        {
            "type": "object",
            "patternProperties": {"^x-": S},
            "required": ["x-trace"],
            "additionalProperties": False,
        },
    ),
    (
        "propertyNames allows required",
        "json_schema",
        {
            "type": "object",
            "propertyNames": {"enum": ["a", "b"]},
            "properties": {"a": {"type": "integer"}},
            "required": ["a"],
        },
    ),
    (
        "oneOf disjoint by type",
        "json_schema",
        {"oneOf": [{"type": "integer"}, {"type": "string", "maxLength": 3}]},
    ),
    (
        "oneOf disjoint by const",
        "json_schema",
        {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"kind": {"const": "a"}},
                    "required": ["kind"],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {"kind": {"const": "b"}},
                    "required": ["kind"],
                    "additionalProperties": False,
                },
            ]
        },
    ),
    (
        "local ref",
        "json_schema",
        {"$defs": {"name": S}, "type": "object", "properties": {"n": {"$ref": "#/$defs/name"}}},
    ),
    ("enum within bounds", "json_schema", {"type": "integer", "enum": [1, 2, 3], "minimum": 1}),
    (
        "exclusive bounds with room",
        "json_schema",
        {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
    ),
    ("integer between bounds", "json_schema", {"type": "integer", "minimum": 1.5, "maximum": 2.5}),
    ("boolean", "json_schema", {"type": "boolean"}),
    ("nullable bounded", "json_schema", {"type": ["string", "null"], "maxLength": 8}),
    (
        "prefixItems closed",
        "json_schema",
        {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "boolean"}], "items": False},
    ),
    ("regex date", "regex", r"\d{4}-\d{2}-\d{2}"),
    ("regex choice", "regex", "(yes|no|maybe)"),
    ("lark small", "lark", 'start: "(" INT ("," INT)* ")"\n%import common.INT\n'),
    ("grammar small", "grammar", 'root ::= "(" num ("," num)* ")"\nnum ::= [0-9]{1,3}\n'),
]

CLEAN += [
    (
        "words with digits are not ids",
        "json_schema",
        {"enum": ["IPv6protocoltranslation", "HTTP2ServerPush"]},
    ),
    ("long free string in a schema", "json_schema", {"type": "string", "maxLength": 200}),
]

# (name, kind, source, expected codes)
FLAWED: list[tuple[str, str, Any, set[str]]] = [
    ("maxLength past the counted budget", "json_schema", {"type": "string", "maxLength": 2000}, {"W201"}),
    ("per-request api key", "json_schema", {"const": "tok_8Hq2ZpL0xR4vN7mK1sT9wB3c"}, {"W209"}),
    ("minimum above maximum", "json_schema", {"type": "integer", "minimum": 5, "maximum": 3}, {"E101"}),
    (
        "exclusive bounds equal",
        "json_schema",
        {"type": "number", "exclusiveMinimum": 1, "maximum": 1},
        {"E101"},
    ),
    ("no integer between", "json_schema", {"type": "integer", "minimum": 1.2, "maximum": 1.8}, {"E101"}),
    (
        "allOf bounds contradict",
        "json_schema",
        {"allOf": [{"type": "number", "minimum": 10}, {"maximum": 2}]},
        {"E101"},
    ),
    (
        "allOf types disjoint",
        "json_schema",
        {"allOf": [{"type": "string", "maxLength": 3}, {"type": "integer"}]},
        {"E101"},
    ),
    (
        "minLength above maxLength",
        "json_schema",
        {"type": "string", "minLength": 5, "maxLength": 2},
        {"E101"},
    ),
    (
        "minItems above maxItems",
        "json_schema",
        {"type": "array", "items": {"type": "integer"}, "minItems": 4, "maxItems": 2},
        {"E101"},
    ),
    (
        "required excluded by additionalProperties",
        "json_schema",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "required": ["b"],
            "additionalProperties": False,
        },
        {"E102"},
    ),
    (
        "required excluded by propertyNames",
        "json_schema",
        {
            "type": "object",
            "propertyNames": {"pattern": "^[a-z]+$"},
            "required": ["Name"],
            "properties": {"Name": S},
        },
        {"E102"},
    ),
    (
        "required property false",
        "json_schema",
        {"type": "object", "properties": {"a": False}, "required": ["a"]},
        {"E102"},
    ),
    ("enum outside type", "json_schema", {"type": "string", "enum": [1, 2]}, {"E103"}),
    ("const outside type", "json_schema", {"type": "integer", "const": "seven"}, {"E103"}),
    ("empty enum", "json_schema", {"enum": []}, {"E103"}),
    ("const above maximum", "json_schema", {"type": "integer", "const": 12, "maximum": 10}, {"E104"}),
    (
        "enum all too long",
        "json_schema",
        {"type": "string", "enum": ["alpha", "gamma"], "maxLength": 3},
        {"E104"},
    ),
    (
        "empty pattern language",
        "json_schema",
        {"type": "string", "pattern": "[^\\x00-\\U0010FFFF]"},
        {"E105"},
    ),
    (
        "undefined ref",
        "json_schema",
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}},
        {"E106"},
    ),
    (
        "uniqueItems left after decoding",
        "json_schema",
        {"type": "array", "items": {"type": ["number", "null"]}, "maxItems": 4, "uniqueItems": True},
        {"W201"},
    ),
    ("not left after decoding", "json_schema", {"type": "number", "not": {"multipleOf": 0.5}}, {"W201"}),
    (
        "oneOf overlapping types",
        "json_schema",
        {"oneOf": [{"type": "integer"}, {"type": "number"}]},
        {"W202"},  # (exactly-one is enforced: the non-integral numbers)
    ),
    (
        "oneOf overlapping objects",
        "json_schema",
        {"oneOf": [{"type": "object", "properties": {"a": S}}, {"type": "object", "properties": {"b": S}}]},
        {"W202"},  # (exactly-one is enforced through the complements: no W201)
    ),
    (
        "unbounded string",
        "json_schema",
        {"type": "object", "properties": {"note": {"type": "string"}}},
        {"W203"},
    ),
    ("unbounded array", "json_schema", {"type": "array", "items": {"type": "boolean"}}, {"W204"}),
    (
        "unique integers capped by the mask",
        "json_schema",
        {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
        {"W204", "W210"},
    ),
    (
        "unique integers past max_unique_items",
        "json_schema",
        {"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 1000},
        {"W210"},
    ),
    ("large enum", "json_schema", {"enum": [f"SKU-{i:04d}" for i in range(200)]}, {"W205"}),
    (
        "recursive tree",
        "json_schema",
        {
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {
                        "kids": {"type": "array", "maxItems": 3, "items": {"$ref": "#/$defs/node"}}
                    },
                }
            },
            "$ref": "#/$defs/node",
        },
        {"W206"},
    ),
    (
        "per-request uuid",
        "json_schema",
        {"type": "object", "properties": {"id": {"const": "3f2b8c1e-9a4d-4e7b-8c2a-1b2c3d4e5f60"}}},
        {"W209"},
    ),
    ("per-request email", "json_schema", {"enum": ["alice@example.com", "bob@example.com"]}, {"W209"}),
    ("regex syntax error", "regex", "a(b", {"E100"}),
    ("regex lookahead", "regex", "(?=a)a", {"E100"}),
    ("regex empty", "regex", "[^\\x00-\\U0010FFFF]", {"E100"}),
    ("grammar undefined rule", "grammar", 'root ::= "x" missing\n', {"E100"}),
    ("lark template", "lark", 'start: _l{x}\n_l{a}: a+\nx: "x"\n', {"E100"}),
    ("grammar syntax error", "grammar", 'root ::= ("x"\n', {"E100"}),
    ("schema not an object", "json_schema", "[1, 2]", {"E100"}),
    ("schema bad json text", "json_schema", '{"type": ', {"E100"}),
    ("remote ref", "json_schema", {"$ref": "https://example.com/schema.json"}, {"E100"}),
]
