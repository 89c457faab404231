"""``corral lint``: is this constraint going to hurt me? — before production finds out.

    result = corral.lint({"type": "object", "properties": {...}}, tokenizer=tok)
    for f in result.findings:
        print(f.code, f.pointer, f.message)
    result.cost.compile_ms, result.tightness.mean_share

For JSON Schemas, regexes and grammars it reports, each with a stable rule code (see
:data:`RULES`) and the JSON pointer (or line/column) it is about:

- errors: parts no value satisfies (contradictory bounds after ``allOf`` merging, required
  properties that are excluded, enums outside their type or bounds, empty patterns, undefined
  ``$ref``) and everything compile refuses;
- warnings: keywords checked only after decoding, overlapping ``oneOf`` branches, unbounded
  strings/arrays, large inline enums, recursion, deep or wide schemas, per-request values;
- cost: conversion and compile time, grammar size and first-mask time on the tokenizer, each with
  the limit it is held against;
- tightness: the share of the vocabulary the mask allows at each step of a seeded random walk.

Modules: ``rules`` (the rule table), ``schema_checks`` (static checks), ``overlap`` (W202, with
evidence), ``measure`` (compile, cost, walk).
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from corral.errors import CorralError, SchemaError
from corral.linter.measure import Cost, Tightness, byte_tokenizer, measure
from corral.linter.overlap import oneof_overlaps
from corral.linter.rules import RULES, Rule, rule
from corral.linter.schema_checks import Finding, SchemaThresholds, check_schema
from corral.tokenizer import Tokenizer

__all__ = [
    "LINT_REPORT_SCHEMA",
    "RULES",
    "Finding",
    "LintResult",
    "Rule",
    "SchemaThresholds",
    "Tightness",
    "Cost",
    "detect_kind",
    "lint",
    "lint_file",
    "report_json",
]

Kind = Literal["json_schema", "regex", "grammar", "lark"]
_SUFFIXES: dict[str, Kind] = {
    ".json": "json_schema",
    ".gbnf": "grammar",
    ".ebnf": "grammar",
    ".grammar": "grammar",
    ".lark": "lark",
    ".regex": "regex",
    ".re": "regex",
}


@dataclass
class LintResult:
    """What lint found for one constraint."""

    source: str
    kind: str
    findings: list[Finding] = field(default_factory=list)
    cost: Cost | None = None
    tightness: Tightness | None = None
    tokenizer: str | None = None

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if rule(f.code).severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if rule(f.code).severity == "warning"]

    def to_json(self) -> dict[str, Any]:
        """This result as the JSON object :data:`LINT_REPORT_SCHEMA` describes (one of ``files``)."""
        return {
            "source": self.source,
            "kind": self.kind,
            "tokenizer": self.tokenizer,
            "findings": [
                {
                    "code": f.code,
                    "rule": rule(f.code).name,
                    "severity": rule(f.code).severity,
                    "message": f.message,
                    "pointer": f.pointer,
                    "line": f.line,
                    "column": f.column,
                }
                for f in self.findings
            ],
            "cost": dataclasses.asdict(self.cost) if self.cost is not None else None,
            "tightness": dataclasses.asdict(self.tightness) if self.tightness is not None else None,
        }


def detect_kind(path: str | os.PathLike[str]) -> Kind | None:
    """The constraint kind a file's suffix names (``.json`` schema, ``.gbnf``/``.ebnf`` grammar,
    ``.lark`` Lark grammar, ``.regex``/``.re`` regex), or None."""
    return _SUFFIXES.get(Path(path).suffix.lower())


def _static_regexes(root: Any) -> list[Finding]:
    """E105 for ``pattern`` keywords whose language is empty (syntax the engine does not read
    is left to the compile report)."""
    from corral._native import check_regex
    from corral.linter.schema_checks import _nodes

    out = []
    for node, ptr in _nodes(root):
        pat = node.get("pattern") if isinstance(node, dict) else None
        if isinstance(pat, str):
            try:
                check_regex(pat, {})
            except CorralError as e:
                if "matches no string" in str(e):
                    out.append(Finding("E105", f"pattern {pat!r} matches no string", f"{ptr}/pattern"))
    return out


def lint(
    constraint: Any,
    *,
    kind: Kind | None = None,
    tokenizer: Tokenizer | None = None,
    measure_cost: bool = True,
    steps: int = 48,
    seed: int = 0,
    thresholds: SchemaThresholds | None = None,
    ignore: tuple[str, ...] = (),
    source: str = "<constraint>",
    **options: Any,
) -> LintResult:
    """Lint one constraint: a JSON Schema (dict, bool, JSON text or Pydantic type; the default
    kind), a regex (``kind="regex"``) or a grammar (``kind="grammar"``, GBNF + ``/regex/``;
    ``kind="lark"``, a Lark grammar).

    ``tokenizer`` is the vocabulary cost and tightness are measured on (default: a 256-token
    byte vocabulary, which says little about a real model's masks); ``options`` are the
    schema options and engine limits compile takes (``whitespace=``, ``max_convert_ms=``, ...);
    ``ignore`` drops findings by rule code. Never raises for a bad constraint: that is an E100
    finding."""
    k: Kind = kind or "json_schema"
    if k not in ("json_schema", "regex", "grammar", "lark"):
        raise ValueError(f"kind must be json_schema, regex, grammar or lark, got {k!r}")
    tok = tokenizer if tokenizer is not None else byte_tokenizer()
    result = LintResult(source=source, kind=k, tokenizer=tok.name)
    findings: list[Finding] = []
    value = constraint
    if k == "json_schema":
        try:
            from corral.schema import schema_of

            value, _ = schema_of(constraint)
            if isinstance(value, str):
                value = json.loads(value)
        except CorralError as e:
            findings.append(Finding("E100", f"{e.code}: {e}", pointer=getattr(e, "pointer", "#")))
            value = None
        except (ValueError, TypeError) as e:
            findings.append(Finding("E100", f"schema_error: not a JSON Schema: {e}", pointer="#"))
            value = None
        except RecursionError:
            findings.append(
                Finding("E100", "limit_exceeded: JSON text nested too deeply to read", pointer="#")
            )
            value = None
        if value is not None and not isinstance(value, (dict, bool)):
            err = SchemaError(f"a JSON Schema is an object or a boolean, not {type(value).__name__}")
            findings.append(Finding("E100", f"{err.code}: {err}", pointer="#"))
            value = None
        if value is not None:
            findings += check_schema(value, thresholds)
            findings += _static_regexes(value)
            findings += oneof_overlaps(value, byte_tokenizer())
    elif not isinstance(constraint, str):
        raise TypeError(f"a {k} is a str, got {type(constraint).__name__}")
    if value is not None and measure_cost:
        cost, tight, more = measure(k, value, tok, options, steps=steps, seed=seed)
        result.cost, result.tightness = cost, tight
        # Compile stops at its first refusal; when the static checks already name errors, the
        # refusal is one of them said less precisely (the converter often reports "#"), so it is
        # dropped. Fixing those and linting again shows any refusal left.
        static_errors = any(rule(f.code).severity == "error" for f in findings)
        findings += [f for f in more if not (f.code == "E100" and static_errors)]
    result.findings = [f for f in findings if f.code not in ignore]
    return result


def lint_file(path: str | os.PathLike[str], *, kind: Kind | None = None, **kwargs: Any) -> LintResult:
    """Lint the constraint in a file (kind from the suffix unless given; see :func:`detect_kind`).
    An unreadable file is an E100 finding."""
    p = Path(path)
    k = kind or detect_kind(p)
    if k is None:
        raise ValueError(f"{p}: cannot tell the constraint kind from the suffix {p.suffix!r}: pass kind=")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return LintResult(source=str(p), kind=k, findings=[Finding("E100", f"cannot read the file: {e}")])
    if k == "regex":
        text = text[:-1] if text.endswith("\n") else text
    return lint(text, kind=k, source=str(p), **kwargs)


# The JSON output of ``corral lint --format json`` (and of ``report_json``), as a JSON Schema.
_FINDING = {
    "type": "object",
    "required": ["code", "rule", "severity", "message", "pointer", "line", "column"],
    "additionalProperties": False,
    "properties": {
        "code": {"type": "string", "pattern": "^[EW][0-9]{3}$"},
        "rule": {"type": "string"},
        "severity": {"enum": ["error", "warning"]},
        "message": {"type": "string"},
        "pointer": {"type": ["string", "null"]},
        "line": {"type": ["integer", "null"]},
        "column": {"type": ["integer", "null"]},
    },
}
LINT_REPORT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["version", "files", "summary"],
    "additionalProperties": False,
    "properties": {
        "version": {"const": 1},
        "files": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["source", "kind", "tokenizer", "findings", "cost", "tightness"],
                "additionalProperties": False,
                "properties": {
                    "source": {"type": "string"},
                    "kind": {"enum": ["json_schema", "regex", "grammar", "lark"]},
                    "tokenizer": {"type": ["string", "null"]},
                    "findings": {"type": "array", "items": _FINDING},
                    "cost": {"type": ["object", "null"]},
                    "tightness": {"type": ["object", "null"]},
                },
            },
        },
        "summary": {
            "type": "object",
            "required": ["files", "errors", "warnings"],
            "properties": {k: {"type": "integer", "minimum": 0} for k in ("files", "errors", "warnings")},
        },
    },
}


def report_json(results: list[LintResult]) -> dict[str, Any]:
    """Results as one JSON object (validates against :data:`LINT_REPORT_SCHEMA`)."""
    return {
        "version": 1,
        "files": [r.to_json() for r in results],
        "summary": {
            "files": len(results),
            "errors": sum(len(r.errors) for r in results),
            "warnings": sum(len(r.warnings) for r in results),
        },
    }
