"""The one constraint layer: ConstraintSpec rules and keys, the one compile cache (with the
property-order regression in every cache a host uses), reading outputs back, tools as a
constraint, and the shared runtime kernel (masks, budget guard) on a real vocabulary."""

from __future__ import annotations

import json
import threading
from typing import Any

import numpy as np
import pytest

import corral
from corral.compile import (
    SCHEMA_DEFAULTS,
    CompileCache,
    Constraint,
    ConstraintSpec,
    compile_constraint,
    compile_constraint_async,
    default_cache,
    spec_from_args,
)
from corral.errors import SchemaError, ToolError
from corral.grammar.tools import ToolCall, tools_from
from corral.runtime.kernel import MaskKernel, MaskRow
from corral.runtime.masks import allowed_ids, apply_token_bitmask_

BYTES = corral.Tokenizer.from_tokens(
    [bytes([b]) for b in range(256)] + [b"<eos>"], special_ids=[256], eos_ids=[256]
)

ANSWER_FIRST = {
    "type": "object",
    "properties": {"answer": {"enum": ["yes", "no"]}, "reasoning": {"type": "string", "maxLength": 20}},
    "required": ["reasoning", "answer"],
    "additionalProperties": False,
}
REASONING_FIRST = {
    "type": "object",
    "properties": {"reasoning": {"type": "string", "maxLength": 20}, "answer": {"enum": ["yes", "no"]}},
    "required": ["reasoning", "answer"],
    "additionalProperties": False,
}
COMPACT = {"whitespace": "compact"}
ANSWER_TEXT = b'{"answer":"yes","reasoning":"r"}'
REASONING_TEXT = b'{"reasoning":"r","answer":"yes"}'


def _accepts(c: Constraint, text: bytes) -> bool:
    m = c.grammar.matcher()
    return m.accept_bytes(text) and m.is_accepting()


# ---------------------------------------------------------------------- property order, every cache


def _assert_order_kept(first: Constraint, second: Constraint) -> None:
    assert _accepts(first, ANSWER_TEXT) and not _accepts(first, REASONING_TEXT)
    assert _accepts(second, REASONING_TEXT) and not _accepts(second, ANSWER_TEXT)


def test_property_order_in_the_library_cache() -> None:
    a = compile_constraint(ConstraintSpec.json_schema(ANSWER_FIRST, COMPACT), BYTES)
    b = compile_constraint(ConstraintSpec.json_schema(REASONING_FIRST, COMPACT), BYTES)
    _assert_order_kept(a, b)
    # The cache does serve equal schemas from one compile.
    again = compile_constraint(ConstraintSpec.json_schema(json.dumps(REASONING_FIRST), COMPACT), BYTES)
    assert again.grammar is b.grammar


def test_property_order_in_a_server_style_cache() -> None:
    cache = CompileCache(64 * 1024 * 1024, workers=1)
    try:
        fa, hit_a = compile_constraint_async(
            ConstraintSpec.json_schema(ANSWER_FIRST, COMPACT), BYTES, cache=cache
        )
        fb, hit_b = compile_constraint_async(
            ConstraintSpec.json_schema(REASONING_FIRST, COMPACT), BYTES, cache=cache
        )
        assert not hit_a and not hit_b
        _assert_order_kept(fa.result(timeout=30), fb.result(timeout=30))
        assert cache.stats()["compiles"] == 2
    finally:
        cache.close()


def test_property_order_through_vllm_arguments() -> None:
    from corral.vllm import parse_request
    from corral.vllm._spec import compile_spec

    ra = parse_request({"corral": {"json_schema": ANSWER_FIRST, "schema_options": COMPACT}})
    rb = parse_request(
        {
            "corral_json_schema": json.dumps(REASONING_FIRST),
            "corral_schema_options": '{"whitespace": "compact"}',
        }
    )
    assert ra is not None and rb is not None
    _assert_order_kept(compile_spec(ra, BYTES), compile_spec(rb, BYTES))


def test_property_order_through_generate_arguments() -> None:
    sa = spec_from_args({"schema": ANSWER_FIRST, "schema_options": COMPACT})
    sb = spec_from_args({"schema": REASONING_FIRST, "schema_options": COMPACT})
    assert sa is not None and sb is not None and sa != sb
    assert sa.key(BYTES.hash) != sb.key(BYTES.hash)
    _assert_order_kept(compile_constraint(sa, BYTES), compile_constraint(sb, BYTES))


# ---------------------------------------------------------------------- spec rules


