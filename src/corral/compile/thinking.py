"""Think-then-answer and structural tags as constraints: arguments checked, grammar composed,
outputs read back.

In:  a request's ``thinking`` (``N`` tokens, True, or ``{"budget_tokens", "open", "close",
     "optional"}``, also Anthropic's ``{"type": "enabled", "budget_tokens": N}``) and
     ``structural_tags`` (a list of ``{"begin", "end", "schema" | "regex" | "grammar" |
     "content"}`` tags with optional ``triggers``; or XGrammar's / vLLM's request shapes
     ``{"type": "structural_tag", "format": {"type": "triggered_tags", "triggers", "tags",
     "at_least_one", "stop_after_first"}}`` and ``{"type": "structural_tag", "structures",
     "triggers"}``).
Out: plain data for :class:`~corral.compile.spec.ConstraintSpec` (:func:`thinking_of`,
     :func:`structural_of`); at compile time one grammar for the whole output
     (:func:`compile_composite`: the answer's or each segment's own grammar renamed into a
     namespace and embedded, :mod:`corral.grammar.structural`), and the readers that split an
     output into reasoning and answer (:func:`split_reasoning`) or into tagged segments
     (:func:`read_segments`).

Marker defaults are decided here once, from the vocabulary: a model whose vocabulary holds
``<think>`` and ``</think>`` as tokens thinks in those; any other gets a plain
``Reasoning:`` / ``Answer:`` section pair. A marker that is a special token is matched as that
token as well as by its text.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from corral.grammar.structural import (
    ANY_TEXT,
    Marker,
    StructuralTag,
    check_triggers,
    literal,
    regex_terminal,
    rename_rules,
    structural_grammar,
    think_grammar,
)
from corral.schema import schema_of
from corral.tokenizer import Tokenizer

__all__ = [
    "MODEL_THINK",
    "PLAIN_THINK",
    "ReasoningSplitter",
    "Segment",
    "ThinkFormat",
    "read_segments",
    "split_reasoning",
    "structural_of",
    "think_format",
    "thinking_of",
]

MODEL_THINK = ("<think>", "</think>")
"""The markers of models that think in tags (chosen when the vocabulary has both as tokens)."""
PLAIN_THINK = ("Reasoning: ", "\nAnswer: ")
"""The section pair for models without a think format."""

_THINK_KEYS = {"budget_tokens", "open", "close", "optional", "type"}
_JSON_ANSWERS = ("json_schema", "json", "json_object", "tools")


@dataclass(frozen=True)
class ThinkFormat:
    """A think block as compiled: markers resolved for the vocabulary, the budget in tokens
    (None: no budget) and whether the block may be skipped."""

    open: Marker
    close: Marker
    budget: int | None = None
    optional: bool = False


# ---------------------------------------------------------------------- arguments


def thinking_of(value: Any) -> dict[str, Any] | None:
    """The normalised think-block arguments (None: no think block). Raises ValueError/TypeError
    naming the bad field."""
    if value is None or value is False:
        return None
    out: dict[str, Any] = {"budget_tokens": None, "open": None, "close": None, "optional": False}
    if value is True:
        return out
    if isinstance(value, int) and not isinstance(value, bool):
        out["budget_tokens"] = value
    elif isinstance(value, Mapping):
        unknown = sorted(set(value) - _THINK_KEYS)
        if unknown:
            raise ValueError(f"thinking: unknown field(s) {unknown}; expected {sorted(_THINK_KEYS)}")
        kind = value.get("type", "enabled")
        if kind == "disabled":
            return None
        if kind != "enabled":
            raise ValueError(f'thinking.type must be "enabled" or "disabled", got {kind!r}')
        for k in ("budget_tokens", "open", "close", "optional"):
            if value.get(k) is not None:
                out[k] = value[k]
    else:
        raise TypeError(
            f"thinking must be a token budget (int), true or an object, got {type(value).__name__}"
        )
    budget = out["budget_tokens"]
    if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget < 1):
        raise ValueError(f"thinking.budget_tokens must be a positive integer, got {budget!r}")
    for k in ("open", "close"):
        if out[k] is not None and (not isinstance(out[k], str) or not out[k]):
            raise ValueError(f"thinking.{k} must be a non-empty string, got {out[k]!r}")
    if (out["open"] is None) != (out["close"] is None):
        raise ValueError("thinking: give both open and close markers, or neither (the model's own)")
    if not isinstance(out["optional"], bool):
        raise TypeError(f"thinking.optional must be true or false, got {out['optional']!r}")
    return out


def structural_of(value: Any) -> dict[str, Any]:
    """The normalised structural-tag arguments: ``{"triggers", "tags": [{"begin", "end",
    "content"}], "at_least_one", "stop_after_first"}``. Raises ValueError/TypeError."""
    at_least_one = stop_after_first = False
    if isinstance(value, Mapping):
        fmt = value.get("format", value)
        if not isinstance(fmt, Mapping):
            raise TypeError("structural_tag.format must be an object")
        if "tags" in fmt:  # XGrammar's triggered_tags
            if fmt.get("type", "triggered_tags") != "triggered_tags":
                raise ValueError(
                    f"structural_tag.format.type {fmt.get('type')!r} is not supported (triggered_tags)"
                )
            tags, triggers = fmt.get("tags"), fmt.get("triggers")
            at_least_one = fmt.get("at_least_one", False)
            stop_after_first = fmt.get("stop_after_first", False)
        elif "structures" in value:  # vLLM's structural_tag response format
            tags, triggers = value.get("structures"), value.get("triggers")
        else:
            raise ValueError("structural_tag needs tags (a list, format.tags or structures)")
    else:
        tags, triggers = value, None
    if isinstance(tags, (str, bytes)) or not isinstance(tags, Sequence) or not tags:
        raise ValueError("structural tags must be a non-empty list of {begin, end, content} objects")
    for flag, v in (("at_least_one", at_least_one), ("stop_after_first", stop_after_first)):
        if not isinstance(v, bool):
            raise TypeError(f"structural_tag {flag} must be true or false, got {v!r}")
    norm = [_tag(t, i) for i, t in enumerate(tags)]
    begins = [t["begin"] for t in norm]
    for i, a in enumerate(begins):
        for j, b in enumerate(begins):
            if i != j and b.startswith(a):
                raise ValueError(
                    f"structural tag {j}'s begin {b!r} starts with tag {i}'s begin {a!r}: ambiguous"
                )
    if triggers is None:
        triggers = list(dict.fromkeys(begins))
    if isinstance(triggers, (str, bytes)) or not isinstance(triggers, Sequence) or not triggers:
        raise ValueError("triggers must be a non-empty list of strings")
    triggers = list(triggers)
    check_triggers(triggers)
    for i, b in enumerate(begins):
        n = sum(b.startswith(t) for t in triggers)
        if n != 1:
            raise ValueError(
                f"structural tag {i}'s begin {b!r} starts with {n} of the triggers {triggers}: "
                "exactly one is needed"
            )
    return {
        "triggers": triggers,
        "tags": norm,
        "at_least_one": at_least_one,
        "stop_after_first": stop_after_first,
    }


def _tag(t: Any, i: int) -> dict[str, Any]:
    where = f"structural tag {i}"
    if not isinstance(t, Mapping):
        raise TypeError(f"{where} must be an object with begin, end and a content")
    begin, end = t.get("begin"), t.get("end", "")
    if not isinstance(begin, str) or not begin:
        raise ValueError(f"{where}: begin must be a non-empty string")
    if not isinstance(end, str):
        raise ValueError(f"{where}: end must be a string")
    given = [k for k in ("schema", "json_schema", "regex", "grammar", "content") if t.get(k) is not None]
    if len(given) > 1:
        raise ValueError(f"{where}: give one content, not {' and '.join(given)}")
    unknown = sorted(
        set(t) - {"begin", "end", "schema", "json_schema", "regex", "grammar", "content", "type"}
    )
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {unknown}")
    if not given:
        content: dict[str, Any] = {"type": "any_text"}
    elif given[0] == "content":
        content = _content(t["content"], where)
    elif given[0] in ("schema", "json_schema"):
        content = _content({"type": "json_schema", "json_schema": t[given[0]]}, where)
    elif given[0] == "regex":
        content = _content({"type": "regex", "pattern": t["regex"]}, where)
    else:
        content = _content({"type": "grammar", "grammar": t["grammar"]}, where)
    return {"begin": begin, "end": end, "content": content}


def _content(c: Any, where: str) -> dict[str, Any]:
    if not isinstance(c, Mapping):
        raise TypeError(f"{where}: content must be an object with a type")
    kind = c.get("type")
    if kind == "json_schema":
        raw, _model = schema_of(c.get("json_schema"))
        if not isinstance(raw, (dict, bool)):
            raise ValueError(f"{where}: json_schema must be a JSON Schema object")
        return {"type": "json_schema", "json_schema": raw}
    if kind in ("regex", "grammar", "const_string"):
        key = {"regex": "pattern", "grammar": "grammar", "const_string": "value"}[kind]
        if not isinstance(c.get(key), str):
            raise ValueError(f"{where}: a {kind} content needs {key} (a string)")
        return {"type": kind, key: c[key]}
    if kind == "any_text":
        return {"type": "any_text"}
    raise ValueError(
        f"{where}: content type {kind!r} is not one of json_schema, regex, grammar, const_string, any_text"
    )


# ---------------------------------------------------------------------- compile


def _marker(tokenizer: Tokenizer, text: str) -> Marker:
    special = tokenizer.special_ids
    return Marker(text, tuple(i for i in tokenizer.ids_of(text) if i in special))


def think_format(thinking: Mapping[str, Any], tokenizer: Tokenizer) -> ThinkFormat:
    """The think block of a spec, markers resolved for ``tokenizer``."""
    open_, close = thinking.get("open"), thinking.get("close")
    if open_ is None or close is None:
        has = all(tokenizer.ids_of(m) for m in MODEL_THINK)
        open_, close = MODEL_THINK if has else PLAIN_THINK
    return ThinkFormat(
        _marker(tokenizer, open_),
        _marker(tokenizer, close),
        thinking.get("budget_tokens"),
        bool(thinking.get("optional")),
    )


def body_grammar(spec: Any, convert: Any, prefix: str, tokenizer: Tokenizer | None = None) -> tuple[str, str]:
    """(grammar text, start rule) of a spec's own constraint (no think block), every rule
    renamed under ``prefix``. ``convert(schema, options) -> text`` runs the schema converter;
    ``tokenizer`` lets a tool format's opener be matched as its special token too (as it is
    without a think block)."""
    kind = spec.kind
    one_call = kind == "tools" and spec.payload is None and spec.tool_mode == "required"
    if kind in ("json_schema", "json", "json_object") or one_call:
        return rename_rules(convert(spec.schema, spec.options), prefix), prefix + "root"
    if kind == "tools":
        from corral.compile.tool_calls import tools_grammar

        return tools_grammar(spec, tokenizer, convert, prefix)
    if kind == "regex":
        return f"{prefix}root ::= {regex_terminal(spec.payload)}\n", prefix + "root"
    if kind == "grammar":
        return rename_rules(spec.payload, prefix), prefix + "root"
    if kind == "choices":
        return f"{prefix}root ::= {' | '.join(literal(c) for c in spec.payload)}\n", prefix + "root"
    if kind == "text":
        return f"{prefix}root ::= {ANY_TEXT}\n", prefix + "root"
    raise ValueError(f"a {kind} constraint cannot be embedded here")


def content_spec(content: Mapping[str, Any], options: Mapping[str, Any]) -> Any:
    """The :class:`ConstraintSpec` of a tag's content (None: any text or a constant)."""
    from corral.compile.spec import ConstraintSpec

    kind = content["type"]
    if kind == "json_schema":
        return ConstraintSpec.json_schema(content["json_schema"], options)
    if kind == "regex":
        return ConstraintSpec.regex(content["pattern"])
    if kind == "grammar":
        return ConstraintSpec.grammar(content["grammar"])
    return None


