"""JSON Schema `format` regexes (corral.grammar.formats): hand-picked examples, corral agrees with
Python's `re` on them, and cross-checks against jsonschema's FormatChecker where it has a checker
that needs no extra dependency (date-time, date, time, email, ipv4, ipv6, uuid)."""

from __future__ import annotations

import ipaddress
import json
import random
import re
import time
from functools import cache

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import corral
from corral.grammar.formats import FORMAT_REGEXES, format_regex

TOK = corral.Tokenizer.from_tokens(
    [bytes([b]) for b in range(256)] + [b"<eos>"], special_ids=[256], eos_ids=[256]
)
CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER

VALID = {
    "date-time": [
        "1963-06-19T08:30:06.283185Z",
        "1963-06-19t08:30:06z",
        "1985-04-12T23:20:50.52+01:00",
        "1990-12-31T15:59:60-08:00",  # leap second
        "2000-02-29T00:00:00Z",
        "2024-02-29T23:59:59.000000001-23:59",
        "0000-02-29T00:00:00Z",
        "9999-12-31T23:59:59+00:00",
    ],
    "date": [
        "1963-06-19",
        "2020-01-31",
        "2020-02-29",
        "2000-02-29",
        "1600-02-29",
        "2021-04-30",
        "0001-01-01",
    ],
    "time": ["08:30:06Z", "08:30:06.283185Z", "23:59:60z", "00:00:00+23:59", "12:00:00-05:00"],
    "duration": [
        "P4DT12H30M5S",
        "P4Y",
        "PT0S",
        "P0D",
        "P1M",
        "PT1M",
        "PT36H",
        "P1W",
        "P2W",
        "P1Y2M",
        "PT1H",
        "P1Y1D",
        "PT1H30S",
        "P1Y2M3DT4H5M6S",
        "P1DT1S",
    ],
    "email": [
        "joe.bloggs@example.com",
        "a@b",
        "te~st@example.com",
        "~test@example.com",
        "test~@example.com",
        "te.s.t@example.com",
        "x+y/z=!#$%&'*?^_`{|}-@a-b.c0",
    ],
    "hostname": [
        "www.example.com",
        "xn--4gbwdl.xn--wgbh1c",
        "a",
        "hostname",
        "host-name",
        "h0stn4me",
        "1host",
        "a" * 63,
        "a" * 63 + "." + "b" * 63,
        "A-B.C-D",
        "0",
    ],
    "ipv4": ["192.168.0.1", "0.0.0.0", "255.255.255.255", "87.10.0.1", "1.2.3.4"],
    "ipv6": [
        "::1",
        "::",
        "::abef",
        "1:d6::42",
        "1::d6:192.168.0.1",
        "::ffff:192.168.0.1",
        "1:2:3:4:5:6:7:8",
        "1:2:3:4:5:6:7::",
        "::1:2:3:4:5:6:7",
        "1:2:3:4:5:6::8",
        "1:2:3:4:5:6:1.2.3.4",
        "::42:ff:1",
        "aBcD::EfF0",
        "0000:0000:0000:0000:0000:0000:0000:0001",
        "fe80::",
        "::1.2.3.4",
        "1::",
    ],
    "uri": [
        "http://foo.bar/?baz=qux#quux",
        "http://foo.com/blah_(wikipedia)_blah#cite-1",
        "http://foo.bar/?q=Test%20URL-encoded%20stuff",
        "http://xn--nw2a.xn--j6w193g/",
        "http://-.~_!$&'()*+,;=:%40:80%2f::::::@example.com",
        "http://223.255.255.254",
        "ftp://ftp.is.co.za/rfc/rfc1808.txt",
        "http://www.ietf.org/rfc/rfc2396.txt",
        "ldap://[2001:db8::7]/c=GB?objectClass?one",
        "mailto:John.Doe@example.com",
        "news:comp.infosystems.www.servers.unix",
        "tel:+1-816-555-1212",
        "telnet://192.0.2.16:80/",
        "urn:oasis:names:specification:docbook:dtd:xml:4.1.2",
        "a:",
        "x+y.z-w:/a//b?c?/#d?/",
        "http://[v1.fe80::a+en1]/",
        "file:///etc/hosts",
        "http://user:pass@host:8080/p",
    ],
    "uuid": [
        "2eb8aa08-aa98-11ea-b4aa-73b441d16380",
        "2EB8AA08-AA98-11EA-B4AA-73B441D16380",
        "00000000-0000-0000-0000-000000000000",
        "98d80576-482e-427f-8434-7f86890ab222",
    ],
}

