"""corral.grammar.numbers: regexes for JSON numbers within bounds must be exact.

Truth is computed with `decimal.Decimal` against the bounds, restricted to the spellings the
module documents as generated: canonical integers (no -0) in integer mode; every JSON number text
without exponent in number mode, plus exponents when every finite bound is zero.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import time
from decimal import Decimal, localcontext

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corral
from corral.grammar.numbers import float_safe_bound, integer_regex, number_regex

JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
CANONICAL_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")

AnyBound = Decimal | int | float | None
BoundsAndFlags = tuple[AnyBound, AnyBound, bool, bool]


def to_decimal(v: Decimal | int | float | None) -> Decimal | None:
    if v is None:
        return None
    if isinstance(v, float):
        return Decimal(str(v))
    return Decimal(v)


def expected(
    s: str,
    lo: Decimal | int | float | None,
    hi: Decimal | int | float | None,
    lo_x: bool = False,
    hi_x: bool = False,
    integer: bool = False,
    allow_exponent: bool = True,
) -> bool:
    """Whether `s` should match: a documented spelling whose exact value is within the bounds."""
    if not JSON_NUMBER.fullmatch(s):
        return False
    dlo, dhi = to_decimal(lo), to_decimal(hi)
    if integer:
        if not CANONICAL_INTEGER.fullmatch(s) or s == "-0":
            return False
    elif "e" in s.lower():
        exponents = allow_exponent and all(b is None or b == 0 for b in (dlo, dhi))
        if not exponents:
            return False
    v = Decimal(s)
    if dlo is not None and (v < dlo or (lo_x and v == dlo)):
        return False
    if dhi is not None and (v > dhi or (hi_x and v == dhi)):
        return False
    return True


def text(v: Decimal) -> str:
    """Plain JSON spelling of a decimal value (no exponent; keeps trailing zeros of `v`)."""
    s = format(v, "f")
    return s


def spellings(v: Decimal) -> list[str]:
    """Several JSON spellings of the value v: plain, with trailing zeros, with exponents."""
    s = text(v)
    out = [s, s + ("0" if "." in s else ".0"), s + ("000" if "." in s else ".000")]
    sign = "-" if s.startswith("-") else ""
    digits = s.lstrip("-")
    whole, _, frac = digits.partition(".")
    # Exponent spellings: shift the point left by one and two places, and right by one.
    all_digits = (whole + frac).lstrip("0") or "0"
    exp = len(whole.lstrip("0")) - 1 if whole.lstrip("0") else -(len(frac) - len(frac.lstrip("0")) + 1)
    if all_digits != "0":
        mant = all_digits[0] + ("." + all_digits[1:] if len(all_digits) > 1 else "")
        out += [f"{sign}{mant}e{exp}", f"{sign}{mant}E{exp:+d}"]
    out += [f"{s}e0", f"{s}E+0", f"{s}e-0"]
    out.append("-" + s if not s.startswith("-") else s[1:])
    return [x for x in out if JSON_NUMBER.fullmatch(x)]


def near(bound: Decimal | int | float | None) -> list[str]:
    """Candidate texts around a bound: itself, ±1, ±0.001, ±10**-k, ±10**-(precision+1)."""
    d = to_decimal(bound)
    if d is None:
        return []
    out: list[str] = []
    with localcontext() as ctx:
        ctx.prec = 400
        exp = d.as_tuple().exponent
        places = -exp if isinstance(exp, int) and exp < 0 else 0
        deltas = [Decimal(0), Decimal(1), Decimal("0.001"), Decimal(10) ** -(places + 1), Decimal("1e-30")]
        deltas += [Decimal(10) ** -k for k in range(1, 4)]
        for delta in deltas:
            for v in {d + delta, d - delta}:
                out += spellings(v)
        out += spellings(d.to_integral_value()) + spellings(d.to_integral_value() + 1)
    return out


FIXED = (
    "0 -0 0.0 -0.0 0.000 0e0 -0E+5 1 -1 0.1 -0.1 1e3 1E-3 -1e-3 100 100.0 100.5 101 100.0000001 99.9999 1e2"
    " 1.0 1.50 12.5 0.001 01 -01 1. .5 +1 - 1e 1e+ 00 0x1 --1 1.e5 \u0661"
).split() + ["", " 1", "1 "]


# ---------------------------------------------------------------------------------------------
# Strategies

small_ints = st.integers(-1100, 1100)
huge_ints = st.integers(-(10**30), 10**30)
decimals = st.builds(
    lambda n, places: Decimal(n).scaleb(-places), st.integers(-(10**8), 10**8), st.integers(0, 8)
)
floats = st.floats(-1e7, 1e7, allow_nan=False, allow_infinity=False)
bound = st.one_of(
    st.none(), st.just(0), small_ints, huge_ints, decimals, floats, st.sampled_from([0.1, 0.5, -0.5])
)


@st.composite
def json_number_text(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "", "-"]))
    whole = str(draw(st.one_of(st.integers(0, 1200), st.integers(0, 10**25))))
    frac = draw(st.one_of(st.just(""), st.text("0123456789", min_size=1, max_size=7).map(lambda f: "." + f)))
    exp = draw(
        st.one_of(
            st.just(""),
            st.builds(
                lambda e, s, n: e + s + str(n),
                st.sampled_from("eE"),
                st.sampled_from(["", "+", "-"]),
                st.integers(0, 40),
            ),
        )
    )
    return sign + whole + frac + exp


@st.composite
def bounds_and_flags(draw: st.DrawFn) -> BoundsAndFlags:
    lo: AnyBound = draw(bound)
    hi: AnyBound = draw(bound)
    dlo, dhi = to_decimal(lo), to_decimal(hi)
    if dlo is not None and dhi is not None and dlo > dhi:
        lo, hi = hi, lo
    lo_x = draw(st.booleans())
    hi_x = draw(st.booleans())
    if dlo is not None and dhi is not None and dlo == dhi:
        lo_x = hi_x = False
    return lo, hi, lo_x, hi_x


def check_all(rx: str, candidates: list[str], **truth: object) -> None:
    pattern = re.compile(rx)
    for s in candidates:
        got = pattern.fullmatch(s) is not None
        want = expected(s, **truth)  # type: ignore[arg-type]
        assert got == want, f"{s!r}: regex says {got}, truth {want}; regex {rx!r}, bounds {truth}"


# ---------------------------------------------------------------------------------------------
# Property tests


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bounds_and_flags(), st.lists(json_number_text(), max_size=25), st.booleans())
def test_number_regex_is_exact(bf: BoundsAndFlags, extra: list[str], allow_exponent: bool) -> None:
    lo, hi, lo_x, hi_x = bf
    try:
        rx = number_regex(
            lo, hi, exclusive_minimum=lo_x, exclusive_maximum=hi_x, allow_exponent=allow_exponent
        )
    except ValueError:
        # Only an empty range may be refused.
        dlo, dhi = to_decimal(lo), to_decimal(hi)
        assert dlo is not None and dhi is not None
        assert dlo > dhi or (dlo == dhi and (lo_x or hi_x))
        return
    cands = FIXED + near(lo) + near(hi) + extra
    check_all(rx, cands, lo=lo, hi=hi, lo_x=lo_x, hi_x=hi_x, allow_exponent=allow_exponent)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bounds_and_flags(), st.lists(json_number_text(), max_size=25))
def test_number_regex_integer_mode_is_exact(bf: BoundsAndFlags, extra: list[str]) -> None:
    lo, hi, lo_x, hi_x = bf
    dlo, dhi = to_decimal(lo), to_decimal(hi)
    try:
        rx = number_regex(lo, hi, exclusive_minimum=lo_x, exclusive_maximum=hi_x, integer=True)
    except ValueError:
        assert dlo is not None and dhi is not None
        # No integer in the range.
        with localcontext() as ctx:
            ctx.prec = 400
            first = dlo.to_integral_value(rounding="ROUND_CEILING")
            if lo_x and first == dlo:
                first += 1
            assert first > dhi or (hi_x and first == dhi)
        return
    cands = FIXED + near(lo) + near(hi) + extra
    check_all(rx, cands, lo=lo, hi=hi, lo_x=lo_x, hi_x=hi_x, integer=True)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(st.none(), small_ints, huge_ints),
    st.one_of(st.none(), small_ints, huge_ints),
    st.lists(json_number_text(), max_size=25),
)
def test_integer_regex_is_exact(lo: int | None, hi: int | None, extra: list[str]) -> None:
    if lo is not None and hi is not None and lo > hi:
        with pytest.raises(ValueError, match="empty"):
            integer_regex(lo, hi)
        lo, hi = hi, lo
    rx = integer_regex(lo, hi)
    assert rx == number_regex(lo, hi, integer=True)
    cands = FIXED + near(lo) + near(hi) + extra
    check_all(rx, cands, lo=lo, hi=hi, integer=True)


# ---------------------------------------------------------------------------------------------
# Exhaustive small ranges

INTERESTING = [
    int(v) for v in "-1001 -1000 -999 -101 -100 -99 -10 -9 -1 0 1 9 10 11 99 100 101 999 1000 1001".split()
]


def test_integer_regex_exhaustive_small() -> None:
    texts = [str(v) for v in range(-1100, 1101)] + ["-0", "01", "1.0", "1e2"]
    for lo, hi in itertools.product([None, *INTERESTING], repeat=2):
        if lo is not None and hi is not None and lo > hi:
            continue
        pattern = re.compile(integer_regex(lo, hi))
        matched = {s for s in texts if pattern.fullmatch(s)}
        want = {str(v) for v in range(-1100, 1101) if (lo is None or v >= lo) and (hi is None or v <= hi)}
        assert matched == want, (lo, hi)


@pytest.mark.parametrize(
    ("lo", "hi"), [(0, 1000), (-50, 50), (-1000, -1), (7, 7), (0, 0), (-1, 0), (123, 4567)]
)
def test_every_integer_in_range_is_producible(lo: int, hi: int) -> None:
    pattern = re.compile(integer_regex(lo, hi))
    for v in range(lo - 200, hi + 201):
        assert (pattern.fullmatch(str(v)) is not None) == (lo <= v <= hi), v


def fraction_texts() -> list[str]:
    """Every text with integer part 0..3, up to 3 fraction digits (trailing zeros included), both signs."""
    out = []
    for whole in range(4):
        out.append(str(whole))
        for n in range(1, 4):
            for k in range(10**n):
                out.append(f"{whole}.{k:0{n}d}")
    return out + ["-" + s for s in out]


FRACTION_BOUNDS: list[str | None] = [
    None,
    *"-3 -2.5 -1.05 -1 -0.5 -0.25 -0.01 0 0.001 0.01 0.1 0.25 0.5 0.75 0.99 1 1.5 1.05 2 2.999 3".split(),
]


def test_number_regex_exhaustive_fractions() -> None:
    texts = fraction_texts()
    values = [Decimal(s) for s in texts]
    for lo_s, hi_s in itertools.product(FRACTION_BOUNDS, repeat=2):
        lo = None if lo_s is None else Decimal(lo_s)
        hi = None if hi_s is None else Decimal(hi_s)
        if lo is not None and hi is not None and lo > hi:
            continue
        for lo_x, hi_x in itertools.product([False, True], repeat=2):
            if lo is not None and hi is not None and lo == hi and (lo_x or hi_x):
                with pytest.raises(ValueError, match="empty"):
                    number_regex(lo, hi, exclusive_minimum=lo_x, exclusive_maximum=hi_x)
                continue
            pattern = re.compile(
                number_regex(lo, hi, exclusive_minimum=lo_x, exclusive_maximum=hi_x, allow_exponent=False)
            )
            for s, v in zip(texts, values, strict=True):
                want = (lo is None or v > lo or (v == lo and not lo_x)) and (
                    hi is None or v < hi or (v == hi and not hi_x)
                )
                assert (pattern.fullmatch(s) is not None) == want, (s, lo_s, hi_s, lo_x, hi_x)


def test_repeated_digit_bounds() -> None:
    """Bounds whose fraction starts with a run of one digit (written with counted repetition)."""
    bounds = []
    for c in "0123456789":
        for n in (1, 2, 4, 5):
            for tail in ("", "3", "9"):
                if (c * n + tail).strip("0"):
                    bounds.append(Decimal("0." + c * n + tail))
    texts = ["0", "0.0", "-0", "1", "0.99999999999"]
    for c in "0123456789":
        for j in range(9):
            for d in "0123456789":
                for rest in ("", "0", "4"):
                    texts.append("0." + c * j + d + rest)
    for b in bounds:
        for lower in (True, False):
            for x in (False, True):
                if lower:
                    rx = number_regex(minimum=b, exclusive_minimum=x, allow_exponent=False)
                    check_all(rx, texts, lo=b, hi=None, lo_x=x)
                else:
                    rx = number_regex(maximum=b, exclusive_maximum=x, allow_exponent=False)
                    check_all(rx, texts, lo=None, hi=b, hi_x=x)
        # Two-sided, sharing the run.
        check_all(number_regex(b, b + Decimal("1e-12")), texts, lo=b, hi=b + Decimal("1e-12"))


def test_deep_fraction_bounds_compile_in_corral() -> None:
    cases: list[tuple[Decimal | float | None, Decimal | float | None]] = [
        (None, 2.6799672630727607e-190),
        (Decimal("1e-300"), None),
        (Decimal("-0.1234567890123456789012345678"), Decimal("9.87654321098765432109")),
    ]
    for lo, hi in cases:
        rx = number_regex(lo, hi)
        corral.compile_regex(rx, byte_tokenizer())
        assert re.fullmatch(rx, "0.0" if lo is None else "1")


def test_every_decimal_in_range_is_producible() -> None:
    pattern = re.compile(number_regex(Decimal("-5.5"), Decimal("7.25")))
    for k in range(-1000, 1001):
        v = Decimal(k).scaleb(-2)
        want = Decimal("-5.5") <= v <= Decimal("7.25")
        for s in (text(v), text(v.normalize()) if v != 0 else "0", text(v) + "0"):
            if JSON_NUMBER.fullmatch(s):
                assert (pattern.fullmatch(s) is not None) == want, s


# ---------------------------------------------------------------------------------------------
# Examples from the spec of the module


def test_maximum_100_examples() -> None:
    rx = re.compile(number_regex(maximum=100))
    for s in ["100", "100.0", "100.000", "99.999", "-1e3" if False else "-1000", "0", "-0", "-0.0", "1.50"]:
        assert rx.fullmatch(s), s
    for s in ["100.5", "101", "1e3", "1e2", "100.0000001", "100.00001", "01", "1."]:
        assert not rx.fullmatch(s), s


def test_exclusive_minimum_zero() -> None:
    rx = re.compile(number_regex(0, exclusive_minimum=True))
    for s in ["0.1", "0.0000001", "1e-300", "5E+3", "1"]:
        assert rx.fullmatch(s), s
    for s in ["0", "0.0", "-0.0", "-0", "0e5", "-1", "-1e-300"]:
        assert not rx.fullmatch(s), s


def test_minimum_zero_keeps_exponents_exact() -> None:
    rx = re.compile(number_regex(0))
    for s in ["0", "-0", "-0.0e7", "1e-5", "2.5E+9"]:
        assert rx.fullmatch(s), s
    for s in ["-1e-5", "-0.001"]:
        assert not rx.fullmatch(s), s
    assert not re.fullmatch(number_regex(0, allow_exponent=False), "1e5")


def test_integer_mode_details() -> None:
    rx = re.compile(number_regex(1.5, 7.2, integer=True))
    assert [v for v in range(-5, 15) if rx.fullmatch(str(v))] == list(range(2, 8))
    rx = re.compile(number_regex(1, 7, exclusive_minimum=True, exclusive_maximum=True, integer=True))
    assert [v for v in range(-5, 15) if rx.fullmatch(str(v))] == list(range(2, 7))
    for s in ["1.0", "2.0", "-0", "1e0", "02"]:
        assert not re.fullmatch(number_regex(-10, 10, integer=True), s)
    with pytest.raises(ValueError):
        number_regex(1.2, 1.8, integer=True)
    with pytest.raises(ValueError):
        number_regex(1, 2, exclusive_minimum=True, exclusive_maximum=True, integer=True)


def test_float_bounds_are_read_as_their_shortest_decimal() -> None:
    rx = re.compile(number_regex(maximum=0.1))
    assert rx.fullmatch("0.1") and rx.fullmatch("0.10")
    assert not rx.fullmatch("0.1000000000000000055511151231257827")  # the double nearest 0.1
    rx = re.compile(number_regex(0.1 + 0.2))  # 0.30000000000000004
    assert rx.fullmatch("0.30000000000000004") and not rx.fullmatch("0.3")


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="empty"):
        integer_regex(5, 4)
    with pytest.raises(ValueError):
        number_regex(2, 1)
    with pytest.raises(ValueError):
        number_regex(1, 1, exclusive_maximum=True)
    with pytest.raises(ValueError, match="finite"):
        number_regex(float("inf"))
    with pytest.raises(ValueError, match="finite"):
        number_regex(maximum=Decimal("NaN"))
    with pytest.raises(TypeError):
        integer_regex(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        integer_regex(True)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        number_regex("1")  # type: ignore[arg-type]


def test_const_values() -> None:
    """number_regex(d, d): every plain spelling of exactly d."""
    for d, yes, no in [
        (Decimal("1.5"), ["1.5", "1.50"], ["1.51", "1.49", "1", "15e-1"]),
        (Decimal("-3"), ["-3", "-3.0"], ["3", "-3.01", "-2.9"]),
        (Decimal("0"), ["0", "-0", "0.00", "0e10"], ["0.01", "-0.01"]),
    ]:
        rx = re.compile(number_regex(d, d))
        assert all(rx.fullmatch(s) for s in yes), (d, rx.pattern)
        assert not any(rx.fullmatch(s) for s in no), (d, rx.pattern)


# ---------------------------------------------------------------------------------------------
# Size, speed, and corral's own regex engine

LARGE = [
    dict(minimum=0, maximum=1000, integer=True),
    dict(minimum=-(10**18), maximum=10**18, integer=True),
    dict(minimum=0, maximum=2**63 - 1, integer=True),
    dict(minimum=-(2**63), maximum=2**63 - 1, integer=True),
    dict(minimum=-(2**31), maximum=2**31 - 1, integer=True),
    dict(minimum=0, maximum=100),
    dict(minimum=Decimal("-123.456"), maximum=Decimal("98765.4321"), exclusive_maximum=True),
    dict(minimum=0.1 + 0.2, maximum=1e16),
    dict(minimum=Decimal("-1e-20"), maximum=Decimal("1e30"), exclusive_minimum=True),
    dict(minimum=0, exclusive_minimum=True),
    dict(),
]


def test_sizes_and_speed() -> None:
    assert len(integer_regex(0, 1000)) < 40
    for kw in LARGE:
        start = time.process_time()  # CPU time: a loaded machine does not fail it
        rx = number_regex(**kw)  # type: ignore[arg-type]
        elapsed = time.process_time() - start
        assert elapsed < 0.05, (kw, elapsed)  # a cold call; warm calls are well under 5 ms
        assert len(rx) < 1500, (kw, len(rx))
        re.compile(rx)


def test_typical_call_is_fast() -> None:
    start = time.process_time()  # CPU time: a loaded machine does not fail it
    n = 0
    pairs: list[tuple[AnyBound, AnyBound]] = [
        (0, 100),
        (-1, 1),
        (1.5, 99.75),
        (Decimal("0.001"), Decimal("12.5")),
    ]
    for lo, hi in pairs:
        for integer in (False, True):
            number_regex(lo, hi, integer=integer, exclusive_minimum=True)
            n += 1
    assert (time.process_time() - start) / n < 0.005


@functools.lru_cache(maxsize=1)
def byte_tokenizer() -> corral.Tokenizer:
    return corral.Tokenizer.from_tokens(
        [bytes([b]) for b in range(256)] + [b"<eos>"], special_ids=[256], eos_ids=[256]
    )


def corral_matches(grammar: corral.CompiledGrammar, s: str) -> bool:
    m = grammar.matcher()
    return m.accept_bytes(s.encode()) and m.is_accepting()


@pytest.mark.parametrize("kw", LARGE, ids=[str(i) for i in range(len(LARGE))])
def test_corral_compiles_and_agrees(kw: dict) -> None:
    rx = number_regex(**kw)
    grammar = corral.compile_regex(rx, byte_tokenizer())
    pattern = re.compile(rx)
    cands = FIXED + near(kw.get("minimum")) + near(kw.get("maximum"))
    for s in cands:
        assert corral_matches(grammar, s) == (pattern.fullmatch(s) is not None), (s, rx)


@settings(max_examples=60, deadline=None)
@given(bounds_and_flags(), st.booleans(), st.lists(json_number_text(), max_size=10))
def test_corral_agrees_with_re(bf: BoundsAndFlags, integer: bool, extra: list[str]) -> None:
    lo, hi, lo_x, hi_x = bf
    try:
        rx = number_regex(lo, hi, exclusive_minimum=lo_x, exclusive_maximum=hi_x, integer=integer)
    except ValueError:
        return
    grammar = corral.compile_regex(rx, byte_tokenizer())
    pattern = re.compile(rx)
    for s in FIXED + near(lo) + near(hi) + extra:
        assert corral_matches(grammar, s) == (pattern.fullmatch(s) is not None), (s, rx)


# ---- bounds as validators see them (float parsing) ------------------------------------------


def _float_ok(x: float, v: int | float, lower: bool, exclusive: bool) -> bool:
    if lower:
        return x > v if exclusive else x >= v
    return x < v if exclusive else x <= v


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.floats(allow_nan=False, allow_infinity=False),
        st.integers(-(2**70), 2**70),
        st.sampled_from([0, 0.0, -0.0, 5e-324, 0.1, 2**53 + 1, 2**54 + 3, 1.7976931348623157e308]),
    ),
    st.booleans(),
    st.booleans(),
    st.integers(-3, 3),
)
def test_float_safe_bound_holds_after_parsing(v: int | float, lower: bool, exclusive: bool, k: int) -> None:
    b = float_safe_bound(v, lower, exclusive)
    # Texts at the bound and one digit of the last place beyond it (on the allowed side) parse
    # to floats on the right side of v ...
    ulp = Decimal(1).scaleb(b.adjusted() - 25)
    for d in (b, b + ulp * abs(k) if lower else b - ulp * abs(k)):
        x = float(f"{d:f}") if abs(d.adjusted()) < 400 else float(str(d))
        assert _float_ok(x, v, lower, exclusive), (v, lower, exclusive, str(d))
    # ... and the bound is the first float on that side, unless beyond the float range.
    if abs(Decimal(v)) < Decimal("1.7e308"):
        f = float(b)
        assert _float_ok(f, v, lower, exclusive)
        assert not _float_ok(math.nextafter(f, -math.inf if lower else math.inf), v, lower, exclusive)


def test_float_safe_bound_examples() -> None:
    assert float_safe_bound(0, True, True) == Decimal("5e-324")
    assert float_safe_bound(0, False, True) == Decimal("-5e-324")
    assert float_safe_bound(5, True, True) == Decimal("5.000000000000001")
    assert float_safe_bound(0.1, True, False) == Decimal("0.1")  # inclusive float: unchanged
    assert float_safe_bound(2**54 + 3, False, False) == 2**54  # the float 2**54 + 4 is too big
    # Underflow: 1e-400 and 0.000...1 (400 zeros) parse to 0.0: below the bound.
    rx = re.compile(number_regex(minimum=float_safe_bound(0, True, True)))
    assert not rx.fullmatch("1e-400") and not rx.fullmatch("0." + "0" * 400 + "1")
    assert rx.fullmatch("0." + "0" * 300 + "1") and float("0." + "0" * 300 + "1") > 0
