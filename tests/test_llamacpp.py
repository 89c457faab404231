"""The llama.cpp backend (``corral[llama]``) with the bundled SmolLM2-135M-Instruct GGUF.

Every constrained output must parse and validate; batching, jump-ahead, the budget finish,
streaming and llama-cpp-python's own ``logits_processor`` hook are covered. Skipped when
llama-cpp-python is not installed.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest
from generation_cases import GRAMMAR, GRAMMAR_RE, PERSON, valid_json
from generation_cases import REGEX_CASES as ALL_REGEX_CASES
from generation_cases import SCHEMA_CASES as ALL_SCHEMA_CASES
from helpers import llama_cpp_llama

import corral
from corral import models

llama_cpp = pytest.importorskip("llama_cpp")

pytestmark = [pytest.mark.real_tokenizer, pytest.mark.slow]

# A subset of the shared cases keeps this file quick.
SCHEMA_CASES = [ALL_SCHEMA_CASES[i] for i in (0, 2, 3, 7, 8, 10)]
REGEX_CASES = [ALL_REGEX_CASES[i] for i in (0, 1, 3, 4)]


@pytest.fixture(scope="module")
def gguf_path() -> Any:
    try:
        return models.smollm2_gguf_path()
    except models.ModelNotFoundError as e:  # pragma: no cover - CI installs it
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def llm(gguf_path: Any) -> Any:
    return corral.load_model(backend="llama.cpp")


def test_extra_buffer_types_off_for_amx_builds() -> None:
    from corral.backends.llama_cpp import extra_buffer_types_safe

    amx = "CPU : SSE3 = 1 | AVX2 = 1 | AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 | "
    assert not extra_buffer_types_safe(amx)
    assert not extra_buffer_types_safe("CPU : AMX_INT8 = 1 | REPACK = 1 |")  # first flag
    assert extra_buffer_types_safe("CPU : SSE3 = 1 | AVX2 = 1 | REPACK = 1 | ")
    assert extra_buffer_types_safe("CPU : AMX_INT8 = 0 | AVX2 = 1 |")
    assert extra_buffer_types_safe("")


def test_extra_buffer_types_follow_the_build(llm: Any, gguf_path: Any) -> None:
    # The default reads the build's own system-info line; an explicit choice wins.
    info = llama_cpp.llama_print_system_info().decode()
    assert llm.extra_buffer_types == ("AMX_INT8 = 1" not in info)
    from corral.backends.llama_cpp import LlamaCppBackend

    off = LlamaCppBackend(gguf_path, extra_buffer_types=False, max_sequences=1)
    assert off.extra_buffer_types is False
    r = corral.generate(off, "Say yes.", regex="yes|no", max_new_tokens=4)
    assert r.text in ("yes", "no")


def test_backend_matches_the_model(llm: Any, gguf_path: Any) -> None:
    from corral.backends.llama_cpp import LlamaCppBackend

    assert isinstance(llm, LlamaCppBackend) and llm.name == "llama.cpp"
    tok = llm.tokenizer
    assert tok.width == llm.n_vocab == 49152
    # Every token's bytes agree with llama.cpp's own pieces.
    bad = [i for i in range(len(tok)) if llm.token_piece(i) != tok.token_bytes[i]]
    assert not bad, bad[:10]
    assert tok.ids_of("<|im_end|>")[0] in tok.eos_ids
    assert set(corral.Tokenizer.from_gguf(gguf_path).eos_ids) <= set(tok.eos_ids)
    assert llm.has_chat_template and llm.context_length == 4096
    ids = llm.render([{"role": "user", "content": "Hi"}])
    text = tok.decode(ids).decode()
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    assert ids.count(tok.ids_of("<|im_start|>")[0]) == 3  # special-token text became the token
    assert llm.render("Hi", chat=False) == llm.encode("Hi", add_special=True)


def test_batch_forward_matches_single_rows(llm: Any) -> None:
    """Rows decoded together (different lengths, multi-token chunks) equal rows decoded alone;
    fork continues a row; keep drops rows."""
    a, b = llm.encode("The capital of France is"), llm.encode("One, two, three, four")
    solo = []
    for p in (a, b):
        batch = llm.new_batch()
        first = batch.forward([p])
        second = batch.forward([[13, 284]])
        solo.append((np.asarray(first[0]), np.asarray(second[0])))
    batch = llm.new_batch()
    first = batch.forward([a, b])
    second = batch.forward([[13, 284], [13, 284]])
    for i in range(2):
        np.testing.assert_allclose(np.asarray(first[i]), solo[i][0], atol=2e-3)
        np.testing.assert_allclose(np.asarray(second[i]), solo[i][1], atol=2e-3)
    fork = batch.fork([1, 1, 0])
    allpos = fork.forward([[11], [11, 1232], [11]], all_positions=True)
    assert tuple(allpos.shape) == (3, 2, llm.n_vocab)
    np.testing.assert_allclose(np.asarray(allpos[0, 1]), np.asarray(allpos[1, 0]), atol=2e-3)
    batch.keep([1])
    third = batch.forward([[11]])
    np.testing.assert_allclose(np.asarray(third[0]), np.asarray(allpos[0, 1]), atol=2e-3)
    # extend: rows prefilled apart, then stepped together (continuous batching).
    late = llm.new_batch()
    late.forward([a])
    batch.extend(late)
    merged = batch.forward([[11], [13]])
    alone = llm.new_batch()
    alone.forward([a])
    np.testing.assert_array_equal(np.asarray(merged[1]), np.asarray(alone.forward([[13]])[0]))
    with pytest.raises(ValueError):
        late.forward([[1]])
    in_use = llm.max_sequences - len(llm._free_seqs)
    del batch, fork, late, alone
    assert llm.max_sequences - len(llm._free_seqs) == in_use - 6  # dropped batches free their rows


def test_schema_generations_greedy_and_sampled_all_validate(llm: Any) -> None:
    for sampled in (False, True):
        kw: dict[str, Any] = dict(temperature=0.9, top_p=0.95, seed=7) if sampled else {}
        for prompt, schema in SCHEMA_CASES:
            r = corral.generate(llm, prompt, schema=schema, max_new_tokens=96, **kw)
            assert valid_json(r.text, schema), (prompt, r.text)
            assert r.valid and r.value == json.loads(r.text)


def test_regex_grammar_and_choices(llm: Any) -> None:
    for sampled in (False, True):
        kw: dict[str, Any] = dict(temperature=1.0, top_k=50, seed=3) if sampled else {}
        for prompt, rx in REGEX_CASES:
            r = corral.generate(llm, prompt, regex=rx, max_new_tokens=40, **kw)
            assert re.fullmatch(rx, r.text), (rx, r.text)
        r = corral.generate(
            llm, "Write an SQL query listing users' names.", grammar=GRAMMAR, max_new_tokens=40, **kw
        )
        assert GRAMMAR_RE.fullmatch(r.text), r.text
        r = corral.generate(
            llm, "Pick the odd one out: apple, pear, hammer.", choices=["apple", "pear", "hammer"], **kw
        )
        assert r.value in ("apple", "pear", "hammer")
        r = corral.generate(llm, "Any JSON about a cat.", json=True, max_new_tokens=48, **kw)
        json.loads(r.text)


def test_seeded_sampling_is_reproducible(llm: Any) -> None:
    a = corral.generate(llm, "A colour:", regex=r"[a-z]{3,8}", temperature=1.5, seed=5)
    b = corral.generate(llm, "A colour:", regex=r"[a-z]{3,8}", temperature=1.5, seed=5)
    assert a.text == b.text


def test_batch_equals_single_under_greedy(llm: Any) -> None:
    prompts = [p for p, _ in SCHEMA_CASES[:3]] + ["Extract the person as JSON: Bob, 30."]
    calls = llm.decode_calls
    batch = corral.generate(llm, prompts, schema=PERSON, max_new_tokens=48)
    batch_calls = llm.decode_calls - calls
    assert batch_calls <= max(r.forward_passes for r in batch)  # one llama_decode per step for all rows
    for p, b in zip(prompts, batch, strict=True):
        single = corral.generate(llm, p, schema=PERSON, max_new_tokens=48)
        assert single.text == b.text
        assert valid_json(b.text, PERSON)


def test_jump_ahead_saves_forward_passes(llm: Any) -> None:
    total_on = total_off = 0
    for prompt, schema in SCHEMA_CASES[:4]:
        on = corral.generate(llm, prompt, schema=schema, max_new_tokens=96)
        off = corral.generate(llm, prompt, schema=schema, max_new_tokens=96, jump_ahead=False)
        assert valid_json(on.text, schema) and valid_json(off.text, schema)
        assert on.forced_tokens > 0 and off.forced_tokens == 0
        assert off.forward_passes >= off.completion_tokens
        total_on += on.forward_passes
        total_off += off.forward_passes
    assert total_on * 1.5 <= total_off, (total_on, total_off)


def test_token_limit_yields_valid_truncated_output(llm: Any) -> None:
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "string", "maxLength": 30}}},
        "required": ["items"],
    }
    r = corral.generate(llm, "List twenty animals as JSON.", schema=schema, max_new_tokens=20)
    assert r.completion_tokens <= 20 and valid_json(r.text, schema), r.text
    assert r.stop_reason == "max_tokens" and r.truncated
    r = corral.generate(llm, "A number", regex=r"[0-9]{3,30}", max_new_tokens=3)
    assert re.fullmatch(r"[0-9]{3,30}", r.text) and r.completion_tokens <= 3


def test_streaming_deltas_add_up(llm: Any) -> None:
    s = corral.stream(llm, SCHEMA_CASES[0][0], schema=PERSON, max_new_tokens=48)
    deltas = list(s)
    assert s.result is not None and len(deltas) > 1
    assert "".join(deltas) == s.result.text and valid_json(s.result.text, PERSON)


def test_kv_cache_grows_when_rows_outgrow_it(gguf_path: Any) -> None:
    from corral.backends.llama_cpp import LlamaCppBackend

    small = LlamaCppBackend(gguf_path, threads=1, kv_cells=256)  # < 4 rows of ~40 + 25..45 tokens
    prompts = [f"Write a long story about a {w}." for w in ("cat", "dog", "owl", "fox")]
    rx = r"[a-z ]{100,200}"
    big = corral.generate(small, prompts, regex=rx, max_new_tokens=45)
    assert small._cells > 256
    assert all(re.fullmatch(rx, r.text) for r in big)
    assert corral.generate(small, prompts[3], regex=rx, max_new_tokens=45).text == big[3].text
    small.close()
    with pytest.raises(corral.CorralError, match="closed"):
        corral.generate(small, prompts[0], regex=rx, max_new_tokens=45)


def test_logits_processor_hook(gguf_path: Any) -> None:
    """llama-cpp-python's own create_completion, constrained through logits_processor."""
    from corral.backends.llama_cpp import render_chat_template
    from corral.integrations.llama_cpp import LlamaCppLogitsProcessor

    model = llama_cpp_llama(
        model_path=str(gguf_path), n_ctx=512, n_threads=1, n_threads_batch=1, verbose=False
    )
    tok = corral.Tokenizer.from_gguf(gguf_path)
    template = model.metadata["tokenizer.chat_template"]
    g = corral.compile_json_schema(PERSON, tok, whitespace="pretty")
    proc = LlamaCppLogitsProcessor(g, max_new_tokens=48)
    for prompt, kw in (
        (SCHEMA_CASES[0][0], dict(temperature=0.0)),
        ("Invent a person as JSON.", dict(temperature=1.0, seed=4)),
    ):
        text = render_chat_template(template, [{"role": "user", "content": prompt}])
        out = model.create_completion(
            text, max_tokens=48, logits_processor=llama_cpp.LogitsProcessorList([proc]), **kw
        )
        gen = out["choices"][0]["text"]
        assert valid_json(gen, PERSON), gen
        assert out["choices"][0]["finish_reason"] == "stop"
    # A tight budget is steered to a complete output; a regex through the same hook.
    proc = LlamaCppLogitsProcessor(g, max_new_tokens=16)
    out = model.create_completion(
        text, max_tokens=16, temperature=0.0, logits_processor=llama_cpp.LogitsProcessorList([proc])
    )
    assert valid_json(out["choices"][0]["text"], PERSON), out["choices"][0]["text"]
    proc = LlamaCppLogitsProcessor(corral.compile_regex(r"(yes|no)", tok))
    out = model(
        "Is the sky blue? Answer:",
        max_tokens=5,
        temperature=0.0,
        logits_processor=llama_cpp.LogitsProcessorList([proc]),
    )
    assert out["choices"][0]["text"] in ("yes", "no")


def test_greedy_agreement_with_transformers(llm: Any, smol_model: Any) -> None:
    """Quantized (llama.cpp) vs de-quantized (transformers) weights: report, don't assert."""
    same = 0
    for prompt, schema in SCHEMA_CASES[:3]:
        a = corral.generate(llm, prompt, schema=schema, max_new_tokens=64)
        b = corral.generate(smol_model, prompt, schema=schema, max_new_tokens=64)
        assert valid_json(a.text, schema) and valid_json(b.text, schema)
        same += a.text == b.text
        if a.text != b.text:
            print(f"\nllama.cpp:    {a.text!r}\ntransformers: {b.text!r}")
    print(f"\nllama.cpp vs transformers greedy: {same}/3 identical")
