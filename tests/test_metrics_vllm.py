"""The constraint-quality metrics the vLLM integration exposes (on ``prometheus_client``'s
registry, the one vLLM's ``/metrics`` serves), read back with the Prometheus text parser.

Without vLLM: the mask kernel's allowed counts (what mask density is made of) against the masked
logits on a real vocabulary, and the registry wiring. With vLLM (the ``.ci/vllm`` step): the
processor on a stub vLLM config, as tests/test_vllm.py drives it, moving each counter.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from corral.compile import ConstraintSpec, compile_constraint
from corral.runtime.kernel import MaskKernel, MaskRow

pytestmark = [pytest.mark.real_tokenizer]

prometheus_client = pytest.importorskip("prometheus_client")
parser = pytest.importorskip("prometheus_client.parser")


def _samples() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = prometheus_client.generate_latest(prometheus_client.REGISTRY).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for f in parser.text_string_to_metric_families(text)
        for s in f.samples
    }


def _get(samples: Any, name: str, **labels: str) -> float:
    return float(samples.get((name, frozenset(labels.items())), 0.0))


def test_the_kernel_counts_what_each_mask_allows(smollm2: Any) -> None:
    tok = smollm2
    kernel = MaskKernel(tok, threads=1)
    digits = compile_constraint(ConstraintSpec.regex("[0-9]{2}"), tok).grammar
    word = compile_constraint(ConstraintSpec.choices(["yes", "no"]), tok).grammar
    m_done = digits.matcher()
    for t in tok.encode("12"):
        assert m_done.accept_token(t)
    rows = [MaskRow(0, digits.matcher()), MaskRow(1, word.matcher()), MaskRow(2, m_done)]
    logits = np.zeros((3, tok.width), dtype=np.float32)
    allowed: list[int] = []
    kernel.mask(logits, rows, allowed)
    finite = [int(np.isfinite(logits[i]).sum()) for i in range(3)]
    assert allowed == finite
    assert 1 < allowed[0] < tok.width and 1 < allowed[1] < allowed[0]
    assert allowed[2] == len(set(tok.eos_ids))  # "12" is complete: only EOS


def test_quality_metrics_register_once_on_prometheus() -> None:
    from corral.vllm.metrics import quality_metrics

    q = quality_metrics()
    assert quality_metrics() is q
    before = _samples()
    q.refusal("schema_error")
    q.refusal("a code nobody knows")
    q.steps(masked=3, allowed=100, forced=1, tokens=3)
    after = _samples()
    d = lambda name, **kw: _get(after, name, **kw) - _get(before, name, **kw)  # noqa: E731
    assert d("corral_constraint_refusals_total", code="schema_error") == 1
    assert d("corral_constraint_refusals_total", code="other") == 1
    assert d("corral_masked_steps_total") == 3 and d("corral_mask_allowed_tokens_total") == 100
    assert d("corral_forced_tokens_total") == 1 and d("corral_constrained_tokens_total") == 3


# ---------------------------------------------------------------------- with vLLM


@pytest.fixture(scope="module")
def proc() -> Any:
    pytest.importorskip("vllm")
    import torch

    from corral.backends.loading import _converted_gguf
    from corral.models import smollm2_gguf_path
    from corral.vllm import CorralLogitsProcessor

    try:
        model_dir = str(_converted_gguf(smollm2_gguf_path(), False))
    except Exception as e:  # the model package is not installed
        pytest.skip(f"SmolLM2 is not available: {e}")
    mc = SimpleNamespace(
        tokenizer=model_dir,
        tokenizer_revision=None,
        trust_remote_code=False,
        try_get_generation_config=lambda: {},
        get_vocab_size=lambda: 49152,
    )
    return CorralLogitsProcessor(SimpleNamespace(model_config=mc), torch.device("cpu"), False)


def test_vllm_processor_moves_the_step_and_wait_counters(proc: Any) -> None:
    import torch
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdate

    tok = proc.tokenizer
    digits = SamplingParams(max_tokens=50, extra_args={"corral": {"regex": "[0-9]{3}"}})
    free = SamplingParams(max_tokens=50)
    out0: list[int] = []
    before = _samples()
    proc.update_state(BatchUpdate(2, [], [(0, digits, None, out0), (1, free, None, [])], []))
    logits = proc.apply(torch.zeros(2, 49152))
    allowed = int(torch.isfinite(logits[0]).sum())
    mid = _samples()
    d = lambda a, b, name, **kw: _get(b, name, **kw) - _get(a, name, **kw)  # noqa: E731
    assert d(before, mid, "corral_masked_steps_total") == 1  # the free row is not masked
    assert d(before, mid, "corral_mask_allowed_tokens_total") == allowed
    assert d(before, mid, "corral_constrained_tokens_total") == 1
    assert d(before, mid, "corral_forced_tokens_total") == 0
    waits = sum(d(before, mid, "corral_compile_wait_seconds_count", cache=c) for c in ("hit", "miss"))
    assert waits == 1
    # "123" complete: the next mask allows EOS alone, a forced step; no second compile wait.
    out0.extend(tok.encode("123"))
    proc.apply(torch.zeros(2, 49152))
    after = _samples()
    assert d(mid, after, "corral_forced_tokens_total") == 1
    assert sum(d(mid, after, "corral_compile_wait_seconds_count", cache=c) for c in ("hit", "miss")) == 0
    proc.update_state(BatchUpdate(0, [0, 1], [], []))


def test_vllm_refusals_are_counted_by_corral_error_code(proc: Any) -> None:
    from vllm import SamplingParams

    before = _samples()
    bad = SamplingParams(max_tokens=5, extra_args={"corral": {"json_schema": {"type": 5}}})
    with pytest.raises(ValueError):
        type(proc).validate_params(bad)
    malformed = SamplingParams(max_tokens=5, extra_args={"corral": {"json_schema": "{not json"}})
    with pytest.raises(ValueError):
        type(proc).validate_params(malformed)
    after = _samples()
    codes = {k[1] for k in after if k[0] == "corral_constraint_refusals_total"}
    moved = {
        dict(c)["code"]: _get(after, "corral_constraint_refusals_total", **dict(c))
        - _get(before, "corral_constraint_refusals_total", **dict(c))
        for c in codes
    }
    assert moved.get("schema_error") == 1 and moved.get("invalid_request") == 1, moved


def test_vllm_thinking_answer_split_is_counted_when_a_row_leaves(proc: Any) -> None:
    import torch
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdate

    tok = proc.tokenizer
    args = {"corral": {"json_schema": {"type": "integer"}, "thinking": {"budget_tokens": 40}}}
    p = SamplingParams(max_tokens=80, extra_args=args)
    out: list[int] = []
    before = _samples()
    proc.update_state(BatchUpdate(1, [], [(0, p, None, out)], []))
    logits = proc.apply(torch.zeros(1, 49152))
    fmt = proc.rows[0].constraint.think  # the markers as resolved for this vocabulary
    close = fmt.close.text.encode()
    ids = tok.encode(fmt.open.text) + tok.encode("hm") + tok.encode(fmt.close.text) + tok.encode("42")
    for i, t in enumerate(ids):  # the model "wants" exactly this text: each token is allowed
        if i:
            logits = proc.apply(torch.zeros(1, 49152))
        assert torch.isfinite(logits[0, t]), (tok.decode(out), t)
        out.append(t)
    proc.apply(torch.zeros(1, 49152))
    proc.update_state(BatchUpdate(0, [0], [], []))
    after = _samples()
    thinking = _get(after, "corral_output_tokens_total", part="thinking") - _get(
        before, "corral_output_tokens_total", part="thinking"
    )
    answer = _get(after, "corral_output_tokens_total", part="answer") - _get(
        before, "corral_output_tokens_total", part="answer"
    )
    assert thinking + answer == len(ids)
    # The think block ends with the first token whose text completes the close marker.
    closes = next(k for k in range(1, len(ids) + 1) if close in tok.decode(ids[:k]))
    assert thinking == closes and answer == len(ids) - closes > 0
