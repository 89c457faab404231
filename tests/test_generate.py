"""Constrained generation with the real SmolLM2-135M-Instruct model (transformers backend).

Every constrained output must parse and validate (jsonschema / re.fullmatch / the grammar);
the same prompts without the constraint are run for contrast (failures reported, not asserted).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from generation_cases import GRAMMAR, GRAMMAR_RE, PERSON, REGEX_CASES, SCHEMA_CASES, valid_json

import corral
from corral.errors import BudgetError

pytestmark = [pytest.mark.real_tokenizer, pytest.mark.slow]


def test_schema_generations_greedy_and_sampled_all_validate(smol_model: Any) -> None:
    prompts = [p for p, _ in SCHEMA_CASES]
    n = 0
    for sampled in (False, True):
        for prompt, schema in SCHEMA_CASES:
            kw = dict(temperature=0.9, top_p=0.95, seed=7) if sampled else {}
            r = corral.generate(smol_model, prompt, schema=schema, max_new_tokens=96, **kw)
            n += 1
            assert valid_json(r.text, schema), (prompt, r.text)
            assert r.valid and r.error is None
            assert r.value == json.loads(r.text)
    assert n == 2 * len(prompts) >= 24


def test_regex_and_grammar_generations_all_match(smol_model: Any) -> None:
    n = 0
    for sampled in (False, True):
        kw = dict(temperature=1.0, top_k=50, seed=3) if sampled else {}
        for prompt, rx in REGEX_CASES:
            r = corral.generate(smol_model, prompt, regex=rx, max_new_tokens=40, **kw)
            assert re.fullmatch(rx, r.text), (rx, r.text)
            n += 1
        for q in ("Write an SQL query listing users' names.", "SQL: the price of item 7 in table products."):
            r = corral.generate(smol_model, q, grammar=GRAMMAR, max_new_tokens=40, **kw)
            assert GRAMMAR_RE.fullmatch(r.text), r.text
            n += 1
    for sampled in (False, True):
        kw = dict(temperature=1.0, seed=11) if sampled else {}
        r = corral.generate(
            smol_model,
            "Pick the odd one out: apple, pear, hammer.",
            choices=["apple", "pear", "hammer"],
            **kw,
        )
        assert r.value in ("apple", "pear", "hammer")
        r = corral.generate(smol_model, "Any JSON about a cat.", json=True, max_new_tokens=48, **kw)
        json.loads(r.text)
        n += 2
    assert n == 20


def test_unconstrained_contrast(smol_model: Any) -> None:
    """The product's reason to exist: the same prompts free vs constrained."""
    free_failures = 0
    results = corral.generate(smol_model, [p for p, _ in SCHEMA_CASES], max_new_tokens=96)
    for (_, schema), r in zip(SCHEMA_CASES, results, strict=False):
        free_failures += not valid_json(r.text, schema)
    constrained = corral.generate(
        smol_model, [p for p, _ in SCHEMA_CASES[:4]], schema=PERSON, max_new_tokens=64
    )
    assert all(valid_json(r.text, PERSON) for r in constrained)
    print(f"\nfree generation: {free_failures}/{len(SCHEMA_CASES)} outputs fail to parse or validate")


def test_batch_equals_single_under_greedy(smol_model: Any) -> None:
    prompts = [p for p, _ in SCHEMA_CASES[:3]] + ["Extract the person as JSON: Bob, 30."]
    batch = corral.generate(smol_model, prompts, schema=PERSON, max_new_tokens=48)
    for p, b in zip(prompts, batch, strict=False):
        single = corral.generate(smol_model, p, schema=PERSON, max_new_tokens=48)
        assert single.text == b.text
        assert valid_json(b.text, PERSON)


def test_jump_ahead_saves_forward_passes(smol_model: Any) -> None:
    tokens_on = passes_on = same = 0
    for prompt, schema in SCHEMA_CASES[:6]:
        on = corral.generate(smol_model, prompt, schema=schema, max_new_tokens=96)
        off = corral.generate(smol_model, prompt, schema=schema, max_new_tokens=96, jump_ahead=False)
        assert valid_json(on.text, schema) and valid_json(off.text, schema)
        assert off.forward_passes >= off.completion_tokens  # one per token (+1 for EOS)
        assert on.forced_tokens > 0 and off.forced_tokens == 0
        if on.text == off.text:
            # Same output: jump-ahead only removes passes.
            assert on.forward_passes < off.forward_passes
            same += 1
        tokens_on += on.completion_tokens
        passes_on += on.forward_passes
    # Forced tokens are canonically tokenized, so an output can differ from the one-token-at-a-
    # time run (the model may have spelled a key in odd pieces); most are identical.
    assert same >= 4
    assert tokens_on >= 1.5 * passes_on, (tokens_on, passes_on)
    print(f"\njump-ahead: {tokens_on} tokens in {passes_on} forward passes; {same}/6 outputs identical")


