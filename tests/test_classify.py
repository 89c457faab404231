"""corral.classify on the real SmolLM2-135M-Instruct: exact label probabilities, batching,
thresholds, calibration, agreement with generate(choices=...), bad input, and the CLI."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import corral
from corral.classification import (
    CONTENT_FREE_TEXTS,
    content_free_prior,
    results_from_scores,
    score_labels,
    temperature_for,
)

pytestmark = [pytest.mark.real_tokenizer, pytest.mark.slow]

TICKETS = [
    "I was charged twice for my subscription this month.",
    "The app crashes every time I open the settings page.",
    "How do I change the e-mail address on my account?",
    "Please refund the duplicate payment on my card.",
    "I get error 500 when uploading a file.",
]
SINGLE = ["payment", "technical", "account"]  # one token each, distinct
SHARED = ["refund_request", "refund_status", "tech_issue"]  # shared prefix, multi-token
NESTED = ["refund", "refund_request", "billing"]  # one label is a token-prefix of another


def by_hand(model: Any, text: str, labels: list[str], end: bool, template: str = "{text}") -> np.ndarray:
    """Label probabilities from full forward passes of prompt + label (one per label)."""
    import torch

    ptext, add = model.render_text(template.format(text=text))
    pids = model.encode(ptext, add_special=add)
    eos = list(model.tokenizer.eos_ids)
    scores = []
    for lab in labels:
        joint = model.encode(ptext + lab, add_special=add)
        assert joint[: len(pids)] == pids
        lids = joint[len(pids) :]
        with torch.no_grad():
            logits = model.model(torch.tensor([pids + lids])).logits[0].double()
        logp = torch.log_softmax(logits, dim=-1)
        n = len(pids)
        total = sum(float(logp[n - 1 + k, t]) for k, t in enumerate(lids))
        if end:
            total += float(torch.logsumexp(logp[n - 1 + len(lids), eos], dim=0))
        scores.append(total)
    s = np.array(scores)
    return np.exp(s - s.max()) / np.exp(s - s.max()).sum()


@pytest.mark.parametrize(
    ("labels", "end"),
    [(SINGLE, False), (SHARED, False), (NESTED, True)],
    ids=["single-token", "shared-prefix", "prefix-of-another"],
)
def test_probabilities_match_hand_computation(smol_model: Any, labels: list[str], end: bool) -> None:
    rs = corral.classify(smol_model, TICKETS[:2], labels, template="{text}")
    for text, r in zip(TICKETS[:2], rs, strict=True):
        expected = by_hand(smol_model, text, labels, end)
        got = np.array([r.probabilities[lab] for lab in labels])
        assert np.abs(got - expected).max() < 1e-4, (got, expected)
        assert r.top_label == labels[int(np.argmax(expected))]
        assert math.isclose(sum(r.probabilities.values()), 1.0, rel_tol=1e-9)


def test_label_sets_have_the_shapes_the_tests_need(smol_model: Any) -> None:
    enc = smol_model.encode
    assert len(enc("refund_request")) > 1 and enc("refund_request")[0] == enc("refund_status")[0]
    assert all(len(enc(x)) == 1 for x in SINGLE) and len({enc(x)[0] for x in SINGLE}) == 3
    assert enc("refund_request")[: len(enc("refund"))] == enc("refund")


def test_score_end_is_on_only_for_prefix_labels(smol_model: Any) -> None:
    plain = score_labels(smol_model, TICKETS[:1], SHARED)
    with_end = score_labels(smol_model, TICKETS[:1], SHARED, score_end=True)
    assert (with_end < plain).all()  # the end token's log-probability is negative
    auto = score_labels(smol_model, TICKETS[:1], NESTED)
    assert np.allclose(auto, score_labels(smol_model, TICKETS[:1], NESTED, score_end=True))


def test_batch_equals_one_at_a_time(smol_model: Any) -> None:
    batch = corral.classify(smol_model, TICKETS, SHARED, batch_size=4)
    for text, b in zip(TICKETS, batch, strict=True):
        one = corral.classify(smol_model, [text], SHARED, batch_size=1)[0]
        assert one.top_label == b.top_label
        for lab in SHARED:
            assert abs(one.probabilities[lab] - b.probabilities[lab]) < 1e-4


def test_threshold_routes_exactly_the_items_below_it(smol_model: Any) -> None:
    plain = corral.classify(smol_model, TICKETS, SINGLE)
    cut = float(np.median([r.probability for r in plain]))
    routed = corral.classify(smol_model, TICKETS, SINGLE, threshold=cut)
    for p, r in zip(plain, routed, strict=True):
        assert r.review == (p.probability < cut)
        assert r.label == (None if r.review else p.top_label)
        assert r.top_label in SINGLE


def test_length_normalisation_divides_by_token_count(smol_model: Any) -> None:
    total = score_labels(smol_model, TICKETS[:1], SHARED)
    mean = score_labels(smol_model, TICKETS[:1], SHARED, length_normalize=True)
    ptext, add = smol_model.render_text(
        corral.classification.DEFAULT_TEMPLATE.format(
            text=TICKETS[0],
            labels="",
            legend="\n".join(f"- {x}" for x in SHARED),
            instructions=corral.classification.DEFAULT_INSTRUCTIONS,
        )
    )
    pids = smol_model.encode(ptext, add_special=add)
    lengths = [len(corral.generation.scoring.answer_ids(smol_model, ptext, pids, x, add)) + 1 for x in SHARED]
    assert np.allclose(mean[0], total[0] / np.array(lengths))


def test_generate_choices_agrees_with_classify(smol_model: Any) -> None:
    for labels in (SINGLE, SHARED, NESTED):
        cls = corral.classify(smol_model, TICKETS, labels, template="{text}")
        gen = corral.generate(smol_model, TICKETS, choices=labels)
        assert [g.text for g in gen] == [c.top_label for c in cls]
        assert all(g.valid and g.value in labels for g in gen)


def test_sampled_choices_stay_in_the_set(smol_model: Any) -> None:
    for seed in range(4):
        r = corral.generate(smol_model, TICKETS[0], choices=SHARED, temperature=1.5, seed=seed)
        assert r.value in SHARED


def test_temperature_scaling_minimises_nll() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(400, 3)) * 3
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    gold = [int(rng.choice(3, p=p)) for p in probs]
    t = temperature_for(logits * 2.5, gold)  # over-confident scores: the fit should undo the 2.5
    assert 2.0 < t < 3.1

    def nll(tt: float) -> float:
        z = logits * 2.5 / tt
        z = z - z.max(axis=1, keepdims=True)
        lp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        return float(-lp[np.arange(400), gold].mean())

    assert nll(t) <= min(nll(t * 1.1), nll(t / 1.1))


def test_fit_temperature_on_the_model(smol_model: Any) -> None:
    gold = ["payment", "technical", "account", "payment", "technical"]
    t = corral.fit_temperature(smol_model, TICKETS, gold, SINGLE)
    assert t > 0
    rs = corral.classify(smol_model, TICKETS, SINGLE, temperature=t)
    assert all(r.top_label in SINGLE for r in rs)


def test_bad_input(smol_model: Any) -> None:
    with pytest.raises(ValueError, match="empty"):
        corral.classify(smol_model, ["x"], [])
    with pytest.raises(ValueError, match="twice"):
        corral.classify(smol_model, ["x"], ["a", "a"])
    with pytest.raises(ValueError, match="empty string"):
        corral.classify(smol_model, ["x"], ["a", ""])
    with pytest.raises(TypeError):
        corral.classify(smol_model, ["x"], "billing")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        corral.classify(smol_model, "one text", SINGLE)
    with pytest.raises(corral.CorralError, match="text 1.*context"):
        corral.classify(smol_model, ["short", "word " * 9000], SINGLE)
    with pytest.raises(ValueError, match="threshold"):
        corral.classify(smol_model, ["x"], SINGLE, threshold=1.5)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    return subprocess.run(
        [sys.executable, "-m", "corral", "classify", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_cli_one_line_per_input_line(smol_model: Any, tmp_path: Path) -> None:
    inp = tmp_path / "tickets.jsonl"
    inp.write_text(
        json.dumps({"id": "a", "text": TICKETS[0]})
        + "\nnot json\n"
        + json.dumps(TICKETS[1])
        + '\n{"body": "x"}\n'
    )
    out = tmp_path / "out.jsonl"
    proc = _cli(
        "--labels",
        "billing,technical,account",
        "--input",
        str(inp),
        "--on-bad-line",
        "skip",
        "--output",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["line"] for x in lines] == [1, 2, 3, 4]
    labels = ("billing", "technical", "account")
    assert lines[0]["id"] == "a" and lines[0]["label"] in labels and lines[2]["label"] in labels
    assert "not JSON" in lines[1]["error"] and "text" in lines[3]["error"]
    proc = _cli("--labels", "billing,technical,account", "--input", str(inp))
    assert proc.returncode == 2 and ":2:" in proc.stderr and "Traceback" not in proc.stderr
    proc = _cli("--labels", "a,a", "--text", "x")
    assert proc.returncode == 2 and "twice" in proc.stderr


def test_contextual_calibration_divides_out_the_prior_by_hand() -> None:
    # A label-biased case written out: the model puts 50% on the first label for content-free
    # inputs (two of them, averaged), and a text's raw distribution is [0.6, 0.3, 0.1].
    labels = ["billing", "technical", "account"]
    scores = np.log(np.array([[0.6, 0.3, 0.1], [0.2, 0.2, 0.6]]))
    cf = np.log(np.array([[0.6, 0.2, 0.2], [0.4, 0.3, 0.3]]))
    prior = content_free_prior(cf)
    assert np.allclose(prior, [0.5, 0.25, 0.25])
    rs = results_from_scores(scores, labels, prior=prior)
    # 0.6/0.5, 0.3/0.25, 0.1/0.25 = 1.2, 1.2, 0.4 -> divided by 2.8
    assert np.allclose([rs[0].probabilities[x] for x in labels], [1.2 / 2.8, 1.2 / 2.8, 0.4 / 2.8])
    # 0.2/0.5, 0.2/0.25, 0.6/0.25 = 0.4, 0.8, 2.4 -> divided by 3.6
    assert np.allclose([rs[1].probabilities[x] for x in labels], [0.4 / 3.6, 0.8 / 3.6, 2.4 / 3.6])
    assert rs[0].logprobs["billing"] == pytest.approx(math.log(0.6))  # raw scores kept
    # With a temperature the prior is taken at the same temperature: softmax(s / T) / p_cf(T).
    t = 2.0
    p = np.sqrt([0.6, 0.3, 0.1]) / np.sqrt([0.6, 0.3, 0.1]).sum()
    q = (np.sqrt([[0.6, 0.2, 0.2], [0.4, 0.3, 0.3]]).T / np.sqrt([[0.6, 0.2, 0.2], [0.4, 0.3, 0.3]]).sum(1)).T
    want = p / q.mean(axis=0)
    got = results_from_scores(scores, labels, temperature=t, prior=content_free_prior(cf, t))[0]
    assert np.allclose([got.probabilities[x] for x in labels], want / want.sum())


def test_calibrate_on_the_model_equals_the_hand_computation(smol_model: Any) -> None:
    raw = score_labels(smol_model, TICKETS, SINGLE)
    cf = score_labels(smol_model, list(CONTENT_FREE_TEXTS), SINGLE)
    p = np.exp(raw - raw.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    pc = np.exp(cf - cf.max(axis=1, keepdims=True))
    pc = (pc / pc.sum(axis=1, keepdims=True)).mean(axis=0)
    want = p / pc
    want /= want.sum(axis=1, keepdims=True)
    rs = corral.classify(smol_model, TICKETS, SINGLE, calibrate=True)
    got = np.array([[r.probabilities[x] for x in SINGLE] for r in rs])
    # Same batches would give the same numbers; the content-free rows share batches with the
    # texts in classify, and float32 logits move by ~1e-6 with the batch's padding.
    assert np.abs(got - want).max() < 1e-4
    assert [r.top_label for r in rs] == [SINGLE[i] for i in want.argmax(axis=1)]
    custom = corral.classify(smol_model, TICKETS[:1], SINGLE, calibrate=["nothing"])
    assert custom[0].probabilities != rs[0].probabilities
    with pytest.raises(ValueError, match="at least one"):
        corral.classify(smol_model, TICKETS[:1], SINGLE, calibrate=[])
    gold = ["payment", "technical", "account", "payment", "technical"]
    t = corral.fit_temperature(smol_model, TICKETS, gold, SINGLE, calibrate=True)
    assert t > 0


def test_cli_calibrate_agrees_with_the_library(smol_model: Any) -> None:
    proc = _cli(
        "--labels", ",".join(SINGLE), "--text", TICKETS[0], "--calibrate", "--backend", "transformers"
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)["probabilities"]
    want = corral.classify(smol_model, TICKETS[:1], SINGLE, calibrate=True)[0].probabilities
    raw = corral.classify(smol_model, TICKETS[:1], SINGLE)[0].probabilities
    assert max(abs(got[x] - want[x]) for x in SINGLE) < 1e-4
    assert max(abs(raw[x] - want[x]) for x in SINGLE) > 1e-3  # calibration changed something


def test_label_orders_average_the_rotations(smol_model: Any) -> None:
    """label_orders=k: the probabilities are the mean over the legend's k cyclic orders of each
    order's own softmax (scores in label order), computed here by hand."""
    from corral.generation.scoring import calibrated_probs as _calibrated

    labels = SINGLE
    rs = corral.classify(smol_model, TICKETS[:3], labels, label_orders=3)
    want = np.zeros((3, 3))
    for k in range(3):
        order = [*labels[k:], *labels[:k]]
        want += _calibrated(score_labels(smol_model, TICKETS[:3], labels, legend_order=order), 1.0, None) / 3
    for r, w in zip(rs, want, strict=True):
        assert [r.probabilities[x] for x in labels] == pytest.approx(list(w), abs=1e-6)
        assert r.top_label == labels[int(np.argmax(w))]
    one = corral.classify(smol_model, TICKETS[:3], labels, label_orders=1)
    plain = corral.classify(smol_model, TICKETS[:3], labels)
    assert [r.probabilities for r in one] == [r.probabilities for r in plain]
    for bad in (0, 4, True, 1.5):
        with pytest.raises(ValueError, match="label_orders"):
            corral.classify(smol_model, ["x"], labels, label_orders=bad)


def test_reasoning_mode_scores_after_the_rationale(smol_model: Any) -> None:
    from corral.classification import DEFAULT_TEMPLATE, REASONING_NOTE
    from corral.generation.scoring import calibrated_probs as _calibrated

    rs = corral.classify(smol_model, TICKETS[:2], SINGLE, reasoning=12)
    for r in rs:
        assert r.rationale and "\n" not in r.rationale and r.to_dict()["rationale"] == r.rationale
    prefixes = [f"{r.rationale}\nLabel: " for r in rs]
    scores = score_labels(
        smol_model, TICKETS[:2], SINGLE, template=DEFAULT_TEMPLATE + REASONING_NOTE, answer_prefixes=prefixes
    )
    want = _calibrated(scores, 1.0, None)
    for r, w in zip(rs, want, strict=True):
        assert [r.probabilities[x] for x in SINGLE] == pytest.approx(list(w), abs=1e-6)
    assert corral.classify(smol_model, TICKETS[:1], SINGLE)[0].rationale is None
    for bad in (0, -3, 5000, "yes"):
        with pytest.raises(ValueError, match="reasoning"):
            corral.classify(smol_model, ["x"], SINGLE, reasoning=bad)
