"""Exact regular expressions for JSON numbers within bounds.

The JSON Schema frontend turns ``{"type": "integer" | "number", "minimum": ..., "maximum": ...,
"exclusiveMinimum": ..., "exclusiveMaximum": ...}`` into a regular expression (Python ``re``
syntax, full-match semantics, ASCII only) over JSON number texts (RFC 8259:
``-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?``). The regex is *exact*: a text matches if and
only if it belongs to the documented family of spellings below and its numeric value satisfies
the bounds. Values are compared as exact decimals (:class:`decimal.Decimal`), never as floats.

Spellings that are generated
----------------------------
Integers (:func:`integer_regex`, ``number_regex(integer=True)``)
    Canonical integers only: ``-?(0|[1-9][0-9]*)`` without ``-0``. JSON Schema also counts
    ``1.0`` and ``1e2`` as integers, and ``-0`` equals ``0``; those spellings are valid but
    pointless for a generator, so they are **not** generated.
Numbers (``number_regex(integer=False)``)
    Every JSON number text *without exponent* whose value is in range: fractions of any length
    (``12.5``, ``0.001``), trailing zeros (``1.50``, ``100.0``) and negative zero (``-0``,
    ``-0.0``, value 0, allowed exactly when 0 is in range). Leading zeros (``01``) never.

    Exponents (``1e-3``, ``2E+5``) are generated when ``allow_exponent`` is true (the default)
    and every finite bound is zero: no bounds, ``minimum: 0``, ``exclusiveMinimum: 0``,
    ``maximum: 0``, ... Then the sign of the value decides, which is regular. With any other
    bound, exponent spellings are **not** generated: the set of texts ``m e k`` with
    ``m * 10**k <= 100`` is not a regular language (``0.00…01e+K`` needs as many zeros as ``K``
    says), so no regex can be exact for it. A bounded number is therefore written in plain
    decimal notation, which can express every value in range.

Bounds
------
Bounds may be ``int``, :class:`decimal.Decimal` or ``float``. A float is converted with
``Decimal(str(x))``, so ``0.1`` means exactly one tenth (not the binary double nearest to it).
Non-finite bounds raise :class:`ValueError`; so does a range that holds no value.

The result is safe to embed in a larger regex: when it has top-level alternation it is wrapped in
a non-capturing group. Its size grows with the number of digits of the bounds, not with their
magnitude (``0..2**63-1``: 335 characters); its group nesting grows with their significant digits
(a run of one repeated digit, as in ``1e-300``, costs one level), well inside corral's
``max_nesting`` for any bound that came from a float.
"""

from __future__ import annotations

import math
import sys
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from functools import lru_cache

from corral.grammar.regex_text import scan

__all__ = ["float_safe_bound", "integer_regex", "number_regex"]

Bound = Decimal | int | float

_ANY_FRACTION = r"(?:\.[0-9]+)?"
_EXPONENT = "(?:[eE][+-]?[0-9]+)?"
_JSON_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?" + _EXPONENT
_POSITIVE_MANTISSA = r"(?:0\.0*[1-9][0-9]*|[1-9][0-9]*(?:\.[0-9]+)?)"
_ZERO_MANTISSA = r"0(?:\.0+)?"


# ---------------------------------------------------------------------------------------------
# Regex text helpers


def _has_top_level_alternation(rx: str) -> bool:
    return any(c == "|" and depth == 0 for _, c, depth in scan(rx))


def _group(rx: str) -> str:
    """`rx` made safe for concatenation (wrapped when it has top-level alternation)."""
    return f"(?:{rx})" if _has_top_level_alternation(rx) else rx


def _alternation(alternatives: list[str]) -> str:
    return "|".join(alternatives)


def _digit_class(lo: int, hi: int) -> str:
    if lo == hi:
        return str(lo)
    if hi == lo + 1:
        return f"[{lo}{hi}]"
    return f"[{lo}-{hi}]"


def _repeat(item: str, lo: int, hi: int | None) -> str:
    """`item` (one atom) repeated between `lo` and `hi` (None: unbounded) times."""
    if hi is None:
        return item + ("*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}")
    if hi == 0:
        return ""
    if lo == hi:
        return item if lo == 1 else f"{item}{{{lo}}}"
    if (lo, hi) == (0, 1):
        return item + "?"
    return f"{item}{{{lo},{hi}}}"