def structural_text(
    payload: Mapping[str, Any],
    options: Mapping[str, Any],
    convert: Any,
    *,
    prefix: str,
    markers: Sequence[Marker] | None = None,
) -> tuple[str, str]:
    """(grammar text, start rule) of a structural-tag payload."""
    tags = []
    for i, t in enumerate(payload["tags"]):
        c = t["content"]
        sub = content_spec(c, options)
        if sub is not None:
            text, start = body_grammar(sub, convert, f"c{i}-")
        elif c["type"] == "const_string":
            text, start = f"c{i}-root ::= {literal(c['value'])}\n", f"c{i}-root"
        else:  # any text that does not run into the end tag
            end = Marker(t["end"]) if t["end"] else None
            body = ANY_TEXT if end is None else f"({ANY_TEXT} - {ANY_TEXT} {literal(end.text)} {ANY_TEXT})"
            text, start = f"c{i}-root ::= {body}\n", f"c{i}-root"
        tags.append(StructuralTag(t["begin"], t["end"], text, start))
    trig = list(markers) if markers is not None else [Marker(x) for x in payload["triggers"]]
    name = prefix + "st"
    text = structural_grammar(
        tags,
        trig,
        at_least_one=payload["at_least_one"],
        stop_after_first=payload["stop_after_first"],
        name=name,
    )
    return text, name


