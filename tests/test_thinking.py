"""Think-then-answer (corral.compile.thinking, corral.runtime.thinking): arguments, the grammar,
the budget kept to the token (special-token markers included), reading and stream splitting,
generation with SmolLM2 and the server's reasoning_content (official openai client)."""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import pytest

import corral
from corral.compile import compile_constraint, spec_from_args
from corral.compile.thinking import ReasoningSplitter, ThinkFormat, split_reasoning
from corral.errors import BudgetError
from corral.grammar.structural import Marker
from corral.runtime.thinking import ThinkBudget
from corral.runtime.tokens import tools_for

YES_NO = {
    "type": "object",
    "properties": {"answer": {"enum": ["yes", "no"]}},
    "required": ["answer"],
    "additionalProperties": False,
}
# A byte vocabulary with <think> / </think> as special tokens (ids 257, 258).
SPECIAL = corral.Tokenizer.from_tokens(
    [bytes([i]) for i in range(256)] + [b"<eos>", b"<think>", b"</think>"],
    special_ids=[256, 257, 258],
    eos_ids=[256],
)


@pytest.mark.parametrize(
    "value, message",
    [
        (0, "positive integer"),
        ({"budget_tokens": -3}, "positive integer"),
        ({"budget": 5}, "unknown field"),
        ({"open": "<a>"}, "both open and close"),
        ({"open": "", "close": "x"}, "non-empty string"),
        ("lots", "token budget"),
        ({"type": "sometimes"}, "enabled"),
    ],
)
def test_bad_thinking_arguments_are_clear_errors(value: Any, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        spec_from_args({"schema": YES_NO, "thinking": value})


def test_thinking_alone_is_free_text_after_the_block_and_is_part_of_the_key() -> None:
    a = spec_from_args({"thinking": 8})
    b = spec_from_args({"thinking": 9})
    assert a is not None and b is not None and a.kind == "text" and a.key("t") != b.key("t")
    assert spec_from_args({"thinking": {"type": "disabled"}}) is None


def test_the_answer_never_sees_the_block_and_reads_back_apart() -> None:
    spec = spec_from_args({"schema": YES_NO, "thinking": {"open": "<r>", "close": "</r>"}})
    assert spec is not None
    c = compile_constraint(spec, SPECIAL)
    m = c.grammar.matcher()
    assert m.accept_string('<r>a {"answer": "maybe"} </r')  # JSON-ish text inside the block is free
    assert not m.copy().accept_string("</r>maybe")
    assert m.accept_string('>\n{\n  "answer": "no"\n}') and m.is_accepting()
    text = '<r>think </r\n</r>\n{\n  "answer": "no"\n}'
    assert c.split(text) == ("think </r\n", '{\n  "answer": "no"\n}')
    assert c.read(text) == ({"answer": "no"}, None)


def test_special_token_markers_close_as_the_token_and_the_budget_forces_it() -> None:
    spec = spec_from_args({"regex": "[0-9]", "thinking": 9})
    assert spec is not None
    c = compile_constraint(spec, SPECIAL)
    assert c.think is not None and c.think.close.token_ids == (258,)
    m = c.grammar.matcher()
    assert m.accept_token(257)  # the open marker as its special token
    for ch in b"abc":
        assert m.accept_token(ch)
    budget = ThinkBudget(c.think, tools_for(SPECIAL))
    budget.accept([257, *b"abc"])
    words = (SPECIAL.width + 31) // 32
    row = np.zeros(words, dtype=np.int32)
    m.fill_next_token_bitmask(row[None, :], 0)
    assert budget.budget - budget.used == 5 and not budget.active
    budget.accept([ord("d")])
    assert m.accept_token(ord("d"))
    m.fill_next_token_bitmask(row[None, :], 0)
    assert budget.active and budget.narrow(row)
    assert corral.engine.allowed_tokens(row, SPECIAL) == [258]
    assert budget.forced() == [258]


@pytest.mark.parametrize("budget", [2, 3])
def test_a_budget_too_small_for_the_markers_is_a_budget_error(budget: int) -> None:
    fmt = ThinkFormat(Marker("<think>"), Marker("</think>"), budget)
    with pytest.raises(BudgetError, match="cannot hold"):
        ThinkBudget(fmt, tools_for(SPECIAL))  # byte tokens: 7 + 8 needed


def test_the_budget_mask_is_exact_on_bytes() -> None:
    """Byte tokens, text markers: for every budget, random walks under the narrowed mask close
    the block within the budget, never empty the mask, and always finish the answer."""
    rng = random.Random(3)
    tok = corral.Tokenizer.from_tokens(
        [bytes([i]) for i in range(256)] + [b"<eos>"], special_ids=[256], eos_ids=[256]
    )
    close = "</t>"
    words = (tok.width + 31) // 32
    for n in range(7, 16):
        spec = spec_from_args(
            {"regex": "[0-9]", "thinking": {"budget_tokens": n, "open": "<t>", "close": close}}
        )
        assert spec is not None
        c = compile_constraint(spec, tok)
        assert c.think is not None
        for _ in range(20):
            m = c.grammar.matcher()
            b = ThinkBudget(c.think, tools_for(tok))
            out = b""
            while not m.is_accepting():
                row = np.zeros((1, words), dtype=np.int32)
                m.fill_next_token_bitmask(row, 0)
                b.narrow(row[0])
                allowed = corral.engine.allowed_tokens(row[0], tok)
                assert allowed, out
                # Favour the close marker's own bytes, so partial markers occur.
                pool = [t for t in allowed if bytes([t]) in b"</t>"] if rng.random() < 0.6 else allowed
                t = rng.choice(pool or allowed)
                assert m.accept_token(t)
                b.accept([t])
                out += bytes([t])
            block = out.index(close.encode()) + len(close)
            assert block <= n, (n, out)


# ---------------------------------------------------------------------- with the model


@pytest.mark.real_tokenizer
@pytest.mark.slow
@pytest.mark.parametrize("jump_ahead", [True, False])
def test_generate_keeps_the_budget_and_the_answer_validates(smol_model: Any, jump_ahead: bool) -> None:
    """SmolLM2 does not think on its own: the forced block (plain section pair) is closed within
    its budget, to the token, and the answer validates; reasoning is kept out of value."""
    for budget in (9, 20):
        r = corral.generate(
            smol_model,
            "Is 17 a prime number? Think, then answer as JSON.",
            schema=YES_NO,
            thinking=budget,
            max_new_tokens=60,
            jump_ahead=jump_ahead,
        )
        assert r.valid and r.value in ({"answer": "yes"}, {"answer": "no"}), r.text
        assert r.text.startswith("Reasoning: ") and r.reasoning is not None
        acc = b""
        for i, t in enumerate(r.tokens):
            acc += smol_model.tokenizer.token_bytes[t]
            if b"\nAnswer: " in acc:
                assert i + 1 <= budget, (budget, i + 1, r.text)
                break
        else:
            raise AssertionError(r.text)
        assert (
            split_reasoning(r.text, ThinkFormat(Marker("Reasoning: "), Marker("\nAnswer: ")))[0]
            == r.reasoning
        )


@pytest.mark.real_tokenizer
@pytest.mark.slow
def test_structural_tags_generate_valid_segments(smol_model: Any) -> None:
    tags = [{"begin": "<tool_call>", "schema": YES_NO, "end": "</tool_call>"}]
    r = corral.generate(
        smol_model,
        "Answer with a <tool_call>{...}</tool_call> block: is 17 prime?\n<tool_call>",
        structural_tags=tags,
        max_new_tokens=40,
        chat=False,
    )
    assert r.valid, r.error
    for seg in r.value:
        assert seg.value in ({"answer": "yes"}, {"answer": "no"})


def test_the_stream_splitter_equals_the_reader() -> None:
    fmt = ThinkFormat(Marker("<think>"), Marker("</think>"))
    rng = random.Random(0)
    for text in [
        '<think>a</thi</think>\n{"x": 1}',
        "<think></think>x",
        "<think>abc",
        "<think>a<</think></think>",
    ]:
        for _ in range(40):
            sp = ReasoningSplitter(fmt, strip_answer=True)
            parts: list[tuple[str, str]] = []
            i = 0
            while i < len(text):
                j = rng.randint(i + 1, len(text))
                parts += sp.feed(text[i:j])
                i = j
            parts += sp.finish()
            reasoning = "".join(p for k, p in parts if k == "reasoning")
            content = "".join(p for k, p in parts if k == "content")
            want_r, want_c = split_reasoning(text, fmt)
            assert (reasoning, content) == (want_r or "", want_c.lstrip(" \n")), text


# ---------------------------------------------------------------------- the server


@pytest.fixture(scope="module")
def client(smol_model: Any) -> Any:
    openai = pytest.importorskip("openai")
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from corral.server import ServerConfig, create_server

    app = create_server(smol_model, ServerConfig(model_name="smollm2", compile_workers=1)).app
    with TestClient(app) as http:  # in process: the official client over starlette's transport
        yield openai.OpenAI(api_key="x", base_url="http://testserver/v1", http_client=http, max_retries=0)


@pytest.mark.real_tokenizer
@pytest.mark.slow
@pytest.mark.parametrize("how", ["thinking", "enable_thinking"])
def test_server_separates_reasoning_content(client: Any, how: str) -> None:
    extra = (
        {"thinking": {"budget_tokens": 12}}
        if how == "thinking"
        else {"chat_template_kwargs": {"enable_thinking": True}}
    )
    fmt = {"type": "json_schema", "json_schema": {"name": "yn", "schema": YES_NO}}
    kw: dict[str, Any] = dict(
        model="smollm2",
        messages=[{"role": "user", "content": "Is 17 prime? Think, then answer as JSON."}],
        max_tokens=60 if how == "thinking" else 40,
        temperature=0,
        response_format=fmt,
        extra_body=extra,
    )
    r = client.chat.completions.create(**kw)
    msg = r.choices[0].message
    reasoning = (msg.model_extra or {}).get("reasoning_content")
    assert isinstance(reasoning, str)
    assert json.loads(msg.content) in ({"answer": "yes"}, {"answer": "no"})
    assert "Answer:" not in msg.content and "Reasoning:" not in reasoning
    chunks = list(client.chat.completions.create(**kw, stream=True))
    r_parts = [(c.choices[0].delta.model_extra or {}).get("reasoning_content") for c in chunks if c.choices]
    c_parts = [c.choices[0].delta.content for c in chunks if c.choices]
    assert "".join(p for p in r_parts if p) == reasoning
    assert "".join(p for p in c_parts if p) == msg.content


@pytest.mark.real_tokenizer
@pytest.mark.slow
def test_max_tokens_below_the_thinking_budget_still_ends_valid(smol_model: Any) -> None:
    """max_new_tokens is the outer budget: with less room than the block could take, the output
    still closes the block, answers validly and fits."""
    for jump_ahead in (True, False):
        r = corral.generate(
            smol_model,
            "Is 17 a prime number? Think, then answer as JSON.",
            schema=YES_NO,
            thinking=40,
            max_new_tokens=22,
            jump_ahead=jump_ahead,
        )
        assert r.valid and r.completion_tokens <= 22, (r.text, r.error)
        assert r.value in ({"answer": "yes"}, {"answer": "no"})


@pytest.mark.real_tokenizer
@pytest.mark.slow
def test_tools_after_a_think_block(smol_model: Any, client: Any) -> None:
    """A typed tool call after the block: the library returns the call and the reasoning apart;
    the server returns tool_calls and reasoning_content."""
    tools = [
        {
            "type": "function",
            "function": {
                "name": "is_prime",
                "parameters": {
                    "type": "object",
                    "properties": {"n": {"type": "integer"}},
                    "required": ["n"],
                    "additionalProperties": False,
                },
            },
        }
    ]
    r = corral.generate(
        smol_model,
        "Is 17 prime? Use the tool.",
        tools=tools,
        tool_choice="required",
        thinking=16,
        max_new_tokens=60,
    )
    assert isinstance(r.value, corral.ToolCall) and r.value.name == "is_prime", r.text
    assert r.reasoning is not None and "is_prime" not in r.reasoning
    resp = client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": "Is 17 prime? Use the tool."}],
        tools=tools,
        tool_choice="required",
        max_tokens=60,
        temperature=0,
        extra_body={"thinking": {"budget_tokens": 16}},
    )
    msg = resp.choices[0].message
    assert msg.tool_calls and msg.tool_calls[0].function.name == "is_prime"
    assert isinstance(json.loads(msg.tool_calls[0].function.arguments)["n"], int)
    assert isinstance((msg.model_extra or {}).get("reasoning_content"), str) and msg.content is None


