"""Lark grammars → corral grammar text (GBNF with ``/regex/`` terminals).

    text = lark_to_gbnf(open("calc.lark").read())          # then compile_grammar(text, tok)
    corral.compile_grammar(lark_text, tok, syntax="lark")  # the same, in one call

What is read, and what it means here (the language of the grammar as Lark's Earley parser with
the ``dynamic_complete`` lexer accepts it — every terminal may end at any point its pattern
allows, which is also corral's semantics):

- rules ``name: a b | c`` (lower case) and terminals ``NAME: ...`` (upper case); ``?rule``,
  ``!rule``, ``_rule``, aliases ``-> name`` and priorities ``rule.2`` / ``TERM.2`` are accepted
  and change nothing in the language (they shape Lark's tree or break ties between parses);
- strings ``"..."`` (Python escapes) with the ``i`` flag, regexes ``/.../flags`` (``i s x u``;
  ``m`` and ``l`` change nothing under whole-terminal matching), ranges ``"a".."z"``, groups,
  ``[optional]``, ``? * +``, ``item ~ n`` and ``item ~ n..m``;
- ``%import common.NAME`` (``-> ALIAS``), ``%import common (A, B)``: a bundled equivalent of
  Lark's common terminals (:data:`COMMON`), not a download;
- ``%ignore X``: text matching the ignored terminals is allowed before, between and after the
  tokens of the rules (not inside a terminal), at most ``max_ignore`` characters in a row
  (default 16: bounded like JSON whitespace, so a model cannot fill its budget with blanks);
- ``%override`` replaces a definition, ``%extend`` adds alternatives to one.

Refused with :class:`~corral.errors.GrammarSyntaxError`-style :class:`CompileError` naming the
line and column: templates (``rule{x}``), ``%declare`` (a terminal with no pattern), imports
from anything but ``common``, undefined names, recursive terminals, nesting deeper than
``max_depth``.

Invariants: the output grammar's start rule is ``lark-start`` (names with ``-`` cannot clash
with Lark's); every Lark terminal becomes one corral rule, merged by the engine into a single
lexeme; parsing is a hand-written tokenizer + recursive descent bounded by ``max_depth``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from corral.errors import CompileError
from corral.grammar.structural import literal as _lit

__all__ = ["COMMON", "START_RULE", "grammar_syntax", "lark_to_gbnf"]

START_RULE = "lark-start"
_IGNORE_RULE = "lark-ignore"

# Lark's common terminals, written out here with the languages they have in Lark (a string's
# body has no newline; an escape is a backslash and any other character but a newline).
COMMON: dict[str, str] = {
    "DIGIT": '"0".."9"',
    "HEXDIGIT": '"a".."f" | "A".."F" | DIGIT',
    "INT": "DIGIT+",
    "SIGNED_INT": '["+" | "-"] INT',
    "DECIMAL": 'INT "." INT? | "." INT',
    "_EXP": '("e" | "E") SIGNED_INT',
    "FLOAT": "INT _EXP | DECIMAL _EXP?",
    "SIGNED_FLOAT": '["+" | "-"] FLOAT',
    "NUMBER": "FLOAT | INT",
    "SIGNED_NUMBER": '["+" | "-"] NUMBER',
    "ESCAPED_STRING": r'"\"" /([^"\\\n]|\\[^\n])*/ "\""',
    "LCASE_LETTER": '"a".."z"',
    "UCASE_LETTER": '"A".."Z"',
    "LETTER": "UCASE_LETTER | LCASE_LETTER",
    "WORD": "LETTER+",
    "CNAME": '("_" | LETTER) ("_" | LETTER | DIGIT)*',
    "WS_INLINE": '(" " | /\\t/)+',
    "WS": "/[ \\t\\f\\r\\n]/+",
    "CR": "/\\r/",
    "LF": "/\\n/",
    "NEWLINE": "(CR? LF)+",
    "SH_COMMENT": "/#[^\\n]*/",
    "CPP_COMMENT": "/\\/\\/[^\\n]*/",
    "C_COMMENT": '"/*" /(.|\\n)*?/ "*/"',
    "SQL_COMMENT": "/--[^\\n]*/",
}
# C_COMMENT's body may not contain "*/" in Lark (the lazy pattern stops at the first one).
_C_COMMENT_BODY = "(/(?s).*/ - /(?s).*\\*\\/.*/)"

_TOKEN = re.compile(
    r"""
    (?P<nl>\n)
  | (?P<ws>[ \t\f\r]+|\\\n)
  | (?P<comment>//[^\n]*)
  | (?P<directive>%[a-z]+)
  | (?P<string>"(?:\\.|[^"\\\n])*"i?)
  | (?P<regex>/(?!/)(?:\\.|[^/\\\n])+/[a-z]*)
  | (?P<arrow>->)
  | (?P<range>\.\.)
  | (?P<number>-?\d+)
  | (?P<name>[_?!]*[A-Za-z_][A-Za-z_0-9]*(?:\.[A-Za-z_][A-Za-z_0-9]*)*)
  | (?P<op>[:|()\[\]?*+~{},.])
    """,
    re.VERBOSE,
)


@dataclass
class _Tok:
    kind: str
    text: str
    line: int
    col: int


@dataclass
class _Def:
    name: str
    body: str  # corral expression text
    terminal: bool
    line: int
    col: int
    refs: list[tuple[str, int, int]] = field(default_factory=list)


def _err(msg: str, line: int, col: int) -> CompileError:
    return CompileError(f"Lark grammar: {msg}", line=line, column=col)


def _tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos, line, line_start = 0, 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        col = pos - line_start + 1
        if m is None:
            raise _err(f"unexpected character {text[pos]!r}", line, col)
        kind = m.lastgroup or ""
        if kind not in ("ws", "comment"):
            out.append(_Tok(kind, m.group(), line, col))
        if "\n" in m.group():
            line += m.group().count("\n")
            line_start = m.end()
        pos = m.end()
    out.append(_Tok("nl", "\n", line, pos - line_start + 1))
    out.append(_Tok("eof", "end of grammar", line, pos - line_start + 1))
    return out


def _rx_char(ch: str) -> str:
    o = ord(ch)
    if ch in ".^$*+?{}[]\\|()/-":
        return "\\" + ch
    if 0x20 <= o < 0x7F:
        return ch
    return f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}"


_ESC = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "f": "\f",
    "v": "\v",
    "0": "\0",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "a": "\a",
    "b": "\b",
}


def _unescape(body: str, t: _Tok) -> str:
    out, i = [], 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1] if i + 1 < len(body) else ""
        if nxt in _ESC:
            out.append(_ESC[nxt])
            i += 2
        elif nxt in "xuU":
            n = {"x": 2, "u": 4, "U": 8}[nxt]
            digits = body[i + 2 : i + 2 + n]
            if len(digits) != n or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise _err(f"bad \\{nxt} escape in {t.text}", t.line, t.col)
            out.append(chr(int(digits, 16)))
            i += 2 + n
        else:  # Python keeps unknown escapes as written
            out.append("\\" + nxt)
            i += 2
    return "".join(out)


class _Parser:
    def __init__(self, text: str, max_depth: int) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.max_depth = max_depth
        self.defs: dict[str, _Def] = {}
        self.ignores: list[str] = []
        self.imports: dict[str, str] = {}  # local name -> common name
        self.ignore_refs: list[tuple[str, int, int]] = []

    # -- token helpers -------------------------------------------------------------------------
    def peek(self) -> _Tok:
        return self.toks[self.i]

    def next(self) -> _Tok:
        t = self.toks[self.i]
        if t.kind != "eof":  # the end stays put: every caller then reports it
            self.i += 1
        return t

    def skip_nl(self) -> None:
        while self.peek().kind == "nl":
            self.i += 1

    def continued(self) -> bool:
        """Newlines followed by ``|`` continue the expansion (at any depth, as in Lark)."""
        j = self.i
        while self.toks[j].kind == "nl":
            j += 1
        if self.toks[j].text == "|" and j > self.i:
            self.i = j
            return True
        return False

    # -- grammar --------------------------------------------------------------------------------
    def parse(self) -> None:
        while self.peek().kind != "eof":
            t = self.peek()
            if t.kind == "nl":
                self.i += 1
                continue
            if t.kind == "directive":
                self.directive()
            elif t.kind == "name":
                self.definition(None)
            else:
                raise _err(f"expected a rule, a terminal or a %directive, found {t.text!r}", t.line, t.col)

    def definition(self, mode: str | None) -> None:
        t = self.next()
        raw = t.text
        name = raw.lstrip("?!")
        if "." in name:
            name, _, prio = name.partition(".")
            if not prio.isdigit():
                raise _err(f"bad priority in {raw!r}", t.line, t.col)
        terminal = name.lstrip("_")[:1].isupper()
        if self.peek().text == "{":
            raise _err(f"templates ({name}{{...}}) are not supported", self.peek().line, self.peek().col)
        if self.peek().text == "." and self.toks[self.i + 1].kind == "number":
            self.i += 2
        colon = self.next()
        if colon.text != ":":
            raise _err(f"expected ':' after {name!r}, found {colon.text!r}", colon.line, colon.col)
        d = _Def(name, "", terminal, t.line, t.col)
        body = self.alternatives(d, 0)
        if mode == "extend":
            if name not in self.defs:
                raise _err(f"%extend of undefined {name!r}", t.line, t.col)
            old = self.defs[name]
            old.body = f"{old.body} | {body}"
            old.refs += d.refs
            return
        if name in self.defs and mode != "override" and name not in self.imports:
            raise _err(f"{name!r} is defined twice (use %override)", t.line, t.col)
        d.body = body
        self.defs[name] = d
        self.imports.pop(name, None)

    def alternatives(self, d: _Def, depth: int) -> str:
        if depth > self.max_depth:
            t = self.peek()
            raise _err(f"nested deeper than {self.max_depth} levels", t.line, t.col)
        alts = [self.sequence(d, depth)]
        while True:
            if self.peek().text == "|" or self.continued():
                self.i += 1
                alts.append(self.sequence(d, depth))
            else:
                break
        return " | ".join(alts)

    def sequence(self, d: _Def, depth: int) -> str:
        items: list[str] = []
        while True:
            t = self.peek()
            if t.kind == "nl":  # as in Lark, a definition goes on past a newline only before "|"
                break
            if t.kind == "eof" or t.text in ("|", ")", "]"):
                break
            if t.kind == "arrow":
                self.i += 1
                alias = self.next()
                if alias.kind != "name":
                    raise _err("expected an alias name after '->'", alias.line, alias.col)
                continue
            items.append(self.repeated(d, depth))
        return " ".join(items) if items else '""'

    def repeated(self, d: _Def, depth: int) -> str:
        atom = self.atom(d, depth)
        while True:
            t = self.peek()
            if t.text in ("?", "*", "+"):
                self.i += 1
                atom = f"({atom}){t.text}"
            elif t.text == "~":
                self.i += 1
                lo = self.next()
                if lo.kind != "number":
                    raise _err("expected a count after '~'", lo.line, lo.col)
                if self.peek().kind == "range":
                    self.i += 1
                    hi = self.next()
                    if hi.kind != "number" or int(hi.text) < int(lo.text):
                        raise _err("bad repetition range after '~'", hi.line, hi.col)
                    atom = f"({atom}){{{lo.text},{hi.text}}}"
                else:
                    atom = f"({atom}){{{lo.text}}}"
            else:
                return atom

    def atom(self, d: _Def, depth: int) -> str:
        t = self.next()
        if t.text in ("(", "["):
            inner = self.alternatives(d, depth + 1)
            close = self.next()
            want = ")" if t.text == "(" else "]"
            if close.text != want:
                raise _err(f"expected {want!r}, found {close.text!r}", close.line, close.col)
            return f"({inner})" if want == ")" else f"({inner})?"
        if t.kind == "string":
            return self.token(d, self.string(t))
        if t.kind == "regex":
            return self.token(d, self.regex(t))
        if t.kind == "name":
            name = t.text
            if name.startswith(("?", "!")) or "." in name:
                raise _err(f"unexpected {name!r} in an expansion", t.line, t.col)
            if self.peek().text == "{":
                raise _err(f"templates ({name}{{...}}) are not supported", t.line, t.col)
            d.refs.append((name, t.line, t.col))
            is_term = name.lstrip("_")[:1].isupper()
            return self.token(d, name) if is_term else name
        raise _err(f"unexpected {t.text!r} in an expansion", t.line, t.col)

    def token(self, d: _Def, expr: str) -> str:
        # A token of a rule may be followed by ignored text; inside a terminal it may not.
        return expr if d.terminal else f"{expr} {_IGNORE_RULE}"

    def string(self, t: _Tok) -> str:
        flags = "i" if t.text.endswith("i") and not t.text.endswith('"') else ""
        body = _unescape(t.text[1 : -1 - len(flags)], t)
        if self.peek().kind == "range":
            self.i += 1
            hi = self.next()
            if hi.kind != "string":
                raise _err("expected a string after '..'", hi.line, hi.col)
            top = _unescape(hi.text[1:-1], hi)
            if len(body) != 1 or len(top) != 1 or ord(top) < ord(body):
                raise _err(
                    f'a range is "a".."z" with one character each side, low to high: {t.text}..{hi.text}',
                    t.line,
                    t.col,
                )
            return f"[{_rx_char(body)}-{_rx_char(top)}]"
        if not body:
            return '""'
        if flags:
            return "/(?i)" + "".join(_rx_char(c) for c in body) + "/"
        return _lit(body)

    def regex(self, t: _Tok) -> str:
        end = t.text.rfind("/")
        pattern, flags = t.text[1:end], t.text[end + 1 :]
        bad = set(flags) - set("imsxul")
        if bad:
            raise _err(f"unknown regex flag(s) {''.join(sorted(bad))!r}", t.line, t.col)
        keep = "".join(f for f in "isx" if f in flags)
        return f"/(?{keep}){pattern}/" if keep else f"/{pattern}/"

    def directive(self) -> None:
        t = self.next()
        if t.text == "%ignore":
            d = _Def(_IGNORE_RULE, "", True, t.line, t.col)
            self.ignores.append(self.alternatives(d, 0))
            self.ignore_refs += d.refs
        elif t.text == "%import":
            self.import_()
        elif t.text in ("%override", "%extend"):
            nt = self.peek()
            if nt.kind != "name":
                raise _err(f"expected a definition after {t.text}", nt.line, nt.col)
            self.definition(t.text[1:])
        elif t.text == "%declare":
            raise _err(
                "%declare is not supported: a declared terminal has no pattern to match", t.line, t.col
            )
        else:
            raise _err(f"unknown directive {t.text}", t.line, t.col)

    def import_(self) -> None:
        t = self.next()
        if t.kind != "name" or not (t.text == "common" or t.text.startswith("common.")):
            raise _err(f"only %import common... is bundled (found {t.text!r})", t.line, t.col)
        if t.text == "common":
            if self.next().text != "(":
                raise _err("expected '(' after %import common", t.line, t.col)
            names = []
            while True:
                n = self.next()
                if n.text == ")":
                    break
                if n.text == ",":
                    continue
                names.append((n.text, n.text, n))
        else:
            name = t.text.split(".", 1)[1]
            alias = name
            if self.peek().kind == "arrow":
                self.i += 1
                alias = self.next().text
            names = [(name, alias, t)]
        for name, alias, tok in names:
            if name not in COMMON:
                raise _err(f"common has no terminal {name!r}", tok.line, tok.col)
            self.imports[alias] = name


def _common_defs(wanted: set[str]) -> dict[str, str]:
    """The common terminals ``wanted`` and those they use, as corral expressions."""
    out: dict[str, str] = {}
    todo = list(wanted)
    while todo:
        name = todo.pop()
        if name in out:
            continue
        p = _Parser(f"{name}: {COMMON[name]}\n", 64)
        p.parse()
        d = p.defs[name]
        out[name] = _C_COMMENT_BODY.join(d.body.split("/(.|\\n)*?/")) if name == "C_COMMENT" else d.body
        todo += [r for r, _, _ in d.refs if r in COMMON]
    return out


_LARK_DEFINITION = re.compile(
    r"^[ \t]*(?:[?!]?[a-z_][a-z_0-9]*|_?[A-Z][A-Z_0-9]*)(?:\.-?\d+)?[ \t]*:(?!:)", re.M
)


def grammar_syntax(text: str) -> str:
    """``"gbnf"`` or ``"lark"``: how grammar text is written. GBNF rules are ``name ::= ...``;
    Lark definitions are ``name: ...`` (or a ``%import``/``%ignore`` line). Text with a ``::=``
    rule is GBNF, as before Lark was read."""
    if re.search(r"^[ \t]*[A-Za-z0-9_-]+[ \t]*::=", text, re.M):
        return "gbnf"
    if _LARK_DEFINITION.search(text) or re.search(r"^[ \t]*%(import|ignore)\b", text, re.M):
        return "lark"
    return "gbnf"


def lark_to_gbnf(text: str, *, start: str = "start", max_ignore: int = 16, max_depth: int = 200) -> str:
    """Translate a Lark grammar to corral grammar text whose start rule is :data:`START_RULE`.

    Raises :class:`corral.CompileError` (with line and column) for syntax corral does not read
    or a grammar that refers to what it does not define."""
    if not isinstance(text, str):
        raise TypeError("a Lark grammar is a str")
    if max_ignore < 0:
        raise ValueError("max_ignore must be >= 0")
    p = _Parser(text, max_depth)
    p.parse()
    if start not in p.defs:
        raise CompileError(f"Lark grammar: no start rule {start!r} (define `{start}: ...` or pass start=)")
    # Imports: each alias becomes a terminal defined by its common expression.
    common_needed = set(p.imports.values())
    refs = [r for d in p.defs.values() for r in d.refs] + p.ignore_refs
    common = _common_defs(common_needed)
    lines: list[str] = []
    for alias, name in p.imports.items():
        if alias != name:
            lines.append(f"{alias} ::= {name}")
    for name, body in common.items():
        if name not in p.defs:
            lines.append(f"{name} ::= {body}")
    defined = set(p.defs) | set(p.imports) | set(common)
    for name, line, col in refs:
        if name not in defined:
            raise _err(
                f"undefined {'terminal' if name.lstrip('_')[:1].isupper() else 'rule'} {name!r}", line, col
            )
    _check_terminals_regular(p.defs)
    for d in p.defs.values():
        lines.append(f"{d.name} ::= {d.body}")
    if p.ignores:
        ignored = " | ".join(f"({x})" for x in p.ignores)
        lines.append(f"{_IGNORE_RULE} ::= ({ignored})* & /(?s).{{0,{max_ignore}}}/")
    else:
        lines.append(f'{_IGNORE_RULE} ::= ""')
    lines.append(f"{START_RULE} ::= {_IGNORE_RULE} {start}")
    return "\n".join(lines) + "\n"


def _check_terminals_regular(defs: dict[str, _Def]) -> None:
    """Terminals may use other terminals, never rules, and never themselves (Lark refuses both)."""
    for d in defs.values():
        if not d.terminal:
            continue
        for name, line, col in d.refs:
            if not name.lstrip("_")[:1].isupper():
                raise _err(
                    f"terminal {d.name!r} uses the rule {name!r} (terminals can use only terminals)",
                    line,
                    col,
                )
    state: dict[str, int] = {}
    for root in (n for n, d in defs.items() if d.terminal):
        if root in state:
            continue
        stack = [(root, iter([r for r, _, _ in defs[root].refs]))]
        state[root] = 1
        while stack:
            name, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[name] = 2
                stack.pop()
                continue
            if nxt not in defs or not defs[nxt].terminal:
                continue
            if state.get(nxt) == 1:
                d = defs[nxt]
                raise _err(f"terminal {nxt!r} is recursive (terminals must be regular)", d.line, d.col)
            if nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter([r for r, _, _ in defs[nxt].refs])))
