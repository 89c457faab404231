"""Numbers: ``minimum``/``maximum`` (inclusive and exclusive) and ``multipleOf``.

In:  a schema's numeric keywords, for ``type`` number or integer.
Out: a ``/regex/`` terminal for the numbers within the bounds (corral.grammar.numbers), or,
     with ``multipleOf``, automaton rules for the multiples within the bounds
     (corral.grammar.multiples), capped at ``SchemaOptions.max_machine_states``.

Invariants: bounds are exact decimals for integers; fractions and exponents are bounded by what
a validator's float comparison sees (``numbers.float_safe_bound``), so ``1e-400`` is never
generated under ``exclusiveMinimum: 0``. An integer ``multipleOf`` is enforced exactly (integer
spellings only); a decimal one is generated exactly but also checked after decoding, because
validators divide in floating point. Bounds that allow nothing raise ``_NoValue``.
"""

from __future__ import annotations

import math
from decimal import Decimal
from functools import lru_cache
from typing import Any

from corral.errors import SchemaError, UnsupportedSchemaError
from corral.grammar import multiples, numbers
from corral.grammar.json_schema.core import ConverterCore
from corral.grammar.json_schema.keywords import _FRACTION, _NOT_MULTIPLE_OF, _PLAIN_NUMBERS, _steps_ok
from corral.grammar.json_schema.util import _NoValue, _ptr, _regex_terminal


class NumbersMixin(ConverterCore):
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
        fraction = _FRACTION in schema  # (the complement of type: integer, see keywords.py)
        if fraction and integer:
            raise _NoValue("no integer is a non-integral number", pointer)
        if fraction and "multipleOf" in schema:
            raise UnsupportedSchemaError("multipleOf of non-integral numbers", _ptr(pointer, "multipleOf"))
        if "multipleOf" in schema or _NOT_MULTIPLE_OF in schema:
            body = self.multiple_body(schema, pointer, integer, (lo, lo_x), (hi, hi_x))
            if body is not None:
                return body
        if not integer:
            # Validators compare fractions and exponents after rounding them to a float; the
            # bounds keep that comparison true (stricter within one float step of a bound).
            lo, lo_x, hi, hi_x = f_lo, False, f_hi, False
        try:
            rx = _range_regex(lo, hi, lo_x, hi_x, integer, _PLAIN_NUMBERS not in schema and not fraction)
        except ValueError as e:
            raise _NoValue(f"the number bounds allow no value: {e}", pointer) from None
        if fraction:
            return f"( {_regex_terminal(rx)} & {_regex_terminal(_FRACTION_RX)} )"
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
        is also checked after decoding. The integers of _NOT_MULTIPLE_OF (a complement's branch
        for ``not: {multipleOf: k}``) are left out in the same automaton (residues mod the lcm)."""
        where = _ptr(pointer, "multipleOf")
        step = schema.get("multipleOf", 1)
        excluded = _excluded_steps(schema.get(_NOT_MULTIPLE_OF, []))
        if excluded and not integer:
            # (complement branches carry type: integer; anything else is not one of them)
            self.cannot_enforce(
                _ptr(pointer, "not"), "not", "integers outside a multipleOf, on a non-integer"
            )
            excluded = ()
        if "multipleOf" not in schema and not excluded:
            return None  # (the bounds alone)
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
            if k == 1 and not excluded:
                rule = _regex_terminal(numbers.integer_regex(int_lo, int_hi))
            else:
                try:
                    automaton = multiples.integer_multiples(
                        k, int_lo, int_hi, self.opt.max_machine_states, excluded
                    )
                except ValueError:
                    raise _NoValue(f"no multiple of {step} satisfies the bounds", where) from None
                if automaton is None:
                    if "multipleOf" in schema:
                        self.cannot_enforce(
                            where, "multipleOf", f"step {step} with these bounds needs too many states"
                        )
                    if excluded:
                        self.cannot_enforce(
                            _ptr(pointer, "not"), "not", "integers outside a multipleOf need too many states"
                        )
                    return None
                rule = automaton.rules(self.new_rule, self.rules)
            # (Without multipleOf only the complement's exclusion is here: negation notes `not`.)
            if "multipleOf" in schema and exact:
                self.note(where, "multipleOf", "enforced", "" if integer else "integer spellings only")
            elif "multipleOf" in schema:
                self.cannot_enforce(where, "multipleOf", float_note)
            return rule
        if lo is not None or hi is not None:
            self.cannot_enforce(where, "multipleOf", "non-integer step combined with minimum/maximum")
            return None
        automaton = multiples.decimal_multiples(p, s, self.opt.max_machine_states)
        if automaton is None:
            self.cannot_enforce(where, "multipleOf", f"step {step} needs too many automaton states")
            return None
        self.cannot_enforce(where, "multipleOf", float_note)
        return automaton.rules(self.new_rule, self.rules)


def _excluded_steps(value: Any) -> tuple[int, ...]:
    """The steps of _NOT_MULTIPLE_OF (set by composition._violators: positive integers)."""
    if not _steps_ok(value):
        raise SchemaError(f"{_NOT_MULTIPLE_OF} must list positive integers")
    return tuple(dict.fromkeys(value))


# Non-integral numbers in plain spellings with at most 15 significant digits (and at most 20
# zeros after the point before the first one): a double keeps 15 significant digits, so the
# value a validator parses is not integral either (1.0000000000000001 would parse to 1.0).
_FRACTION_RX = (
    "-?(?:0\\.0{0,20}[1-9](?:[0-9]{0,13}[1-9])?|"
    + "|".join(f"[1-9][0-9]{{{d - 1}}}\\.[0-9]{{0,{14 - d}}}[1-9]" for d in range(1, 15))
    + ")0*"
)


def _range_regex(
    lo: Decimal | None, hi: Decimal | None, lo_x: bool, hi_x: bool, integer: bool, allow_exponent: bool
) -> str:
    """numbers.number_regex for these bounds, memoised by the bounds' text when it is short
    (a cache entry's size follows the bounds'): the same few ranges (none, >= 0, 1..100) come
    back in number after number, and building their regex was a tenth of converting them."""
    lo_t = None if lo is None else str(lo)
    hi_t = None if hi is None else str(hi)
    if len(lo_t or "") + len(hi_t or "") <= 80:
        return _range_regex_of(lo_t, hi_t, lo_x, hi_x, integer, allow_exponent)
    return _range_regex_of.__wrapped__(lo_t, hi_t, lo_x, hi_x, integer, allow_exponent)


@lru_cache(maxsize=4096)
def _range_regex_of(
    lo: str | None, hi: str | None, lo_x: bool, hi_x: bool, integer: bool, allow_exponent: bool
) -> str:
    # By text, not Decimal: Decimal("1") == Decimal("1.0"), yet they are two spellings of a
    # bound; the text gives back the Decimal exactly. (A ValueError - no value in range - is
    # raised again on every call: lru_cache keeps only results.)
    return numbers.number_regex(
        None if lo is None else Decimal(lo),
        None if hi is None else Decimal(hi),
        exclusive_minimum=lo_x,
        exclusive_maximum=hi_x,
        integer=integer,
        allow_exponent=allow_exponent,
    )