def test_a_special_token_tool_opener_after_a_think_block_is_the_token() -> None:
    """Hermes' <tool_call> is a special token in this vocabulary: after </think> the mask allows
    it as the token (what the model was trained to emit), exactly as without a think block."""
    tok = corral.Tokenizer.from_tokens(
        [bytes([i]) for i in range(256)] + [b"<eos>", b"<think>", b"</think>", b"<tool_call>"],
        special_ids=[256, 257, 258, 259],
        eos_ids=[256],
    )
    tool = {"name": "f", "parameters": {"type": "object", "properties": {}, "additionalProperties": False}}
    words = (tok.width + 31) // 32
    for thinking in (None, 8):
        args: dict[str, Any] = {"tools": [tool], "tool_choice": "required", "tool_format": "hermes"}
        if thinking is not None:
            args["thinking"] = thinking
        spec = spec_from_args(args)
        assert spec is not None
        m = compile_constraint(spec, tok).grammar.matcher()
        if thinking is not None:
            assert m.accept_token(257) and all(m.accept_token(b) for b in b"hm") and m.accept_token(258)
            while True:  # past the optional blank line between the block and the reply
                row = np.zeros((1, words), dtype=np.int32)
                m.fill_next_token_bitmask(row, 0)
                if 259 in corral.engine.allowed_tokens(row[0], tok):
                    break
                assert m.accept_token(ord("\n")), "the opener token never became allowed"
        row = np.zeros((1, words), dtype=np.int32)
        m.fill_next_token_bitmask(row, 0)
        assert 259 in corral.engine.allowed_tokens(row[0], tok), thinking
        assert m.accept_token(259)
        assert all(m.accept_token(b) for b in b'\n{"name": "f", "arguments": {}}\n</tool_call>'), thinking


