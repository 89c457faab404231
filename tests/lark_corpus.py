"""Lark grammars written for the conformance tests, each with strings Lark accepts and rejects.

Every grammar is read by the ``lark`` package itself (Earley, ``dynamic_complete`` lexer) in the
tests, so the positive/negative lists are checked against Lark before corral is compared to it.
"""

from __future__ import annotations

# (name, grammar, accepted, rejected)
CORPUS: list[tuple[str, str, list[str], list[str]]] = [
    (
        "calculator",
        r"""
?start: sum
?sum: product | sum "+" product -> add | sum "-" product -> sub
?product: atom | product "*" atom -> mul | product "/" atom -> div
?atom: NUMBER -> number | "-" atom -> neg | NAME -> var | "(" sum ")"
%import common.CNAME -> NAME
%import common.NUMBER
%import common.WS_INLINE
%ignore WS_INLINE
""",
        ["1+2", " 1 + x*(3 - -4) ", "a/b/c", "2.5e3*y"],
        ["1+", "1 2", "(1", "*3"],
    ),
    (
        "json",
        r"""
?start: value
?value: object | array | string | SIGNED_NUMBER -> number | "true" | "false" | "null"
array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : string ":" value
string : ESCAPED_STRING
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
""",
        ['{"a": [1, 2.5, true, null]}', "[]", '"x\\"y"', '{ "k" : { } }', "-3"],
        ["{a: 1}", "[1,]", '"unterminated', "tru"],
    ),
    (
        "key value config",
        r"""
start: (line _NL)*
line: KEY "=" VALUE
KEY: /[a-z_]+/
VALUE: /[^\n]+/
_NL: "\n"
""",
        ["a=1\nb_c=hello world\n", ""],
        ["a=1", "A=1\n", "=x\n"],
    ),
    (
        "case insensitive keywords",
        r"""
start: "select"i FIELD ("," FIELD)* "from"i FIELD
FIELD: /[a-z]+/
%ignore " "
""",
        ["select a from t", "SELECT a, b FROM t", "SeLeCt x fRoM y"],
        ["select from t", "select a t"],
    ),
    (
        "ranges and counts",
        r"""
start: DATE
DATE: YEAR "-" MONTH "-" DAY
YEAR: DIGIT ~ 4
MONTH: "0" "1".."9" | "1" "0".."2"
DAY: "0".."3" DIGIT
DIGIT: "0".."9"
""",
        ["2024-01-31", "1999-12-09"],
        ["2024-13-01", "24-01-01", "2024-00-10"],
    ),
    (
        "bounded repetition",
        r"""
start: WORD ("," WORD) ~ 1..3
WORD: /[a-z]{2}/
""",
        ["ab,cd", "ab,cd,ef,gh"],
        ["ab", "ab,cd,ef,gh,ij", "ab,c"],
    ),
    (
        "optional brackets",
        r"""
start: "a" ["b"] "c" ["d" "e"]
""",
        ["ac", "abc", "acde", "abcde"],
        ["acd", "ab", "bc"],
    ),
    (
        "lisp",
        r"""
start: sexpr
?sexpr: atom | "(" sexpr* ")"
atom: SYMBOL | INT
SYMBOL: /[a-z+*\/-]+/
%import common.INT
%import common.WS
%ignore WS
""",
        ["(+ 1 (* 2 3))", "()", "x", "(a (b (c)))"],
        ["(a", ")", "(1 2))"],
    ),
    (
        "csv row",
        r"""
start: field ("," field)*
field: QUOTED | BARE |
QUOTED: "\"" /[^"]*/ "\""
BARE: /[^,"\n]+/
""",
        ["a,b,c", '"x, y",2', "a,,c", ""],
        ['"open,b', 'a"b'],
    ),
    (
        "email like",
        r"""
start: LOCAL "@" DOMAIN
LOCAL: /[a-z0-9.]+/
DOMAIN: LABEL ("." LABEL)+
LABEL: /[a-z0-9]+/
""",
        ["bob@example.com", "a.b@c.d.e"],
        ["bob@example", "@x.y", "bob@@x.y"],
    ),
    (
        "hex colors",
        r"""
start: COLOR (" " COLOR)*
COLOR: "#" HEXDIGIT ~ 6 | "#" HEXDIGIT ~ 3
%import common.HEXDIGIT
""",
        ["#fff", "#a0B1c2 #000"],
        ["#ff", "#gggggg", "fff"],
    ),
    (
        "booleans",
        r"""
?start: or_expr
?or_expr: and_expr ("or" and_expr)*
?and_expr: not_expr ("and" not_expr)*
?not_expr: "not" not_expr | atom
?atom: "true" | "false" | "(" or_expr ")"
%ignore " "
""",
        ["true", "not true and (false or true)", "true or false and false"],
        ["true and", "or true", "(true"],
    ),
    (
        "regex flags",
        r"""
start: WORD ":" BODY
WORD: /hello/i
BODY: /a.b/s
""",
        ["HeLLo:a\nb", "hello:axb"],
        ["hell:axb", "hello:ab"],
    ),
    (
        "comments ignored",
        r"""
start: stmt*
stmt: NAME ";"
%import common.CNAME -> NAME
%import common.SH_COMMENT
%import common.WS
%ignore WS
%ignore SH_COMMENT
""",
        ["a; b;", "a; #c\nb;", ""],
        ["a", "a;; ", "#x\n a"],
    ),
    (
        "c comments",
        r"""
start: "x" "y"
%import common.C_COMMENT
%ignore C_COMMENT
""",
        ["xy", "x/* hi */y", "/**/x/*a*/y/**/"],
        ["x/* open y", "x/* a */ */y"],
    ),
    (
        "escaped strings list",
        r"""
start: "[" ESCAPED_STRING ("," ESCAPED_STRING)* "]"
%import common.ESCAPED_STRING
""",
        ['["a"]', '["a\\\\","b\\"c"]', '["é ü"]'],
        ['["a]', '["a\\"]', "[]"],
    ),
    (
        "override",
        r"""
start: item+
item: "a"
%override item: "b" | "c"
""",
        ["b", "bcb"],
        ["a", ""],
    ),
    (
        "extend",
        r"""
start: item+
item: "a"
%extend item: "b"
""",
        ["a", "ab", "bba"],
        ["c", ""],
    ),
    (
        "priorities are neutral",
        r"""
start: A | B
A.2: /[a-z]+/
B: /[a-z0-9]+/
""",
        ["abc", "a1"],
        ["", "A"],
    ),
    (
        "inline and keep modifiers",
        r"""
?start: pair
!pair: KEY "=" _val
_val: NUMBER | WORD
%import common (NUMBER, WORD)
KEY: WORD
""",
        ["a=1", "abc=xyz", "k=2.5"],
        ["=1", "a=", "a==1"],
    ),
    (
        "newlines",
        r"""
start: line (NEWLINE line)*
line: WORD (" " WORD)*
%import common.NEWLINE
%import common.WORD
""",
        ["a b\nc", "x\r\ny\n\nz"],
        ["a\n", "a  b"],
    ),
    (
        "signed numbers",
        r"""
start: SIGNED_NUMBER ("," SIGNED_NUMBER)*
%import common.SIGNED_NUMBER
""",
        ["1,-2,+3.5,4e-2,.5", "-0"],
        ["1,", "--1", "1e"],
    ),
    (
        "url",
        r"""
start: SCHEME "://" HOST PATH? QUERY?
SCHEME: "http" | "https"
HOST: /[a-z0-9.-]+/
PATH: ("/" SEG)+
SEG: /[a-z0-9_.-]*/
QUERY: "?" /[a-z0-9=&]+/
""",
        ["http://a.com", "https://x.y/p/q?a=1&b=2", "http://h/"],
        ["ftp://a.com", "http:/a.com", "https://"],
    ),
    (
        "ip address",
        r"""
start: OCTET "." OCTET "." OCTET "." OCTET
OCTET: "25" "0".."5" | "2" "0".."4" DIGIT | "1" DIGIT DIGIT | "1".."9" DIGIT | DIGIT
%import common.DIGIT
""",
        ["192.168.0.1", "255.255.255.255", "0.0.0.0"],
        ["256.1.1.1", "1.2.3", "01.2.3.4"],
    ),
    (
        "nested lists",
        r"""
start: list
list: "[" [elem ("," elem)*] "]"
?elem: list | INT
%import common.INT
""",
        ["[]", "[1,[2,[3]],4]", "[[[]]]"],
        ["[1,]", "[[1]", "1"],
    ),
    (
        "tagged values",
        r"""
start: tag+
tag: "<" NAME ">" TEXT "</" NAME ">"
NAME: /[a-z]+/
TEXT: /[^<]+/
""",
        ["<a>hi</a>", "<b>1</b><c>x y</c>"],
        ["<a>hi</a", "<a>x<y</a>"],
    ),
    (
        "anonymous regex tokens",
        r"""
start: /[A-Z]{2}/ /[0-9]{2,4}/
%ignore "-"
""",
        ["AB12", "AB-1234", "-AB-12-"],
        ["A12", "AB1", "AB12345"],
    ),
    (
        "ambiguous split",
        r"""
start: X X
X: /a+/
""",
        ["aa", "aaaa"],
        ["a", ""],
    ),
    (
        "words and punctuation",
        r"""
start: sentence+
sentence: WORD+ PUNCT
PUNCT: "." | "!" | "?"
%import common.WORD
%import common.WS_INLINE
%ignore WS_INLINE
""",
        ["Hello world.", "Hi! Bye ?"],
        ["Hello world", ". Hi"],
    ),
    (
        "grouped alternatives over lines",
        r"""
start: ("up" | "down") ( "left"
     | "right" )
""",
        ["upleft", "downright"],
        ["up", "leftup"],
    ),
    (
        "unicode literals",
        r"""
start: "→" NAME "←"
NAME: /\w+/
""",
        ["→héllo←", "→x←"],
        ["->x<-", "→←"],
    ),
]

# (name, grammar, message fragment, line) — refused with a CompileError at that line.
REFUSED: list[tuple[str, str, str, int]] = [
    ("template", 'start: _sep{x}\n_sep{a}: a ("," a)*\nx: "x"\n', "templates", 1),
    ("declare", "start: A\n%declare A\n", "%declare", 2),
    ("other import", "start: X\n%import .mygrammar.X\n", "only %import common", 2),
    ("unknown common", "start: X\n%import common.NOPE\n", "no terminal 'NOPE'", 2),
    ("undefined rule", 'start: a b\na: "a"\n', "undefined rule 'b'", 1),
    ("undefined terminal", 'start: "a"\n\nx: B\n', "undefined terminal 'B'", 3),
    ("recursive terminal", 'start: A\nA: "a" A?\n', "recursive", 2),
    ("terminal uses rule", 'start: A\nA: a\na: "x"\n', "uses the rule", 2),
    ("missing start", 'begin: "x"\n', "no start rule", 0),
    ("unclosed group", 'start: ("a"\n', "expected ')'", 1),
    ("bad character", 'start: "a" $\n', "unexpected character", 1),
    ("bad range", 'start: "ab".."z"\n', "a range", 1),
]
