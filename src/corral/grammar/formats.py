"""Regexes for JSON Schema string ``format`` values, over the *decoded* string (full match).

Each regex is in Python ``re`` syntax, uses only ASCII classes (``[0-9]``, never ``\\d``, which is
Unicode-aware) and only regular constructs, so it compiles with :func:`corral.compile_regex` and
can be wrapped for JSON string bodies with the grammar flag ``/.../j``.

Exactness, per format:

* ``date``, ``time``, ``date-time`` — RFC 3339 ``full-date``, ``full-time`` and
  ``full-date "T" full-time``: exact month lengths, 29 February only in leap years (Gregorian rule,
  year ``0000`` counted as a leap year, as RFC 3339's 4-digit years allow), ``T``/``t`` and
  ``Z``/``z`` (RFC 3339 §5.6 note), fractional seconds, numeric offsets, and the leap second
  ``:60`` in any minute (RFC 3339 allows it; where it may occur depends on the offset).
* ``duration`` — ISO 8601 durations as RFC 3339 appendix A writes them, read as ISO 8601 does:
  designators in order, each optional, at least one present (``P1Y2M3DT4H5M6S``, ``P1Y1D``,
  ``PT1H30S``), ``T`` followed by at least one time element, or weeks alone (``P3W``). No
  fractions. (The RFC's ABNF is stricter about gaps, e.g. it has no ``P1Y1D``; this accepts a
  superset of it.)
* ``email`` — a practical ASCII subset of RFC 5321/5322: a dot-atom local part ``@`` a
  ``hostname``. No quoted local parts, address literals or the 64/254-octet limits.
* ``hostname`` — RFC 1123 labels (1–63 letters, digits, hyphens, not starting or ending with a
  hyphen) separated by dots. The 253-character total is not enforced (a length bound across
  labels would multiply the automaton by 253).
* ``ipv4`` — dotted quad, each 0–255 without leading zeros.
* ``ipv6`` — every RFC 4291 §2.2 text form: full, ``::``-compressed, and with an embedded IPv4
  dotted quad (the RFC 3986 ``IPv6address`` ABNF, exactly). No zone ids.
* ``uri`` — RFC 3986 ``URI`` (absolute, optional query and fragment), exactly its ABNF: ASCII
  only (IRIs are ``iri``), percent-encoding, IPv6 and IPvFuture literals.
* ``uuid`` — RFC 4122 ``8-4-4-4-12`` hex digits in either case.
"""

from __future__ import annotations

__all__ = ["FORMAT_REGEXES", "format_regex"]

_DIGIT = "[0-9]"
_HEX = "[0-9A-Fa-f]"

# --- RFC 3339 dates and times ------------------------------------------------------------------

_MONTH_DAY = (
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"  # 31-day months
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"  # 30-day months
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"  # February, common year
)
# Years divisible by 4 and not by 100, or divisible by 400 (0000 included).
_LEAP_YEAR = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
_DATE = f"(?:[0-9]{{4}}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
_PARTIAL_TIME = "(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\\.[0-9]+)?"
_OFFSET = "(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_TIME = f"{_PARTIAL_TIME}{_OFFSET}"
_DATE_TIME = f"{_DATE}[Tt]{_TIME}"

# --- ISO 8601 durations ------------------------------------------------------------------------

_N = "[0-9]+"
_DUR_DATE = f"(?:{_N}Y(?:{_N}M)?(?:{_N}D)?|{_N}M(?:{_N}D)?|{_N}D)"
_DUR_TIME = f"T(?:{_N}H(?:{_N}M)?(?:{_N}S)?|{_N}M(?:{_N}S)?|{_N}S)"
_DURATION = f"P(?:{_DUR_DATE}(?:{_DUR_TIME})?|{_DUR_TIME}|{_N}W)"

# --- Hosts and addresses -----------------------------------------------------------------------

_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = f"{_LABEL}(?:\\.{_LABEL})*"
_ATEXT = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_EMAIL = f"{_ATEXT}+(?:\\.{_ATEXT}+)*@{_HOSTNAME}"

_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = f"{_OCTET}(?:\\.{_OCTET}){{3}}"


def _ipv6() -> str:
    """RFC 3986 §3.2.2 ``IPv6address``, one alternative per position of ``::``."""
    h16 = f"{_HEX}{{1,4}}"
    ls32 = f"(?:{h16}:{h16}|{_IPV4})"
    alts = [f"(?:{h16}:){{6}}{ls32}", f"::(?:{h16}:){{5}}{ls32}"]
    # [ *k( h16 ":" ) h16 ] "::" tail, for k = 0..6; the tail has 4-k (h16 ":") groups then ls32,
    # except the last two forms (tail h16 alone, then nothing).
    for k in range(7):
        head = f"(?:(?:{h16}:){{0,{k}}}{h16})?" if k else f"(?:{h16})?"
        if k <= 4:
            tail = (f"(?:{h16}:){{{4 - k}}}" if 4 - k > 1 else (f"{h16}:" if 4 - k == 1 else "")) + ls32
        elif k == 5:
            tail = h16
        else:
            tail = ""
        alts.append(f"{head}::{tail}")
    return "(?:" + "|".join(alts) + ")"


_IPV6 = _ipv6()

# --- RFC 3986 URI ------------------------------------------------------------------------------

_UNRESERVED = "A-Za-z0-9._~\\-"
_SUB_DELIMS = "!$&'()*+,;="
_PCT = f"%{_HEX}{{2}}"
_PCHAR = f"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT})"
_SEGMENT = f"{_PCHAR}*"
_SEGMENT_NZ = f"{_PCHAR}+"
_USERINFO = f"(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT})*"
_IPVFUTURE = f"[Vv]{_HEX}+\\.[{_UNRESERVED}{_SUB_DELIMS}:]+"
_REG_NAME = f"(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT})*"  # includes every IPv4address
_HOST = f"(?:\\[(?:{_IPV6}|{_IPVFUTURE})\\]|{_REG_NAME})"
_AUTHORITY = f"(?:{_USERINFO}@)?{_HOST}(?::[0-9]*)?"
_HIER_PART = (
    f"(?://{_AUTHORITY}(?:/{_SEGMENT})*"  # "//" authority path-abempty
    f"|/(?:{_SEGMENT_NZ}(?:/{_SEGMENT})*)?"  # path-absolute
    f"|{_SEGMENT_NZ}(?:/{_SEGMENT})*"  # path-rootless
    "|)"  # path-empty
)
_QUERY = f"(?:{_PCHAR}|[/?])*"
_URI = f"[A-Za-z][A-Za-z0-9+.-]*:{_HIER_PART}(?:\\?{_QUERY})?(?:#{_QUERY})?"

_UUID = f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"

FORMAT_REGEXES: dict[str, str] = {
    "date-time": _DATE_TIME,
    "date": _DATE,
    "time": _TIME,
    "duration": _DURATION,
    "email": _EMAIL,
    "hostname": _HOSTNAME,
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "uri": _URI,
    "uuid": _UUID,
}


def format_regex(name: str) -> str | None:
    """The full-match regex (over the decoded string) for JSON Schema format `name`, or None
    when the format is not supported (callers then leave the string unconstrained)."""
    return FORMAT_REGEXES.get(name)