def composite_text(spec: Any, tokenizer: Tokenizer, convert: Any) -> tuple[str, str, ThinkFormat | None]:
    """(grammar text, start rule, think format) for a spec with a think block or a
    structural-tag kind: one grammar for the whole output."""
    base = spec.without_thinking()
    if base.kind == "structural_tag":
        markers = [_marker(tokenizer, t) for t in base.payload["triggers"]]
        text, start = structural_text(
            base.payload, base.options, convert, prefix="corral-a-", markers=markers
        )
    else:
        text, start = body_grammar(base, convert, "corral-a-", tokenizer)
    if spec.thinking is None:
        return text, start, None
    fmt = think_format(spec.thinking, tokenizer)
    if base.kind in _JSON_ANSWERS:  # the model may put a blank line between the block and the JSON
        text += f"corral-a-sep ::= /[ \\n]{{0,2}}/ {start}\n"
        start = "corral-a-sep"
    return think_grammar(fmt.open, fmt.close, text, start, optional=fmt.optional), "corral-think", fmt


# ---------------------------------------------------------------------- reading


def split_reasoning(text: str, fmt: ThinkFormat) -> tuple[str | None, str]:
    """(reasoning, answer) of an output: the text between the markers (None when an optional
    block was skipped) and what follows the close marker."""
    if not text.startswith(fmt.open.text):
        return None, text
    rest = text[len(fmt.open.text) :]
    at = rest.find(fmt.close.text)
    if at < 0:  # cut off inside the block (only an unconstrained reader sees this)
        return rest, ""
    return rest[:at], rest[at + len(fmt.close.text) :]


