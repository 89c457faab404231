"""Structural tags and the marker languages under them (corral.grammar.structural,
corral.compile.thinking): exact against a brute-force oracle, random walks under the mask on real
tokenizers, triggers split across and merged into tokens, EOS never inside an open segment."""

from __future__ import annotations

import itertools
import json
import random

import jsonschema
import numpy as np
import pytest

import corral
from corral.compile import compile_constraint, spec_from_args
from corral.grammar.structural import Marker, no_trigger, rename_rules, upto

BYTES = corral.Tokenizer.from_tokens(
    [bytes([i]) for i in range(256)] + [b"<eos>"], special_ids=[256], eos_ids=[256]
)

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 12}, "unit": {"enum": ["c", "f"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
ADD = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
TAGS = [
    {"begin": "<function=get_weather>", "schema": WEATHER, "end": "</function>"},
    {"begin": "<function=add>", "schema": ADD, "end": "</function>"},
    {"begin": "<tool_call>", "regex": "[a-z]{1,5}", "end": "</tool_call>"},
]
TRIGGERS = ["<function=", "<tool_call>"]


def _accepts(grammar: corral.CompiledGrammar, s: str) -> bool:
    m = grammar.matcher()
    return bool(m.accept_string(s) and m.is_accepting())


def _first_end(s: str, triggers: list[str]) -> int | None:
    """Brute force: where the first trigger occurrence ends (None: none occurs)."""
    for end in range(1, len(s) + 1):
        if any(s[:end].endswith(t) for t in triggers):
            return end
    return None


@pytest.mark.parametrize(
    "triggers",
    [["aab", "ba"], ["aa"], ["abab", "c"], ["a"], ["aba", "bb"]],
    ids=lambda t: "+".join(t),
)
def test_marker_languages_match_a_brute_force_oracle(triggers: list[str]) -> None:
    """Every string over {a, b, c} up to 7 characters: `upto(k)` accepts exactly the strings
    whose first trigger occurrence is trigger k, at the very end; `no_trigger` exactly those with
    no occurrence. Self-overlapping triggers (aa, abab, aba) included."""
    markers = [Marker(t) for t in triggers]
    ups = [corral.compile_grammar(f"root ::= {upto(markers, k)}\n", BYTES) for k in range(len(triggers))]
    free = corral.compile_grammar(f"root ::= {no_trigger(markers)}\n", BYTES)
    checked = 0
    for n in range(8):
        for chars in itertools.product("abc", repeat=n):
            s = "".join(chars)
            end = _first_end(s, triggers)
            assert _accepts(free, s) == (end is None), s
            for k, g in enumerate(ups):
                assert _accepts(g, s) == (end == len(s) and s.endswith(triggers[k])), (s, k)
            checked += 1
    assert checked == sum(3**n for n in range(8))


def test_marker_automata_stay_linear_in_the_triggers() -> None:
    """The difference is built on automata, not spelled out as a regex: every automaton built on
    the way (operands, product) fits in 2 * sum(len(Ti)) + 4 DFA states, for a realistic trigger
    set and for self-overlapping ones (checked through the engine's max_dfa_states limit)."""
    sets = (
        ["<tool_call>", "<function=", "[TOOL_CALLS]", "<|python_tag|>"],
        ["aaaaaaaa", "abababab"],
        ["</think>"],
    )
    for triggers in sets:
        markers = [Marker(t) for t in triggers]
        cap = 2 * sum(len(t) for t in triggers) + 4
        for expr in (no_trigger(markers), upto(markers, 0)):
            corral.compile_grammar(f"root ::= {expr}\n", BYTES, max_dfa_states=cap)
        with pytest.raises(corral.LimitExceeded):  # the check can fail: far below, it does
            corral.compile_grammar(
                f"root ::= {upto(markers, 0)}\n", BYTES, max_dfa_states=sum(map(len, triggers)) // 2
            )


def test_rename_rules_touches_only_rule_names() -> None:
    text = (
        'root ::= item ("," item)* ws\nitem ::= /[a-z\\/]+/ | "root" | [r-t] | <[5]> | x{2,3}\n'
        'x ::= "a"\nws ::= " "?\n'
    )
    out = rename_rules(text, "p-")
    assert out.splitlines()[0] == 'p-root ::= p-item ("," p-item)* p-ws'
    assert (
        '"root"' in out and "/[a-z\\/]+/" in out and "[r-t]" in out and "<[5]>" in out and "p-x{2,3}" in out
    )
    g = corral.compile_grammar(out, BYTES, start="p-root")
    assert _accepts(g, "abc,root,t,aa ") and not _accepts(g, "p-root")


def _structural(tok: corral.Tokenizer, **kw: object) -> corral.Constraint:
    spec = spec_from_args({"structural_tags": TAGS, "triggers": TRIGGERS, **kw})
    assert spec is not None
    return compile_constraint(spec, tok)


def _check_output(text: str) -> int:
    """A structural-tag output: free text with only well-formed, valid segments. Returns how many."""
    pos, n = 0, 0
    while True:
        hits = [(text.find(t, pos), t) for t in TRIGGERS if text.find(t, pos) >= 0]
        if not hits:
            return n
        at, _ = min(hits)
        tag = next(t for t in TAGS if text.startswith(t["begin"], at))
        start = at + len(tag["begin"])
        stop = text.index(tag["end"], start)
        content = text[start:stop]
        if "schema" in tag:
            jsonschema.validate(json.loads(content), tag["schema"])
        else:
            assert 1 <= len(content) <= 5 and content.isalpha()
        pos, n = stop + len(tag["end"]), n + 1


@pytest.mark.real_tokenizer
@pytest.mark.parametrize("fixture", ["smollm2", "llama32"])
def test_random_walks_give_free_text_with_valid_segments(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    """Random walks under the mask, biased toward the triggers' and tags' own tokens so that
    segments open: every output is free text with zero or more well-formed, schema-valid
    segments, EOS is allowed exactly when no segment is open, and the mask never empties."""
    tok: corral.Tokenizer = request.getfixturevalue(fixture)
    c = _structural(tok)
    width = tok.width
    words = (width + 31) // 32
    eos = set(tok.eos_ids)
    tb = tok.token_bytes
    # Plans: the tokenizer's own spelling of a trigger and tag name, taken while the mask allows
    # them (so segments open; the walk stays under the mask).
    plans = [tok.encode(x) for x in ("<function=get_weather>", "<function=add>", "<tool_call>", "<function=")]
    rng = random.Random(7)
    segments = 0
    for _walk in range(12):
        m = c.grammar.matcher()
        out = b""
        plan: list[int] = []
        for _step in range(60):
            buf = np.zeros((1, words), dtype=np.int32)
            m.fill_next_token_bitmask(buf, 0)
            allowed = np.flatnonzero(np.unpackbits(buf[0].view(np.uint8), bitorder="little")[:width])
            assert allowed.size, out
            eos_ok = any(int(t) in eos for t in allowed)
            assert eos_ok == m.is_accepting(), out
            if not plan and rng.random() < 0.2:
                plan = list(rng.choice(plans))
            ok = set(allowed.tolist())
            if plan and plan[0] in ok:
                t = plan.pop(0)
            else:
                plan = []
                t = int(rng.choice(allowed))
            if t in eos:
                break
            assert m.accept_token(t)
            out += tb[t]
        tail = m.shortest_completion()  # closes an open segment: the output ends valid
        assert m.accept_bytes(tail) and m.is_accepting()
        text = (out + tail).decode("utf-8", errors="strict")
        found = _check_output(text)
        value, error = c.read(text)
        assert error is None and len(value) == found, text
        segments += found
    assert segments > 0


@pytest.mark.real_tokenizer
def test_a_trigger_split_or_merged_across_tokens_is_recognised(llama32: corral.Tokenizer) -> None:
    """The trigger is matched on bytes: spelled in single-byte tokens, in the tokenizer's own
    tokens, or in a token that runs on past it, it opens the segment (then only the tag may
    follow), and EOS is impossible until the segment is closed."""
    c = _structural(llama32)
    call = '<function=add>{\n  "a": 1,\n  "b": 2\n}</function>'
    for spelling in ("bytes", "own"):
        m = c.grammar.matcher()
        assert m.accept_string("Sure. ")
        ids = (
            llama32.encode(call)
            if spelling == "own"
            else [llama32.ids_of(bytes([b]))[0] for b in call.encode()]
        )
        open_at = None
        for i, t in enumerate(ids):
            assert m.accept_token(t), (spelling, i)
            if open_at is None and b"<function=" in llama32.decode(ids[: i + 1]):
                open_at = i
            closed = b"</function>" in llama32.decode(ids[: i + 1])
            if open_at is not None and not closed:
                assert not m.is_accepting()  # no EOS inside the open segment
        assert m.is_accepting()
        assert open_at is not None
        if spelling == "own":  # some token crosses the trigger's end into the tag name
            pieces = [llama32.token_bytes[t] for t in ids]
            ends = list(itertools.accumulate(len(p) for p in pieces))
            assert len(b"<function=") not in ends
    # Inside an open trigger, a wrong tag name is impossible.
    m = c.grammar.matcher()
    assert m.accept_string("x <function=")
    assert not m.copy().accept_string("sub>")
    assert m.accept_string("add>")


def test_at_least_one_and_stop_after_first() -> None:
    one = {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": ["<t>"],
            "tags": [{"begin": "<t>", "content": {"type": "regex", "pattern": "[0-9]"}, "end": "</t>"}],
            "at_least_one": True,
            "stop_after_first": True,
        },
    }
    spec = spec_from_args({"structural_tags": one})
    assert spec is not None
    g = compile_constraint(spec, BYTES).grammar
    assert _accepts(g, "hi <t>4</t>")
    assert not _accepts(g, "hi")  # at least one
    assert not _accepts(g, "<t>4</t> and more")  # stops after the first
    legacy = {
        "type": "structural_tag",
        "structures": [{"begin": "<t>", "schema": ADD, "end": "</t>"}],
        "triggers": ["<t>"],
    }
    spec = spec_from_args({"structural_tags": legacy})
    assert spec is not None
    c = compile_constraint(spec, BYTES)
    text = 'a <t>{\n  "a": 1,\n  "b": 2\n}</t> b <t>{\n  "a": 3,\n  "b": 4\n}</t>'
    assert _accepts(c.grammar, text)
    segs, err = c.read(text)
    assert err is None and [s.value for s in segs] == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]


@pytest.mark.parametrize(
    "args, message",
    [
        ({"structural_tags": []}, "non-empty list"),
        (
            {"structural_tags": [{"begin": "<a>", "end": "</a>"}], "triggers": ["<a", "<a>"]},
            "contains trigger",
        ),
        ({"structural_tags": [{"begin": "<a>", "end": "</a>", "regex": "x", "schema": {}}]}, "one content"),
        ({"structural_tags": [{"begin": "<a>"}, {"begin": "<a>b"}]}, "ambiguous"),
        ({"structural_tags": [{"begin": "<b>"}], "triggers": ["<a>"]}, "exactly one"),
        ({"triggers": ["<a>"]}, "without structural_tags"),
        ({"structural_tags": [{"begin": "<a>", "content": {"type": "nope"}}]}, "content type"),
    ],
)
def test_bad_structural_tags_are_clear_errors(args: dict, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        spec_from_args(args)


def test_a_special_token_trigger_opens_a_segment_as_the_token_or_its_text() -> None:
    """A trigger that is a special token of the vocabulary (Llama 3.1's <|python_tag|>) opens
    its segment as that token — which free text can never produce — and by its text."""
    tok = corral.Tokenizer.from_tokens(
        [bytes([i]) for i in range(256)] + [b"<eos>", b"<|python_tag|>"],
        special_ids=[256, 257],
        eos_ids=[256],
    )
    tags = [{"begin": "<|python_tag|>", "regex": "[0-9]{2}", "end": ";"}]
    spec = spec_from_args({"structural_tags": tags})
    assert spec is not None
    c = compile_constraint(spec, tok)
    m = c.grammar.matcher()
    assert m.accept_string("call ")
    assert m.accept_token(257) and not m.is_accepting()  # the segment is open: no EOS
    assert not m.copy().accept_string("x")
    assert m.accept_string("42;") and m.is_accepting()
    assert m.accept_string(" more <|python_tag|>07;") and m.is_accepting()
    segs, err = c.read("call <|python_tag|>42; more <|python_tag|>07;")
    assert err is None and [s.value for s in segs] == ["42", "07"]


def test_hermes_tool_calls_are_one_structural_tag_over_the_call_union() -> None:
    """The Hermes/Qwen format as a thin layer: one tag, <tool_call> as its trigger, the call
    union (corral.grammar.tools.call_schema) as its content: prose is free, every call names a
    declared tool with valid arguments."""
    from corral.grammar.tools import call_schema, tools_from

    tools = tools_from([{"name": "get_weather", "parameters": WEATHER}, {"name": "add", "parameters": ADD}])
    tags = [{"begin": "<tool_call>\n", "schema": call_schema(tools), "end": "\n</tool_call>"}]
    spec = spec_from_args(
        {"structural_tags": tags, "triggers": ["<tool_call>"], "schema_options": {"whitespace": "compact"}}
    )
    assert spec is not None
    c = compile_constraint(spec, BYTES)
    call = '<tool_call>\n{"name":"add","arguments":{"a":1,"b":2}}\n</tool_call>'
    text = f"Let me add them.\n{call}\n{call}"
    assert _accepts(c.grammar, text)
    assert not _accepts(c.grammar, '<tool_call>\n{"name":"sub","arguments":{"a":1,"b":2}}\n</tool_call>')
    assert not _accepts(c.grammar, '<tool_call>\n{"name":"add","arguments":{"a":"x","b":2}}\n</tool_call>')
    segs, err = c.read(text)
    assert err is None and [s.value["name"] for s in segs] == ["add", "add"]