# ---------------------------------------------------------------------------------------------
# Integers


def _same_length_range(a: str, b: str) -> str:
    """Digit strings of length len(a) == len(b) between a and b (inclusive, a <= b)."""
    if a == b:
        return a
    if a[0] == b[0]:
        return a[0] + _group(_same_length_range(a[1:], b[1:]))
    n = len(a) - 1
    a0, b0 = int(a[0]), int(b[0])
    low_full = a[1:] == "0" * n
    high_full = b[1:] == "9" * n
    start = a0 if low_full else a0 + 1
    end = b0 if high_full else b0 - 1
    parts: list[str] = []
    if not low_full:
        parts.append(a[0] + _group(_same_length_range(a[1:], "9" * n)))
    if start <= end:
        if (start, end) == (0, 9):
            parts.append(_repeat("[0-9]", n + 1, n + 1))
        else:
            parts.append(_digit_class(start, end) + _repeat("[0-9]", n, n))
    if not high_full:
        parts.append(b[0] + _group(_same_length_range("0" * n, b[1:])))
    return _alternation(parts)


def _lengths_range(k1: int, k2: int | None) -> str:
    """Canonical positive integers with between k1 and k2 (None: any number of) digits."""
    return "[1-9]" + _repeat("[0-9]", k1 - 1, None if k2 is None else k2 - 1)


def _positive_integers(lo: int, hi: int | None) -> str | None:
    """Canonical positive integers in [lo, hi] (lo >= 1; hi None: unbounded); None if empty."""
    if hi is not None and hi < lo:
        return None
    low = str(lo)
    k = len(low)
    if hi is not None and len(str(hi)) == k:
        return _same_length_range(low, str(hi))
    parts: list[str] = []
    if low != "1" + "0" * (k - 1):  # the first length is only partly covered
        parts.append(_same_length_range(low, "9" * k))
        k += 1
    if hi is None:
        parts.append(_lengths_range(k, None))
    else:
        high = str(hi)
        m = len(high)
        last_full = high == "9" * m
        top = m if last_full else m - 1
        if k <= top:
            parts.append(_lengths_range(k, top))
        if not last_full:
            parts.append(_same_length_range("1" + "0" * (m - 1), high))
    return _alternation(parts)


def _nonnegative_integers(lo: int, hi: int | None) -> str | None:
    """Canonical non-negative integers in [lo, hi] (lo >= 0); None if empty."""
    if hi is not None and hi < lo:
        return None
    if hi is not None and hi <= 9:
        return _digit_class(lo, hi)
    if lo == 0 and hi is not None and hi < 99:  # [0-9]|[1-8][0-9] rather than 0|[1-9]|[1-8][0-9]
        return "[0-9]|" + _same_length_range("10", str(hi))
    parts = ["0"] if lo == 0 else []
    positive = _positive_integers(max(lo, 1), hi)
    if positive is not None:
        parts.append(positive)
    return _alternation(parts)


def _integer_range(lo: int | None, hi: int | None) -> str:
    if lo is not None and hi is not None and lo > hi:
        raise ValueError(f"empty integer range: minimum {lo} is greater than maximum {hi}")
    positive = _positive_integers(max(lo, 1) if lo is not None else 1, hi)
    negative = (
        None
        if lo is not None and lo >= 0
        else _positive_integers(max(-hi, 1) if hi is not None else 1, None if lo is None else -lo)
    )
    zero = "0" if (lo is None or lo <= 0) and (hi is None or hi >= 0) else None
    return _signed(positive, negative, zero)


