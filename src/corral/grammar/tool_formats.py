"""Tool-call formats by model family: the grammar of a reply, how to read calls back, which
format a chat template speaks.

In:  a format name (:data:`FORMATS`), the tool mode (``"required"`` / ``"auto"``), whether
     several calls may come in one reply, the call object's grammar (rule ``root``, from the
     schema converter over :func:`call_schema_for`) and, for ``auto`` with a response format,
     the answer's grammar.
Out: grammar text (:func:`reply_grammar`), the calls of a decoded reply (:func:`parse_reply`,
     also the lenient "usual parser" for unconstrained text), the calls of a reply still being
     written (:func:`scan_partial`, for streaming argument deltas), a chat template's format
     (:func:`detect_format`) and a call written back as text (:func:`calls_text`).

The formats (what the model writes; ``CALL`` is one call object)::

    json     CALL                         several: CALL\\nCALL...   ({"name", "arguments"})
    hermes   <tool_call>\\nCALL\\n</tool_call>   several: blocks joined by \\n; prose may come first
    llama3   CALL                         several: CALL; CALL...     ({"name", "parameters"})
    mistral  [TOOL_CALLS][CALL, CALL...]                           ({"name", "arguments"})

Under ``tool_choice="auto"`` the reply is either prose or calls: prose is any non-empty text in
which the format's call opener does not occur (for ``json``/``llama3``, text that does not start
with ``{`` or whitespace); with a response format, the schema's answer instead of prose.

Invariant: a reply the grammar accepts parses with :func:`parse_reply` into the calls it holds,
in order, each naming a declared tool (the call union names only those), with no error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.grammar.structural import ANY_TEXT, Marker, literal, marker, rename_rules, upto

__all__ = [
    "FORMATS",
    "ParsedCall",
    "PartialCall",
    "ToolFormat",
    "call_schema_for",
    "calls_text",
    "detect_format",
    "get_format",
    "history",
    "parse_reply",
    "reply_grammar",
    "scan_partial",
]


@dataclass(frozen=True)
class ToolFormat:
    """One family's call syntax."""

    name: str
    args_key: str  # the call object's arguments key
    opener: str  # what starts the calls in a reply ("" for formats whose calls start with "{")
    close: str  # written after each call (hermes' end tag)
    sep: str  # between two calls
    prose_first: bool  # whether prose may come before the calls
    options: dict[str, Any] = field(default_factory=dict)  # default schema options of the call JSON
    families: str = ""


# Tagged formats are written the way their models were trained: one line, json.dumps' spacing.
_ONE_LINE = {"whitespace": "flexible", "max_whitespace": 1}

FORMATS: dict[str, ToolFormat] = {
    "json": ToolFormat("json", "arguments", "", "", "\n", False, {}, "any model (corral's default)"),
    "hermes": ToolFormat(
        "hermes", "arguments", "<tool_call>", "\n</tool_call>", "\n", True, _ONE_LINE, "Hermes, Qwen 2.5-3"
    ),
    "llama3": ToolFormat("llama3", "parameters", "", "", "; ", False, _ONE_LINE, "Llama 3.1-3.3"),
    "mistral": ToolFormat("mistral", "arguments", "[TOOL_CALLS]", "", ", ", True, _ONE_LINE, "Mistral"),
}
"""The built-in formats by name."""


def get_format(name: str) -> ToolFormat:
    """The format called ``name`` (ValueError naming the choices otherwise)."""
    fmt = FORMATS.get(name) if isinstance(name, str) else None
    if fmt is None:
        raise ValueError(f"tool format must be one of {sorted(FORMATS)} or 'auto', got {name!r}")
    return fmt


def detect_format(template: str | None) -> str:
    """The format a chat template declares for its tools ("json" when it declares none)."""
    t = template or ""
    if "<tool_call>" in t:
        return "hermes"
    if "[TOOL_CALLS]" in t:
        return "mistral"
    if "<|python_tag|>" in t or ('"parameters"' in t and "ipython" in t):
        return "llama3"
    return "json"


# ---------------------------------------------------------------------- grammar