def test_a_pydantic_answer_after_the_block_parses_into_each_callers_model() -> None:
    pydantic = pytest.importorskip("pydantic")

    def make() -> Any:
        class M(pydantic.BaseModel):
            answer: str

        return M

    A, B = make(), make()  # equal schemas, so one cache entry
    text = 'Reasoning: hm\nAnswer: {"answer": "yes"}'
    for model in (A, B):  # one compiled grammar (equal schemas), two models
        spec = spec_from_args({"schema": model, "thinking": {"open": "Reasoning: ", "close": "\nAnswer: "}})
        assert spec is not None
        value, error = compile_constraint(spec, SPECIAL).read(text)
        assert error is None and type(value) is model and value.answer == "yes"


def test_an_optional_block_may_be_skipped_and_then_costs_no_budget() -> None:
    tok = corral.Tokenizer.from_tokens(
        [bytes([i]) for i in range(256)] + [b"<eos>"], special_ids=[256], eos_ids=[256]
    )
    spec = spec_from_args(
        {
            "regex": "[a-z]{1,12}",
            "thinking": {"budget_tokens": 9, "open": "<t>", "close": "</t>", "optional": True},
        }
    )
    assert spec is not None
    c = compile_constraint(spec, tok)
    assert _accepts_all(c, "abc") and _accepts_all(c, "<t>x</t>abc")
    assert c.split("abc") == (None, "abc") and c.split("<t>x</t>ab") == ("x", "ab")
    assert c.think is not None
    b = ThinkBudget(c.think, tools_for(tok))
    b.accept(list(b"abcdefghij"))  # the answer started: the block was left out
    row = np.full((tok.width + 31) // 32, -1, dtype=np.int32)
    assert not b.narrow(row) and b.forced() == []


def test_structural_tags_after_a_think_block() -> None:
    """Qwen3-style: think, then prose with tool calls; the block never opens a segment."""
    tags = [{"begin": "<tool_call>", "regex": "[0-9]+", "end": "</tool_call>"}]
    spec = spec_from_args({"structural_tags": tags, "thinking": {"open": "<think>", "close": "</think>"}})
    assert spec is not None
    c = compile_constraint(spec, SPECIAL)
    text = "<think>maybe <tool_call>x</think>Sure <tool_call>42</tool_call> done"
    assert _accepts_all(c, text)
    assert not _accepts_all(c, "<think>a</think><tool_call>x</tool_call>")
    segs, err = c.read(text)
    assert err is None and [s.value for s in segs] == ["42"]
    assert c.split(text)[0] == "maybe <tool_call>x"


def _accepts_all(c: corral.Constraint, text: str) -> bool:
    m = c.grammar.matcher()
    return bool(m.accept_string(text) and m.is_accepting())
