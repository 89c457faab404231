#!/usr/bin/env python3
"""crosscheck_regex.py — compares corral's regex → DFA pipeline with Python's `re.fullmatch`.

In:  the driver built from scripts/regex_check.cpp (path as argv[1], default /tmp/regex_check).
Out: a report of mismatches; exit status 1 if any.
For every pattern below: the DFA must accept exactly the strings re.fullmatch accepts (strings
drawn with hypothesis `st.from_regex(p, fullmatch=True)`, their mutations, and a pool of tricky
characters); print_regex must re-compile in Python to the same language on those strings and
re-parse in corral to a DFA of the same size; shortest_completion from the start state must be
accepted by Python and be distance_to_accept bytes long. Patterns Python rejects must be
rejected; patterns corral refuses on purpose are listed in REFUSED.

Build the driver:
  g++ -std=c++17 -O2 -Icpp cpp/regex_ast.cpp cpp/regex_parser.cpp cpp/dfa.cpp cpp/nfa.cpp \
      cpp/utf8.cpp scripts/regex_check.cpp -o /tmp/regex_check
"""
import random
import re
import signal
import subprocess
import sys
import warnings

import time

from hypothesis import HealthCheck, Phase, given, settings, strategies as st

warnings.filterwarnings("ignore")

PATTERNS = [
    r"abc", r"a|b|c", r"", r"a*", r"a+b?", r"(ab)*c", r"(a|b)*abb", r"a{3}", r"a{2,4}", r"a{2,}",
    r"a{,3}", r"x{0}", r"(?:ab){1,3}c", r"[abc]", r"[^abc]", r"[a-z]+", r"[^a-z0-9]", r"[-a]", r"[a-]",
    r"[]a]", r"[^]a]", r"[\]]", r"[\\-]", r"\d", r"\d+", r"\D", r"\w+", r"\W", r"\s", r"\S+",
    r"[\d\s]", r"[^\w]", r"[\w.+-]+@[\w-]+\.[\w.]+", r".", r".*", r"(?s).", r"(?s).*x", r"[.]",
    r"\.", r"\n\t\r\f\v\a\0", r"\x41\x7e", r"\u00e9\u4e2d", r"\U0001F600", r"\101\0\01\012",
    r"[\101-\132]", r"[\x00-\x7f]", r"[^\x00-\x7f]", r"é+", r"日本語?", r"😀|😃", r"[é-ü]",
    r"[\u0400-\u04ff]+", r"[\U00010000-\U0010ffff]", r"[^\U00010000-\U0010ffff]",
    r"^abc$", r"^a|^b$", r"\Aabc\Z", r"a$|b", r"a{", r"a{}", r"a{1", r"a{,}", r"a{x}", r"{", r"x{2}{",
    r"(?i)abc", r"(?i)[a-z]+", r"(?i)k", r"(?i)s", r"(?i)[^k]", r"(?i)é", r"(?i)ß", r"(?i)σ",
    r"(?i)[ǅ]", r"(?i)ı", r"(?i)İ", r"(?i)[i-k]", r"(?i)[\w]x", r"(?i)µ", r"(?i)ﬅ", r"(?i)θ",
    r"(?i:a)b", r"a(?i:b)c", r"(?i)a(?-i:b)c", r"(?a)\w+", r"(?a)\d", r"(?a)\s", r"(?ai)k",
    r"(?x) a b # comment\n c", r"(?x)[ ]a", r"(?x)a\ b", r"(?x) a * ", r"(?s:.)\n", r"(?m)^a$",
    r"(?u)\w", r"(?#comment)a", r"a(?#x)*", r"(?P<name>a)(?P<n2>b)*", r"(a)(b)?", r"(?:)",
    r"(|a)", r"a||b", r"a*?", r"a+?b", r"a??", r"a{2,3}?", 
    r"[\s\S]", r"[^\s\S]", r"[^\x00-\U0010FFFF]", r"\-\.\*", r"[\b]", r"\'\"", r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"',
    r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?", r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})",
    r"\+?1?[ -]?\(?\d{3}\)?[ -]?\d{3}-\d{4}", r"[٠-٩]+", r"[\d--]", r"[&&a]",
    # errors Python reports
    r"(", r")", r"a)", r"(a", r"[a", r"[z-a]", r"*", r"a**", r"a{3,2}", r"\q", r"\x4", r"\u12",
    r"[\d-z]", r"(?P<1>a)", r"(?P<a>x)(?P<a>y)", r"(?z)", r"a(?i)", r"\400", r"\U00110000",
    r"(?<x)", r"(?L)a", r"(?au)a", r"(?-a:b)", r"(?i-i:a)", r"(?#unterminated", r"a{4294967295}",
    # refused on purpose (regular languages only)
    r"(a)\1", r"(?P<x>a)(?P=x)", r"a(?=b)", r"a(?!b)", r"(?<=a)b", r"(?<!a)b", r"(a)?(?(1)b|c)",
    r"(?>a)", r"a*+", r"a++", r"a?+", r"a{1,2}+", r"\bword\b", r"a\B", r"a^b", r"a$b", r"(^a)",
    r"\ud800", r"[\ud800]", r"\N{DIGIT ONE}",
]