def reply_grammar(
    fmt: ToolFormat,
    call: str,
    *,
    mode: str,
    parallel: bool,
    prefix: str,
    opener: Marker | None = None,
    answer: tuple[str, str] | None = None,
) -> tuple[str, str]:
    """(grammar text, start rule) of a whole reply. ``call`` is the call object's grammar (rule
    ``root``), renamed here under ``prefix``; ``opener`` the format's opener resolved for the
    vocabulary (a special token too, when it is one); ``answer`` (text, start rule), already
    renamed, replaces prose under ``auto``."""
    p = prefix
    lines = [rename_rules(call, p + "c-")]
    c = p + "c-root"
    op = opener if opener is not None else Marker(fmt.opener)
    # A model may end its calls with the newline it writes between them before it stops (Qwen
    # writes "</tool_call>\n"): that newline is allowed before the end, or it would have to
    # start another call (greedy decoding then wrote duplicate calls up to max_tokens).
    end_nl = ' "\\n"?' if parallel and fmt.sep == "\n" else ""
    if fmt.name in ("json", "llama3"):
        lines.append(f"{p}calls ::= {c}" + (f" ({literal(fmt.sep)} {c})*{end_nl}" if parallel else ""))
        prose: str | None = "/(?s)[^{\\s].*/"
        rest = None
    elif fmt.name == "hermes":
        block_rest = f'"\\n" {c} {literal(fmt.close)}'
        lines.append(f"{p}more ::= {literal(fmt.sep)} {marker(op)} {block_rest}")
        rest = block_rest + (f" {p}more*{end_nl}" if parallel else "")
        lines.append(f"{p}calls ::= {marker(op)} {rest}")
        prose = None
    else:  # mistral
        items = c + (f' ("," " "? {c})*' if parallel else "")
        rest = f'" "? "[" {items} "]"'
        lines.append(f"{p}calls ::= {marker(op)} {rest}")
        prose = None
    if prose is None:  # non-empty text in which the opener does not occur
        prose = f"(/(?s).+/ - {ANY_TEXT} {literal(fmt.opener)} {ANY_TEXT})"
    alts = [f"{p}calls"]
    if mode == "auto":
        if answer is not None:
            lines.append(answer[0])
            alts.append(answer[1])
        else:
            lines.append(f"{p}prose ::= {prose}")
            alts.append(f"{p}prose")
            if fmt.prose_first and rest is not None:  # prose, then the calls
                lines.append(f"{p}lead ::= {upto([op], 0)}")
                alts.append(f"{p}lead {rest}")
    lines.append(f"{p}reply ::= {' | '.join(alts)}")
    return "\n".join(lines) + "\n", f"{p}reply"


# ---------------------------------------------------------------------- reading


@dataclass(frozen=True)
class ParsedCall:
    """A call as written: its name and arguments (not yet checked against the tools)."""

    name: Any
    arguments: Any


_DEC = json.JSONDecoder()
_HERMES = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)


def _objects(text: str, i: int, seps: str) -> tuple[list[Any], int, str | None]:
    """JSON values from ``text[i:]``, separated by whitespace and the characters ``seps``."""
    out: list[Any] = []
    n = len(text)
    while True:
        while i < n and (text[i].isspace() or (out and text[i] in seps)):
            i += 1
        if i >= n:
            return out, i, None
        try:
            v, i = _DEC.raw_decode(text, i)
        except ValueError as e:
            return out, i, f"call {len(out)} is not JSON: {e}"
        out.append(v)


def _call(obj: Any, fmt: ToolFormat) -> tuple[ParsedCall | None, str | None]:
    if not isinstance(obj, dict) or "name" not in obj:
        return None, "a call is not an object with a name"
    args = obj.get(fmt.args_key, obj.get("arguments", obj.get("parameters")))
    if isinstance(args, str):  # some models write the arguments as a JSON string
        try:
            args = json.loads(args)
        except ValueError:
            return None, "a call's arguments are not JSON"
    if args is None:
        args = {}
    return ParsedCall(obj["name"], args), None


def parse_reply(text: str, fmt: ToolFormat) -> tuple[str | None, list[ParsedCall], str | None]:
    """(content, calls, error) of a reply: the prose (None when empty), the calls in order, and
    what failed to parse (None when everything did). Lenient as the families' usual parsers
    are: it is also how unconstrained replies are read."""
    calls: list[ParsedCall] = []
    errors: list[str] = []

    def add(objs: list[Any]) -> None:
        for o in objs:
            c, err = _call(o, fmt)
            if c is not None:
                calls.append(c)
            elif err:
                errors.append(err)

    if fmt.name == "hermes":
        at = text.find("<tool_call>")
        if at < 0:
            return (text.strip() or None), [], None
        content = text[:at].strip() or None
        for m in _HERMES.finditer(text, at):
            try:
                add([json.loads(m.group(1))])
            except ValueError as e:
                errors.append(f"a <tool_call> block is not JSON: {e}")
        if text.count("<tool_call>") > text.count("</tool_call>"):
            errors.append("a <tool_call> block is not closed")
        return content, calls, ("; ".join(errors) or None)
    if fmt.name == "mistral":
        at = text.find("[TOOL_CALLS]")
        if at < 0:
            return (text.strip() or None), [], None
        content = text[:at].strip() or None
        objs, _, err = _objects(text, at + len("[TOOL_CALLS]"), "")
        for o in objs:
            add(o if isinstance(o, list) else [o])
        if err:
            errors.append(err)
        return content, calls, ("; ".join(errors) or None)
    body = text.strip()
    if fmt.name == "llama3" and body.startswith("<|python_tag|>"):
        body = body[len("<|python_tag|>") :].lstrip()
    if not body.startswith("{"):
        return (body or None), [], None
    objs, _, err = _objects(body, 0, ";")
    add(objs)
    if err:
        errors.append(err)
    return None, calls, ("; ".join(errors) or None)