INVALID = {
    "date-time": [
        "1998-12-31T23:59:61Z",
        "1990-02-31T15:59:59.123-08:00",
        "1990-12-31T15:59:59-24:00",
        "1963-06-19T08:30:06.28123+01:00Z",
        "1963-06-19 08:30:06Z",
        "1963-06-19T08:30:06",
        "06/19/1963 08:30:06 PST",
        "2013-350T01:01:01",
        "1963-6-19T08:30:06Z",
        "2021-02-29T00:00:00Z",
        "1900-02-29T00:00:00Z",
        "1963-06-19T08:30:06.Z",
        "1963-06-1৪T00:00:00Z",
        "1963-06-11T0৪:00:00Z",
        "2020-04-31T00:00:00Z",
        "2020-01-01T24:00:00Z",
        "2020-01-01T00:60:00Z",
        "2020-00-01T00:00:00Z",
        "2020-13-01T00:00:00Z",
    ],
    "date": [
        "06/19/1963",
        "2013-350",
        "1998-1-20",
        "1998-01-1",
        "1998-13-01",
        "1998-04-31",
        "2020-11-31",
        "2021-02-29",
        "2100-02-29",
        "1900-02-29",
        "2020-02-30",
        "1963-06-1৪",
        "20230328",
        "2023-W01",
        "2022W527",
        "2023-01-32",
        "2023-00-01",
        "2023-01-00",
        "",
    ],
    "time": [
        "08:30:06",
        "008:030:006Z",
        "8:3:6Z",
        "24:00:00Z",
        "00:60:00Z",
        "00:00:61Z",
        "01:02:03+24:00",
        "01:02:03+00:60",
        "01:02:03Z+00:30",
        "08:30:06 PST",
        "01:01:01,1111Z",
        "12:00:00.Z",
        "1২:00:00Z",
        "01:02:03+0100",
        "T08:30:06Z",
    ],
    "duration": [
        "P",
        "PT",
        "P1YT",
        "PT1D",
        "P2D1Y",
        "P1D2H",
        "P2S",
        "P1Y2W",
        "P1",
        "1Y",
        "p1y",
        "P1.5Y",
        "P1W1D",
        "PT1H1D",
        "P৪Y",
        "PT1S1M",
        "P1M1Y",
        "",
    ],
    "email": [
        "2962",
        "",
        "@example.com",
        "joe@",
        ".test@example.com",
        "test.@example.com",
        "te..st@example.com",
        "joe bloggs@example.com",
        "joe@-example.com",
        "joe@example-.com",
        "joe@example..com",
        'a"b@c',
        "a@b@c",
        "joe@exa_mple.com",
        "é@example.com",
    ],
    "hostname": [
        "",
        "-a-host-name-that-starts-with--",
        "not_a_valid_host_name",
        "a-host-name-that-ends-with-",
        "a" * 64,
        "host..name",
        ".hostname",
        "hostname.",
        "-",
        "host name",
        "hostnäme",
        "a.-b",
    ],
    "ipv4": [
        "127.0.0.0.1",
        "256.256.256.256",
        "127.0",
        "0x7f000001",
        "2130706433",
        "087.10.0.1",
        "00.0.0.0",
        "1.2.3.4 ",
        "1.2.3.",
        "1.2.3.4.",
        "1.2.3.০",
        "192.168.1.0/24",
        "1.2.3.256",
        "",
    ],
    "ipv6": [
        "12345::",
        "::abcef",
        "1::1::1",
        "::laptop",
        "",
        ":2:3:4:5:6:7:8",
        "1:2:3:4:5:6:7:",
        "1:2:3:4:5:6:7:8:9",
        "1:2:3:4:5:6:7:8::",
        "::1:2:3:4:5:6:7:8",
        "1:2:3:4:5:6:7:1.2.3.4",
        "1::2::3",
        "1:::2",
        "fe80::1%eth0",
        "::ffff:192.168.0.256",
        "::ffff:192.168.0.01",
        "1.2.3.4::",
        "1:2:3:4:5:6:7:8:",
        "::1.2.3.4:1",
        "1:2:3:4:1.2.3.4",
        "১::",
        " ::1",
        "::g",
    ],
    "uri": [
        "//foo.bar/?baz=qux#quux",
        "/abc",
        "\\\\WINDOWS\\fileshare",
        "abc",
        "http:// shouldfail.com",
        ":// should fail",
        "bar,baz:foo",
        "http://example.com/a b",
        "http://[::1",
        "1http://x",
        "http://exa mple.com",
        "http://a/%zz",
        "http://a/%4",
        "http://a/é",
        "http://a/#f#g",
        "http://[g::1]/",
        "http://a/<b>",
        "ht^tp://a",
        "",
    ],
    "uuid": [
        "2eb8aa08-aa98-11ea-b4aa-73b441d1638",
        "2eb8aa08-aa98-11ea-73b441d16380",
        "2eb8aa08-aa98-11ea-b4ga-73b441d16380",
        "2eb8aa08aa9811eab4aa73b441d16380",
        "2eb8aa08-aa98-11ea-b4aa73b4-41d16380",
        "{2eb8aa08-aa98-11ea-b4aa-73b441d16380}",
        "urn:uuid:2eb8aa08-aa98-11ea-b4aa-73b441d16380",
        "2eb8-aa08-aa98-11ea-b4aa73b441d16380",
        "",
    ],
}


