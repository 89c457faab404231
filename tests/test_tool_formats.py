"""Tool-call formats by family (corral.grammar.tool_formats, corral.compile.tool_calls): each
format's grammar accepts exactly its calls (declared tools, valid arguments, one call unless
parallel), the mask never allows an unknown tool name on real vocabularies (and never forbids a
declared one), random walks under the mask always read back as valid calls, replies are parsed
and streamed back as OpenAI calls, and formats are detected from chat templates."""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest

import corral
from corral.compile import ConstraintSpec, compile_constraint, spec_from_args
from corral.engine import allocate_bitmask, allowed_tokens
from corral.grammar.tool_formats import FORMATS, calls_text, detect_format, get_format, parse_reply
from corral.grammar.tools import tools_from
from corral.server.tool_stream import ToolDeltas, tool_message

pytestmark = pytest.mark.real_tokenizer

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 8}, "unit": {"enum": ["c", "f"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
ADD = {
    "type": "object",
    "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
TIME = {"type": "object", "properties": {}, "additionalProperties": False}
TOOLS = tools_from(
    [
        {"name": "get_weather", "parameters": WEATHER},
        {"name": "add", "parameters": ADD},
        {"name": "get_time", "parameters": TIME},
    ]
)
PARAMS = {t.name: t.parameters for t in TOOLS}
NAMES = [t.name for t in TOOLS]
FMTS = sorted(FORMATS)
ONE = [("add", {"a": 1, "b": 2})]
TWO = [("add", {"a": 1, "b": 2}), ("get_weather", {"city": "Oslo", "unit": "c"})]


@pytest.fixture(scope="module")
def qwen() -> corral.Tokenizer:
    try:
        return corral.load_tokenizer("qwen2.5-coder-0.5b")
    except corral.errors.ModelNotFoundError as e:  # pragma: no cover - CI installs it
        pytest.skip(str(e))


def _compile(
    tok: corral.Tokenizer, fmt: str, mode: str = "required", parallel: bool = False, **kw: Any
) -> Any:
    spec = ConstraintSpec.tool_calls(TOOLS, mode, tool_format=fmt, parallel=parallel, **kw)
    return compile_constraint(spec, tok)


def _accepts(c: Any, text: str) -> bool:
    m = c.grammar.matcher()
    return bool(m.accept_string(text) and m.is_accepting())


@pytest.mark.parametrize("fmt", FMTS)
def test_each_format_accepts_its_calls_and_nothing_else(smollm2: corral.Tokenizer, fmt: str) -> None:
    f = get_format(fmt)
    one, two = calls_text(ONE, f), calls_text(TWO, f)
    single = _compile(smollm2, fmt)
    multi = _compile(smollm2, fmt, parallel=True)
    auto = _compile(smollm2, fmt, "auto", parallel=True)
    assert _accepts(single, one) and not _accepts(single, two)  # parallel off: one call at most
    assert _accepts(multi, one) and _accepts(multi, two)
    for bad in (  # an unknown tool, arguments that violate the tool's parameters
        calls_text([("sub", {"a": 1, "b": 2})], f),
        calls_text([("add", {"a": 100, "b": 2})], f),
        calls_text([("add", {"a": 1})], f),
        calls_text([("get_weather", {"city": "Oslo", "unit": "k"})], f),
    ):
        assert not _accepts(multi, bad) and not _accepts(auto, bad), bad
    assert not _accepts(multi, "Hello.") and _accepts(auto, "Hello, no call needed.")
    assert not _accepts(single, "")
    for c, text, names in ((single, one, ["add"]), (multi, two, ["add", "get_weather"]), (auto, two, None)):
        reply = c.read_tools(text)
        assert reply.error is None and [x.name for x in reply.calls] == (names or ["add", "get_weather"])
        assert reply.calls[0].arguments == {"a": 1, "b": 2}
    prose = auto.read_tools("Hello, no call needed.")
    assert prose.calls == () and prose.content == "Hello, no call needed." and prose.error is None


@pytest.mark.parametrize("fmt", ["hermes", "json"])
def test_parallel_calls_may_end_with_the_separator_newline(smollm2: corral.Tokenizer, fmt: str) -> None:
    """Formats whose calls are separated by a newline: the newline a model writes after its last
    call may end the reply (Qwen writes "</tool_call>\\n" and then stops); without that, greedy
    decoding had to start another call and wrote duplicates up to max_tokens."""
    f = get_format(fmt)
    one = calls_text(ONE, f)
    multi = _compile(smollm2, fmt, parallel=True)
    assert _accepts(multi, one + "\n") and _accepts(multi, calls_text(TWO, f) + "\n")
    assert not _accepts(multi, one + "\n\n")
    assert not _accepts(_compile(smollm2, fmt), one + "\n")  # one call only: it ends at the call
    reply = multi.read_tools(one + "\n")
    assert reply.error is None and [c.name for c in reply.calls] == ["add"]


def test_prose_then_calls_only_where_the_family_writes_it(smollm2: corral.Tokenizer) -> None:
    """hermes/mistral: prose, then calls. json/llama3: a reply that starts as prose is prose
    throughout (its calls are text, not calls)."""
    for fmt in FMTS:
        auto = _compile(smollm2, fmt, "auto", parallel=True)
        text = "Let me check.\n" + calls_text(TWO, get_format(fmt))
        assert _accepts(auto, text), fmt
        reply = auto.read_tools(text)
        assert reply.error is None
        if get_format(fmt).prose_first:
            assert reply.content == "Let me check." and len(reply.calls) == 2
        else:
            assert reply.content == text and reply.calls == ()


def test_auto_with_an_answer_schema_is_a_call_or_a_valid_answer(smollm2: corral.Tokenizer) -> None:
    answer = {
        "type": "object",
        "properties": {"reply": {"type": "string", "maxLength": 20}},
        "required": ["reply"],
        "additionalProperties": False,
    }
    for fmt in FMTS:
        c = _compile(smollm2, fmt, "auto", answer=answer)
        f = get_format(fmt)
        good = json.dumps({"reply": "hi"}, indent=2) if fmt == "json" else '{"reply": "hi"}'
        assert _accepts(c, good) and _accepts(c, calls_text(ONE, f)), fmt
        assert not _accepts(c, "Just prose.") and not _accepts(c, '{"reply": 3}'), fmt
        reply = c.read_tools(good)
        assert reply.calls == () and reply.answer == {"reply": "hi"} and reply.error is None
        assert c.read_tools(calls_text(ONE, f)).calls[0].name == "add"
    spec = spec_from_args({"tools": list(TOOLS), "json_schema": answer, "tool_format": "hermes"})
    assert spec is not None and spec.answer_schema == answer and spec.tool_format == "hermes"
    with pytest.raises(ValueError, match="auto"):
        spec_from_args({"tools": list(TOOLS), "json_schema": answer, "tool_choice": "required"})


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("vocab", ["smollm2", "qwen"])
def test_the_mask_allows_exactly_the_declared_tool_names(
    fmt: str, vocab: str, request: pytest.FixtureRequest
) -> None:
    """Right after `"name": "`: a token without a quote is allowed iff it is a prefix of a
    declared name; a token with a quote only if what precedes the quote is a whole declared
    name; special tokens and EOS never."""
    tok: corral.Tokenizer = request.getfixturevalue(vocab)
    c = _compile(tok, fmt, parallel=True)
    head = calls_text([("NAME", {})], get_format(fmt)).split("NAME")[0]
    m = c.grammar.matcher()
    assert m.accept_string(head)
    mask = allocate_bitmask(1, tok)
    m.fill_next_token_bitmask(mask, 0)
    allowed = set(allowed_tokens(mask[0], tok))
    names = [n.encode() for n in NAMES]
    checked = 0
    vocab = tok.token_bytes
    for i in range(len(vocab)):
        x = vocab[i]
        if i in tok.special_ids or i in tok.eos_ids:
            assert i not in allowed, i
            continue
        if not x:
            continue
        if b'"' not in x:
            assert (i in allowed) == any(n.startswith(x) for n in names), (i, x)
            checked += 1
        elif i in allowed:
            assert x[: x.index(b'"')] in names, (i, x)
    assert checked > 1000 and {tok.ids_of("add")[0], tok.ids_of("get")[0]} <= allowed


@pytest.mark.parametrize("fmt", FMTS)
def test_random_walks_under_the_mask_read_back_as_valid_calls(qwen: corral.Tokenizer, fmt: str) -> None:
    """Uniformly random allowed tokens on the Qwen vocabulary (151,936 tokens, `<tool_call>` a
    token of its own): every finished walk is one or more calls naming declared tools with
    arguments valid for them."""
    c = _compile(qwen, fmt, parallel=True)
    rng = random.Random(7)
    mask = allocate_bitmask(1, qwen)
    for _walk in range(3):
        m = c.grammar.matcher()
        ids: list[int] = []
        for _ in range(120):
            if m.is_accepting() and rng.random() < 0.3:
                break
            mask[:] = 0
            m.fill_next_token_bitmask(mask, 0)
            options = [t for t in allowed_tokens(mask[0], qwen) if t not in qwen.eos_ids]
            if not options:
                break
            t = rng.choice(options)
            assert m.accept_token(t)
            ids.append(t)
        text = qwen.decode(ids) + m.shortest_completion()
        s = text.decode("utf-8", errors="strict")
        assert _accepts(c, s), s
        reply = c.read_tools(s)
        assert reply.error is None and reply.calls, s
        for call in reply.calls:
            jsonschema.validate(call.arguments, PARAMS[call.name])


def test_the_usual_parsers_read_free_replies() -> None:
    h = get_format("hermes")
    content, calls, err = parse_reply(
        'Sure.\n<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>', h
    )
    assert content == "Sure." and calls[0].name == "add" and calls[0].arguments == {"a": 1} and err is None
    _, calls, err = parse_reply("<tool_call>\n{'name': 'add'}\n</tool_call>", h)
    assert calls == [] and err is not None and "not JSON" in err
    _, calls, err = parse_reply('<tool_call>\n{"name": "add", "arguments": {}}', h)
    assert err is not None and "not closed" in err
    content, calls, err = parse_reply(
        '<|python_tag|>{"name": "add", "parameters": {"a": 1}}; {"name": "x"}', get_format("llama3")
    )
    assert [c.name for c in calls] == ["add", "x"] and calls[0].arguments == {"a": 1} and err is None
    _, calls, err = parse_reply(
        '[TOOL_CALLS] [{"name": "add", "arguments": "{\\"a\\": 2}"}]', get_format("mistral")
    )
    assert calls[0].arguments == {"a": 2} and err is None
    content, calls, err = parse_reply("The weather is fine.", get_format("json"))
    assert content == "The weather is fine." and calls == [] and err is None
    _, calls, err = parse_reply('{"name": "add", "arguments": {"a": 1}', get_format("json"))
    assert calls == [] and err is not None


@pytest.mark.parametrize("fmt", FMTS)
def test_streamed_deltas_rebuild_the_calls(smollm2: corral.Tokenizer, fmt: str) -> None:
    """Fed a character at a time, the deltas give each call's id and name once, then argument
    pieces whose concatenation is JSON equal to the non-streamed arguments."""
    f = get_format(fmt)
    c = _compile(smollm2, fmt, "auto", parallel=True)
    text = ("Checking.\n" if f.prose_first else "") + calls_text(TWO, f)
    assert _accepts(c, text)
    deltas = ToolDeltas(c, "call_x")
    out: list[dict[str, Any]] = []
    for ch in text:
        out += deltas.feed(ch)
    rest, called = deltas.finish()
    out += rest
    assert called
    content = "".join(d.get("content", "") for d in out)
    heads = [tc for d in out for tc in d.get("tool_calls", []) if "id" in tc]
    args: dict[int, str] = {}
    for d in out:
        for tc in d.get("tool_calls", []):
            args[tc["index"]] = args.get(tc["index"], "") + tc["function"]["arguments"]
    fields, err = tool_message(c, text, "call_x")
    assert err is None
    assert content == (fields["content"] or "")
    assert [h["function"]["name"] for h in heads] == ["add", "get_weather"]
    assert [h["id"] for h in heads] == [tc["id"] for tc in fields["tool_calls"]]
    assert [json.loads(args[k]) for k in sorted(args)] == [
        json.loads(tc["function"]["arguments"]) for tc in fields["tool_calls"]
    ]
    prose = ToolDeltas(c, "call_y")
    pieces = [d for ch in "No call, just words." for d in prose.feed(ch)]
    rest, called = prose.finish()
    assert not called and "".join(d["content"] for d in pieces + rest) == "No call, just words."


def test_formats_are_detected_from_chat_templates() -> None:
    assert detect_format(None) == "json"
    assert detect_format("{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}") == "json"
    assert detect_format('{%- if tools %}...<tool_call>\\n{"name": ...}</tool_call>{% endif %}') == "hermes"
    assert detect_format("{% if message.tool_calls %}[TOOL_CALLS]{{ calls }}{% endif %}") == "mistral"
    assert detect_format("{{- '<|python_tag|>' + tool_call.name }}") == "llama3"
    assert detect_format('respond with {"name": function name, "parameters": ...} ipython') == "llama3"


def test_real_templates_declare_their_formats(qwen: corral.Tokenizer) -> None:
    gguf = pytest.importorskip("gguf")
    from corral import models
    from corral.backends.presets import model_path

    def template(path: Any) -> str:
        f = gguf.GGUFReader(str(path)).fields["tokenizer.chat_template"]
        return bytes(f.parts[f.data[0]]).decode()

    assert detect_format(template(model_path("qwen2.5-coder-0.5b"))) == "hermes"
    assert detect_format(template(models.smollm2_gguf_path())) == "json"


def test_bad_format_arguments_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="tool format must be one of"):
        ConstraintSpec.tool_calls(TOOLS, "required", tool_format="xml")
    with pytest.raises(ValueError, match="tool_format given without tools"):
        spec_from_args({"regex": "a", "tool_format": "hermes"})
    with pytest.raises(TypeError, match="parallel"):
        ConstraintSpec.tool_calls(TOOLS, "required", parallel="yes")  # type: ignore[arg-type]
    keys = {ConstraintSpec.tool_calls(TOOLS, "required", tool_format=f).key("t") for f in FMTS}
    assert len(keys) == len(FMTS)  # the format is part of the compile key


def test_past_calls_are_rendered_as_the_template_expects() -> None:
    """A template that renders tools gets structured calls (object arguments); any other gets
    them written in the format."""
    from corral.grammar.tool_formats import history

    msgs = [
        {"role": "user", "content": "2+3?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "5"},
    ]
    structured = history(msgs, get_format("hermes"), True)
    assert structured[1]["tool_calls"][0]["function"] == {"name": "add", "arguments": {"a": 2, "b": 3}}
    assert structured[1]["content"] == "" and structured[2] == msgs[2]
    for fmt in FMTS:
        flat = history(msgs, get_format(fmt), False)
        assert "tool_calls" not in flat[1]
        _, calls, err = parse_reply(flat[1]["content"], get_format(fmt))
        assert err is None and [(c.name, c.arguments) for c in calls] == [("add", {"a": 2, "b": 3})]
    with pytest.raises(ValueError, match=r"messages\[1\].tool_calls\[0\]"):
        history(
            [msgs[0], {**msgs[1], "tool_calls": [{"function": {"name": "add", "arguments": "{"}}]}],
            get_format("json"),
            False,
        )
    with pytest.raises(ValueError, match=r"messages\[1\].tool_calls\[0\]: the function name is missing"):
        history(
            [msgs[0], {**msgs[1], "tool_calls": [{"function": {"arguments": "{}"}}]}],
            get_format("hermes"),
            True,
        )


def test_chat_requests_pick_the_template_format() -> None:
    """parse_chat: a template that declares hermes renders the tools itself (no corral note
    about the format); forced json on it gets corral's note; parallel_tool_calls and auto +
    response_format reach the spec."""
    pytest.importorskip("starlette")
    from corral.server.protocol import parse_chat

    tools = [{"type": "function", "function": {"name": "add", "parameters": ADD}}]
    body = {"model": "m", "messages": [{"role": "user", "content": "2+3?"}], "tools": tools}
    req = parse_chat(body, "m", set(), {}, 1, tool_formats=("hermes", "hermes"))
    assert req.spec is not None and req.spec.tool_format == "hermes" and req.spec.parallel
    assert req.template_tools == [{"type": "function", "function": req.tools[0].as_json()}]
    assert req.prompts[0] == body["messages"]  # auto: the template says it all
    req = parse_chat(
        {**body, "tool_format": "json", "parallel_tool_calls": False},
        "m",
        set(),
        {},
        1,
        tool_formats=("hermes", "hermes"),
    )
    assert req.spec is not None and req.spec.tool_format == "json" and not req.spec.parallel
    assert req.template_tools is None and "JSON object" in req.prompts[0][0]["content"]
    fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": WEATHER}}
    req = parse_chat({**body, "response_format": fmt}, "m", set(), {}, 1)
    assert req.spec is not None and req.spec.answer_schema == WEATHER and req.spec.tool_mode == "auto"
    req = parse_chat({**body, "chat_template_kwargs": {"enable_thinking": False, "x": 1}}, "m", set(), {}, 1)
    assert req.template_kwargs == {"enable_thinking": False, "x": 1}