def calls_text(calls: Sequence[tuple[str, Any]], fmt: ToolFormat) -> str:
    """(name, arguments) pairs written in ``fmt`` (an assistant turn for a template that has no
    tool support of its own)."""
    if fmt.name == "json":
        objs = [json.dumps({"name": n, "arguments": a}, indent=2, ensure_ascii=False) for n, a in calls]
        return "\n".join(objs)
    objs = [json.dumps({"name": n, fmt.args_key: a}, ensure_ascii=False) for n, a in calls]
    if fmt.name == "hermes":
        return "\n".join(f"<tool_call>\n{o}\n</tool_call>" for o in objs)
    if fmt.name == "mistral":
        return "[TOOL_CALLS][" + ", ".join(objs) + "]"
    return "; ".join(objs)


def history(messages: Sequence[Any], fmt: ToolFormat, structured: bool) -> list[dict[str, Any]]:
    """Chat messages with past assistant ``tool_calls`` (OpenAI shape, ``arguments`` a JSON
    string or an object) made renderable: kept as fields with object arguments for a template
    that renders tools (``structured``), else written into the content in ``fmt``. Raises
    ValueError naming a call whose arguments are not JSON."""
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        m = dict(m)
        raw = m.get("tool_calls")
        if m.get("role") == "assistant" and raw:
            pairs = []
            for k, c in enumerate(raw):
                fn = c.get("function", c) if isinstance(c, dict) else {}
                args = fn.get("arguments") or {}
                if isinstance(args, str):
                    try:
                        args = json.loads(args)
                    except ValueError:
                        raise ValueError(
                            f"messages[{i}].tool_calls[{k}]: the arguments are not JSON"
                        ) from None
                name = fn.get("name")
                if not isinstance(name, str):
                    raise ValueError(f"messages[{i}].tool_calls[{k}]: the function name is missing")
                pairs.append((name, args))
            if structured:
                m["tool_calls"] = [
                    {
                        "type": "function",
                        "id": c.get("id", f"call_{k}"),
                        "function": {"name": n, "arguments": a},
                    }
                    for k, (c, (n, a)) in enumerate(zip(raw, pairs, strict=True))
                ]
                m["content"] = m.get("content") or ""
            else:
                m.pop("tool_calls")
                written = calls_text(pairs, fmt)
                m["content"] = "\n".join([m["content"], written]) if m.get("content") else written
        out.append(m)
    return out


# ---------------------------------------------------------------------- streaming


@dataclass
class PartialCall:
    """A call being written: its name once complete, the argument text so far (raw JSON, only
    ever growing) and whether the arguments are complete."""

    name: str | None
    args: str
    done: bool


_HEAD = re.compile(r'\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"(?:arguments|parameters)"\s*:\s*')


def _value_end(text: str, i: int) -> int | None:
    """End of the JSON value starting at ``text[i]`` (an object or array), None if unfinished."""
    depth, in_str, esc = 0, False, False
    for j in range(i, len(text)):
        ch = text[j]
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return j + 1
    return None


def scan_partial(text: str, fmt: ToolFormat) -> tuple[str | None, int, list[PartialCall]]:
    """A reply being written, read as far as it is decided, for a *constrained* reply (whose
    calls put ``name`` first): (state, content length, calls). ``state`` is "calls" once the
    calls have begun, "text" when the reply is prose, None while undecided; the first ``content
    length`` characters are prose that can no longer turn into the opener."""
    if fmt.opener:
        at = text.find(fmt.opener)
        if at < 0:
            keep = next(
                (
                    k
                    for k in range(min(len(fmt.opener) - 1, len(text)), 0, -1)
                    if text.endswith(fmt.opener[:k])
                ),
                0,
            )
            return ("text" if text[: len(text) - keep].strip() else None), len(text) - keep, []
        start = at + len(fmt.opener)
        content_len = at
    else:
        body = text.lstrip()
        if not body:
            return None, 0, []
        if not body.startswith("{"):
            return "text", len(text), []
        start, content_len = len(text) - len(body), 0
    calls: list[PartialCall] = []
    i = start
    while True:
        j = text.find("{", i)
        if j < 0:
            break
        m = _HEAD.match(text, j)
        if m is None:  # the call's head is still being written
            break
        name = json.loads('"' + m.group(1) + '"')
        a = m.end()
        if a >= len(text):
            calls.append(PartialCall(name, "", False))
            break
        end = _value_end(text, a)
        calls.append(PartialCall(name, text[a : end if end is not None else len(text)], end is not None))
        if end is None:
            break
        i = end + 1  # past the call object's own closing brace
    return "calls", content_len, calls


def call_schema_for(tools: Sequence[Any], fmt: ToolFormat) -> dict[str, Any]:
    """The JSON Schema of one call object in ``fmt`` (the arguments under its own key)."""
    from corral.grammar.tools import call_schema

    return call_schema(tools, fmt.args_key)