@cache
def compiled(name: str) -> corral.CompiledGrammar:
    return corral.compile_regex(FORMAT_REGEXES[name], TOK)


@cache
def compiled_json(name: str) -> corral.CompiledGrammar:
    return corral.compile_grammar("root ::= /" + FORMAT_REGEXES[name].replace("/", "\\/") + "/j", TOK)


def corral_match(name: str, s: str) -> bool:
    m = compiled(name).matcher()
    return m.accept_bytes(s.encode()) and m.is_accepting()


def corral_json_match(name: str, s: str) -> bool:
    m = compiled_json(name).matcher()
    return m.accept_bytes(json.dumps(s)[1:-1].encode()) and m.is_accepting()


def ours(name: str, s: str) -> bool:
    """The verdict of the format regex, checked to agree between Python's `re` and corral (as a
    plain regex and, JSON-encoded, as `/.../j`)."""
    py = re.fullmatch(FORMAT_REGEXES[name], s) is not None
    assert corral_match(name, s) == py, (name, s)
    assert corral_json_match(name, s) == py, (name, s)
    return py


def test_format_table_is_complete() -> None:
    assert set(FORMAT_REGEXES) == set(VALID) == set(INVALID)
    assert format_regex("ipv4") == FORMAT_REGEXES["ipv4"]
    assert format_regex("no-such-format") is None


@pytest.mark.parametrize("name", sorted(FORMAT_REGEXES))
def test_hand_picked_examples(name: str) -> None:
    for s in VALID[name]:
        assert ours(name, s), (name, s)
    for s in INVALID[name]:
        assert not ours(name, s), (name, s)


@pytest.mark.parametrize("name", sorted(FORMAT_REGEXES))
def test_every_format_compiles_quickly(name: str) -> None:
    t0 = time.perf_counter()
    corral.compile_regex(FORMAT_REGEXES[name], TOK)
    t1 = time.perf_counter()
    corral.compile_grammar("root ::= /" + FORMAT_REGEXES[name].replace("/", "\\/") + "/j", TOK)
    t2 = time.perf_counter()
    assert t1 - t0 < 2 and t2 - t1 < 2, (t1 - t0, t2 - t1)


# --- Cross-checks with jsonschema's FormatChecker ----------------------------------------------

CROSS_CHECKED = ["date-time", "date", "time", "email", "ipv4", "ipv6", "uuid"]


def checker(name: str, s: str) -> bool:
    return CHECKER.conforms(s, name)


def known_difference(name: str, s: str) -> bool:
    """Where RFC 3339 and jsonschema's checkers part ways on purpose: the checkers reject year
    0000 (Python's date has no year 0) and leap seconds, which RFC 3339 allows."""
    if name in ("date-time", "date") and s.startswith("0000"):
        return True
    if name in ("date-time", "time") and re.search(r":60(\.|[zZ+-])", s):
        return True
    return False


def test_checkers_are_available() -> None:
    for name in CROSS_CHECKED:
        assert name in CHECKER.checkers, name


@pytest.mark.parametrize("name", CROSS_CHECKED)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_generated_matches_pass_the_checker(name: str, data: st.DataObject) -> None:
    s = data.draw(st.from_regex(FORMAT_REGEXES[name], fullmatch=True))
    assert ours(name, s)
    assert checker(name, s) or known_difference(name, s), (name, s)


def _date(y: int, m: int, d: int) -> str:
    return f"{y:04d}-{m:02d}-{d:02d}"