def integer_regex(minimum: int | None = None, maximum: int | None = None) -> str:
    """Regex for the canonical JSON integers in ``[minimum, maximum]``.

    Parameters
    ----------
    minimum, maximum
        Inclusive bounds; ``None`` leaves that side unbounded.

    Returns
    -------
    str
        A Python ``re`` pattern (full-match semantics) matching exactly the texts
        ``-?(0|[1-9][0-9]*)`` whose value lies in the range. ``-0`` is never matched (it equals
        ``0``, which is matched when in range), nor ``01``, ``1.0`` or ``1e2``. Built by the
        digit-range decomposition, so its size grows with the number of digits of the bounds,
        not with their magnitude.

    Raises
    ------
    TypeError
        A bound is not an ``int`` (``bool`` is refused too).
    ValueError
        ``minimum > maximum``.
    """
    for name, v in (("minimum", minimum), ("maximum", maximum)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise TypeError(f"{name} must be an int or None, not {type(v).__name__}")
    return _integer_range(minimum, maximum)


# ---------------------------------------------------------------------------------------------
# Decimal fractions
#
# A fraction is the digit string d after the decimal point; its value is 0.d. The sets below are
# sets of digit strings (the empty string, value 0, standing for "no fraction") given by a lower
# condition (None, "ge" or "gt" against the digits l of a bound in [0, 1)) and an upper condition
# (None, "le" or "lt" against the digits h). Bound digits never end in 0, so "d is a prefix of l"
# implies 0.d < 0.l.


class _FractionSet:
    """A set of digit strings: whether it holds the empty string, and a regex for the rest."""

    __slots__ = ("empty", "nonempty")

    def __init__(self, empty: bool, nonempty: str | None) -> None:
        self.empty = empty
        self.nonempty = nonempty

    def full(self) -> str | None:
        """Regex for the whole set (None if the set is empty), safe to concatenate."""
        if self.nonempty is None:
            return "" if self.empty else None
        if not self.empty:
            return _group(self.nonempty)
        if self.nonempty == "[0-9]+":
            return "[0-9]*"
        if self.nonempty == "0+":
            return "0*"
        return f"(?:{self.nonempty})?"


_ANY = _FractionSet(True, "[0-9]+")
_ZEROS = _FractionSet(True, "0+")
_NONZERO = _FractionSet(False, "0*[1-9][0-9]*")
_NOTHING = _FractionSet(False, None)


@lru_cache(maxsize=4096)
def _fraction_set(low: str, low_kind: str | None, high: str, high_kind: str | None) -> _FractionSet:
    if low_kind == "ge" and low == "":
        low_kind = None  # >= 0 holds for every fraction
    if high_kind is not None and high == "":  # the fraction must be (<= or <) 0
        if high_kind == "lt" or low_kind is not None:
            return _NOTHING  # < 0, or (> 0 or >= something positive) and <= 0
        return _ZEROS
    if low_kind is None and high_kind is None:
        return _ANY
    if low_kind == "gt" and low == "" and high_kind is None:
        return _NONZERO
    if high_kind is None and low_kind is not None and _run_length(low) >= _RUN:
        return _lower_run(low, low_kind)
    if low_kind is None and high_kind is not None and _run_length(high) >= _RUN:
        return _upper_run(high, high_kind)
    empty = low_kind is None and (high_kind is None or high_kind == "le" or high != "")
    l0 = int(low[0]) if low else 0
    h0 = int(high[0]) if high else 9
    pieces: list[tuple[int, int, str]] = []  # (first digit from, to, continuation regex)
    for c in range(10):
        lower: tuple[str, str | None] = ("", None)
        upper: tuple[str, str | None] = ("", None)
        if low_kind is not None:
            if c < l0:
                continue
            if c == l0:
                lower = (low[1:], low_kind)
        if high_kind is not None:
            if c > h0:
                continue
            if c == h0:
                upper = (high[1:], high_kind)
        rest = _fraction_set(lower[0], lower[1], upper[0], upper[1]).full()
        if rest is None:
            continue
        if pieces and pieces[-1][1] == c - 1 and pieces[-1][2] == rest:
            pieces[-1] = (pieces[-1][0], c, rest)
        else:
            pieces.append((c, c, rest))
    parts = [("[0-9]" if (a, b) == (0, 9) else _digit_class(a, b)) + rest for a, b, rest in pieces]
    return _FractionSet(empty, _alternation(parts) if parts else None)


# A run of one digit repeated in a one-sided bound (0.000001, or a float like 1e-300) is written
# with a counted repetition instead of one nested group per digit, which keeps the nesting depth
# (corral's max_nesting) proportional to the significant digits only.
_RUN = 4


def _run_length(digits: str) -> int:
    return len(digits) - len(digits.lstrip(digits[:1])) if digits else 0


def _lower_run(low: str, kind: str) -> _FractionSet:
    """Fractions (>= or >) 0.low where low starts with n >= 2 copies of one digit c."""
    n = _run_length(low)
    c = int(low[0])
    tail = _fraction_set(low[n:], kind, "", None).full()
    parts = []
    if c < 9:  # c^j, j < n, then a greater digit
        parts.append(_repeat(str(c), 0, n - 1) + _digit_class(c + 1, 9) + "[0-9]*")
    if tail is not None:
        parts.append(_repeat(str(c), n, n) + tail)
    return _FractionSet(False, _alternation(parts) if parts else None)


def _upper_run(high: str, kind: str) -> _FractionSet:
    """Fractions (<= or <) 0.high where high starts with n >= 2 copies of one digit c."""
    n = _run_length(high)
    c = int(high[0])
    tail = _fraction_set("", None, high[n:], kind).full()
    parts = [_repeat(str(c), 1, n - 1)]  # a proper prefix c^j, 0 < j < n
    if c > 0:  # c^j, j < n, then a smaller digit
        parts.append(_repeat(str(c), 0, n - 1) + _digit_class(0, c - 1) + "[0-9]*")
    if tail is not None:
        parts.append(_repeat(str(c), n, n) + tail)
    return _FractionSet(True, _alternation(parts))


def _fraction_suffix(low: str, low_kind: str | None, high: str, high_kind: str | None) -> str | None:
    """Regex for the optional ``.digits`` part whose fraction lies in the given set."""
    s = _fraction_set(low, low_kind, high, high_kind)
    if s.nonempty is None:
        return "" if s.empty else None
    if s.empty:
        return rf"(?:\.{_group(s.nonempty)})?"
    return r"\." + _group(s.nonempty)


# ---------------------------------------------------------------------------------------------
# Numbers


def _to_decimal(name: str, v: Bound | None) -> Decimal | None:
    if v is None:
        return None
    if isinstance(v, bool):
        raise TypeError(f"{name} must be a number or None, not bool")
    if isinstance(v, Decimal):
        d = v
    elif isinstance(v, int):
        d = Decimal(v)
    elif isinstance(v, float):
        d = Decimal(str(v))
    else:
        raise TypeError(f"{name} must be a Decimal, int, float or None, not {type(v).__name__}")
    if not d.is_finite():
        raise ValueError(f"{name} must be finite, got {v!r}")
    return d


def _split(d: Decimal) -> tuple[int, str]:
    """A non-negative decimal as (integer part, fraction digits without trailing zeros)."""
    text = format(d.copy_abs(), "f")
    whole, _, fraction = text.partition(".")
    return int(whole), fraction.rstrip("0")


def _is_empty(lo: Decimal, lo_open: bool, hi: Decimal | None, hi_open: bool) -> bool:
    return hi is not None and (lo > hi or (lo == hi and (lo_open or hi_open)))


def _magnitudes(lo: Decimal, lo_open: bool, hi: Decimal | None, hi_open: bool) -> str | None:
    """Unsigned decimal texts (canonical integer part, optional fraction) with value m,
    lo (< or <=) m (< or <=) hi; lo >= 0, hi None: unbounded. None if there is none."""
    if _is_empty(lo, lo_open, hi, hi_open):
        return None
    a, a_digits = _split(lo)
    a_kind = "gt" if lo_open else "ge"
    b_kind = "lt" if hi_open else "le"
    parts: list[str] = []
    if hi is not None:
        b, b_digits = _split(hi)
        if a == b:
            suffix = _fraction_suffix(a_digits, a_kind, b_digits, b_kind)
            return None if suffix is None else f"{a}{suffix}"
    if a_digits == "" and not lo_open:
        first = a  # every fraction of the integer part a is in range
    else:
        suffix = _fraction_suffix(a_digits, a_kind, "", None)
        if suffix is not None:
            parts.append(f"{a}{suffix}")
        first = a + 1
    last = None if hi is None else b - 1
    integers = _nonnegative_integers(first, last)
    if integers is not None:
        parts.append(_group(integers) + _ANY_FRACTION)
    if hi is not None:
        suffix = _fraction_suffix("", None, b_digits, b_kind)
        if suffix is not None:
            parts.append(f"{b}{suffix}")
    return _alternation(parts) if parts else None


def _signed(positive: str | None, negative: str | None, zero: str | None = None) -> str:
    """Alternation of `zero`, `positive` and ``-`` `negative` (shared when they are equal)."""
    parts = [] if zero is None else [zero]
    if positive is not None and positive == negative:
        parts.append("-?" + _group(positive))
    else:
        if positive is not None:
            parts.append(positive)
        if negative is not None:
            parts.append("-" + _group(negative))
    return _group(_alternation(parts))


def _decimal_range(lo: Decimal | None, lo_open: bool, hi: Decimal | None, hi_open: bool) -> str:
    zero = Decimal(0)
    # Texts without '-': value m >= 0.
    if hi is not None and (hi < zero or (hi == zero and hi_open)):
        positive = None
    elif lo is None or lo < zero:
        positive = _magnitudes(zero, False, hi, hi_open)
    else:
        positive = _magnitudes(lo, lo_open, hi, hi_open)
    # Texts '-m': value -m, so -hi (<) m (<) -lo.
    if lo is not None and (lo > zero or (lo == zero and lo_open)):
        negative = None
    else:
        neg_hi = None if lo is None else lo.copy_negate()
        if hi is None or hi > zero:
            negative = _magnitudes(zero, False, neg_hi, lo_open)
        else:
            negative = _magnitudes(hi.copy_negate(), hi_open, neg_hi, lo_open)
    return _signed(positive, negative)


def _exponent_range(lo: Decimal | None, lo_open: bool, hi: Decimal | None, hi_open: bool) -> str:
    """Numbers with optional exponent when every finite bound is zero: the sign decides."""
    positive = hi is None
    negative = lo is None
    zero = (lo is None or not lo_open) and (hi is None or not hi_open)
    if positive and negative and zero:
        return _JSON_NUMBER
    pos = _POSITIVE_MANTISSA + _EXPONENT if positive else None
    neg = _POSITIVE_MANTISSA + _EXPONENT if negative else None
    return _signed(pos, neg, f"-?{_ZERO_MANTISSA}{_EXPONENT}" if zero else None)


def number_regex(
    minimum: Bound | None = None,
    maximum: Bound | None = None,
    *,
    exclusive_minimum: bool = False,
    exclusive_maximum: bool = False,
    integer: bool = False,
    allow_exponent: bool = True,
) -> str:
    """Regex for the JSON number texts whose value lies within the bounds.

    Parameters
    ----------
    minimum, maximum
        Bounds (``None``: unbounded on that side). ``int`` and :class:`~decimal.Decimal` are
        exact; a ``float`` is read as ``Decimal(str(x))``, so ``0.1`` means one tenth.
    exclusive_minimum, exclusive_maximum
        Make the corresponding bound strict (``exclusiveMinimum``/``exclusiveMaximum``).
    integer
        Only canonical integers ``-?(0|[1-9][0-9]*)``, never ``-0``, ``1.0`` or ``1e2`` (see
        :func:`integer_regex`). Non-integer bounds are rounded inwards (``minimum=1.5`` means
        integers >= 2). ``allow_exponent`` is ignored.
    allow_exponent
        For non-integers: allow exponent spellings when every finite bound is zero (no bounds,
        ``minimum=0``, ``exclusive_minimum`` at 0, ...). With any other bound exponents are never
        generated, whatever this flag says: that set of texts is not regular (module docstring).

    Returns
    -------
    str
        A Python ``re`` pattern (full-match semantics). Non-integer mode matches every JSON
        number text without exponent whose exact decimal value is in range, including fractions
        with trailing zeros (``100.0`` for ``maximum=100``) and ``-0``/``-0.0`` when 0 is in range;
        plus the exponent spellings described above.

    Raises
    ------
    TypeError
        A bound is not a Decimal, int, float or None.
    ValueError
        A bound is not finite, or no value satisfies the bounds.
    """
    lo = _to_decimal("minimum", minimum)
    hi = _to_decimal("maximum", maximum)
    if (
        lo is not None
        and hi is not None
        and (lo > hi or (lo == hi and (exclusive_minimum or exclusive_maximum)))
    ):
        lo_sym = "(" if exclusive_minimum else "["
        hi_sym = ")" if exclusive_maximum else "]"
        raise ValueError(f"empty range {lo_sym}{lo}, {hi}{hi_sym}: no number satisfies the bounds")
    if integer:
        int_lo = int_hi = None
        if lo is not None:
            c = lo.to_integral_value(rounding=ROUND_CEILING)
            int_lo = int(c) + (1 if exclusive_minimum and c == lo else 0)
        if hi is not None:
            f = hi.to_integral_value(rounding=ROUND_FLOOR)
            int_hi = int(f) - (1 if exclusive_maximum and f == hi else 0)
        if int_lo is not None and int_hi is not None and int_lo > int_hi:
            raise ValueError(f"no integer satisfies the bounds (minimum {lo}, maximum {hi})")
        return _integer_range(int_lo, int_hi)
    if allow_exponent and (lo is None or lo.is_zero()) and (hi is None or hi.is_zero()):
        return _exponent_range(lo, exclusive_minimum, hi, exclusive_maximum)
    return _decimal_range(lo, exclusive_minimum, hi, exclusive_maximum)


# ---------------------------------------------------------------------------------------------
# Bounds as validators see them


# Decimal values at least this large parse to an infinite float (the largest double plus half
# of its last step rounds up); rounded up to a short decimal, which is stricter.
_BEYOND_FLOAT = Decimal("1.8e308")


def float_safe_bound(v: int | float, lower: bool, exclusive: bool) -> Decimal:
    """An *inclusive* bound on the exact decimal value of a number text that guarantees the
    comparison a validator makes after parsing the text into a float.

    A JSON parser (Python's ``json``, so ``jsonschema``) reads ``5.0000000000000000001`` and
    ``1e-400`` as the floats ``5.0`` and ``0.0``, and compares them with the schema's bound ``v``
    exactly: ``exclusiveMinimum: 5`` then rejects the first, ``exclusiveMinimum: 0`` the second,
    although their decimal values are in range. Rounding to the nearest float is monotonic, so
    every text whose decimal value is at least the returned bound (``lower``; at most, otherwise)
    parses to a float ``f`` with ``f >= v`` (``f > v`` when ``exclusive``; ``<=``/``<`` for
    upper bounds): the bound is the shortest spelling of the first float on the right side of
    ``v``. It is stricter than the float comparison only for values within one float step of
    ``v`` (``exclusiveMinimum: 0`` allows ``5e-324`` and above, not ``3e-324``, which rounds up
    to ``5e-324``), and equals ``Decimal(str(v))`` for an inclusive float bound.
    """
    exact = Decimal(v)  # the bound's exact value (binary fraction for a float)
    top, bottom = Decimal(sys.float_info.max), Decimal(-sys.float_info.max)  # (exact; no `-top`)
    if lower and exact >= top:
        return max(exact, _BEYOND_FLOAT)  # only texts that parse to +inf
    if not lower and exact <= bottom:
        return min(exact, Decimal("-1.8e308"))
    if lower and exact < bottom:
        return Decimal(repr(-sys.float_info.max))
    if not lower and exact > top:
        return Decimal(repr(sys.float_info.max))
    step = math.inf if lower else -math.inf
    back = -step

    def ok(f: float) -> bool:
        d = Decimal(f)
        if lower:
            return d > exact or (d == exact and not exclusive)
        return d < exact or (d == exact and not exclusive)

    f = float(exact)
    while not ok(f):
        f = math.nextafter(f, step)
    while ok(math.nextafter(f, back)):
        f = math.nextafter(f, back)
    if math.isinf(f):
        return _BEYOND_FLOAT if lower else Decimal("-1.8e308")
    return Decimal(repr(f))