@dataclass(frozen=True)
class Segment:
    """One tagged segment of a structural-tag output: which tag, its content text, the content
    read as its constraint reads it (a JSON value for schemas, else the text) and the
    validation error, if any; ``start``/``stop`` are the content's offsets in the output."""

    tag: int
    begin: str
    end: str
    content: str
    value: Any
    error: str | None
    start: int
    stop: int


def read_segments(text: str, payload: Mapping[str, Any], readers: Sequence[Any]) -> list[Segment]:
    """The tagged segments of a structural-tag output, in order (``readers[i]`` reads tag
    ``i``'s content: a compiled :class:`~corral.compile.constraint.Constraint`, or None)."""
    triggers: list[str] = list(payload["triggers"])
    tags = payload["tags"]
    out: list[Segment] = []
    pos = 0
    while True:
        hits = [(at, t) for t in triggers if (at := text.find(t, pos)) >= 0]
        if not hits:
            return out
        at, trig = min(hits)
        which = next((i for i, t in enumerate(tags) if text.startswith(t["begin"], at)), None)
        if which is None:
            return out  # a cut-off output (only an unconstrained reader sees this)
        tag = tags[which]
        start = at + len(tag["begin"])
        stop = _content_end(text, start, tag, readers[which])
        if stop is None:
            return out
        content = text[start:stop]
        value, error = _read_content(content, tag, readers[which])
        out.append(Segment(which, tag["begin"], tag["end"], content, value, error, start, stop))
        pos = stop + len(tag["end"])


