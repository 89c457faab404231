"""MkDocs hook: tables generated from corral itself, so the documentation cannot drift.

A page writes ``<!-- corral:table NAME -->`` on a line of its own; the build replaces it with the
table NAME (``errors``, ``limits``, ``schema-options``, ``lint-rules``, ``json-schema``,
``lark-common``, ``trace-spans``, ``trace-attributes``, ``quality-metrics``). An unknown NAME
fails the build.
"""

from __future__ import annotations

import json
import re
from typing import Any

_MARKER = re.compile(r"^<!-- corral:table ([a-z-]+) -->$", re.MULTILINE)


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def _table(head: list[str], rows: list[list[object]]) -> str:
    return "\n".join([_row(*head), _row(*(["---"] * len(head))), *(_row(*r) for r in rows)])


def _first_line(doc: str | None) -> str:
    # The docstrings' reST ``literals`` become Markdown `literals`.
    return (doc or "").strip().split("\n\n")[0].replace("\n", " ").replace("``", "`")


def _errors() -> str:
    from corral import errors

    rows = []
    for cls in sorted(errors._classes().values(), key=lambda c: c.code):
        parent = cls.__mro__[1].__name__
        rows.append([f"`{cls.code}`", f"`{cls.__name__}`", f"`{parent}`", _first_line(cls.__doc__)])
    return _table(["code", "class", "parent", "meaning"], rows)


def _limits() -> str:
    from corral import DEFAULT_LIMITS

    return _table(["engine limit", "default"], [[f"`{k}`", f"{v:,}"] for k, v in DEFAULT_LIMITS.items()])


def _schema_options() -> str:
    import dataclasses

    from corral.grammar.json_schema import SchemaOptions

    rows = [[f"`{f.name}`", f"`{f.default!r}`"] for f in dataclasses.fields(SchemaOptions)]
    return _table(["schema option", "default"], rows)


def _lint_rules() -> str:
    from corral.linter import RULES

    return _table(
        ["code", "rule", "severity", "meaning"],
        [[f"`{r.code}`", r.name, r.severity, r.summary] for r in RULES.values()],
    )


# One probe schema per keyword: the table says what compiling it reports, today.
_PROBES: list[tuple[str, dict[str, Any]]] = [
    ("type", {"type": ["string", "null"]}),
    ("enum", {"enum": ["a", 1, None]}),
    ("const", {"const": {"k": [1]}}),
    ("minimum / maximum", {"type": "integer", "minimum": -3, "maximum": 70}),
    ("exclusiveMinimum / exclusiveMaximum", {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}),
    ("multipleOf", {"type": "integer", "multipleOf": 5}),
    ("minLength / maxLength", {"type": "string", "minLength": 2, "maxLength": 40}),
    ("pattern", {"type": "string", "pattern": "^[A-Z]{3}-\\d+$"}),
    ("format (date-time)", {"type": "string", "format": "date-time"}),
    (
        "items / prefixItems",
        {"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "string"}},
    ),
    ("minItems / maxItems", {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}),
    ("uniqueItems", {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}),
    ("contains", {"type": "array", "items": {"type": "integer"}, "contains": {"const": 3}}),
    (
        "properties / required",
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
    ),
    ("additionalProperties", {"type": "object", "additionalProperties": {"type": "integer"}}),
    ("patternProperties", {"type": "object", "patternProperties": {"^x-": {"type": "string"}}}),
    ("propertyNames", {"type": "object", "propertyNames": {"maxLength": 3}}),
    ("minProperties / maxProperties", {"type": "object", "minProperties": 1, "maxProperties": 2}),
    (
        "dependentRequired",
        {"type": "object", "properties": {"a": {}, "b": {}}, "dependentRequired": {"a": ["b"]}},
    ),
    ("$ref / $defs", {"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n"}),
    ("allOf", {"allOf": [{"type": "integer"}, {"minimum": 2}]}),
    ("anyOf", {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
    ("oneOf", {"oneOf": [{"type": "integer"}, {"type": "number"}]}),
    ("not", {"type": "integer", "not": {"const": 3}}),
    ("if / then / else", {"if": {"type": "integer"}, "then": {"minimum": 0}, "else": {"type": "string"}}),
    ("unevaluatedProperties", {"type": "object", "properties": {"a": {}}, "unevaluatedProperties": False}),
]


def _json_schema() -> str:
    from corral.grammar.json_schema import schema_to_grammar

    rows = []
    for name, schema in _PROBES:
        try:
            _, report = schema_to_grammar(schema)
            after = sorted({f"`{e.keyword}`" for e in report.checked_after()})
            status = "checked after decoding: " + ", ".join(after) if after else "enforced by the mask"
        except Exception as e:  # noqa: BLE001 — shown in the table, not hidden
            status = f"refused: {e}"
        rows.append([f"`{name}`", f"`{json.dumps(schema)}`", status])
    return _table(["keyword", "probe schema", "what compile reports"], rows)


def _lark_common() -> str:
    from corral.grammar.lark import COMMON

    return _table(["terminal", "definition"], [[f"`{k}`", f"`{v}`"] for k, v in COMMON.items()])


def _trace_spans() -> str:
    from corral.telemetry.tracing import SPANS

    return _table(["span", "covers"], [[f"`{k}`", v] for k, v in SPANS.items()])


def _trace_attributes() -> str:
    from corral.telemetry.tracing import ATTRIBUTES

    return _table(["attribute", "meaning"], [[f"`{k}`", v] for k, v in ATTRIBUTES.items()])


def _quality_metrics() -> str:
    from corral.telemetry.quality import DEFS

    rows = [[f"`{d.name}`", d.kind, ", ".join(f"`{x}`" for x in d.labels) or "-", d.help] for d in DEFS]
    return _table(["metric", "type", "labels", "meaning"], rows)


TABLES = {
    "errors": _errors,
    "limits": _limits,
    "schema-options": _schema_options,
    "lint-rules": _lint_rules,
    "json-schema": _json_schema,
    "lark-common": _lark_common,
    "trace-spans": _trace_spans,
    "trace-attributes": _trace_attributes,
    "quality-metrics": _quality_metrics,
}


def render(markdown: str) -> str:
    """``markdown`` with every table marker replaced (KeyError names an unknown table)."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in TABLES:
            raise KeyError(f"unknown corral table {name!r} (known: {', '.join(TABLES)})")
        return TABLES[name]()

    return _MARKER.sub(one, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return render(markdown)
