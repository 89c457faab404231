"""Per-step decode records (``corral.runtime.trace``): logprobs under the mask, allowed counts,
the choices the mask removed, and the forced tokens — checked against a hand replay of the
model's logits and the matcher's masks on SmolLM2."""

from __future__ import annotations

import numpy as np
import pytest

import corral
from corral.generation.decode import decode
from corral.runtime.masks import bitmask_to_bool, full_bitmask
from corral.runtime.trace import StepTrace, record_step

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 12}, "n": {"type": "integer"}},
    "required": ["city", "n"],
    "additionalProperties": False,
}


def _replay_logits(backend: corral.backends.Backend, prompt: list[int], tokens: list[int]) -> np.ndarray:
    """The model's next-token logits after ``prompt + tokens`` (one fresh forward pass)."""
    out = backend.new_batch().forward([prompt + tokens])
    row = out[0]
    if not isinstance(row, np.ndarray):
        row = row.detach().float().cpu().numpy()
    return np.asarray(row, dtype=np.float64)


def test_trace_matches_hand_computation(smol_model: corral.backends.Backend) -> None:
    tok = smol_model.tokenizer
    grammar = corral.compile_json_schema(SCHEMA, tok, whitespace="compact", escapes="canonical")
    prompt = smol_model.render("Give the city of Paris and the number 7 as JSON.")
    outs, _ = decode(smol_model, [prompt], [grammar], max_new_tokens=40, trace=5)
    out = outs[0]
    trace = out.trace
    assert trace is not None and trace.steps
    # Every output token is accounted for exactly once, in order.
    rebuilt = list(trace.leading)
    for rec in trace.steps:
        if rec.token not in tok.eos_ids:
            rebuilt.append(rec.token)
        rebuilt += rec.forced
    rebuilt += trace.tail
    assert rebuilt == out.tokens
    assert any(rec.forced for rec in trace.steps)  # e.g. '"city": "' after the brace

    # Replay each step: the matcher's mask and the model's logits give the same record.
    m = grammar.matcher()
    assert all(m.accept_token(t) for t in trace.leading)
    done = list(trace.leading)
    mask = full_bitmask(1, tok.width)
    for rec in trace.steps[:6]:
        m.fill_next_token_bitmask(mask, 0)
        ok = bitmask_to_bool(mask, tok.width)[0]
        raw = _replay_logits(smol_model, prompt, done)
        width = min(raw.size, ok.size)
        masked = np.full_like(raw, -np.inf)
        masked[:width][ok[:width]] = raw[:width][ok[:width]]
        assert rec.allowed == int(ok.sum())
        lp = masked - (masked[np.isfinite(masked)].max())
        lp = lp - np.log(np.exp(lp[np.isfinite(lp)]).sum())
        assert rec.logprob == pytest.approx(lp[rec.token], abs=2e-3)
        assert rec.logprob <= 0.0
        assert rec.top[0][0] == rec.token  # greedy picks the most likely allowed token
        ranked = sorted((t for t, _ in rec.top), key=lambda t: -lp[t])
        assert [t for t, _ in rec.top] == ranked
        for t, _ in rec.removed:
            assert not ok[t]  # a removed choice is one the mask forbade
        if rec.token in tok.eos_ids:
            break
        for t in [rec.token, *rec.forced]:
            assert m.accept_token(t)
        done += [rec.token, *rec.forced]
    assert out.masked_steps == len(trace.steps)
    assert out.allowed_total == sum(r.allowed for r in trace.steps)


def test_untraced_rows_count_mask_density(smol_model: corral.backends.Backend) -> None:
    grammar = corral.compile_regex(r"(yes|no|maybe)[.!]", smol_model.tokenizer)
    prompt = smol_model.render("Answer yes or no.")
    outs, _ = decode(smol_model, [prompt, prompt], [grammar, None], max_new_tokens=8)
    constrained, free = outs
    assert constrained.trace is None
    assert 0 < constrained.masked_steps <= len(constrained.tokens)
    assert 0 < constrained.allowed_total < constrained.masked_steps * smol_model.tokenizer.width
    assert free.masked_steps == 0 and free.allowed_total == 0


def test_record_step_removed_and_bounds() -> None:
    raw = np.array([3.0, 2.0, 1.0, 0.0, -1.0])
    masked = np.array([-np.inf, 2.0, -np.inf, 0.0, -np.inf])
    rec = record_step(raw, masked, 1, 2, top_k=2)
    z = np.log(np.exp(2.0) + np.exp(0.0))
    assert rec.logprob == pytest.approx(2.0 - z)
    assert [t for t, _ in rec.top] == [1, 3]
    assert [t for t, _ in rec.removed] == [0, 2]  # the model's favourites the mask took away
    assert rec.removed[0][1] == pytest.approx(3.0 - np.log(np.exp(raw).sum()))
    with pytest.raises(ValueError, match="top_k"):
        StepTrace(top_k=21)