YEARS = st.one_of(
    st.sampled_from([0, 1, 4, 100, 400, 1600, 1900, 2000, 2023, 2024, 2100, 9996, 9999]), st.integers(0, 9999)
)
DATES = st.builds(_date, YEARS, st.integers(0, 13), st.integers(0, 32))
TIMES = st.from_regex(
    r"[0-2][0-9]:[0-6][0-9]:[0-6][0-9](\.[0-9]{1,3})?([Zz]|[+-][0-2][0-9]:[0-6][0-9])", fullmatch=True
)


@settings(max_examples=400, deadline=None)
@given(d=DATES, t=TIMES, sep=st.sampled_from("Tt"))
def test_dates_and_times_agree_with_checker(d: str, t: str, sep: str) -> None:
    for name, s in (("date", d), ("time", t), ("date-time", d + sep + t)):
        if not known_difference(name, s):
            assert ours(name, s) == checker(name, s), (name, s)


def _mutate(s: str, rnd: random.Random) -> str:
    i = rnd.randrange(len(s) + 1)
    op = rnd.randrange(3)
    c = rnd.choice("0123456789abcdefABCDEF:.-x%@ ")
    if op == 0 or not s:
        return s[:i] + c + s[i:]
    i = min(i, len(s) - 1)
    return s[:i] + (c if op == 1 else "") + s[i + 1 :]


def _ipv6_spellings(n: int, rnd: random.Random) -> list[str]:
    a = ipaddress.IPv6Address(n)
    groups = [f"{int.from_bytes(a.packed[i : i + 2], 'big'):x}" for i in range(0, 16, 2)]
    out = [a.compressed, a.exploded, a.exploded.upper()]
    # A random `::` compressing any run of zero groups (RFC 4291 allows any run, even one group).
    zero_runs = [(i, j) for i in range(8) for j in range(i + 1, 9) if all(g == "0" for g in groups[i:j])]
    if zero_runs:
        i, j = rnd.choice(zero_runs)
        out.append(":".join(groups[:i]) + "::" + ":".join(groups[j:]))
    # Embedded IPv4 in the last 32 bits.
    v4 = ".".join(str(b) for b in a.packed[12:])
    out.append(":".join(groups[:6]) + ":" + v4)
    return out


@settings(max_examples=300, deadline=None)
@given(
    n=st.one_of(
        st.integers(0, 2**128 - 1),
        st.integers(0, 2**40),
        st.integers(0, 2**16 - 1).map(lambda x: x << 112),
    ),
    rnd=st.randoms(use_true_random=False),
)
def test_ipv6_agrees_with_checker(n: int, rnd: random.Random) -> None:
    for s in _ipv6_spellings(n, rnd):
        assert ours("ipv6", s) and checker("ipv6", s), s
        for _ in range(3):
            t = _mutate(s, rnd)
            assert ours("ipv6", t) == checker("ipv6", t), t


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(st.integers(0, 300), min_size=3, max_size=5),
    zeros=st.lists(st.booleans(), min_size=5, max_size=5),
    rnd=st.randoms(use_true_random=False),
)
def test_ipv4_agrees_with_checker(parts: list[int], zeros: list[bool], rnd: random.Random) -> None:
    s = ".".join(("0" if z else "") + str(p) for p, z in zip(parts, zeros[: len(parts)], strict=True))
    for t in (s, _mutate(s, rnd)):
        assert ours("ipv4", t) == checker("ipv4", t), t


@settings(max_examples=200, deadline=None)
@given(u=st.uuids(), upper=st.booleans(), rnd=st.randoms(use_true_random=False))
def test_uuid_agrees_with_checker(u: object, upper: bool, rnd: random.Random) -> None:
    s = str(u).upper() if upper else str(u)
    assert ours("uuid", s) and checker("uuid", s)
    t = _mutate(s, rnd)
    # The checker is looser than RFC 4122 on strings with extra dashes ("…-1234567890a-b") or
    # whitespace (Python's UUID() drops every dash and int() skips spaces): compare on the rest.
    if t.count("-") == 4 and re.fullmatch("[0-9a-fA-F-]*", t):
        assert ours("uuid", t) == checker("uuid", t), t
    else:
        assert not ours("uuid", t)


def test_email_subset_of_checker() -> None:
    # jsonschema only checks for an "@"; ours is stricter, never looser.
    for s in VALID["email"]:
        assert checker("email", s)