def test_token_limit_yields_valid_truncated_output(smol_model: Any) -> None:
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "string", "maxLength": 30}}},
        "required": ["items"],
    }
    r = corral.generate(smol_model, "List twenty animals as JSON.", schema=schema, max_new_tokens=20)
    assert r.completion_tokens <= 20
    assert valid_json(r.text, schema), r.text
    assert r.stop_reason == "max_tokens" and r.truncated
    r = corral.generate(smol_model, "A number", regex=r"[0-9]{3,30}", max_new_tokens=3)
    assert re.fullmatch(r"[0-9]{3,30}", r.text) and r.completion_tokens <= 3


def test_budget_too_small_is_an_error_before_decoding(smol_model: Any) -> None:
    with pytest.raises(BudgetError, match="max_new_tokens=2"):
        corral.generate(smol_model, "x", schema=PERSON, max_new_tokens=2)


def test_streaming_deltas_add_up(smol_model: Any) -> None:
    s = corral.stream(smol_model, SCHEMA_CASES[0][0], schema=PERSON, max_new_tokens=48)
    deltas = list(s)
    assert s.result is not None and len(deltas) > 1
    assert "".join(deltas) == s.result.text
    assert valid_json(s.result.text, PERSON)
    seen: dict[int, list[str]] = {}
    rs = corral.generate(
        smol_model,
        ["Say hi", "Say bye"],
        regex=r"[a-z ]{1,12}",
        on_text=lambda i, d: seen.setdefault(i, []).append(d),
    )
    assert ["".join(seen[i]) for i in range(2)] == [r.text for r in rs]


def test_seeded_sampling_is_reproducible(smol_model: Any) -> None:
    a = corral.generate(smol_model, "A colour:", regex=r"[a-z]{3,8}", temperature=1.5, seed=5)
    b = corral.generate(smol_model, "A colour:", regex=r"[a-z]{3,8}", temperature=1.5, seed=5)
    assert a.text == b.text


def test_pydantic_result_is_an_instance(smol_model: Any) -> None:
    pydantic = pytest.importorskip("pydantic")

    class Person(pydantic.BaseModel):
        name: str = pydantic.Field(max_length=20)
        age: int = pydantic.Field(ge=0, le=120)

    r = corral.generate(smol_model, SCHEMA_CASES[0][0], schema=Person, max_new_tokens=48)
    assert isinstance(r.value, Person)


def test_bad_input_fails_before_decoding(smol_model: Any) -> None:
    with pytest.raises(corral.CorralError, match="context"):
        corral.generate(smol_model, "word " * 9000, regex="a")
    with pytest.raises(corral.CompileError):
        corral.generate(smol_model, "x", regex="(unclosed")
    with pytest.raises(corral.SchemaError):
        corral.generate(smol_model, "x", schema={"type": "string", "minLength": 5, "maxLength": 2})
    with pytest.raises(ValueError, match="one constraint"):
        corral.generate(smol_model, "x", regex="a", choices=["a"])
    with pytest.raises(FileNotFoundError, match="not found"):
        corral.load_model("/nonexistent/model.gguf")


def test_tokenizer_model_mismatch_is_reported(smol_model: Any) -> None:
    from corral.backends.hf import TransformersBackend

    class Wide:
        def __len__(self) -> int:
            return 10**6

    with pytest.raises(corral.CorralError, match="does not match"):
        TransformersBackend(smol_model.model, Wide())


def test_logits_processor_with_model_generate(smol_model: Any) -> None:
    tok, model = smol_model.hf_tokenizer, smol_model.model
    g = corral.compile_json_schema(PERSON, smol_model.tokenizer, whitespace="pretty")
    text = tok.apply_chat_template(
        [{"role": "user", "content": SCHEMA_CASES[0][0]}], add_generation_prompt=True, tokenize=False
    )
    enc = tok(text, return_tensors="pt", add_special_tokens=False)
    for budget in (48, 16):
        proc = corral.TransformersLogitsProcessor(g, max_new_tokens=budget)
        out = model.generate(**enc, logits_processor=[proc], max_new_tokens=budget, do_sample=False)
        gen = tok.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)
        assert valid_json(gen, PERSON), (budget, gen)
    ours = corral.generate(smol_model, SCHEMA_CASES[0][0], schema=PERSON, max_new_tokens=48, jump_ahead=False)
    proc = corral.TransformersLogitsProcessor(g)
    out = model.generate(**enc, logits_processor=[proc], max_new_tokens=48, do_sample=False)
    assert tok.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True) == ours.text


def test_the_agent_loop_example_thinks_calls_and_answers(smol_model: Any) -> None:
    """examples/agent_loop.py on the bundled model: a bounded think block, a call of the declared
    Python function with valid arguments, its result fed back, a prose answer."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / "agent_loop.py"
    spec = importlib.util.spec_from_file_location("agent_loop", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.run("What is the weather in Paris?", model=smol_model)
    assert out["call"]["name"] == "get_weather" and isinstance(out["call"]["arguments"]["city"], str)
    assert out["result"] == mod.get_weather(**out["call"]["arguments"])
    assert isinstance(out["reasoning"], str) and out["answer"].strip()