# Not here: ((a*)*)*, (a|aa)*, (a*|b)*c — Python's backtracking matcher is exponential on them
# (they are covered by cpp/tests/test_dfa.cpp).
REFUSED = set(PATTERNS[PATTERNS.index(r"(a)\1"):])

POOL = ("aAbBcCkKsSzZ09_ -.\n\t\r\x00\x7f\x80é É ß ẞ ſ K ı İ µ μ Σ σ ς θ ϑ ǅ ǆ Ǆ ﬅ ﬆ ٣ ۳ ߀ ５ 日 本 "
        "😀 😃 \u2028 \u3000 \U00010400 \U00010428 \U0010ffff \ue000 ` ~ \" \\ / { } [ ] ( ) * + ? | ^ $"
        ).replace(" ", "") + " "


class Driver:
    def __init__(self, path):
        self.p = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().rstrip("\n")


def hx(s):
    return s.encode("utf-8").hex()


def examples(pattern, n=60):
    out = []
    try:
        strat = st.from_regex(pattern, fullmatch=True)
    except Exception:
        return out

    t0 = time.time()

    class Enough(Exception):
        pass

    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strat)
    def collect(s):
        out.append(s)
        if time.time() - t0 > 2.0:
            raise Enough()

    def on_alarm(signum, frame):
        raise Enough()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(4)  # hypothesis can stall on patterns like ((a*)*)*
    try:
        collect()
    except BaseException:
        pass
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return out


def mutations(s, rng, k=6):
    res = []
    chars = list(POOL) + list(set(s))
    for _ in range(k):
        t = list(s)
        op = rng.randrange(3)
        if op == 0 and t:
            del t[rng.randrange(len(t))]
        elif op == 1:
            t.insert(rng.randrange(len(t) + 1), rng.choice(chars))
        elif t:
            t[rng.randrange(len(t))] = rng.choice(chars)
        res.append("".join(t))
    return res


def encodable(s):
    try:
        s.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def main():
    args = [a for a in sys.argv[1:] if a != "-v"]
    drv = Driver(args[0] if args else "/tmp/regex_check")
    rng = random.Random(1234)
    bad = 0
    checked = 0
    verbose = "-v" in sys.argv
    for p in PATTERNS:
        if verbose:
            print("pattern", repr(p), flush=True)
        try:
            rx = re.compile(p)
            perr = None
        except (re.error, OverflowError) as e:
            rx, perr = None, e
        resp = drv.ask("P " + hx(p))
        if perr is not None or p in REFUSED:
            if not resp.startswith("ERR"):
                print(f"MISMATCH {p!r}: Python/refusal expects an error, corral says {resp}")
                bad += 1
            elif perr is not None and isinstance(perr, re.error) and perr.pos is not None:
                col = int(resp.split()[3])
                if col - 1 != perr.pos:
                    print(f"note {p!r}: error column {col} vs Python position {perr.pos} ({perr.msg}; {resp})")
            continue
        if not resp.startswith("OK"):
            print(f"MISMATCH {p!r}: Python compiles it, corral says {resp}")
            bad += 1
            continue
        strs = examples(p)
        strs += [m for s in strs[:30] for m in mutations(s, rng)]
        strs += list(POOL) + ["", "ab", "abc", "aaa", "aa" * 3]
        strs = [s for s in dict.fromkeys(strs) if encodable(s)]
        printed = bytes.fromhex(drv.ask("R")[2:]).decode("utf-8")
        comp = drv.ask("C").split(" ")
        try:
            prx = re.compile(printed)
        except re.error as e:
            print(f"MISMATCH {p!r}: printed {printed!r} does not compile in Python: {e}")
            bad += 1
            prx = None
        for s in strs:
            want = rx.fullmatch(s) is not None
            got = drv.ask("S " + hx(s)) == "1"
            checked += 1
            if want != got:
                print(f"MISMATCH {p!r} on {s!r}: Python {want}, corral {got}")
                bad += 1
            if prx is not None and (prx.fullmatch(s) is not None) != want:
                print(f"MISMATCH printed {printed!r} of {p!r} on {s!r}: differs from the original")
                bad += 1
        if comp[2] != "-1":
            c = bytes.fromhex(comp[1]).decode("utf-8")
            if rx.fullmatch(c) is None or len(c.encode()) != int(comp[2]):
                print(f"MISMATCH {p!r}: shortest completion {c!r} (distance {comp[2]})")
                bad += 1
        n1 = resp.split()[1]
        resp2 = drv.ask("P " + hx(printed))
        if resp2 != "OK " + n1:
            print(f"MISMATCH {p!r}: printed {printed!r} re-parses to {resp2}, original OK {n1}")
            bad += 1
    print(f"{len(PATTERNS)} patterns, {checked} strings checked, {bad} mismatches")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
