"""JSON Schema → corral grammar text.

In:  a JSON Schema (draft 2020-12; draft-07 spellings ``definitions`` and array-form ``items``
     accepted) as a Python dict or bool.
Out: grammar text (GBNF plus ``/regex/`` and ``/regex/j`` terminals) whose language is the set
     of JSON texts the schema accepts — for every keyword the grammar enforces — plus a
     :class:`SchemaReport` saying, keyword by keyword, what is enforced by the grammar and what
     is checked after decoding.

Invariants:
* Soundness first: every keyword is either enforced exactly by the grammar, or listed in the
  report as ``checked after decoding`` (the Python API then validates the output with the
  ``jsonschema`` package), or refused. Nothing is silently dropped.
* Keywords apply to whichever type the value turns out to be: ``{"minimum": 1}`` constrains
  numbers only and allows any string.
* Strings are constrained on their *decoded* value: ``pattern``/``format``/lengths are
  compiled with the ``j`` regex flag, which accepts every JSON spelling of the matching text
  (raw characters or escapes) and never a raw control character. Several of them at once are
  one product automaton (the grammar's ``&``), lengths up to _MAX_COUNTED_CHARS; a product is
  probed first (probe.py) and written only within _MAX_PRODUCT_STATES (else the length, then
  the pattern, is checked after decoding).
* Property names: an undeclared key is one of up to 2**_MAX_KEY_PATTERNS key classes, one per
  set of ``patternProperties`` patterns it matches (its value then satisfies all of their
  schemas, or ``additionalProperties`` for none), each a product automaton
  ``propertyNames & patterns - other patterns - declared names``. Declared names get the
  schemas of the patterns they match; those that fail ``propertyNames`` are never generated.
  A ``propertyNames`` enum of at most _MAX_NAMED_KEYS names makes them declared members, so
  no key repeats; other extra keys may repeat (not regular), except the ones counted for
  ``minProperties``, whose lengths differ.
* Numbers: fractions and exponents are parsed into floats by validators; bounds are applied
  to what the float comparison sees (numbers.float_safe_bound), so ``1e-400`` is never
  generated under ``exclusiveMinimum: 0``.
* Recursion (``$ref`` cycles) becomes grammar recursion: nesting is exact, not unrolled.
* Counting keywords are state machines written as rules (bounded by _MAX_MACHINE_STATES, else
  checked after decoding): ``multipleOf`` (multiples.py: integer steps exactly; decimal steps
  generated exactly but re-checked, since validators divide in floating point),
  ``minProperties``/``maxProperties`` and dependencies (containers.ObjectMembers: members in
  schema order, names a dependency mentions become declared properties), ``contains`` with
  ``minContains``/``maxContains`` (containers.ArrayItems: an upper bound needs the complement
  of ``contains``, see _complement), and ``if``/``then``/``else`` when "not if" is expressible
  (anyOf of the two cases, see _not_if).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any, Literal
from urllib.parse import unquote

from corral.errors import CompileError, SchemaError, UnsupportedSchemaError
from corral.grammar import formats, multiples, numbers, probe
from corral.grammar.containers import FIRST, NONEMPTY, ArrayItems, Member, ObjectMembers, TooManyStates
from corral.grammar.regex_text import scan, top_level_branches

__all__ = ["SLOT_KEYWORD", "SchemaOptions", "SchemaReport", "ReportEntry", "schema_to_grammar"]

# A string schema whose allowed values are supplied per request: ``{"type": "string",
# "x-corral-slot": "cost_center"}`` becomes the grammar slot ``${cost_center:json}`` (a JSON
# string, values spelled canonically), bound with ``JsonSchemaGrammar.bind``. It constrains
# strings only, like ``pattern``; with it a string allows no other string keyword.
SLOT_KEYWORD = "x-corral-slot"
_SLOT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")

Whitespace = Literal["compact", "flexible", "pretty"]

# Containers nested deeper than this are laid out flexibly in pretty mode (one set of rules per
# depth keeps the indentation exact; recursion needs a bound).
_PRETTY_MAX_DEPTH = 32

# Longest minLength/maxLength the grammar counts exactly (see string_body). Counting multiplies
# the string automaton by the count (about 20 states per character for any character, 10 for
# an ASCII class); it is one product automaton, probed against _MAX_PRODUCT_STATES first.
_MAX_COUNTED_CHARS = 256
# Lengths up to this many characters, alone, stay a plain counted terminal (no product needed).
_INLINE_COUNTED_CHARS = 32
# Most DFA states one product automaton (string `&`/`-` of pattern, format, length, key
# classes) may have, and all of a schema's products together; beyond them the keyword that
# caused it is checked after decoding. (The engine's defaults are 20,000 and 200,000.)
_MAX_PRODUCT_STATES = 6000
_MAX_PRODUCT_TOTAL = 60000
# Most patternProperties patterns whose key classes (one per subset) the grammar writes.
_MAX_KEY_PATTERNS = 4
# Most names a propertyNames enum/const may list to become declared members (no repeats).
_MAX_NAMED_KEYS = 16

# Most rules one counting state machine may write (multipleOf automata, object members counted
# for minProperties/maxProperties/dependencies, array items counted for contains). Beyond it
# the keyword is checked after decoding instead.
_MAX_MACHINE_STATES = 5000

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
# expressible and reported by the type that uses them; if/then/else is enforced for
# discriminator conditions.)
_POST_CHECKED = frozenset(
    {
        "uniqueItems",
        "not",
        "if",
        "then",
        "else",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)


@dataclass(frozen=True)
class SchemaOptions:
    """How JSON is laid out and how strictly the schema is read.

    Attributes
    ----------
    whitespace : {"flexible", "compact", "pretty"}
        ``"flexible"`` (default): the model may put whitespace between tokens as it likes, but
        at most ``max_whitespace`` characters in a row, so a small model cannot loop on spaces
        or newlines. ``"compact"``: no whitespace at all (fewest tokens). ``"pretty"``: the
        layout of ``json.dumps(value, indent=indent)``, exactly, for containers nested up to
        32 deep. Deeper ones accept whitespace runs of up to ``256 * indent +
        max_whitespace`` characters; values of ``true``/``{}`` schemas and object/array
        ``enum`` values are laid out flexibly.
    indent : int
        Spaces per nesting level in pretty mode (default 2).
    max_whitespace : int
        Longest whitespace run in flexible mode (default 16: enough for pretty-printed JSON a
        few levels deep).
    extra_properties : {"schema", "spec"}
        ``"schema"`` (default, like OpenAI strict mode): properties not declared in
        ``properties`` (or by a ``patternProperties`` pattern) are generated only when
        ``additionalProperties`` explicitly allows them.
        ``"spec"``: follow the JSON Schema default (undeclared properties of any value).
    strict : bool
        ``True``: a keyword the grammar cannot enforce is an error. ``False`` (default): it is
        checked after decoding and listed in the report; unknown ``format`` names are then plain
        strings (reported).
    escapes : {"any", "canonical"}
        ``"any"`` (default): strings (keys and values) may use every JSON spelling — raw
        characters, ``\\uXXXX``, ``\\/`` — as a validator accepts them. ``"canonical"``: only
        the spelling ``json.dumps(s, ensure_ascii=False)`` writes (raw characters; ``\\"``,
        ``\\\\``, short escapes and ``\\u00xx`` for control characters), so every key and enum
        string has one spelling, which jump-ahead can force byte for byte and a small model
        cannot drift away from (``"a\\u0072guments"``). Generation uses it by default.
    """

    whitespace: Whitespace = "flexible"
    max_whitespace: int = 16
    indent: int = 2
    extra_properties: Literal["schema", "spec"] = "schema"
    strict: bool = False
    escapes: Literal["any", "canonical"] = "any"

    def __post_init__(self) -> None:
        if self.whitespace not in ("flexible", "compact", "pretty"):
            raise ValueError(f"whitespace must be 'flexible', 'compact' or 'pretty', got {self.whitespace!r}")
        if not isinstance(self.indent, int) or not 0 <= self.indent <= 16:
            raise ValueError("indent must be an integer in [0, 16]")
        if not isinstance(self.max_whitespace, int) or not 0 <= self.max_whitespace <= 256:
            raise ValueError("max_whitespace must be an integer in [0, 256]")
        if self.extra_properties not in ("schema", "spec"):
            raise ValueError("extra_properties must be 'schema' or 'spec'")
        if self.escapes not in ("any", "canonical"):
            raise ValueError("escapes must be 'any' or 'canonical'")


@dataclass(frozen=True)
class ReportEntry:
    """One keyword of the schema and how it is honoured."""

    pointer: str
    keyword: str
    status: Literal["enforced", "checked after decoding", "ignored"]
    detail: str = ""


@dataclass
class SchemaReport:
    """What the grammar enforces and what is checked after decoding.

    ``post_checks`` is true when at least one keyword must be validated on the decoded value
    (the compiled object's ``validate`` does that with the ``jsonschema`` package).
    """

    entries: list[ReportEntry] = field(default_factory=list)
    # Slots (``x-corral-slot``): name -> JSON pointers of the string schemas that use it.
    slots: dict[str, list[str]] = field(default_factory=dict)

    @property
    def post_checks(self) -> bool:
        return any(e.status == "checked after decoding" for e in self.entries)

    def enforced(self) -> list[ReportEntry]:
        return [e for e in self.entries if e.status == "enforced"]

    def checked_after(self) -> list[ReportEntry]:
        return [e for e in self.entries if e.status == "checked after decoding"]

    def __str__(self) -> str:
        if not self.entries:
            return "every keyword is enforced by the grammar"
        lines = [
            f"{e.pointer}: {e.keyword}: {e.status}{' (' + e.detail + ')' if e.detail else ''}"
            for e in self.entries
            if e.status != "enforced"
        ]
        lines += [
            f"slot {name!r}: {', '.join(ptrs)} (values bound per request)"
            for name, ptrs in self.slots.items()
        ]
        return "\n".join(lines)


def _count(schema: dict[str, Any], key: str, pointer: str, default: int | None) -> int | None:
    """A non-negative integer keyword (JSON Schema allows 2.0 for 2)."""
    v = schema.get(key, default)
    if v is None:
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise SchemaError(f"{key} must be a non-negative integer", _ptr(pointer, key))
    return v


def _ptr(base: str, *parts: str | int) -> str:
    out = base
    for p in parts:
        out += "/" + str(p).replace("~", "~0").replace("/", "~1")
    return out


def _lit(text: str) -> str:
    """A grammar string literal for `text` (escaped)."""
    out = ['"']
    for ch in text:
        cp = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif cp < 0x20 or cp == 0x7F:
            out.append(f"\\x{cp:02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _regex_terminal(pattern: str, flag: str = "") -> str:
    """A /regex/ terminal; with flag "j" (or "c") matched as JSON string contents in every (or the
    canonical) spelling. An unescaped `/` would end the terminal, so it is escaped; escape
    sequences are copied as they are."""
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        out.append("\\/" if c == "/" else c)
        i += 1
    return "/" + "".join(out) + "/" + flag


def _json_string_of(regex: str, flag: str = "j") -> str:
    """Grammar for a JSON string whose decoded value fully matches `regex` (flag "j": every
    JSON spelling; "c": only the canonical one)."""
    return f'"\\"" {_regex_terminal(regex, flag)} "\\""'


# Keywords of an allOf part that could not be merged (see _merge_groups): checked after decoding.
_UNMERGED = "$corral:unmerged"
# Internal keyword: numbers in plain decimal notation only. Set on the intervals _complement
# makes: an exponent spelling near a zero bound (1e-400) would parse to 0.0 in a validator.
_PLAIN_NUMBERS = "$corral:plain-numbers"


class _NoValue(SchemaError):
    """A (sub)schema that no JSON value satisfies."""


class _TooBig(Exception):
    """A product automaton over the state budget (see _Converter.regular_string)."""


@dataclass
class _Keys:
    """The property names ``propertyNames`` allows (see _Converter.key_language)."""

    pieces: list[str]  # full-match regexes (decoded names) every name must match
    names: list[str] | None  # the allowed names when they are few (enum/const), else None
    test: Callable[[str], bool]  # exactly: does a name satisfy propertyNames?


class _Converter:
    def jstr(self, regex: str) -> str:
        """A JSON string whose decoded value fully matches ``regex``, spelled per the options."""
        return _json_string_of(regex, self.jflag)

    def __init__(self, root: Any, options: SchemaOptions, check_regex: Callable[[str], None] | None) -> None:
        self.root = root
        self.opt = options
        self.check_regex = check_regex
        self.rules: dict[str, str] = {}
        self.by_pointer: dict[str, str] = {}
        self.report = SchemaReport()
        self.counter = 0
        self.ws = "ws"
        self.pretty = options.whitespace == "pretty"
        # JSON strings: every spelling ("j") or only json.dumps(ensure_ascii=False)'s ("c").
        self.jflag = "c" if options.escapes == "canonical" else "j"
        self.depth = 0
        self.in_progress: set[str] = set()
        self.recursive: set[str] = set()
        self.by_body: dict[str, str] = {}
        self.by_content: dict[str, str] = {}
        # Exactness bookkeeping: post_marks counts keywords not enforced exactly (checked after
        # decoding, ignored); a rule whose build raised it is inexact, and so is every rule that
        # uses it. Variants that must be exact (items that count as `contains` matches) check it.
        self.post_marks = 0
        self.inexact: set[str] = set()
        # Product automata written so far (expression -> DFA states) and their total.
        self.products: dict[str, int] = {}
        self.product_total = 0
        schema_uri = root.get("$schema") if isinstance(root, dict) else None
        # Before draft 2019-09, minContains/maxContains and dependentRequired/dependentSchemas
        # were not keywords (and `dependencies` was).
        self.old_draft = isinstance(schema_uri, str) and re.search(r"draft-0[0-7]", schema_uri) is not None

    # -- helpers -----------------------------------------------------------------------------
    def new_rule(self, hint: str) -> str:
        self.counter += 1
        name = re.sub(r"[^A-Za-z0-9_-]", "-", hint)[:40].strip("-") or "n"
        return f"s{self.counter}-{name}"

    def layout(self) -> tuple[str, str, str, str]:
        """(after the opening bracket, between items, before the closing bracket, between a
        key and its value) for a container at the current depth."""
        if self.pretty and self.depth < _PRETTY_MAX_DEPTH:
            inner = " " * (self.opt.indent * (self.depth + 1))
            outer = " " * (self.opt.indent * self.depth)
            return _lit("\n" + inner), _lit(",\n" + inner), _lit("\n" + outer), _lit(": ")
        # Beyond the pretty depth cap the indentation keeps growing: a longer (still bounded) run.
        ws = "ws-deep" if self.pretty else self.ws
        return ws, f'{ws} "," {ws}', ws, f'{ws} ":" {ws}'

    def child_rule(self, schema: Any, pointer: str) -> str:
        """The rule for a value one container level deeper."""
        self.depth += 1
        try:
            return self.value_rule(schema, pointer)
        finally:
            self.depth -= 1

    def note(self, pointer: str, keyword: str, status: str, detail: str = "") -> None:
        if status != "enforced":
            self.post_marks += 1
        self.report.entries.append(ReportEntry(pointer, keyword, status, detail))  # type: ignore[arg-type]

    def snapshot(self) -> tuple[Any, ...]:
        """The converter's mutable state, to undo an attempt that failed half-way."""
        return (
            dict(self.rules),
            dict(self.by_pointer),
            dict(self.by_body),
            dict(self.by_content),
            set(self.in_progress),
            set(self.recursive),
            set(self.inexact),
            list(self.report.entries),
            self.post_marks,
            {k: list(v) for k, v in self.report.slots.items()},
        )

    def restore(self, saved: tuple[Any, ...]) -> None:
        (
            self.rules,
            self.by_pointer,
            self.by_body,
            self.by_content,
            self.in_progress,
            self.recursive,
            self.inexact,
            self.report.entries,
            self.post_marks,
            self.report.slots,
        ) = saved

    def exact_child(self, schema: Any, pointer: str) -> tuple[str, bool]:
        """child_rule, and whether the grammar enforces that schema exactly (no keyword inside it
        is checked after decoding or ignored)."""
        before = self.post_marks
        rule = self.child_rule(schema, pointer)
        return rule, self.post_marks == before

    def cannot_enforce(self, pointer: str, keyword: str, detail: str) -> None:
        if self.opt.strict:
            raise UnsupportedSchemaError(f"'{keyword}' cannot be enforced by the grammar: {detail}", pointer)
        self.note(pointer, keyword, "checked after decoding", detail)

    def resolve_ref(self, ref: str, pointer: str) -> tuple[Any, str]:
        if not isinstance(ref, str):
            raise SchemaError("$ref must be a string", pointer)
        if not ref.startswith("#"):
            raise UnsupportedSchemaError(
                f"remote or relative $ref {ref!r} is not supported (only '#...')", pointer
            )
        target: Any = self.root
        frag = unquote(ref[1:])
        if frag and not frag.startswith("/"):
            # A plain-name fragment: an $anchor.
            found = self._find_anchor(self.root, frag)
            if found is None:
                raise SchemaError(f"$ref {ref!r}: no $anchor named {frag!r}", pointer)
            return found, "#" + frag
        for part in [p for p in frag.split("/")[1:]] if frag else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                raise SchemaError(f"$ref {ref!r} points to nothing", pointer)
        return target, "#" + frag

    def _find_anchor(self, node: Any, name: str) -> Any:
        if isinstance(node, dict):
            if node.get("$anchor") == name or node.get("$id") == "#" + name or node.get("id") == "#" + name:
                return node
            for v in node.values():
                r = self._find_anchor(v, name)
                if r is not None:
                    return r
        elif isinstance(node, list):
            for v in node:
                r = self._find_anchor(v, name)
                if r is not None:
                    return r
        return None

    # -- entry ---------------------------------------------------------------------------------
    def convert(self) -> str:
        ws = "" if self.opt.whitespace == "compact" else f"[ \\t\\n\\r]{{0,{self.opt.max_whitespace}}}"
        root = self.value_rule(self.root, "#")
        # No whitespace around the top-level value: it would only cost tokens (small models pad
        # the end with newlines up to the whitespace cap instead of stopping).
        lines = [f"root ::= {root}"]
        lines.append(f"ws ::= {ws}" if ws else 'ws ::= ""')
        if self.pretty:
            deep = self.opt.indent * 256 + self.opt.max_whitespace
            lines.append(f"ws-deep ::= [ \\t\\n\\r]{{0,{deep}}}")
        lines += [f"{name} ::= {body}" for name, body in self.rules.items()]
        return "\n".join(lines) + "\n"

    def value_rule(self, schema: Any, pointer: str) -> str:
        """Name of the rule for values matching `schema` (memoised per pointer, so $ref cycles
        become grammar recursion). Rules with identical bodies are shared, so e.g. every plain
        string property uses one rule — one terminal, one cached mask entry."""
        # Schemas that are expanded in place (an allOf or a $ref with siblings that reaches a
        # $ref) are also memoised by content, so recursion through them stays finite.
        ck = _content_key(schema)
        if self.pretty:  # rules differ by nesting depth (their indentation)
            pointer = f"{pointer}@{min(self.depth, _PRETTY_MAX_DEPTH)}"
            ck = f"{ck}@{min(self.depth, _PRETTY_MAX_DEPTH)}" if ck else None
        hit = self.by_pointer.get(pointer) or (self.by_content.get(ck) if ck else None)
        if hit is not None:
            if hit in self.in_progress:
                self.recursive.add(hit)
            if hit in self.in_progress or pointer in self.inexact or (ck and ck in self.inexact):
                self.post_marks += 1  # (recursion: exactness unknown yet, assume not)
            return hit
        name = self.new_rule(pointer.split("@")[0].rsplit("/", 1)[-1] or "root")
        self.by_pointer[pointer] = name
        if ck:
            self.by_content[ck] = name
        self.rules[name] = ""  # reserve (recursion may refer to it before it is built)
        self.in_progress.add(name)
        marks = self.post_marks
        body = self.value_body(schema, pointer.split("@")[0] if self.pretty else pointer)
        self.in_progress.discard(name)
        if self.post_marks != marks:
            self.inexact.add(pointer)
            if ck:
                self.inexact.add(ck)
        same = self.by_body.get(body)
        if same is not None and name not in self.recursive:
            del self.rules[name]
            for table in (self.by_pointer, self.by_content):
                for k, v in table.items():
                    if v == name:
                        table[k] = same
            return same
        self.rules[name] = body
        self.by_body.setdefault(body, name)
        return name

    def value_body(self, schema: Any, pointer: str) -> str:
        if schema is True or schema == {}:
            return self.any_value()
        if schema is False:
            raise _NoValue("this schema allows no value (false)", pointer)
        if not isinstance(schema, dict):
            raise SchemaError(
                f"a schema must be an object or a boolean, got {type(schema).__name__}", pointer
            )
        for key in ("$dynamicRef", "$recursiveRef"):
            if key in schema:
                raise UnsupportedSchemaError(f"{key} is not supported", _ptr(pointer, key))
        schema = self.merge_all_of(schema, pointer)
        for key in schema.get(_UNMERGED, []):
            self.cannot_enforce(
                _ptr(pointer, "allOf"), key, "allOf with two different values: one is checked after decoding"
            )
        if "$ref" in schema:
            ref_target, ref_ptr = self.resolve_ref(schema["$ref"], _ptr(pointer, "$ref"))
            rest = {k: v for k, v in schema.items() if k != "$ref" and k not in _ANNOTATIONS}
            if not rest:
                return self.value_rule(ref_target, ref_ptr)
            # $ref with sibling keywords (2020-12): both apply. Memoised by (target, siblings) so
            # a recursive $ref with siblings becomes grammar recursion, not endless unfolding.
            key = f"{ref_ptr}&{json.dumps(rest, sort_keys=True, default=str)}"
            if (f"{key}@{min(self.depth, _PRETTY_MAX_DEPTH)}" if self.pretty else key) in self.by_pointer:
                return self.value_rule(None, key)
            merged = self.merge_all_of({"allOf": [ref_target, rest]}, pointer)
            return self.value_rule(merged, key)
        if "if" in schema:
            saved = self.snapshot()
            rewritten = self.if_then_else(schema, pointer)
            if rewritten is not None:
                try:
                    return self.value_body(rewritten, pointer)
                except UnsupportedSchemaError:
                    # then/else use something unsupported: as before, check them after decoding
                    # (they are then never compiled).
                    self.restore(saved)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                branches = schema[key]
                if not isinstance(branches, list) or not branches:
                    raise SchemaError(f"{key} must be a non-empty array", _ptr(pointer, key))
                rest = {k: v for k, v in schema.items() if k != key}
                if key == "oneOf" and len(branches) > 1:
                    if self.provably_disjoint(branches, _ptr(pointer, key)):
                        self.note(_ptr(pointer, key), key, "enforced", "branches are disjoint")
                    else:
                        self.cannot_enforce(_ptr(pointer, key), key, "exactly-one is checked after decoding")
                alts = []
                for i, b in enumerate(branches):
                    sub = b if not _constraining(rest) else {"allOf": [rest, b]}
                    try:
                        alts.append(self.value_rule(sub, _ptr(pointer, key, i)))
                    except _NoValue:
                        pass
                if not alts:
                    raise _NoValue(f"no branch of {key} allows any value", _ptr(pointer, key))
                return " | ".join(alts)
        for key in sorted(set(schema) & _POST_CHECKED):
            if key in ("then", "else"):
                if "if" not in schema:
                    self.note(_ptr(pointer, key), key, "enforced", "no effect without if")
                continue
            self.cannot_enforce(_ptr(pointer, key), key, "checked after decoding")
        if "enum" in schema or "const" in schema:
            if SLOT_KEYWORD in schema:
                raise UnsupportedSchemaError(
                    f"{SLOT_KEYWORD} cannot be combined with enum/const (the bound values are the enum)",
                    _ptr(pointer, SLOT_KEYWORD),
                )
            if "dependencies" in schema:
                # enum values are filtered with a draft 2020-12 validator, which ignores it.
                self.cannot_enforce(_ptr(pointer, "dependencies"), "dependencies", "combined with enum/const")
            return self.enum_body(schema, pointer)
        types = self.types_of(schema, pointer)
        alts = []
        first_error: _NoValue | None = None
        for t in types:
            try:
                alt = self.type_body(t, schema, pointer)
            except _NoValue as e:
                # One type allows nothing (say, objects under an impossible minProperties): the
                # others still apply.
                first_error = first_error or e
                continue
            if alt is not None:
                alts.append(alt)
        if not alts:
            raise first_error or _NoValue("this schema allows no value", pointer)
        return " | ".join(f"( {a} )" for a in alts) if len(alts) > 1 else alts[0]

    # -- composition ---------------------------------------------------------------------------
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

    def deref(self, schema: Any, pointer: str) -> Any:
        seen = 0
        while isinstance(schema, dict) and "$ref" in schema and seen < 32:
            extra = {k for k in schema if k not in _ANNOTATIONS and k != "$ref"}
            if extra:
                return schema
            schema, pointer = self.resolve_ref(schema["$ref"], pointer)
            seen += 1
        return schema

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

    def merge_all_of(self, schema: dict[str, Any], pointer: str) -> dict[str, Any]:
        if "allOf" not in schema:
            return schema
        parts = schema["allOf"]
        if not isinstance(parts, list) or not parts:
            raise SchemaError("allOf must be a non-empty array", _ptr(pointer, "allOf"))
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for i, part in enumerate(parts):
            p = _ptr(pointer, "allOf", i)
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

    # -- enum / const --------------------------------------------------------------------------
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
        kept = [v for v in values if _quick_check(rest, v)] if rest else values
        if not kept:
            raise _NoValue("no enum/const value satisfies the rest of the schema (e.g. its type)", where)
        if rest:
            self.note(where, "enum", "enforced", "values filtered by the sibling keywords")
        types = self.types_of(schema, pointer) if "type" in schema else []
        integer_only = "integer" in types and "number" not in types
        return " | ".join(self.literal_value(v, where, integer_only) for v in kept)

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
            d = Decimal(str(v))
            # Under an integer type only the canonical integer spelling is generated (older
            # drafts do not count 2.0 as an integer).
            as_integer = integer_only and d == d.to_integral_value()
            return _regex_terminal(numbers.number_regex(d, d, integer=as_integer))
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

    # -- types ---------------------------------------------------------------------------------
    def types_of(self, schema: dict[str, Any], pointer: str) -> list[str]:
        t = schema.get("type")
        if t is None:
            types = list(_TYPES)
        else:
            listed = [t] if isinstance(t, str) else t
            if not isinstance(listed, list) or not all(isinstance(x, str) for x in listed):
                raise SchemaError("type must be a string or an array of strings", _ptr(pointer, "type"))
            for x in listed:
                if x not in _TYPES and x != "integer":
                    raise SchemaError(f"unknown type {x!r}", _ptr(pointer, "type"))
            types = [x for x in _TYPES if x in listed]
            if "integer" in listed and "number" not in listed:
                types.insert(types.index("string") + 1 if "string" in types else len(types), "integer")
        return types

    def type_body(self, t: str, schema: dict[str, Any], pointer: str) -> str | None:
        if t == "null":
            return '"null"'
        if t == "boolean":
            return '"true" | "false"'
        if t in ("number", "integer"):
            return self.number_body(schema, pointer, integer=t == "integer")
        if t == "string":
            return self.string_body(schema, pointer)
        if t == "array":
            return self.array_body(schema, pointer)
        return self.object_body(schema, pointer)

    def number_body(self, schema: dict[str, Any], pointer: str, integer: bool) -> str:
        lo: Decimal | None = None
        hi: Decimal | None = None
        lo_x = hi_x = False
        # Bounds for spellings a validator parses as floats (see numbers.float_safe_bound):
        # inclusive, so an exclusive bound at 0 no longer allows exponents (1e-400 is 0.0).
        f_lo: Decimal | None = None
        f_hi: Decimal | None = None
        for key in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
            if key not in schema:
                continue
            v = schema[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                if key.startswith("exclusive") and isinstance(v, bool):
                    raise UnsupportedSchemaError(
                        f"draft-04 boolean {key} is not supported", _ptr(pointer, key)
                    )
                raise SchemaError(f"{key} must be a number", _ptr(pointer, key))
            if isinstance(v, float) and not math.isfinite(v):
                raise SchemaError(f"{key} must be finite", _ptr(pointer, key))
            d = Decimal(str(v))
            is_lower = key in ("minimum", "exclusiveMinimum")
            f = numbers.float_safe_bound(v, is_lower, key.startswith("exclusive"))
            if is_lower:
                if lo is None or d > lo or (d == lo and key == "exclusiveMinimum"):
                    lo, lo_x = d, key == "exclusiveMinimum"
                f_lo = f if f_lo is None else max(f_lo, f)
            else:
                if hi is None or d < hi or (d == hi and key == "exclusiveMaximum"):
                    hi, hi_x = d, key == "exclusiveMaximum"
                f_hi = f if f_hi is None else min(f_hi, f)
            self.note(_ptr(pointer, key), key, "enforced")
        if "multipleOf" in schema:
            body = self.multiple_body(schema, pointer, integer, (lo, lo_x), (hi, hi_x))
            if body is not None:
                return body
        if not integer:
            # Validators compare fractions and exponents after rounding them to a float; the
            # bounds keep that comparison true (stricter within one float step of a bound).
            lo, lo_x, hi, hi_x = f_lo, False, f_hi, False
        try:
            rx = numbers.number_regex(
                lo,
                hi,
                exclusive_minimum=lo_x,
                exclusive_maximum=hi_x,
                integer=integer,
                allow_exponent=_PLAIN_NUMBERS not in schema,
            )
        except ValueError as e:
            raise _NoValue(f"the number bounds allow no value: {e}", pointer) from None
        return _regex_terminal(rx)

    def multiple_body(
        self,
        schema: dict[str, Any],
        pointer: str,
        integer: bool,
        low: tuple[Decimal | None, bool],
        high: tuple[Decimal | None, bool],
    ) -> str | None:
        """Numbers that are multiples of `multipleOf` within the bounds, as automaton rules; None
        when only the bounds can be enforced (multipleOf is then checked after decoding).

        An integer multipleOf is enforced exactly: only integer spellings are generated (also
        under ``type: number``), so the value is an exact integer for every validator. A
        non-integer multipleOf (``0.01``, ``1.5``) is generated as exact decimal multiples, but
        validators divide by it in floating point (``0.3 / 0.1`` is not an integer there), so it
        is also checked after decoding."""
        where = _ptr(pointer, "multipleOf")
        step = schema["multipleOf"]
        if (
            isinstance(step, bool)
            or not isinstance(step, (int, float))
            or not math.isfinite(step)
            or step <= 0
        ):
            raise SchemaError("multipleOf must be a positive number", where)
        exact = isinstance(step, int)
        float_note = (
            "the grammar generates exact multiples, but validators divide by a non-integer "
            "multipleOf in floating point"
        )
        p, s = multiples.step_of(step)
        lo, lo_x = low
        hi, hi_x = high
        automaton: multiples.Automaton | None
        if integer or exact:
            k = p // math.gcd(p, 10**s)
            int_lo = int_hi = None
            if lo is not None:
                c = lo.to_integral_value(rounding="ROUND_CEILING")
                int_lo = int(c) + (1 if lo_x and c == lo else 0)
            if hi is not None:
                f = hi.to_integral_value(rounding="ROUND_FLOOR")
                int_hi = int(f) - (1 if hi_x and f == hi else 0)
            if int_lo is not None and int_hi is not None and int_lo > int_hi:
                raise _NoValue("no integer satisfies the bounds", pointer)
            if k == 1:
                rule = _regex_terminal(numbers.integer_regex(int_lo, int_hi))
            else:
                try:
                    automaton = multiples.integer_multiples(k, int_lo, int_hi, _MAX_MACHINE_STATES)
                except ValueError:
                    raise _NoValue(f"no multiple of {step} satisfies the bounds", where) from None
                if automaton is None:
                    self.cannot_enforce(
                        where, "multipleOf", f"step {step} with these bounds needs too many states"
                    )
                    return None
                rule = automaton.rules(self.new_rule, self.rules)
            if exact:
                self.note(where, "multipleOf", "enforced", "" if integer else "integer spellings only")
            else:
                self.cannot_enforce(where, "multipleOf", float_note)
            return rule
        if lo is not None or hi is not None:
            self.cannot_enforce(where, "multipleOf", "non-integer step combined with minimum/maximum")
            return None
        automaton = multiples.decimal_multiples(p, s, _MAX_MACHINE_STATES)
        if automaton is None:
            self.cannot_enforce(where, "multipleOf", f"step {step} needs too many automaton states")
            return None
        self.cannot_enforce(where, "multipleOf", float_note)
        return automaton.rules(self.new_rule, self.rules)

    def string_body(self, schema: dict[str, Any], pointer: str) -> str:
        """Strings: ``format``, ``pattern`` and ``minLength``/``maxLength`` together are one
        product automaton (the grammar's ``&``), when it fits the state budget; otherwise the
        length, then the pattern, is checked after decoding."""
        if SLOT_KEYWORD in schema:
            return self.slot_string(schema, pointer)
        lo = _count(schema, "minLength", pointer, 0) or 0
        hi = _count(schema, "maxLength", pointer, None)
        if hi is not None and lo > hi:
            raise SchemaError(f"minLength {lo} > maxLength {hi}", _ptr(pointer, "minLength"))
        pieces: list[str] = []
        if "format" in schema:
            fmt = schema["format"]
            rx = formats.format_regex(fmt) if isinstance(fmt, str) else None
            if rx is None:
                if self.opt.strict:
                    raise UnsupportedSchemaError(f"unknown format {fmt!r}", _ptr(pointer, "format"))
                self.note(_ptr(pointer, "format"), "format", "ignored", f"unknown format {fmt!r}: any string")
            else:
                pieces.append(rx)
                self.note(_ptr(pointer, "format"), "format", "enforced")
        if "pattern" in schema:
            pieces.append(self.pattern_regex(schema["pattern"], _ptr(pointer, "pattern"), ascii_classes=True))
        length_at = _ptr(pointer, "maxLength" if hi is not None else "minLength")
        if lo > _MAX_COUNTED_CHARS or (hi is not None and hi > _MAX_COUNTED_CHARS):
            # Counting characters multiplies the string automaton (and the per-position mask
            # cache) by the count: long bounds are checked after decoding instead.
            self.cannot_enforce(
                length_at, "minLength/maxLength", f"bounds above {_MAX_COUNTED_CHARS} characters"
            )
            lo = lo if lo <= _MAX_COUNTED_CHARS else 0
            hi = None
        length = f"(?s:.){{{lo},{'' if hi is None else hi}}}" if lo or hi is not None else None
        if length is not None and not pieces and (hi or lo) <= _INLINE_COUNTED_CHARS:
            return self.jstr(length)  # small enough to stay a plain terminal
        if length is not None:
            try:
                out = self.regular_string([*pieces, length])
            except _TooBig:
                self.cannot_enforce(
                    length_at,
                    "minLength/maxLength",
                    "combined with pattern/format: the automaton would need too many states",
                )
            else:
                if out is None:
                    raise _NoValue("no string satisfies pattern/format and the length together", pointer)
                return out
        if len(pieces) > 1:
            try:
                out = self.regular_string(pieces)
            except _TooBig:
                self.cannot_enforce(
                    _ptr(pointer, "pattern"),
                    "pattern",
                    "combined with format: the automaton would need too many states; format enforced",
                )
                pieces = pieces[:1]
            else:
                if out is None:
                    raise _NoValue("no string satisfies both pattern and format", pointer)
                return out
        return self.jstr(pieces[0] if pieces else "(?s:.)*")

    def slot_string(self, schema: dict[str, Any], pointer: str) -> str:
        """A string slot: the grammar's ``${name:json}`` (a whole JSON string; values bound per
        request, spelled canonically whatever ``escapes`` says: a trie of every spelling would
        explode). The values are the whole constraint, so other string keywords are refused."""
        where = _ptr(pointer, SLOT_KEYWORD)
        name = schema[SLOT_KEYWORD]
        if not isinstance(name, str) or not _SLOT_NAME.fullmatch(name):
            raise SchemaError(
                f"{SLOT_KEYWORD} must be a name matching [A-Za-z_][A-Za-z0-9_-]*, got {name!r}", where
            )
        for key in _STRING_KEYS:
            if key in schema:
                raise UnsupportedSchemaError(
                    f"{SLOT_KEYWORD} cannot be combined with {key!r} (the bound values are the whole "
                    "constraint: filter them before binding)",
                    _ptr(pointer, key),
                )
        spelled = (
            "canonically" if self.jflag == "c" else "canonically (escapes='any' does not apply to slots)"
        )
        self.note(
            where,
            SLOT_KEYWORD,
            "enforced",
            f"slot {name!r}: one of the values bound per request, spelled {spelled}",
        )
        if pointer not in self.report.slots.setdefault(name, []):
            self.report.slots[name].append(pointer)
        return f"${{{name}:json}}"

    def pattern_regex(self, pat: Any, where: str, ascii_classes: bool) -> str:
        """The full-match regex for a JSON Schema ``pattern`` (which matches anywhere).
        `ascii_classes`: narrow ``\\d``/``\\w`` to ASCII (fewer states; only for positive uses:
        a narrowed pattern matches a subset)."""
        if not isinstance(pat, str):
            raise SchemaError("pattern must be a string", where)
        try:
            re.compile(pat)
        except re.error as e:
            raise SchemaError(f"pattern is not a valid regular expression: {e}", where) from None
        rx = _unanchored(_ascii_classes(pat) if ascii_classes else pat)
        if self.check_regex is not None:
            try:
                self.check_regex(rx)
            except CompileError as e:
                raise UnsupportedSchemaError(f"pattern {pat!r}: {e.message}", where) from None
        return rx

    def regular_string(self, pieces: list[str], minus: list[str] | None = None) -> str | None:
        """Grammar for a JSON string whose decoded value fully matches every regex of `pieces`
        and none of `minus` (one product automaton); None when no string does.

        Raises _TooBig when the automaton would exceed _MAX_PRODUCT_STATES, or the schema's
        products together _MAX_PRODUCT_TOTAL."""
        minus = minus or []
        if not pieces:
            pieces = ["(?s:.)*"]
        if len(pieces) == 1 and not minus:
            if pieces[0] == "(?s:.)*":
                return self.jstr(pieces[0])
            # `&` makes it one automaton: a long count alone would be split into grammar
            # repetition, whose masks cost far more.
            pieces = [*pieces, "(?s:.)*"]
        expr = " & ".join(_regex_terminal(p, self.jflag) for p in pieces)
        expr += "".join(f" - {_regex_terminal(m, self.jflag)}" for m in minus)
        n = self.products.get(expr)
        if n is None:
            n = probe.dfa_states(expr, _MAX_PRODUCT_STATES)
            if n == probe.TOO_BIG or self.product_total + n > _MAX_PRODUCT_TOTAL:
                raise _TooBig(expr)
            self.products[expr] = n
            self.product_total += n
        if n == probe.EMPTY:
            return None
        return f'"\\"" ( {expr} ) "\\""'

    def array_body(self, schema: dict[str, Any], pointer: str) -> str:
        ws = self.ws
        prefix = schema.get("prefixItems", [])
        items: Any = schema.get("items", True)
        if isinstance(items, list):  # draft-07 array form
            prefix, items = items, schema.get("additionalItems", True)
        if not isinstance(prefix, list):
            raise SchemaError("prefixItems must be an array", _ptr(pointer, "prefixItems"))
        lo = _count(schema, "minItems", pointer, 0) or 0
        hi = _count(schema, "maxItems", pointer, None)
        if hi is not None and lo > hi:
            raise SchemaError(f"minItems {lo} > maxItems {hi}", _ptr(pointer, "minItems"))
        k = len(prefix)
        if items is False:
            hi = k if hi is None else min(hi, k)
            if lo > hi:
                raise SchemaError(
                    f"minItems {lo} needs more items than prefixItems allows", _ptr(pointer, "minItems")
                )
        elems: list[str] = []
        for i, p in enumerate(prefix):
            try:
                elems.append(self.child_rule(p, _ptr(pointer, "prefixItems", i)))
            except _NoValue:
                if lo > i:
                    raise
                # No value fits position i: arrays end before it.
                hi = i if hi is None else min(hi, i)
                break
        rest = (
            self.child_rule(items, _ptr(pointer, "items")) if items is not False and len(elems) == k else None
        )
        k = len(elems)
        prefix = prefix[:k]
        opening, sep, closing, _ = self.layout()

        def elem(i: int) -> str | None:
            return elems[i] if i < k else rest

        for key in ("minItems", "maxItems", "prefixItems", "items"):
            if key in schema:
                self.note(_ptr(pointer, key), key, "enforced")
        if "contains" in schema and hi != 0:
            base = [*prefix, items if rest is not None else False]
            start = self.contains_items(schema, pointer, base, elem, (lo, hi), sep)
            if start is not None:
                if self.pretty:
                    filled = f'"[" {opening} {start[0]} {closing} "]"' if start[0] else None
                    alts = ['"[" "]"'] if start[1] else []
                    alts += [filled] if filled else []
                    if not alts:
                        raise _NoValue("no array satisfies contains", _ptr(pointer, "contains"))
                    return " | ".join(alts)
                return f'"[" {ws} {start[0]} {ws} "]"'
        elif "contains" in schema:
            raise _NoValue("contains needs an item but maxItems is 0", _ptr(pointer, "contains"))

        # tail(i): the elements from position i on, each preceded by a separator.
        def tail(i: int) -> str:
            if hi is not None and i >= hi:
                return ""
            if i >= k:
                need = max(0, lo - i)
                more = None if hi is None else hi - i - need
                out = f"( {sep} {rest} ){{{need}}}" if need else ""
                if more is None:
                    out += f" ( {sep} {rest} )*"
                elif more > 0:
                    out += f" ( {sep} {rest} ){{0,{more}}}"
                return out.strip()
            body = f"{sep} {elem(i)} {tail(i + 1)}".strip()
            return body if i < lo else f"( {body} )?"

        if hi == 0:
            return f'"[" {ws} "]"'
        first = f"{elem(0)} {tail(1)}".strip() if (k > 0 or rest is not None) else ""
        if not first:
            return f'"[" {ws} "]"'
        if self.pretty:
            filled = f'"[" {opening} {first} {closing} "]"'
            return filled if lo > 0 else f'"[" "]" | {filled}'
        content = first if lo > 0 else f"( {first} )?"
        return f'"[" {ws} {content} {ws} "]"'

    def contains_items(
        self,
        schema: dict[str, Any],
        pointer: str,
        base: list[Any],
        elem: Callable[[int], str | None],
        bounds: tuple[int, int | None],
        sep: str,
    ) -> tuple[str | None, bool] | None:
        """The items of an array with `contains`, counted: (start rule or None when only the
        empty array fits, whether the empty array fits). None: no count is needed (minContains
        0) or it cannot be enforced (then reported as checked after decoding).

        At least minContains items match: each position holds either any item or a *matching*
        item (the item schema merged with contains), and matching items are counted up to
        minContains. With maxContains, the non-matching items must be told apart exactly: the
        complement of contains is expressible when contains is a type, const or enum of scalars,
        and then each item is either matching or non-matching, never both."""
        lo, hi = bounds
        k = len(base) - 1  # base[i]: schema of position i; base[k]: every later position
        c_schema = schema["contains"]
        keys = ["contains"]
        if self.old_draft:
            for key in ("minContains", "maxContains"):
                if key in schema:
                    self.note(_ptr(pointer, key), key, "ignored", "not a keyword before draft 2019-09")
            kmin: int = 1
            kmax: int | None = None
        else:
            kmin = _count(schema, "minContains", pointer, 1) or 0
            kmax = _count(schema, "maxContains", pointer, None)
            keys += [key for key in ("minContains", "maxContains") if key in schema]
        if kmax is not None and kmin > kmax:
            raise _NoValue(f"minContains {kmin} > maxContains {kmax}", _ptr(pointer, "minContains"))
        if hi is not None and kmin > hi:
            raise _NoValue(f"minContains {kmin} needs more items than maxItems", _ptr(pointer, "minContains"))

        def give_up(detail: str) -> None:
            for key in keys:
                self.cannot_enforce(_ptr(pointer, key), key, detail)

        if kmin == 0 and kmax is None:
            for key in keys:
                self.note(_ptr(pointer, key), key, "enforced", "minContains 0: no constraint")
            return None

        def where(i: int) -> str:
            return _ptr(pointer, "prefixItems", i) if i < k else _ptr(pointer, "items")

        match: list[str | None] = []
        try:
            for i, b in enumerate(base):
                if b is False:
                    match.append(None)
                    continue
                try:
                    rule, exact = self.exact_child({"allOf": [b, c_schema]}, where(i) + "&contains")
                except _NoValue:
                    match.append(None)
                    continue
                if not exact:
                    give_up("the contains schema is not enforced exactly")
                    return None
                match.append(rule)
        except UnsupportedSchemaError:
            give_up("contains cannot be merged with the item schema")
            return None
        plain: list[str | None] = [elem(i) for i in range(k + 1)]
        if kmax is not None:
            split = self.non_matching(base, c_schema, where)
            if split is None:
                self.cannot_enforce(
                    _ptr(pointer, "maxContains"),
                    "maxContains",
                    "items that match contains cannot be told apart from the others",
                )
                keys.remove("maxContains")
                kmax = None
                if kmin == 0:
                    for key in keys:
                        self.note(_ptr(pointer, key), key, "enforced", "minContains 0: no lower bound")
                    return None
            else:
                plain = split
        machine = ArrayItems(
            plain=lambda i: plain[min(i, k)],
            match=lambda i: match[min(i, k)],
            any=lambda i: elem(min(i, k)),
            positions=k,
            sep=sep,
            min_items=lo,
            max_items=hi,
            min_matches=kmin,
            max_matches=kmax,
            max_states=_MAX_MACHINE_STATES,
        )
        rules: dict[str, str] = {}
        try:
            start = machine.build(self.new_rule, rules, NONEMPTY if self.pretty else FIRST)
        except TooManyStates:
            give_up("too many states to count the matching items")
            return None
        self.rules.update(rules)
        empty_ok = lo == 0 and kmin == 0
        if start is None and (not self.pretty or not empty_ok):
            raise _NoValue("no array satisfies contains", _ptr(pointer, "contains"))
        for key in keys:
            self.note(_ptr(pointer, key), key, "enforced")
        return start, empty_ok

    def non_matching(
        self, base: list[Any], c_schema: Any, where: Callable[[int], str]
    ) -> list[str | None] | None:
        """Per position, the items that do NOT match `c_schema` (exactly), or None when that
        complement is not expressible."""
        branches = _complement(self.deref(c_schema, "#"))
        if branches is None:
            return None
        out: list[str | None] = []
        try:
            for i, b in enumerate(base):
                alts = []
                if b is not False:
                    for j, branch in enumerate(branches):
                        try:
                            rule, exact = self.exact_child(
                                {"allOf": [b, branch]}, f"{where(i)}&not-contains-{j}"
                            )
                        except _NoValue:
                            continue
                        if not exact:
                            return None
                        alts.append(rule)
                out.append(
                    None if not alts else alts[0] if len(alts) == 1 else "( " + " | ".join(alts) + " )"
                )
        except UnsupportedSchemaError:
            return None
        return out

    def object_body(self, schema: dict[str, Any], pointer: str) -> str:
        ws = self.ws
        opening, sep, closing, colon = self.layout()
        props = schema.get("properties", {})
        if not isinstance(props, dict):
            raise SchemaError("properties must be an object", _ptr(pointer, "properties"))
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise SchemaError("required must be an array of strings", _ptr(pointer, "required"))
        lo = _count(schema, "minProperties", pointer, 0) or 0
        hi = _count(schema, "maxProperties", pointer, None)
        if hi is not None and lo > hi:
            raise SchemaError(f"minProperties {lo} > maxProperties {hi}", _ptr(pointer, "minProperties"))
        addl = schema.get("additionalProperties", None)
        if addl is None:
            addl = True if self.opt.extra_properties == "spec" else False
            if addl is False and lo > len([n for n, s in props.items() if s is not False] + required):
                # Only undeclared properties can reach minProperties: generate them (as the spec
                # default allows) rather than nothing.
                addl = True
                self.note(
                    _ptr(pointer, "minProperties"),
                    "minProperties",
                    "enforced",
                    "additionalProperties is not set: undeclared properties are generated to reach it",
                )
        pattern_props = schema.get("patternProperties")
        if not isinstance(pattern_props, dict):
            pattern_props = {}
        keys = self.key_language(schema, pointer)

        def undeclared_schema(name: str) -> Any:
            """The schema an undeclared property `name` gets (patternProperties, else
            additionalProperties)."""
            matching = [sub for pat, sub in pattern_props.items() if _safe_search(pat, name)]
            if matching:
                return matching[0] if len(matching) == 1 else {"allOf": matching}
            return addl

        # A declared property whose name matches patterns must satisfy those schemas too.
        value_at = {name: _ptr(pointer, "properties", name) for name in props}
        for name, sub in list(props.items()):
            matching = [p for pat, p in pattern_props.items() if _safe_search(pat, name)]
            if matching and sub is not False:
                props = {**props, name: {"allOf": [sub, *matching]}}
                value_at[name] += "&patternProperties"
        for r in required:
            matching = [sub for pat, sub in pattern_props.items() if _safe_search(pat, r)]
            if r not in props and matching:
                # Allowed by patternProperties: generate it with those schemas.
                props = {**props, r: undeclared_schema(r)}
        for r in required:
            if r not in props and addl is False:
                if "additionalProperties" in schema:
                    raise _NoValue(
                        f"required property {r!r} is forbidden by additionalProperties: false",
                        _ptr(pointer, "required"),
                    )
                props = {**props, r: True}
        # Required properties that are not declared are generated with the extra-property schema.
        for r in required:
            if r not in props:
                props = {**props, r: addl}
        # Dependencies: names they mention become declared (optional) properties, so their
        # presence is tracked; targets before their keys, the usual order in instances.
        deps, never, dep_keywords = self.dependency_map(schema, pointer)
        for key, targets in deps.items():
            for name in [*targets, key] if targets else []:
                if name in props:
                    continue
                if addl is not False or pattern_props:
                    sub = undeclared_schema(name)
                elif name != key and "additionalProperties" not in schema:
                    sub = True  # a target, generated as required undeclared names are
                else:
                    continue  # can never be present
                props = {**props, name: sub}
        for name in never:
            if name not in props and (addl is not False or pattern_props):
                props = {**props, name: False}  # keep it out of the extra keys
        if keys is not None:
            # propertyNames: names that fail it are never generated.
            for name in list(props):
                if not keys.test(name) and props[name] is not False:
                    if name in required:
                        raise _NoValue(
                            f"required property {name!r} fails propertyNames", _ptr(pointer, "required")
                        )
                    props = {**props, name: False}
            if keys.names is not None:
                # A small finite set of allowed names: each becomes a declared (optional) member,
                # so no extra key can repeat.
                for name in keys.names:
                    if name not in props:
                        props = {**props, name: undeclared_schema(name)}
        names = list(props)
        generated: list[tuple[str, str, bool]] = []  # (name, member text, required)
        for name in names:
            sub = props[name]
            is_req = name in required
            if sub is False:
                if is_req:
                    raise SchemaError(
                        f"required property {name!r} has schema false", _ptr(pointer, "properties", name)
                    )
                continue
            try:
                value = self.child_rule(sub, value_at.get(name, _ptr(pointer, "properties", name)))
            except _NoValue as e:
                if is_req:
                    raise
                self.note(
                    _ptr(pointer, "properties", name),
                    "properties",
                    "enforced",
                    f"never generated: {e.message}",
                )
                continue
            generated.append((name, f"{self.jstr(re.escape(name))} {colon} {value}", is_req))
        extra, distinct = self.extra_members(schema, pointer, addl, pattern_props, keys, names, colon)
        # A key whose dependency can never be present can never be present itself.
        present = {name for name, _, _ in generated}
        changed = True
        while changed:
            changed = False
            for key, targets in deps.items():
                if (
                    key in present
                    and key not in never
                    and any(t not in present or t in never for t in targets)
                ):
                    never.add(key)
                    changed = True
        for name, _, is_req in generated:
            if is_req and name in never:
                raise _NoValue(
                    f"required property {name!r} has a dependency that can never be met",
                    _ptr(pointer, "required"),
                )
        members = [(name, text, is_req) for name, text, is_req in generated if name not in never]
        index = {name: i for i, (name, _, _) in enumerate(members)}
        dep_index = {
            index[key]: {index[t] for t in targets}
            for key, targets in deps.items()
            if key in index and targets
        }
        n_required = sum(1 for _, _, r in members if r)
        if hi is not None and n_required > hi:
            raise _NoValue(
                f"{n_required} required properties but maxProperties is {hi}", _ptr(pointer, "maxProperties")
            )
        if extra is None and lo > len(members):
            raise _NoValue(
                f"minProperties {lo} but at most {len(members)} properties can be present",
                _ptr(pointer, "minProperties"),
            )
        # Bounds that cannot bind are left out of the machine (fewer states).
        count_lo = lo if lo > n_required else 0
        count_hi = hi if hi is not None and (extra is not None or hi < len(members)) else None
        machine = ObjectMembers(
            members=[Member(text, is_req) for _, text, is_req in members],
            extra=extra,
            sep=sep,
            distinct=distinct,
            min_count=count_lo,
            max_count=count_hi,
            deps=dep_index,
            max_states=_MAX_MACHINE_STATES,
        )
        mode = NONEMPTY if self.pretty else FIRST
        start: str | None = None
        counted = tracked = True
        while True:
            rules: dict[str, str] = {}
            try:
                start = machine.build(self.new_rule, rules, mode)
            except TooManyStates:
                # Drop a dimension (dependencies first, then counts) and check it afterwards.
                if machine.deps and not machine.cut:
                    machine.deps = {}
                    tracked = False
                elif machine.min_count or machine.max_count is not None:
                    machine.min_count, machine.max_count = 0, None
                    counted = False
                else:
                    machine.max_states = 1 << 60  # O(number of properties) rules
                continue
            self.rules.update(rules)
            break
        for key in ("properties", "required", "additionalProperties"):
            if key in schema:
                self.note(_ptr(pointer, key), key, "enforced")
        for key in ("minProperties", "maxProperties"):
            if key in schema:
                if counted:
                    self.note(_ptr(pointer, key), key, "enforced")
                else:
                    self.cannot_enforce(_ptr(pointer, key), key, "too many states to count properties")
        for key, detail in dep_keywords.items():
            if detail is None and not tracked:
                detail = "too many states to track the dependencies"
            if detail is None:
                self.note(_ptr(pointer, key), key, "enforced")
            else:
                self.cannot_enforce(_ptr(pointer, key), key, detail)
        empty_ok = n_required == 0 and (lo == 0 or not counted)
        if self.pretty:
            alts = ['"{" "}"'] if empty_ok else []
            if start is not None:
                alts.append(f'"{{" {opening} {start} {closing} "}}"')
            if not alts:
                raise _NoValue("no object satisfies the property constraints", pointer)
            return " | ".join(alts)
        if start is None:
            raise _NoValue("no object satisfies the property constraints", pointer)
        return f'"{{" {ws} {start} {ws} "}}"'

    def key_language(self, schema: dict[str, Any], pointer: str) -> _Keys | None:
        """What ``propertyNames`` allows, as full-match regexes for the grammar plus an exact
        test for names; None when it cannot be enforced (then reported as checked after
        decoding). Enforced: ``true``/``false``, ``type``, ``enum``/``const``, ``pattern``,
        ``format`` and lengths (keywords of other types do not apply to names); composition
        (``anyOf``, ``not``, ...) is not."""
        if "propertyNames" not in schema:
            return _Keys([], None, lambda name: True)
        where = _ptr(pointer, "propertyNames")
        sub = self.deref(schema["propertyNames"], where)
        if sub is True or sub == {}:
            self.note(where, "propertyNames", "enforced", "allows every name")
            return _Keys([], None, lambda name: True)
        if sub is False:
            self.note(where, "propertyNames", "enforced", "no property allowed")
            return _Keys([], [], lambda name: False)
        if not isinstance(sub, dict):
            raise SchemaError("propertyNames must be a schema", where)

        def give_up(detail: str) -> None:
            self.cannot_enforce(where, "propertyNames", detail)

        try:
            sub = self.merge_all_of(sub, where)
        except UnsupportedSchemaError:
            give_up("its allOf cannot be merged")
            return None
        except _NoValue:
            self.note(where, "propertyNames", "enforced", "no property allowed")
            return _Keys([], [], lambda name: False)
        if SLOT_KEYWORD in sub:
            raise UnsupportedSchemaError(
                f"{SLOT_KEYWORD} is not supported in propertyNames", _ptr(where, SLOT_KEYWORD)
            )
        composite = sorted(set(sub) & {"$ref", "anyOf", "oneOf", "not", "if", _UNMERGED})
        if composite:
            give_up(f"{composite[0]} inside propertyNames")
            return None
        tests: list[Callable[[str], bool]] = []
        pieces: list[str] = []
        nothing = _Keys([], [], lambda name: False)
        t = sub.get("type")
        if t is not None and "string" not in ([t] if isinstance(t, str) else t):
            self.note(where, "propertyNames", "enforced", "names are strings: no property allowed")
            return nothing
        if "format" in sub:
            fmt = sub["format"]
            rx = formats.format_regex(fmt) if isinstance(fmt, str) else None
            if rx is None:
                give_up(f"unknown format {fmt!r}")
                return None
            pieces.append(rx)
            fmt_rx = re.compile(rx)
            tests.append(lambda name: fmt_rx.fullmatch(name) is not None)
        if "pattern" in sub:
            pat = sub["pattern"]
            try:
                pieces.append(self.pattern_regex(pat, _ptr(where, "pattern"), ascii_classes=False))
            except UnsupportedSchemaError as e:
                give_up(e.message)
                return None
            tests.append(lambda name: _safe_search(pat, name))
        lo = _count(sub, "minLength", where, 0) or 0
        hi = _count(sub, "maxLength", where, None)
        if lo > _MAX_COUNTED_CHARS or (hi is not None and hi > _MAX_COUNTED_CHARS):
            give_up(f"length bounds above {_MAX_COUNTED_CHARS} characters")
            return None
        if lo or hi is not None:
            pieces.append(f"(?s:.){{{lo},{'' if hi is None else hi}}}")
            tests.append(lambda name: lo <= len(name) and (hi is None or len(name) <= hi))

        def test(name: str) -> bool:
            return all(t(name) for t in tests)

        if "enum" not in sub and "const" not in sub:
            return _Keys(pieces, None, test)
        values = [sub["const"]] if "const" in sub else sub["enum"]
        if not isinstance(values, list):
            raise SchemaError("enum must be an array", _ptr(where, "enum"))
        if "const" in sub and "enum" in sub:
            values = [v for v in values if any(_json_equal(v, e) for e in sub["enum"])]
        allowed = list(dict.fromkeys(v for v in values if isinstance(v, str) and test(v)))
        if not allowed:
            self.note(where, "propertyNames", "enforced", "no name satisfies it: no property allowed")
            return nothing
        return _Keys(
            ["|".join(re.escape(v) for v in allowed)],
            allowed if len(allowed) <= _MAX_NAMED_KEYS else None,
            frozenset(allowed).__contains__,
        )

    def extra_members(
        self,
        schema: dict[str, Any],
        pointer: str,
        addl: Any,
        pattern_props: dict[str, Any],
        keys: _Keys | None,
        names: list[str],
        colon: str,
    ) -> tuple[str | None, Callable[[int, int], str | None] | None]:
        """The grammar of one additional (undeclared) member, or None when none may appear; and
        `distinct` for the counting machine (containers.ObjectMembers).

        An undeclared key falls in one class per subset T of the ``patternProperties`` patterns
        (up to 2**_MAX_KEY_PATTERNS classes): it matches exactly the patterns of T, so its value
        satisfies all of their schemas (``additionalProperties`` when T is empty). Each class is
        one product automaton: ``propertyNames`` & patterns of T - other patterns - declared
        names. Over the state budget, ``patternProperties`` and then ``propertyNames`` are
        checked after decoding instead."""
        pp_where = _ptr(pointer, "patternProperties")
        pn_where = _ptr(pointer, "propertyNames")
        declared = ["|".join(re.escape(n) for n in names)] if names else []
        pp_reason: str | None = None
        prx: dict[str, str] = {}
        if len(pattern_props) > _MAX_KEY_PATTERNS:
            pp_reason = f"more than {_MAX_KEY_PATTERNS} patterns"
        else:
            for pat in pattern_props:
                try:
                    prx[pat] = self.pattern_regex(pat, _ptr(pp_where, pat), ascii_classes=False)
                except SchemaError as e:
                    pp_reason = f"pattern {pat!r}: {e.message}"
                    break
        if keys is not None and keys.names is not None:
            # Every allowed name is a declared member (object_body): no other key may appear.
            if pattern_props:
                self.note(pp_where, "patternProperties", "enforced", "the names propertyNames allows")
            if "propertyNames" in schema:
                self.note(pn_where, "propertyNames", "enforced")
            return None, None
        Class = tuple[list[str], list[str], str, str]  # key pieces, key minus, key rule, value rule

        def build(use_pp: bool, pieces: list[str]) -> list[Class]:
            out: list[Class] = []
            pats = list(pattern_props) if use_pp else []
            for mask in range(1 << len(pats)):
                inside = [p for i, p in enumerate(pats) if mask >> i & 1]
                if inside:
                    subs = [pattern_props[p] for p in inside]
                    sub = subs[0] if len(subs) == 1 else {"allOf": subs}
                    at = "&".join(_ptr(pp_where, p) for p in inside)
                elif addl is False:
                    continue
                else:
                    sub, at = addl, _ptr(pointer, "additionalProperties")
                if sub is False:
                    continue
                k_pieces = [*pieces, *(prx[p] for p in inside)]
                k_minus = [*(prx[p] for p in pats if p not in inside), *declared]
                if k_pieces or k_minus != declared:
                    key = self.regular_string(k_pieces, k_minus)
                else:
                    key = self.extra_key(names)  # any other name: no product needed
                if key is None:
                    continue
                try:
                    value = self.child_rule(sub, at)
                except _NoValue:
                    continue
                out.append((k_pieces, k_minus, key, value))
            return out

        key_pieces = keys.pieces if keys is not None else []
        saved = self.snapshot()
        classes: list[Class] = []
        use_pp, use_keys = bool(pattern_props) and pp_reason is None, keys is not None
        while True:
            try:
                classes = build(use_pp, key_pieces if use_keys else [])
                break
            except _TooBig:
                self.restore(saved)
                if use_pp:
                    use_pp, pp_reason = False, "the key classes would need too many automaton states"
                elif use_keys and key_pieces:
                    use_keys = False
                    self.cannot_enforce(
                        pn_where, "propertyNames", "the keys would need too many automaton states"
                    )
                else:
                    raise
        if pattern_props:
            if use_pp:
                self.note(pp_where, "patternProperties", "enforced", f"{len(classes)} classes of extra keys")
            else:
                self.cannot_enforce(pp_where, "patternProperties", pp_reason or "")
        if use_keys and "propertyNames" in schema:
            self.note(
                pn_where, "propertyNames", "enforced", "declared names that fail it are never generated"
            )
        if not classes:
            return None, None
        if names and addl is not False:
            self.note(
                _ptr(pointer, "additionalProperties"),
                "additionalProperties",
                "enforced",
                "extra keys exclude the declared names",
            )
        members = [f"{key} {colon} {value}" for _, _, key, value in classes]
        extra = members[0] if len(members) == 1 else "( " + " | ".join(members) + " )"
        if len(classes) == 1 and not classes[0][0] and classes[0][1] == declared:
            # Any key but the declared names: keys longer than every declared name, the j-th of
            # length longest + 1 + j modulo n, so the n keys differ from each other.
            longest = max((len(n) for n in names), default=0)
            value = classes[0][3]

            def distinct(j: int, n: int) -> str | None:
                rx = f"(?s:.){{{longest + 1 + j}}}(?:(?s:.){{{n}}})*"
                return f"{self.jstr(rx)} {colon} {value}"

            return extra, distinct

        def distinct_in_classes(j: int, n: int) -> str | None:
            # The j-th of n keys that must differ: its length is j modulo n.
            alts = []
            for k_pieces, k_minus, _, value in classes:
                try:
                    key = self.regular_string([*k_pieces, f"(?s:.){{{j}}}(?:(?s:.){{{n}}})*"], k_minus)
                except _TooBig:
                    return None
                if key is not None:
                    alts.append(f"{key} {colon} {value}")
            if not alts:
                return None
            return alts[0] if len(alts) == 1 else "( " + " | ".join(alts) + " )"

        return extra, distinct_in_classes

    def dependency_map(
        self, schema: dict[str, Any], pointer: str
    ) -> tuple[dict[str, list[str]], set[str], dict[str, str | None]]:
        """(key -> names that must be present with it, keys that can never be present, keyword ->
        None when enforced exactly or why it is checked after decoding) from dependentRequired,
        dependentSchemas and draft-07 dependencies. A dependent schema is enforced when it only
        requires names (``required``, ``properties`` of ``true``, ``type: object``); otherwise
        its ``required`` part is enforced and the rest is checked after decoding."""
        deps: dict[str, list[str]] = {}
        never: set[str] = set()
        keywords: dict[str, str | None] = {}
        for kw in ("dependentRequired", "dependentSchemas", "dependencies"):
            if kw not in schema:
                continue
            where = _ptr(pointer, kw)
            spec = schema[kw]
            if not isinstance(spec, dict):
                raise SchemaError(f"{kw} must be an object", where)
            if kw != "dependencies" and self.old_draft:
                self.note(where, kw, "ignored", "not a keyword before draft 2019-09")
                continue
            keywords[kw] = None
            for key, val in spec.items():
                if isinstance(val, list) and kw != "dependentSchemas":
                    if not all(isinstance(x, str) for x in val):
                        raise SchemaError(f"{kw} lists must hold property names", _ptr(where, key))
                    deps.setdefault(key, [])
                    deps[key] += [x for x in val if x not in deps[key]]
                    continue
                if kw == "dependentRequired":
                    raise SchemaError("dependentRequired values must be arrays of names", _ptr(where, key))
                sub = self.deref(val, _ptr(where, key))
                if sub is True or sub == {}:
                    continue
                if sub is False:
                    never.add(key)
                    continue
                if not isinstance(sub, dict):
                    raise SchemaError(f"{kw} values must be schemas", _ptr(where, key))
                req = sub.get("required", [])
                if isinstance(req, list) and all(isinstance(x, str) for x in req):
                    deps.setdefault(key, [])
                    deps[key] += [x for x in req if x not in deps[key]]
                else:
                    req = None
                rest = {k: v for k, v in sub.items() if k not in _ANNOTATIONS and k != "required"}
                sub_props = rest.pop("properties", {})
                names_only = (
                    req is not None
                    and isinstance(sub_props, dict)
                    and all(v is True or v == {} for v in sub_props.values())
                    and rest.get("type", "object") in ("object", ["object"])
                    and not ({*rest} - {"type"})
                )
                if not names_only:
                    keywords[kw] = "only its required names are enforced" if req else "not expressible"
        return deps, never, keywords

    def extra_key(self, declared: list[str]) -> str:
        """A JSON string key that is none of the declared names (so an extra property can never
        be a second copy of a declared one)."""
        if not declared:
            return self.jstr("(?s:.)*")
        # Strings other than the listed ones: no declared name as a full match. Built as a
        # negative-lookahead-free regex over the trie of declared names.
        return self.jstr(_not_in_regex(declared))

    def any_value(self) -> str:
        if "any-value" not in self.rules:
            ws = self.ws
            self.rules["any-value"] = (
                f'"{{" {ws} ( any-member ( {ws} "," {ws} any-member )* {ws} )? "}}"'
                f' | "[" {ws} ( any-value ( {ws} "," {ws} any-value )* {ws} )? "]"'
                f" | {self.jstr('(?s:.)*')} | {_regex_terminal(numbers.number_regex())}"
                ' | "true" | "false" | "null"'
            )
            self.rules["any-member"] = f'{self.jstr("(?s:.)*")} {ws} ":" {ws} any-value'
        return "any-value"


def _safe_search(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False


def _ascii_classes(pattern: str) -> str:
    """`\\d` and `\\w` as in JSON Schema's regex dialect (ECMA-262): ASCII only. Every ASCII match
    is also a Python match, so this only narrows what is generated (the negated forms keep
    Python's meaning), and it keeps e.g. `[\\w-]{5,96}` from needing one automaton state per
    Unicode word character range and position."""
    out = []
    i = 0
    in_class = False
    negated = False  # inside [^...] the Unicode meaning must stay (ASCII would widen the set)
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if negated:
                out.append(pattern[i : i + 2])
            elif nxt == "d":
                out.append("0-9" if in_class else "[0-9]")
            elif nxt == "w":
                out.append("A-Za-z0-9_" if in_class else "[A-Za-z0-9_]")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class and c == "]":
            in_class = negated = False
        elif not in_class and c == "[":
            in_class = True
            out.append(c)
            i += 1
            if pattern[i : i + 1] == "^":
                out.append("^")
                negated = True
                i += 1
            if pattern[i : i + 1] == "]":
                out.append("]")
                i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _unanchored(pattern: str) -> str:
    """A full-match regex for JSON Schema's `pattern`, which (like Python's ``re.search``, what
    the reference validator uses) matches anywhere unless anchored. Anchors are handled per
    top-level branch; ``$`` also matches before a final newline, as in Python."""
    out = []
    for branch in top_level_branches(pattern):
        inner = _outer_group(branch)
        if inner is not None and ("^" in inner or "$" in inner or "\\A" in inner or "\\Z" in inner):
            # `(^a$)|(^b)`: anchors inside a group that spans the whole branch.
            out.append(_unanchored(inner))
            continue
        body = branch
        start = body.startswith("^") or body.startswith("\\A")
        if start:
            body = body[1:] if body.startswith("^") else body[2:]
        inner = _outer_group(body) if start else None
        if inner is not None and ("$" in inner or "\\Z" in inner):
            # `^(a|b$)`: the start anchor distributes over the group's branches.
            out.append(_unanchored("|".join("^" + b for b in top_level_branches(inner))))
            continue
        end_dollar = body.endswith("$") and not _escaped_at_end(body)
        end_z = body.endswith("\\Z") and not _escaped_at_end(body[:-1])
        if end_dollar:
            body = body[:-1]
        elif end_z:
            body = body[:-2]
        prefix = "" if start else "(?s:.)*"
        suffix = "\\n?" if end_dollar else ("" if end_z else "(?s:.)*")
        out.append(f"{prefix}(?:{body}){suffix}")
    return out[0] if len(out) == 1 else "|".join(f"(?:{b})" for b in out)


def _outer_group(branch: str) -> str | None:
    """The content of a group that spans the whole branch (`(x)`, `(?:x)`, `(?P<n>x)`), else None."""
    if not (branch.startswith("(") and branch.endswith(")")) or _escaped_at_end(branch):
        return None
    start = 1
    if branch.startswith("(?:"):
        start = 3
    elif branch.startswith("(?P<"):
        close = branch.find(">")
        if close < 0:
            return None
        start = close + 1
    elif branch.startswith("(?"):
        return None  # lookaround, flags, ...: leave to the regex engine
    for i, c, depth in scan(branch):
        if c == ")" and depth == 1 and i != len(branch) - 1:
            return None  # the first group closes before the end
    return branch[start:-1]


def _escaped_at_end(body: str) -> bool:
    """Is the last character of `body` escaped by an odd number of backslashes?"""
    n = 0
    i = len(body) - 2
    while i >= 0 and body[i] == "\\":
        n += 1
        i -= 1
    return n % 2 == 1


def _not_in_regex(names: list[str]) -> str:
    """A regex matching every string except those in `names` (exact complement of a finite set)."""
    # Walk the trie of names: at each node, a string that leaves the trie (or stops at a node that
    # is not a name, or continues past a leaf) is fine.
    trie: dict[str, Any] = {}
    for n in names:
        node = trie
        for ch in n:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict[str, Any]) -> str:
        kids = {c: v for c, v in node.items() if c}
        alts = []
        if "" not in node:
            alts.append("")  # stopping here is not a name
        leave = "".join(re.escape(c) for c in kids)
        alts.append(f"[^{leave}](?s:.)*" if kids else "(?s:.)+")
        for c, sub in kids.items():
            alts.append(re.escape(c) + "(?:" + build(sub) + ")")
        return "|".join(alts)

    return build(trie)


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


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def _has_ref(node: Any) -> bool:
    if isinstance(node, dict):
        return "$ref" in node or any(_has_ref(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_ref(v) for v in node)
    return False


def _content_key(schema: Any) -> str | None:
    """A content key for schemas whose expansion may recurse without passing a memoised pointer."""
    if isinstance(schema, dict) and "allOf" in schema and _has_ref(schema["allOf"]):
        return "allOf:" + json.dumps(schema, sort_keys=True, default=str)
    return None


def _constraining(schema: dict[str, Any]) -> bool:
    return any(k not in _ANNOTATIONS for k in schema)


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return Decimal(str(a)) == Decimal(str(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return bool(a == b) and type(a) is type(b)


def _quick_check(schema: dict[str, Any], value: Any) -> bool:
    """Does `value` satisfy `schema`? (Used to filter enum values; jsonschema does the work.)
    Formats the grammar enforces are checked with the grammar's regexes (the post-decoding
    validation skips them), also inside the value (``propertyNames``, ``items``, ...)."""
    import jsonschema

    try:
        jsonschema.Draft202012Validator(schema, format_checker=_format_checker()).validate(value)
    except jsonschema.ValidationError:
        return False
    except jsonschema.exceptions.RefResolutionError:
        return True
    return True


@lru_cache(maxsize=1)
def _format_checker() -> Any:
    import jsonschema

    checker = jsonschema.FormatChecker(formats=())
    for name, rx in formats.FORMAT_REGEXES.items():
        compiled = re.compile(rx)
        checker.checks(name)(lambda v, c=compiled: not isinstance(v, str) or c.fullmatch(v) is not None)
    return checker


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
                merged[name] = {"allOf": [merged[name], s]} if name in merged else s
            out[key] = merged
        elif key == "enum":
            keep = [x for x in va if any(_json_equal(x, y) for y in vb)]
            if not keep:
                raise _NoValue("allOf: the enums have no value in common", pointer)
            out[key] = keep
        elif key in ("items", "additionalProperties", "contains", "propertyNames"):
            out[key] = {"allOf": [va, vb]}
        elif key in ("anyOf", "oneOf"):
            out.setdefault("allOf", [])
            out["allOf"] = [*out.get("allOf", []), {key: vb}]
        elif key not in _KNOWN:
            continue  # an unknown keyword is an annotation: it constrains nothing
        else:
            raise UnsupportedSchemaError(
                f"allOf: cannot merge two different {key!r} values", _ptr(pointer, key)
            )
    if "allOf" in out and out["allOf"]:
        pending = out.pop("allOf")
        for p in pending:
            out = (
                _merge(out, p, pointer)
                if not ("anyOf" in p or "oneOf" in p)
                else {**out, **_wrap_branch(out, p)}
            )
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
        out[_UNMERGED] = [*out.get(_UNMERGED, []), "patternProperties"]
    elif (xa and not foldable(xa, pb, ab)) or (xb and not foldable(xb, pa, aa)):
        pats = dict(xa)
        if xb:
            out[_UNMERGED] = [*out.get(_UNMERGED, []), "patternProperties"]
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


def _merge_groups(out: dict[str, Any], b: dict[str, Any]) -> None:
    """The keywords _merge cannot intersect key by key: `contains` with its counts (two different
    contains need two different matching items), `multipleOf` (the least common multiple), and
    the dependency maps (per key). What cannot be merged moves from `b` to the _UNMERGED list of
    `out`: the grammar enforces `out`'s value and reports the other as checked after decoding."""
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
        out[_UNMERGED] = unmerged


def _all_of(x: Any, y: Any) -> Any:
    """The conjunction of two schemas, dropping `true`."""
    if x is True or x == {}:
        return y
    if y is True or y == {}:
        return x
    return {"allOf": [x, y]}


def _wrap_branch(base: dict[str, Any], branch: dict[str, Any]) -> dict[str, Any]:
    key = "anyOf" if "anyOf" in branch else "oneOf"
    if key in base:
        # Two alternations: distribute (anyOf of the pairwise merges).
        return {"anyOf": [{"allOf": [x, y]} for x in base[key] for y in branch[key]]}
    return {key: branch[key]}


def iter_keywords(schema: Any) -> Iterator[str]:
    """All keywords used anywhere in a schema (for reports and tests)."""
    if isinstance(schema, dict):
        for k, v in schema.items():
            yield k
            yield from iter_keywords(v)
    elif isinstance(schema, list):
        for v in schema:
            yield from iter_keywords(v)


def schema_to_grammar(
    schema: Any, options: SchemaOptions | None = None, check_regex: Callable[[str], None] | None = None
) -> tuple[str, SchemaReport]:
    """Convert a JSON Schema (dict, bool or JSON text) to grammar text and a report.

    Raises
    ------
    corral.SchemaError
        Malformed or contradictory schema (the message names the JSON pointer).
    corral.UnsupportedSchemaError
        A construct corral cannot honour (remote ``$ref``; a ``pattern`` using lookaround or
        backreferences; any post-decoding keyword in strict mode).

    `check_regex`, when given, is called with each pattern regex and raises CompileError for
    one the engine cannot compile, so the error can name the schema keyword.
    """
    if isinstance(schema, (str, bytes)):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as e:
            raise SchemaError(f"schema is not valid JSON: {e}", "#") from None
    conv = _Converter(schema, options or SchemaOptions(), check_regex)
    text = conv.convert()
    return text, conv.report
