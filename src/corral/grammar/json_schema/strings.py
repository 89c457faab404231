"""Strings: ``format``, ``pattern``, ``minLength``/``maxLength``, and ``x-corral-slot``.

In:  a schema's string keywords.
Out: a JSON string terminal whose decoded value satisfies them — one ``/regex/j`` (or ``/c``
     for canonical escapes) terminal, or a product automaton ``"\\"" ( a & b - c ) "\\""`` when
     several constrain the string together — or the slot ``${name:json}``.

Invariants:
* Strings are constrained on their *decoded* value: the ``j`` flag accepts every JSON spelling
  of the matching text and never a raw control character.
* Lengths up to ``SchemaOptions.max_counted_length`` are counted exactly; a product is probed
  first (corral.grammar.probe) and written only within ``max_product_states`` (and
  ``max_product_states_total`` for the schema), else the length, then the pattern, is checked
  after decoding. An empty product raises ``_NoValue``, never an unsatisfiable terminal.
* Every ``pattern`` goes through ``check_regex`` (when given) so an engine refusal names the
  keyword.
"""

from __future__ import annotations

import re
from typing import Any

from corral.errors import CompileError, LimitExceeded, SchemaError, UnsupportedSchemaError
from corral.grammar import formats, probe
from corral.grammar.json_schema.core import ConverterCore
from corral.grammar.json_schema.keywords import _NOT_MATCHING, _SLOT_NAME, _STRING_KEYS, SLOT_KEYWORD
from corral.grammar.json_schema.patterns import _ascii_classes, _unanchored, check_nesting
from corral.grammar.json_schema.util import _count, _NoValue, _ptr, _regex_terminal, _TooBig

# Lengths up to this many characters, alone, stay a plain counted terminal (no product needed).
_INLINE_COUNTED_CHARS = 32
# A length alone as string_body writes it: any character, a bounded number of times. Such a
# piece is written as a plain counted terminal (regular_string); False writes the product with
# `(?s:.)*` instead, the reference the tests compare it with.
_BOUNDED_COUNT = re.compile(r"\(\?s:\.\)\{\d+,\d+\}")
COUNTED_TERMINALS = True


class StringsMixin(ConverterCore):
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
        length_key = "maxLength" if hi is not None else "minLength"  # (named where refused)
        max_counted = self.opt.max_counted_length
        if lo > max_counted or (hi is not None and hi > max_counted):
            # Counting characters multiplies the string automaton (and the per-position mask
            # cache) by the count: long bounds are checked after decoding instead.
            self.cannot_enforce(
                _ptr(pointer, length_key), "minLength/maxLength", f"bounds above {max_counted} characters"
            )
            lo = lo if lo <= max_counted else 0
            hi = None
        length = f"(?s:.){{{lo},{'' if hi is None else hi}}}" if lo or hi is not None else None
        excluded = schema.get(_NOT_MATCHING)
        if excluded:
            # The string side of a complement (composition._complement): patterns subtracted
            # with the grammar's `-`, read as Python does (no ASCII narrowing: that would widen
            # what is left).
            try:
                minus = [self.pattern_regex(p, _ptr(pointer, "not"), ascii_classes=False) for p in excluded]
                out = self.regular_string([*pieces, *([length] if length else [])], minus)
            except (_TooBig, LimitExceeded) as e:
                if isinstance(e, LimitExceeded) and e.limit in ("max_convert_ms", "max_schema_depth"):
                    raise
                self.cannot_enforce(
                    _ptr(pointer, "not"), "not", "the strings left would need too many automaton states"
                )
            else:
                if out is None:
                    raise _NoValue("no string is left outside the excluded patterns/values", pointer)
                return out
        if length is not None and not pieces and (hi or lo) <= _INLINE_COUNTED_CHARS:
            return self.jstr(length)  # small enough to stay a plain terminal
        if length is not None:
            try:
                out = self.regular_string([*pieces, length])
            except _TooBig:
                self.cannot_enforce(
                    _ptr(pointer, length_key),
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
        for key in (*_STRING_KEYS, _NOT_MATCHING):
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
        check_nesting(pat, where)  # before Python's recursive regex parser reads it
        try:
            re.compile(pat)
        except re.error as e:
            raise SchemaError(f"pattern is not a valid regular expression: {e}", where) from None
        rx = _unanchored(_ascii_classes(pat) if ascii_classes else pat)
        if self.check_regex is not None and rx not in self.regexes_checked:
            try:
                self.check_regex(rx)
            except CompileError as e:
                raise UnsupportedSchemaError(f"pattern {pat!r}: {e.message}", where) from None
            self.regexes_checked.add(rx)
        return rx

    def regular_string(self, pieces: list[str], minus: list[str] | None = None) -> str | None:
        """Grammar for a JSON string whose decoded value fully matches every regex of `pieces`
        and none of `minus` (one product automaton); None when no string does.

        Raises _TooBig when the automaton would exceed ``max_product_states``, or the schema's
        products together ``max_product_states_total``."""
        minus = minus or []
        if not pieces:
            pieces = ["(?s:.)*"]
        if len(pieces) == 1 and not minus:
            if pieces[0] == "(?s:.)*":
                return self.jstr(pieces[0])
            if not (COUNTED_TERMINALS and _BOUNDED_COUNT.fullmatch(pieces[0])):
                # `&` makes it one automaton: a long count alone would be split into grammar
                # repetition, whose masks cost far more.
                pieces = [*pieces, "(?s:.)*"]
            # A bounded count of any character (a length alone) is one automaton already: the
            # engine keeps a bounded repetition of one short piece as one terminal (up to a
            # quarter of max_nfa_states, far above max_counted_length's 256 characters) and
            # builds it directly. Its language and minimal DFA are those of the product with
            # `(?s:.)*` (every JSON spelling is in that), so the probe's count is the same; the
            # product took the general pipeline twice, 10-20x the time (5 ms for 256).
        expr = " & ".join(_regex_terminal(p, self.jflag) for p in pieces)
        expr += "".join(f" - {_regex_terminal(m, self.jflag)}" for m in minus)
        n = self.products.get(expr)
        if n is None:
            n = probe.dfa_states(expr, self.opt.max_product_states)
            if n == probe.TOO_BIG or self.product_total + n > self.opt.max_product_states_total:
                raise _TooBig(expr)
            self.products[expr] = n
            self.product_total += n
        if n == probe.EMPTY:
            return None
        return f'"\\"" ( {expr} ) "\\""'