def _content_end(text: str, start: int, tag: Mapping[str, Any], reader: Any) -> int | None:
    end = tag["end"]
    if tag["content"]["type"] == "json_schema":
        dec = json.JSONDecoder()
        i = start
        while i < len(text) and text[i] in " \t\n\r":
            i += 1
        try:
            _, j = dec.raw_decode(text, i)
        except ValueError:
            return None
        while j < len(text) and text[j] in " \t\n\r" and not text.startswith(end, j):
            j += 1
        return j if text.startswith(end, j) else None
    at = text.find(end, start) if end else len(text)
    while at >= 0:
        if reader is None or _accepts(reader, text[start:at]):
            return at
        at = text.find(end, at + 1)
    return None


def _accepts(reader: Any, content: str) -> bool:
    m = reader.grammar.matcher()
    return bool(m.accept_string(content) and m.is_accepting())


def _read_content(content: str, tag: Mapping[str, Any], reader: Any) -> tuple[Any, str | None]:
    if reader is None:
        return content, None
    value, error = reader.read(content.strip() if tag["content"]["type"] == "json_schema" else content)
    return value, error


def with_format(fmt: ThinkFormat, budget: int | None) -> ThinkFormat:
    """``fmt`` with another budget (a host's per-request override)."""
    return dataclasses.replace(fmt, budget=budget)


class ReasoningSplitter:
    """Splits a stream of text deltas into reasoning and answer deltas, as they arrive:
    ``feed(delta)`` returns ``[("reasoning" | "content", text), ...]``. Text that may still turn
    out to be (part of) a marker is held back until it is decided; ``finish()`` returns what is
    left. The concatenated pieces equal :func:`split_reasoning`'s parts (the markers removed)."""

    def __init__(self, fmt: ThinkFormat, strip_answer: bool = False) -> None:
        self.fmt = fmt
        self.strip = strip_answer
        self.phase = "open"
        self.buf = ""

    def feed(self, delta: str) -> list[tuple[str, str]]:
        self.buf += delta
        out: list[tuple[str, str]] = []
        if self.phase == "open":
            o = self.fmt.open.text
            if self.buf.startswith(o):
                self.buf = self.buf[len(o) :]
                self.phase = "think"
            elif o.startswith(self.buf):
                return out
            else:
                self.phase = "answer"  # an optional block left out
        if self.phase == "think":
            c = self.fmt.close.text
            at = self.buf.find(c)
            if at >= 0:
                if at:
                    out.append(("reasoning", self.buf[:at]))
                self.buf = self.buf[at + len(c) :]
                self.phase = "answer"
            else:
                keep = next(
                    (k for k in range(min(len(c) - 1, len(self.buf)), 0, -1) if self.buf.endswith(c[:k])), 0
                )
                if len(self.buf) > keep:
                    out.append(("reasoning", self.buf[: len(self.buf) - keep]))
                    self.buf = self.buf[len(self.buf) - keep :]
                return out
        if self.phase == "answer":
            if self.strip:
                self.buf = self.buf.lstrip(" \n")
                if not self.buf:
                    return out
                self.strip = False
            if self.buf:
                out.append(("content", self.buf))
            self.buf = ""
        return out

    def finish(self) -> list[tuple[str, str]]:
        if not self.buf:
            return []
        kind = "reasoning" if self.phase == "think" else "content"
        text, self.buf = self.buf, ""
        return [(kind, text)]
