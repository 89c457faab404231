"""The converter's core: state, bookkeeping and the dispatch from a subschema to its rule.

In:  the root schema, :class:`SchemaOptions`, and an optional ``check_regex`` callback.
Out: grammar rules in ``self.rules`` (name -> right-hand side), the :class:`SchemaReport`, and
     from :meth:`ConverterCore.convert` the whole grammar text (``root``, ``ws`` and the rules).

The area modules (refs, composition, all_of, literals, numeric, strings, arrays, objects,
object_keys, node_keys) add the methods listed under ``TYPE_CHECKING`` below as mixins; converter.py
composes them into one class. This module holds what every area uses: rule naming
(``new_rule``), the container layout (``layout``), notes and the report (``note``,
``cannot_enforce``), undo (``snapshot``/``restore``), the depth-tracking recursion
(``child_rule``, ``exact_child``) and the conversion time limit (``check_time``).

Invariants:
* ``value_rule`` memoises by pointer (and, for expanded ``allOf``-with-``$ref`` schemas, by
  content), reserving the rule name before its body is built, so ``$ref`` cycles become grammar
  recursion; rules with identical bodies are shared unless recursive. It also memoises by node
  (``node_key``, plus the pretty depth): a conjunction by the *set* of its conjuncts
  (flattened through ``allOf`` and ``$ref``), any other dict by its content (a document
  object's content interned once), and a schema again after its ``allOf`` merge
  (``merged_hit``), so each (subschema, context) pair is converted once however many paths
  (``$ref`` targets, ``anyOf`` branches merged with siblings, ``allOf`` merges) reach it, and
  conversion time follows the number of distinct pairs, not of paths. A subschema that
  allows no value is remembered under all three keys (``failed``) and refused again, never
  answered with its reserved, empty rule.
* ``post_marks`` counts keywords not enforced exactly; a rule whose build raised it is inexact,
  and so is every rule that uses it (``exact_child`` reports that).
* ``snapshot``/``restore`` cover every piece of mutable state an attempt can change except
  the counter that only makes rule names unique (``counter``), the patterns ``check_regex``
  accepted (``regexes_checked``, a fact about the pattern) and the product memo
  (``products``, ``product_total``): the products of an undone attempt still count toward
  ``max_product_states_total``, which only errs on the side of fewer states.
* Every subschema whose body is built passes ``check_time``: conversion stops within one
  subschema's work of ``max_convert_ms``.
* Depth: the document's nesting is checked (iteratively) before anything walks it, and
  ``value_rule`` calls nest at most ``max_schema_depth`` deep; past either,
  ``LimitExceeded("max_schema_depth")``. Every recursion in the converter is bounded by one of
  the two, never by Python's recursion limit.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from corral.errors import LimitExceeded, SchemaError, UnsupportedSchemaError
from corral.grammar import numbers
from corral.grammar.bounded_json import check_value
from corral.grammar.json_schema.keywords import _ANNOTATIONS, _POST_CHECKED, _TYPES, _UNMERGED, SLOT_KEYWORD
from corral.grammar.json_schema.options import ReportEntry, SchemaOptions, SchemaReport
from corral.grammar.json_schema.util import (
    _constraining,
    _content_key,
    _json_string_of,
    _lit,
    _NoValue,
    _ptr,
    _regex_terminal,
)

if TYPE_CHECKING:
    from corral.grammar.json_schema.object_keys import _Keys


class ConverterCore:
    """State and dispatch of one conversion (see the module docstring); the area mixins add the
    methods declared under ``TYPE_CHECKING``."""

    if TYPE_CHECKING:
        # refs.py
        def resolve_ref(self, ref: str, pointer: str) -> tuple[Any, str]: ...
        def deref(self, schema: Any, pointer: str) -> Any: ...

        # composition.py, all_of.py
        def if_then_else(self, schema: dict[str, Any], pointer: str) -> dict[str, Any] | None: ...
        def provably_disjoint(self, branches: list[Any], pointer: str) -> bool: ...
        def negation(self, schema: dict[str, Any], pointer: str) -> dict[str, Any] | None: ...
        def exclusive_one_of(self, schema: dict[str, Any], pointer: str) -> dict[str, Any] | None: ...
        def needs_exclusion(self, schema: dict[str, Any], pointer: str) -> bool: ...
        def merge_all_of(self, schema: dict[str, Any], pointer: str) -> dict[str, Any]: ...

        # literals.py, numeric.py, strings.py, arrays.py
        def enum_body(self, schema: dict[str, Any], pointer: str) -> str: ...
        def number_body(self, schema: dict[str, Any], pointer: str, integer: bool) -> str: ...
        def string_body(self, schema: dict[str, Any], pointer: str) -> str: ...
        def pattern_regex(self, pat: Any, where: str, ascii_classes: bool) -> str: ...
        def regular_string(self, pieces: list[str], minus: list[str] | None = None) -> str | None: ...
        def array_body(self, schema: dict[str, Any], pointer: str) -> str: ...

        # node_keys.py
        def node_key(self, schema: Any) -> Any: ...

        # objects.py, object_keys.py
        def object_body(self, schema: dict[str, Any], pointer: str) -> str: ...
        def extra_key(self, declared: list[str]) -> str: ...
        def key_language(self, schema: dict[str, Any], pointer: str) -> _Keys | None: ...
        def extra_members(
            self,
            schema: dict[str, Any],
            pointer: str,
            addl: Any,
            pattern_props: dict[str, Any],
            keys: _Keys | None,
            names: list[str],
            colon: str,
        ) -> tuple[str | None, Callable[[int, int], str | None] | None, list[tuple[str, str]]]: ...

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
        # value_rule calls in progress (subschemas inside one another, $ref hops included):
        # bounded by max_schema_depth, so the converter's recursion never reaches Python's limit.
        self.nesting = 0
        self.deepest = 0  # the most value_rule calls that were in progress at once
        self.in_progress: set[str] = set()
        self.recursive: set[str] = set()
        self.by_body: dict[str, str] = {}
        self.by_content: dict[str, str] = {}
        # Memo by node (see node_key): rules, and subschemas no value satisfies.
        self.by_node: dict[Any, str] = {}
        self.building: list[tuple[str, list[Any]]] = []  # value_rule calls: (rule, its node keys)
        self.doc_keys: dict[int, Any] = {}  # id of a document object -> its interned content key
        self.doc_tops: dict[int, Any] = {}  # ... -> its node key (see node_keys.py)
        self.built_keys: dict[int, tuple[Any, Any]] = {}  # id -> (a dict built by a merge, its key)
        self.interned: dict[Any, int] = {}
        self.failed: dict[Any, _NoValue] = {}  # by pointer, content key and node key
        # ids of the document's dicts and lists (the document outlives the conversion, so an id
        # stands for one object throughout).
        self.document_ids: set[int] = set()
        # Exactness bookkeeping: post_marks counts keywords not enforced exactly (checked after
        # decoding, ignored); a rule whose build raised it is inexact, and so is every rule that
        # uses it. Variants that must be exact (items that count as `contains` matches) check it.
        self.post_marks = 0
        self.inexact: set[str] = set()
        # Pattern regexes check_regex accepted (one engine call each, however many subschemas
        # share the pattern: a $ref'd id pattern is met once per use).
        self.regexes_checked: set[str] = set()
        # Product automata written so far (expression -> DFA states) and their total.
        self.products: dict[str, int] = {}
        self.product_total = 0
        # Conversion time limit (SchemaOptions.max_convert_ms): set when convert() starts.
        self.started = time.perf_counter()
        self.deadline: float | None = None
        schema_uri = root.get("$schema") if isinstance(root, dict) else None
        # Before draft 2019-09, minContains/maxContains and dependentRequired/dependentSchemas
        # were not keywords (and `dependencies` was).
        self.old_draft = isinstance(schema_uri, str) and re.search(r"draft-0[0-7]", schema_uri) is not None

    # -- helpers -----------------------------------------------------------------------------
    def jstr(self, regex: str) -> str:
        """A JSON string whose decoded value fully matches ``regex``, spelled per the options."""
        return _json_string_of(regex, self.jflag)

    def new_rule(self, hint: str) -> str:
        self.counter += 1
        # (The substitution maps character to character: the first 40 of the hint decide.)
        return f"s{self.counter}-{_rule_hint(hint[:40])}"

    def layout(self) -> tuple[str, str, str, str]:
        """(after the opening bracket, between items, before the closing bracket, between a
        key and its value) for a container at the current depth."""
        if self.pretty and self.depth < self.opt.pretty_max_depth:
            inner = " " * (self.opt.indent * (self.depth + 1))
            outer = " " * (self.opt.indent * self.depth)
            return _lit("\n" + inner), _lit(",\n" + inner), _lit("\n" + outer), _lit(": ")
        # Beyond the pretty depth cap the indentation keeps growing: a longer (still bounded) run.
        ws = "ws-deep" if self.pretty else self.ws
        return ws, f'{ws} "," {ws}', ws, f'{ws} ":" {ws}'

    def depth_tag(self) -> str:
        """The memo-key suffix of the current depth in pretty mode ("" otherwise): rules there
        differ by nesting depth (their indentation), down to ``pretty_max_depth``."""
        return f"@{min(self.depth, self.opt.pretty_max_depth)}" if self.pretty else ""

    def child_rule(self, schema: Any, pointer: str) -> str:
        """The rule for a value one container level deeper."""
        self.depth += 1
        try:
            return self.value_rule(schema, pointer)
        finally:
            self.depth -= 1

    def note(
        self, pointer: str, keyword: str, status: str, detail: str = "", capped_at: int | None = None
    ) -> None:
        if status != "enforced":
            self.post_marks += 1
        entry = ReportEntry(pointer, keyword, status, detail, capped_at)  # type: ignore[arg-type]
        self.report.entries.append(entry)

    def snapshot(self) -> tuple[Any, ...]:
        """The converter's mutable state, to undo an attempt that failed half-way."""
        return (
            dict(self.rules),
            dict(self.by_pointer),
            dict(self.by_body),
            dict(self.by_content),
            dict(self.by_node),
            dict(self.failed),
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
            self.by_node,
            self.failed,
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

    def descend(self, pointer: str) -> None:
        """Count one more nested step of the conversion (a subschema, a $ref hop, an allOf
        part); the caller decrements ``nesting`` when it returns. Raises
        LimitExceeded("max_schema_depth") past the limit, naming `pointer`."""
        self.nesting += 1
        self.deepest = max(self.deepest, self.nesting)
        if self.nesting > self.opt.max_schema_depth:
            self.nesting -= 1
            limit = self.opt.max_schema_depth
            raise LimitExceeded(
                "max_schema_depth",
                self.nesting + 1,
                limit,
                f"the schema nests more than max_schema_depth={limit} subschemas deep "
                f"(counting $ref hops) at {pointer}",
            )

    def check_time(self, pointer: str) -> None:
        """Raise LimitExceeded("max_convert_ms", ...) once the conversion has run past
        ``max_convert_ms``; `pointer` is where it is (named in the message)."""
        if self.deadline is None:
            return
        now = time.perf_counter()
        if now > self.deadline:
            limit = self.opt.max_convert_ms or 0
            elapsed = int((now - self.started) * 1000)
            raise LimitExceeded(
                "max_convert_ms",
                elapsed,
                limit,
                f"converting the schema to a grammar took more than max_convert_ms={limit} ms "
                f"({elapsed} ms); it was at {pointer}",
            )

    # -- entry ---------------------------------------------------------------------------------
    def convert(self) -> str:
        self.started = time.perf_counter()
        if self.opt.max_convert_ms is not None:
            self.deadline = self.started + self.opt.max_convert_ms / 1000
        # Before any recursive helper (json.dumps of content keys, _has_ref, allOf merging)
        # walks the document: they then descend at most max_schema_depth containers.
        check_value(self.root, self.opt.max_schema_depth, "max_schema_depth", "the schema", self.document_ids)
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
        # By node: the same subschema reached along another path (a merged anyOf branch, an
        # allOf part, a $ref target's properties under a merge) is converted once.
        nk = self.node_key(schema)
        # Schemas that are expanded in place (an allOf or a $ref with siblings that reaches a
        # $ref) are memoised by content when they have no node key, so recursion through them
        # stays finite (a node key is coarser: equal content, equal node key).
        ck = _content_key(schema) if nk is None else None
        if self.pretty:  # rules differ by nesting depth (their indentation)
            pointer += self.depth_tag()
            ck = ck + self.depth_tag() if ck else None
        # A subschema no value satisfies stays that way: its reserved rule (empty text) must
        # never be returned as if it were built.
        if self.failed:
            for key in (pointer, ck, nk):
                failed = self.failed.get(key) if key is not None else None
                if failed is not None:
                    raise _NoValue(failed.message, failed.pointer)
        hit = self.by_pointer.get(pointer) or (self.by_content.get(ck) if ck else None)
        if hit is None and nk is not None:
            hit = self.by_node.get(nk)
        if hit is not None:
            if hit in self.in_progress:
                self.recursive.add(hit)
            if (
                hit in self.in_progress
                or pointer in self.inexact
                or (ck and ck in self.inexact)
                or (nk is not None and nk in self.inexact)
            ):
                self.post_marks += 1  # (recursion: exactness unknown yet, assume not)
            return hit
        base = pointer.partition("@")[0]
        name = self.new_rule(base.rsplit("/", 1)[-1] or "root")
        self.by_pointer[pointer] = name
        if ck:
            self.by_content[ck] = name
        if nk is not None:
            self.by_node[nk] = name
        self.rules[name] = ""  # reserve (recursion may refer to it before it is built)
        self.in_progress.add(name)
        marks = self.post_marks
        self.descend(base)
        # Node keys this rule answers for: its own, and its schema's after allOf merging
        # (value_body adds that one, see merged_hit).
        nodes = [nk] if nk is not None else []
        self.building.append((name, nodes))
        try:
            body = self.value_body(schema, base if self.pretty else pointer)
        except _NoValue as e:
            for key in (pointer, ck, *nodes):
                if key is not None:
                    self.failed[key] = e
            for key in nodes:
                self.by_node.pop(key, None)
            raise
        except BaseException:
            for key in nodes:
                self.by_node.pop(key, None)
            raise
        finally:
            self.nesting -= 1
            self.building.pop()
        self.in_progress.discard(name)
        if self.post_marks != marks:
            self.inexact.add(pointer)
            if ck:
                self.inexact.add(ck)
            self.inexact.update(nodes)
        same = self.by_body.get(body)
        if same is not None and name not in self.recursive:
            del self.rules[name]
            # Only these keys can name the new rule: nothing inside its body could share it
            # (it was not in by_body yet), and hits do not store it elsewhere.
            self.by_pointer[pointer] = same
            if ck:
                self.by_content[ck] = same
            for key in nodes:
                self.by_node[key] = same
            return same
        self.rules[name] = body
        self.by_body.setdefault(body, name)
        return name

    def merged_hit(self, before: dict[str, Any], merged: dict[str, Any], pointer: str) -> str | None:
        """After ``allOf`` merging: the rule already built (or being built) for the merged
        schema, else None — and the rule being built now is registered for it. Conjunctions that
        merge to one schema (X ∧ R where X already implies R, the same parts merged along
        different paths) are then converted once."""
        if merged is before or not self.building:
            return None
        mk = self.node_key(merged)
        if mk is None:
            return None
        failed = self.failed.get(mk)
        if failed is not None:
            raise _NoValue(failed.message, failed.pointer)
        hit = self.by_node.get(mk)
        if hit is None:
            name, nodes = self.building[-1]
            self.by_node[mk] = name
            nodes.append(mk)
            return None
        if hit in self.in_progress:
            self.recursive.add(hit)
        if hit in self.in_progress or mk in self.inexact:
            self.post_marks += 1  # (recursion: exactness unknown yet, assume not)
        return hit

    def value_body(self, schema: Any, pointer: str) -> str:
        self.check_time(pointer)
        if schema is True or schema == {}:
            return self.any_value()
        if schema is False:
            raise _NoValue("this schema allows no value (false)", pointer)
        if not isinstance(schema, dict):
            raise SchemaError(
                f"a schema must be an object or a boolean, got {type(schema).__name__}", pointer
            )
        if "$dynamicRef" in schema or "$recursiveRef" in schema:
            key = "$dynamicRef" if "$dynamicRef" in schema else "$recursiveRef"
            raise UnsupportedSchemaError(f"{key} is not supported", _ptr(pointer, key))
        if "allOf" in schema:  # (else merging returns the schema itself)
            merged = self.merge_all_of(schema, pointer)
            hit = self.merged_hit(schema, merged, pointer)
            if hit is not None:
                return hit
            schema = merged
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
            if key + self.depth_tag() in self.by_pointer:
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
        if "not" in schema or "oneOf" in schema:  # (most schemas: no bound methods made)
            for key, rewrite in (("not", self.negation), ("oneOf", self.exclusive_one_of)):
                # Enforced through complements (composition.py) when expressible; if a complement
                # needs something unsupported, as before: checked after decoding.
                if key not in schema or (key == "oneOf" and not self.needs_exclusion(schema, pointer)):
                    continue
                saved = self.snapshot()
                rewritten = rewrite(schema, pointer)
                if rewritten is not None:
                    try:
                        return self.value_body(rewritten, pointer)
                    except SchemaError as e:
                        if isinstance(e, _NoValue):
                            if key == "oneOf" and e.pointer == _ptr(pointer, "anyOf"):
                                # The rewrite's anyOf is ours, not the user's: name their oneOf.
                                raise _NoValue(
                                    "no value satisfies exactly one branch of oneOf", _ptr(pointer, "oneOf")
                                ) from None
                            raise  # (exact: no value satisfies the schema)
                        # Unsupported, or an error only the rewritten form meets: as before.
                        self.restore(saved)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                branches = schema[key]
                if not isinstance(branches, list) or not branches:
                    raise SchemaError(f"{key} must be a non-empty array", _ptr(pointer, key))
                rest = {k: v for k, v in schema.items() if k != key}
                if key == "oneOf" and len(branches) > 1:
                    if not self.needs_exclusion(schema, pointer):
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
        post_checked = _POST_CHECKED.intersection(schema)
        for key in sorted(post_checked) if post_checked else ():
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

    # -- types ---------------------------------------------------------------------------------
    def types_of(self, schema: dict[str, Any], pointer: str) -> list[str]:
        t = schema.get("type")
        if t.__class__ is str and (t in _TYPES or t == "integer"):
            return [t]  # (the common case, as the general path below would find)
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


_NOT_NAME_CHAR = re.compile(r"[^A-Za-z0-9_-]")


@lru_cache(maxsize=4096)
def _rule_hint(hint: str) -> str:
    """The readable part of a rule name made from `hint` (at most 40 characters of a property
    name, a keyword): memoised, as the same names come back in every object and schema."""
    return _NOT_NAME_CHAR.sub("-", hint).strip("-") or "n"