def test_keys_follow_content_not_option_order() -> None:
    s1 = ConstraintSpec.json_schema(ANSWER_FIRST, {"whitespace": "compact", "indent": 4})
    s2 = ConstraintSpec.json_schema(ANSWER_FIRST, {"indent": 4, "whitespace": "compact"})
    assert s1 == s2 and s1.key("t") == s2.key("t") and hash(s1) == hash(s2)
    assert s1.key("t") != s1.key("other tokenizer")
    assert ConstraintSpec.regex("a+").key("t") != ConstraintSpec.grammar("a+").key("t")
    assert ConstraintSpec.regex("a+", {"max_dfa_states": 9}).key("t") != ConstraintSpec.regex("a+").key("t")


def test_defaults_are_applied_once() -> None:
    spec = spec_from_args({"json_schema": {"type": "integer"}})
    assert spec is not None and dict(spec.options) == SCHEMA_DEFAULTS
    flexible = spec_from_args({"json": True, "schema_options": {"whitespace": "flexible"}})
    assert flexible is not None and flexible.options["whitespace"] == "flexible"
    assert flexible.options["escapes"] == "canonical"


@pytest.mark.parametrize(
    "args, error, message",
    [
        ({"schema": {}, "regex": "a"}, ValueError, "give one constraint, not json_schema and regex"),
        ({"schema": {}, "json_schema": {}}, ValueError, "given twice"),
        ({"rgx": "a"}, ValueError, "unknown argument"),
        ({"regex": 3}, TypeError, "must be a string"),
        ({"choices": []}, ValueError, "empty"),
        ({"choices": ["a", "a"]}, ValueError, "twice"),
        ({"regex": "a", "schema_options": {"whitespace": "compact"}}, ValueError, "apply to json_schema"),
        ({"schema_options": {"whitespace": "compact"}}, ValueError, "without a constraint"),
        ({"schema": {}, "schema_options": {"whitespce": "compact"}}, TypeError, "unknown schema option"),
        ({"schema": {}, "schema_options": {"whitespace": "sideways"}}, ValueError, "whitespace"),
        ({"regex": "a", "limits": {"max_nonsense": 1}}, TypeError, "unknown limit"),
        ({"regex": "a", "limits": {"max_dfa_states": -1}}, ValueError, "max_dfa_states"),
        ({"json": "yes please"}, ValueError, "json must be true"),
        ({"regex": "a", "tool_choice": "required"}, ValueError, "tool_choice given without tools"),
    ],
)
def test_spec_errors(args: dict[str, Any], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        spec_from_args(args)


def test_schema_text_that_is_not_json_names_the_root() -> None:
    with pytest.raises(SchemaError, match="not valid JSON") as e:
        ConstraintSpec.json_schema("{oops")
    assert e.value.pointer == "#"


def test_no_constraint_is_free_generation() -> None:
    assert spec_from_args({}) is None
    assert spec_from_args({"schema": None, "regex": None, "json": False}) is None


def test_limits_reach_the_engine() -> None:
    spec = ConstraintSpec.regex("[a-z]{1,300}", {"max_dfa_states": 50})
    with pytest.raises(corral.LimitExceeded) as e:
        compile_constraint(spec, BYTES, cache=CompileCache(1 << 20))
    assert e.value.limit == "max_dfa_states"
    assert compile_constraint(ConstraintSpec.regex("[a-z]{1,300}"), BYTES).grammar is not None


# ---------------------------------------------------------------------- cache behaviour


def test_cache_shares_concurrent_compiles_and_does_not_cache_failures() -> None:
    cache = CompileCache(1 << 30)
    calls = []
    gate = threading.Event()

    def build() -> Any:
        calls.append(1)
        gate.wait(5)
        return "value"

    fut, hit = cache.get("k", build)
    fut2, hit2 = cache.get("k", build)
    assert not hit and hit2
    gate.set()
    assert fut.result(5) == fut2.result(5) == "value" and len(calls) == 1
    assert cache.get_or_compile("k", build) == ("value", True)

    def fail() -> Any:
        raise corral.CompileError("nope")

    for _ in range(2):
        with pytest.raises(corral.CompileError):
            cache.get_or_compile("bad", fail)
    assert cache.stats()["misses"] == 3 and cache.entries == 1
    cache.close()


def test_cache_is_bounded_by_memory() -> None:
    cache = CompileCache(max_bytes=200 * 1024)
    for i in range(6):
        cache.get_or_compile(f"k{i}", lambda: object())
    assert cache.entries <= 3 and cache.evictions >= 3
    assert cache.bytes <= 200 * 1024


def test_pydantic_models_share_the_compile_but_parse_into_their_own_type() -> None:
    pydantic = pytest.importorskip("pydantic")

    class A(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(title="Count")
        n: int

    class B(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(title="Count")
        n: int

    ca = compile_constraint(ConstraintSpec.json_schema(A, COMPACT), BYTES)
    cb = compile_constraint(ConstraintSpec.json_schema(B, COMPACT), BYTES)
    assert ca.grammar is cb.grammar
    assert type(ca.parse('{"n": 1}')) is A and type(cb.parse('{"n": 1}')) is B


# ---------------------------------------------------------------------- reading outputs


def test_read_each_kind() -> None:
    c = compile_constraint(
        ConstraintSpec.json_schema({"type": "integer", "uniqueItems": True}, COMPACT), BYTES
    )
    assert c.read("5") == (5, None)
    u = compile_constraint(ConstraintSpec.json_schema({"type": "array", "uniqueItems": True}, COMPACT), BYTES)
    value, error = u.read("[1,1]")
    assert value == [1, 1] and error is not None and "unique" in error
    with pytest.raises(corral.OutputValidationError):
        u.parse("[1,1]")
    assert compile_constraint(ConstraintSpec.json_value(), BYTES).read("[1]") == ([1], None)
    assert compile_constraint(ConstraintSpec.regex("a+"), BYTES).read("aa") == ("aa", None)
    assert compile_constraint(ConstraintSpec.choices(["x", "y"]), BYTES).read("y") == ("y", None)


def test_slots_bind_on_every_constraint() -> None:
    c = compile_constraint(ConstraintSpec.grammar('root ::= "cc=" ${cc}'), BYTES)
    assert c.missing_slots({}) == ["cc"]
    with pytest.raises(corral.SlotError, match="need values"):
        c.bind(None)
    bound = c.bind({"cc": ["ab", "cd"]})
    assert _accepts(bound, b"cc=cd") and not _accepts(bound, b"cc=ef")
    plain = compile_constraint(ConstraintSpec.regex("a"), BYTES)
    assert plain.bind(None) is plain
    with pytest.raises(corral.SlotError, match="no slots"):
        plain.bind({"x": ["1"]})


# ---------------------------------------------------------------------- tools


WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 10}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


def add(a: int, b: int = 1) -> int:
    """Add two integers."""
    return a + b


def test_tools_from_every_form() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Lookup(pydantic.BaseModel):
        """Look a word up."""

        word: str

    tools = tools_from([WEATHER, Lookup, add, {"name": "bare", "parameters": {"type": "object"}}])
    assert [t.name for t in tools] == ["weather", "Lookup", "add", "bare"]
    assert tools[1].description == "Look a word up." and tools[2].description == "Add two integers."
    assert tools[2].parameters["required"] == ["a"]
    assert tools[2].parameters["properties"]["b"]["default"] == 1


@pytest.mark.parametrize(
    "raw, param",
    [
        ([{"type": "retrieval"}], "tools[0]"),
        ([{"type": "function", "function": {"name": "bad name!"}}], "tools[0].function.name"),
        ([WEATHER, WEATHER], "tools[1].function.name"),
        (
            [{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}],
            "tools[0].function.parameters",
        ),
        (
            [
                {
                    "type": "function",
                    "function": {
                        "name": "f",
                        "parameters": {"type": "object", "properties": {"x": {"type": "strnig"}}},
                    },
                }
            ],
            "tools[0].function.parameters",
        ),
        ([lambda x: x], "tools[0]"),
        ([], "tools"),
        (["weather"], "tools[0]"),
    ],
)
def test_bad_tools_name_the_field(raw: Any, param: str) -> None:
    with pytest.raises(ToolError) as e:
        tools_from(raw)
    assert e.value.param == param and e.value.code == "tool_error"


def test_a_tool_call_constraint_reads_typed_calls() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Lookup(pydantic.BaseModel):
        word: str

    spec = spec_from_args(
        {"tools": [WEATHER, Lookup, add], "tool_choice": "required", "schema_options": COMPACT}
    )
    assert spec is not None
    c = compile_constraint(spec, BYTES)
    call = b'{"name":"Lookup","arguments":{"word":"hi"}}'
    assert _accepts(c, call)
    assert not _accepts(c, b'{"name":"nope","arguments":{}}')
    assert not _accepts(c, b'{"name":"weather","arguments":{"city":"far too long a name"}}')
    value, error = c.read(call.decode())
    assert error is None and isinstance(value, ToolCall) and value.name == "Lookup"
    assert isinstance(value.value, Lookup) and value.value.word == "hi"
    value, _ = c.read('{"name":"add","arguments":{"a":2,"b":3}}')
    assert value.invoke() == 5
    named = spec_from_args({"tools": [WEATHER, add], "tool_choice": "add", "schema_options": COMPACT})
    assert named is not None and [t.name for t in named.tools] == ["add"]
    auto = compile_constraint(spec_from_args({"tools": [WEATHER], "schema_options": COMPACT}), BYTES)
    assert auto.tool_mode == "auto" and _accepts(auto, b"It is sunny.") and auto.read("Hi") == ("Hi", None)


def test_a_bad_tool_schema_is_reported_against_the_tool() -> None:
    bad = {"type": "object", "properties": {"s": {"type": "string", "minLength": 9, "maxLength": 2}}}
    spec = ConstraintSpec.tool_calls([WEATHER, {"name": "f", "parameters": bad}], "required")
    with pytest.raises(ToolError) as e:
        compile_constraint(spec, BYTES, cache=CompileCache(1 << 20))
    assert e.value.param == "tools[1].function.parameters" and e.value.pointer == "#/properties/s/minLength"


# ---------------------------------------------------------------------- runtime kernel


def test_kernel_masks_equal_the_matchers_masks(smollm2: corral.Tokenizer) -> None:
    c = compile_constraint(ConstraintSpec.json_schema(REASONING_FIRST, COMPACT), smollm2)
    kernel = MaskKernel(smollm2, threads=1)
    m1, m2 = c.grammar.matcher(), c.grammar.matcher()
    assert m2.accept_bytes(b'{"reasoning":"')
    logits = np.zeros((3, smollm2.width), dtype=np.float32)
    kernel.mask(logits, [MaskRow(0, m1), MaskRow(2, m2)])
    for row, m in ((0, m1), (2, m2)):
        want = corral.allocate_bitmask(1, smollm2)
        m.fill_next_token_bitmask(want, 0)
        assert (
            np.flatnonzero(np.isfinite(logits[row])).tolist() == allowed_ids(want[0], smollm2.width).tolist()
        )
    assert np.isfinite(logits[1]).all()  # an unconstrained row is untouched
    done = np.zeros((1, smollm2.width), dtype=np.float32)
    kernel.mask(done, [MaskRow(0, None)])
    assert np.flatnonzero(np.isfinite(done[0])).tolist() == [min(smollm2.eos_ids)]


def test_kernel_budget_guard_keeps_greedy_within_budget() -> None:
    # "x" ends at once; "y" commits to 20 more bytes. With 3 tokens left, the model's favourite
    # "y" must be refused even though the budget is far from the margin rule's reach.
    c = compile_constraint(ConstraintSpec.grammar('root ::= "x" | "y" "' + "z" * 20 + '"'), BYTES)
    kernel = MaskKernel(BYTES, threads=1, margin=0)
    logits = np.zeros((1, BYTES.width), dtype=np.float32)
    logits[0, ord("y")] = 10.0
    m = c.grammar.matcher()
    kernel.mask(logits, [MaskRow(0, m, remaining=3)])
    assert int(np.argmax(logits[0])) == ord("x") and not np.isfinite(logits[0, ord("y")])
    # With room for it, the model's choice stands.
    logits = np.zeros((1, BYTES.width), dtype=np.float32)
    logits[0, ord("y")] = 10.0
    kernel.mask(logits, [MaskRow(0, c.grammar.matcher(), remaining=30)])
    assert int(np.argmax(logits[0])) == ord("y")


def test_apply_bitmask_paths_agree() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    width = 100
    mask = rng.integers(-(2**31), 2**31 - 1, size=(2, 4), dtype=np.int64).astype(np.int32)
    base = rng.standard_normal((3, width)).astype(np.float32)
    ref = base.copy()
    apply_token_bitmask_(ref, mask, [0, 2])
    for dtype in (torch.float32, torch.bfloat16):
        t = torch.from_numpy(base.copy()).to(dtype)
        apply_token_bitmask_(t, mask, [0, 2])
        assert (torch.isfinite(t).numpy() == np.isfinite(ref)).all(), dtype
    assert np.isfinite(ref[1]).all()
    # Logits wider than the mask: the extra columns are never allowed.
    wide = np.zeros((1, 140), dtype=np.float32)
    apply_token_bitmask_(wide, np.full((1, 4), -1, dtype=np.int32))
    assert np.isfinite(wide[0, :128]).all() and not np.isfinite(wide[0, 128:]).any()


def test_default_cache_is_shared() -> None:
    assert default_cache() is default_cache()


def test_deprecated_processor_names_still_work() -> None:
    with pytest.warns(DeprecationWarning, match="TransformersLogitsProcessor"):
        cls = corral.CorralLogitsProcessor
    assert cls is corral.TransformersLogitsProcessor
    from corral.generation import llamacpp_processor

    with pytest.warns(DeprecationWarning, match="LlamaCppLogitsProcessor"):
        assert llamacpp_processor.CorralLlamaLogitsProcessor is corral.LlamaCppLogitsProcessor
    from corral import vllm

    # vLLM's processor keeps its name; it is a different class from the transformers one.
    assert "CorralLogitsProcessor" in vllm.__all__
    assert "CorralLogitsProcessor" not in corral.__all__
