"""Object keys: what ``propertyNames`` allows, and the classes of undeclared keys that
``patternProperties`` and ``additionalProperties`` give values to.

In:  a schema's ``propertyNames``, ``patternProperties`` and ``additionalProperties``, and the
     declared names (from objects.py).
Out: ``key_language``: the allowed names as full-match regexes plus an exact test (and the
     names themselves when a ``propertyNames`` enum lists at most
     ``SchemaOptions.max_named_keys``); ``extra_members``: the grammar of one undeclared
     member, and for counting machines a way to write n keys that differ from each other.

Invariants: an undeclared key falls in exactly one class: the set T of ``patternProperties``
groups (patterns with the same schema form one group) it matches, so its value satisfies all of
their schemas (``additionalProperties`` when T is empty). Only the sets some key can match are
classes: they are found by refinement over pairwise overlaps (``key_classes``), never by
enumerating 2**n subsets, so disjoint patterns cost one class each. Each class is one product
automaton ``propertyNames & groups of T - the other groups a key of T could match - declared
names``. Past ``max_key_patterns`` groups matched at once, ``_MAX_KEY_CLASSES`` classes or the
state budget, ``patternProperties`` and then ``propertyNames`` are checked after decoding
instead, after undoing the half-built attempt (snapshot/restore).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from corral.errors import SchemaError, UnsupportedSchemaError
from corral.grammar import formats, probe
from corral.grammar.json_schema.core import ConverterCore
from corral.grammar.json_schema.keywords import _UNMERGED, SLOT_KEYWORD
from corral.grammar.json_schema.patterns import _safe_search
from corral.grammar.json_schema.util import _count, _json_equal, _NoValue, _ptr, _regex_terminal, _TooBig
from corral.grammar.regex_text import top_level_branches


@dataclass
class _Keys:
    """The property names ``propertyNames`` allows (see _Converter.key_language)."""

    pieces: list[str]  # full-match regexes (decoded names) every name must match
    names: list[str] | None  # the allowed names when they are few (enum/const), else None
    test: Callable[[str], bool]  # exactly: does a name satisfy propertyNames?


# One class of undeclared keys as extra_members writes it: key pieces, key minus (None: the
# declared names only), key rule, value rule.
_KeyClass = tuple[list[str], list[str] | None, str, str]


class ObjectKeysMixin(ConverterCore):
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
        max_counted = self.opt.max_counted_length
        if lo > max_counted or (hi is not None and hi > max_counted):
            give_up(f"length bounds above {max_counted} characters")
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
            allowed if len(allowed) <= self.opt.max_named_keys else None,
            frozenset(allowed).__contains__,
        )

    def key_classes(
        self, groups: list[tuple[str, Any, list[str]]], pieces: list[str]
    ) -> list[tuple[list[int], list[int]]]:
        """The subsets T of `groups` (by index) that some key may match exactly — keys matching
        every group of T and no other — each with the other groups such a key could match
        (its rivals, to subtract). Found by refining, group by group, the classes found so far
        (a class splits in two only when the new group overlaps all of its groups), not by
        enumerating 2**n subsets. A class may still turn out empty (its product is probed when
        written). Raises _TooBig past _MAX_KEY_CLASSES classes or when a key could match more
        than ``max_key_patterns`` groups at once."""
        if not groups:
            return [([], [])]  # (most objects: one class, the keys no pattern matches)
        overlap: dict[tuple[int, int], bool] = {}

        def overlaps(a: int, b: int) -> bool:
            if (a, b) not in overlap and _prefix_disjoint(groups[a][2], groups[b][2]):
                overlap[(a, b)] = False  # (anchored literal prefixes that differ: no probe needed)
            if (a, b) not in overlap:
                rxs = (*pieces, groups[a][0], groups[b][0])
                expr = " & ".join(_regex_terminal(rx, self.jflag) for rx in rxs)
                n = probe.dfa_states(expr, self.opt.max_product_states)
                if n == probe.TOO_BIG:
                    raise _TooBig(expr)
                overlap[(a, b)] = n != probe.EMPTY
            return overlap[(a, b)]

        classes: list[list[int]] = [[]]
        for g in range(len(groups)):
            self.check_time("patternProperties")
            grown = [[*c, g] for c in classes if all(overlaps(x, g) for x in c)]
            if any(len(c) > self.opt.max_key_patterns for c in grown):
                raise _TooBig(
                    f"{_CLASSES} a key may match more than {self.opt.max_key_patterns} patterns "
                    "(with different schemas) at once"
                )
            classes = classes + grown
            if len(classes) > _MAX_KEY_CLASSES:
                raise _TooBig(f"{_CLASSES} more than {_MAX_KEY_CLASSES} classes of keys")
        # A key of class T can only match the other groups that overlap every group of T: only
        # those need subtracting.
        out = []
        for c in sorted(classes, key=len, reverse=True):
            rivals = [
                g for g in range(len(groups)) if g not in c and all(overlaps(min(x, g), max(x, g)) for x in c)
            ]
            out.append((c, rivals))
        return out

    def extra_members(
        self,
        schema: dict[str, Any],
        pointer: str,
        addl: Any,
        pattern_props: dict[str, Any],
        keys: _Keys | None,
        names: list[str],
        colon: str,
    ) -> tuple[str | None, Callable[[int, int], str | None] | None, list[tuple[str, str]]]:
        """The grammar of one additional (undeclared) member, or None when none may appear;
        `distinct` for the counting machine (containers.ObjectMembers); and per class of
        undeclared keys, its key and the rest of its member (the parts of the member's
        alternatives, for a keyed group that remembers undeclared keys).

        An undeclared key falls in the class of the set T of ``patternProperties`` groups it
        matches (see key_classes), so its value satisfies all of their schemas
        (``additionalProperties`` when T is empty). Each class is one product automaton:
        ``propertyNames`` & groups of T - rival groups - declared names. Over the budgets,
        ``patternProperties`` and then ``propertyNames`` are checked after decoding instead."""
        pp_where = _ptr(pointer, "patternProperties")
        pn_where = _ptr(pointer, "propertyNames")
        made: list[list[str]] = []

        def declared() -> list[str]:
            """The declared names as one regex to subtract, made when a product first needs it
            (most objects have no product key: their extra key is extra_key's complement)."""
            if not made:
                made.append(["|".join(re.escape(n) for n in names)] if names else [])
            return made[0]

        pp_reason: str | None = None
        prx: dict[str, str] = {}
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
            return None, None, []

        def build(use_pp: bool, pieces: list[str]) -> list[_KeyClass]:
            out: list[_KeyClass] = []
            groups = _groups(pattern_props, prx) if use_pp else []
            for inside, rivals in self.key_classes(groups, pieces):
                if inside:
                    subs = [groups[g][1] for g in inside]
                    sub = subs[0] if len(subs) == 1 else {"allOf": subs}
                    at = "&".join(_ptr(pp_where, p) for g in inside for p in groups[g][2])
                elif addl is False:
                    continue
                else:
                    sub, at = addl, _ptr(pointer, "additionalProperties")
                if sub is False:
                    continue
                k_pieces = [*pieces, *(groups[g][0] for g in inside)]
                others = [groups[g][0] for g in rivals]
                k_minus: list[str] | None = None
                if k_pieces or others:
                    k_minus = [*(["|".join(f"(?:{rx})" for rx in others)] if others else []), *declared()]
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
        classes: list[_KeyClass] = []
        use_pp, use_keys = bool(pattern_props) and pp_reason is None, keys is not None
        # Only patterns and propertyNames pieces are probed (key_classes, regular_string), so
        # without them build cannot give up and there is nothing to undo: no snapshot (a copy
        # of every rule so far, per object - quadratic in a schema's objects).
        saved = self.snapshot() if use_pp or key_pieces else None
        while True:
            try:
                classes = build(use_pp, key_pieces if use_keys else [])
                break
            except _TooBig as e:
                if saved is None:
                    raise
                self.restore(saved)
                if use_pp:
                    why = str(e.args[0]) if e.args else ""
                    too_many = "the key classes would need too many automaton states"
                    pp_reason = why if why.startswith(_CLASSES) else too_many
                    use_pp = False
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
            return None, None, []
        if names and addl is not False:
            self.note(
                _ptr(pointer, "additionalProperties"),
                "additionalProperties",
                "enforced",
                "extra keys exclude the declared names",
            )
        members = [f"{key} {colon} {value}" for _, _, key, value in classes]
        # (each class's key and the rest of its member: a keyed group that remembers
        # undeclared keys marks the key, objects.py)
        parts = [(key, f"{colon} {value}") for _, _, key, value in classes]
        extra = members[0] if len(members) == 1 else "( " + " | ".join(members) + " )"
        if len(classes) == 1 and not classes[0][0] and classes[0][1] is None:
            # Any key but the declared names: keys longer than every declared name, the j-th of
            # length longest + 1 + j modulo n, so the n keys differ from each other.
            longest = max((len(n) for n in names), default=0)
            value = classes[0][3]

            def distinct(j: int, n: int) -> str | None:
                rx = f"(?s:.){{{longest + 1 + j}}}(?:(?s:.){{{n}}})*"
                return f"{self.jstr(rx)} {colon} {value}"

            return extra, distinct, parts

        def distinct_in_classes(j: int, n: int) -> str | None:
            # The j-th of n keys that must differ: its length is j modulo n.
            alts = []
            for k_pieces, k_minus, _, value in classes:
                try:
                    minus = declared() if k_minus is None else k_minus
                    key = self.regular_string([*k_pieces, f"(?s:.){{{j}}}(?:(?s:.){{{n}}})*"], minus)
                except _TooBig:
                    return None
                if key is not None:
                    alts.append(f"{key} {colon} {value}")
            if not alts:
                return None
            return alts[0] if len(alts) == 1 else "( " + " | ".join(alts) + " )"

        return extra, distinct_in_classes, parts


# Most classes of undeclared keys (subsets of patternProperties groups that a key may match)
# one object writes: each is one product automaton and one value rule.
_MAX_KEY_CLASSES = 256
_CLASSES = "key classes:"  # opens the reasons key_classes gives up with


def _groups(pattern_props: dict[str, Any], prx: dict[str, str]) -> list[tuple[str, Any, list[str]]]:
    """patternProperties grouped by schema: (the union of the group's full-match regexes, the
    schema, its patterns). A key matching several patterns of one group gets that schema once,
    so only groups, not patterns, make key classes."""
    by_schema: dict[str, tuple[list[str], Any, list[str]]] = {}
    for pat, sub in pattern_props.items():
        k = json.dumps(sub, sort_keys=True, default=str)
        rxs, _, pats = by_schema.setdefault(k, ([], sub, []))
        rxs.append(prx[pat])
        pats.append(pat)
    return [
        (rxs[0] if len(rxs) == 1 else "|".join(f"(?:{rx})" for rx in rxs), sub, pats)
        for rxs, sub, pats in by_schema.values()
    ]


def _literal_prefix(pattern: str) -> str | None:
    """The literal text every match of an anchored (``^``) search pattern starts with, or None
    (not anchored, or an alternation at the top)."""
    if not pattern.startswith("^") or len(top_level_branches(pattern)) != 1:
        return None
    out: list[str] = []
    for c in pattern[1:]:
        if c in "\\.[](){}*+?|^$":
            if c in "*+?{" and out:
                out.pop()  # the last character is repeated or optional
            break
        out.append(c)
    return "".join(out)


def _prefix_disjoint(a: list[str], b: list[str]) -> bool:
    """Can no name match a pattern of `a` and one of `b`? True only when every pair has
    anchored literal prefixes that differ within their common length."""
    for x in a:
        px = _literal_prefix(x)
        for y in b:
            py = _literal_prefix(y)
            if px is None or py is None:
                return False
            n = min(len(px), len(py))
            if px[:n] == py[:n]:
                return False
    return True
