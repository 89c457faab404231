"""``generate(calibrate=...)``: contextual calibration of the closed choices inside JSON output
(``corral.generation.calibrated_values``)."""

from __future__ import annotations

import enum
import json
from typing import Any, Literal

import jsonschema
import numpy as np
import pytest
from pydantic import BaseModel

import corral
from corral.generation.calibrated_values import closed_choices, content_free_prompts
from corral.generation.validation import value_span
from corral.runtime.tokens import tools_for

CURRENCIES = ["EUR", "USD", "GBP", "CHF"]
RECEIPT = {
    "type": "object",
    "properties": {
        "merchant": {"type": "string", "maxLength": 30},
        "currency": {"enum": CURRENCIES},
        "paid": {"type": "boolean"},
    },
    "required": ["merchant", "currency", "paid"],
    "additionalProperties": False,
}
INSTRUCTIONS = "Extract the receipt as JSON: merchant, currency (EUR, USD, GBP or CHF), paid (true or false)."
DOCUMENT = "Boots Pharmacy, London. Vitamin C 6.99 GBP. Paid by card."


def _prompt(document: str) -> str:
    return f"{INSTRUCTIONS}\n\n{document}"


# ---------------------------------------------------------------------- where the choices are


def test_closed_choices_are_found_in_output_order_through_refs_and_unions() -> None:
    schema = {
        "$defs": {"Role": {"enum": ["customer", "supplier"]}, "Flag": {"type": "boolean"}},
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "role": {"$ref": "#/$defs/Role"},
            "tags": {"type": "array", "items": {"anyOf": [{"const": "a"}, {"const": "b"}, {"type": "null"}]}},
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"$ref": "#/$defs/Flag"}]},
            "one": {"const": "only"},
            "a/b": {"enum": [1, 2]},
        },
    }
    value = {"a/b": 1, "tags": ["a", None], "role": "supplier", "name": "x", "pair": [3, True], "one": "only"}
    assert closed_choices(schema, value) == [
        ("/a~1b", [1, 2]),
        ("/tags/0", ["a", "b", None]),
        ("/tags/1", ["a", "b", None]),
        ("/role", ["customer", "supplier"]),
        ("/pair/1", [True, False]),
    ]  # "one" has a single option: nothing to choose; "name" is free
    # A free value, an open union and a $ref that cannot be followed are not choices.
    assert closed_choices({"anyOf": [{"enum": [1, 2]}, {"type": "string"}]}, 1) == []
    assert closed_choices({"$ref": "https://example.com/x.json"}, "a") == []
    assert closed_choices({"type": "boolean", "description": "d"}, True) == [("", [True, False])]
    assert closed_choices({"type": ["boolean", "null"]}, None) == [("", [True, False, None])]


def test_closed_choices_are_bounded_on_cyclic_and_deep_schemas() -> None:
    assert closed_choices({"$ref": "#"}, 1) == []  # a $ref cycle: no choice, no RecursionError
    deep: Any = {"enum": ["x", "y"]}
    value: Any = "x"
    for _ in range(200):
        deep, value = {"type": "array", "items": deep}, [value]
    assert closed_choices(deep, value) == []  # past the depth bound: left as decoded


def test_content_free_prompts_accepts_one_or_many_and_refuses_the_rest() -> None:
    chat = [{"role": "user", "content": "N/A"}]
    assert content_free_prompts("N/A") == ["N/A"]
    assert content_free_prompts(chat) == [chat]
    assert content_free_prompts(["N/A", chat]) == ["N/A", chat]
    with pytest.raises(ValueError, match="at least one"):
        content_free_prompts([])
    with pytest.raises(TypeError, match="calibrate is int"):
        content_free_prompts(3)
    with pytest.raises(TypeError, match=r"calibrate\[1\]"):
        content_free_prompts(["N/A", 3])


# ---------------------------------------------------------------------- on a real model


def _hand_scores(backend: Any, context: list[int], conts: list[list[int]]) -> np.ndarray:
    """log P(option | context) by one full forward pass per option (no KV cache forks)."""
    import torch

    out = []
    for c in conts:
        batch = backend.new_batch()
        logits = batch.forward([context + c], all_positions=True)[0]
        logp = torch.log_softmax(torch.as_tensor(logits, dtype=torch.float64), dim=-1)
        n = len(context)
        out.append(sum(float(logp[n - 1 + j, t]) for j, t in enumerate(c)))
    return np.array(out)


@pytest.mark.real_tokenizer
@pytest.mark.slow
def test_calibrated_choice_equals_a_hand_computation(smol_model: Any) -> None:
    """The first choice's probabilities are softmax(real) / prior renormalised, the prior being
    softmax of the same options after the content-free prompt; the output before the choice is
    the uncalibrated one, the value written is the calibrated argmax, and it validates."""
    be = smol_model
    prompt, cf = _prompt(DOCUMENT), _prompt("N/A")
    plain = corral.generate(be, prompt, schema=RECEIPT, max_new_tokens=60)
    r = corral.generate(be, prompt, schema=RECEIPT, max_new_tokens=60, calibrate=cf)
    assert r.valid and plain.valid
    jsonschema.validate(json.loads(r.text), RECEIPT)
    first = r.calibration.choices[0]
    assert first.pointer == "/currency" and first.options == CURRENCIES
    assert first.before == plain.value["currency"]
    # The hand computation, from the uncalibrated output's tokens.
    tok = be.tokenizer
    start = len(plain.text[: value_span(plain.text, "/currency")[0]].encode())
    ends = np.cumsum([len(tok.decode([t])) for t in plain.tokens])
    k = int(np.searchsorted(ends, start, side="right"))
    lead = tok.decode(plain.tokens)[int(ends[k - 1]) : start]
    conts = [tools_for(tok).encode_exact(lead + json.dumps(c).encode()) for c in CURRENCIES]
    kept = list(plain.tokens[:k])
    real = _hand_scores(be, be.render(prompt) + kept, conts)
    free = _hand_scores(be, be.render(cf) + kept, conts)
    p, q = np.exp(real - real.max()), np.exp(free - free.max())
    want = (p / p.sum()) / (q / q.sum())
    want /= want.sum()
    assert first.probabilities == pytest.approx(list(want), abs=2e-3)
    assert first.chosen == CURRENCIES[int(np.argmax(want))] == r.value["currency"]
    cut = value_span(plain.text, "/currency")[0]
    assert r.text[:cut] == plain.text[:cut]
    # The boolean after it was looked at too, in output order; the cost is reported.
    assert [c.pointer for c in r.calibration.choices] == ["/currency", "/paid"]
    assert r.calibration.forward_passes > 0 and r.forward_passes > plain.forward_passes
    if first.changed:
        assert r.calibration.extra_tokens > 0 and r.value["currency"] != plain.value["currency"]


@pytest.mark.real_tokenizer
@pytest.mark.slow
def test_calibrate_with_a_pydantic_model_a_batch_and_bad_arguments(smol_model: Any) -> None:
    class Currency(str, enum.Enum):
        eur = "EUR"
        usd = "USD"
        gbp = "GBP"

    class Receipt(BaseModel):
        merchant: str
        currency: Currency
        channel: Literal["shop", "online"]

    cf = [_prompt("N/A"), _prompt("")]
    prompts = [_prompt(DOCUMENT), _prompt("Amazon order, 12 USD")]
    rs = corral.generate(smol_model, prompts, schema=Receipt, max_new_tokens=60, calibrate=cf)
    for r in rs:
        assert isinstance(r.value, Receipt)
        assert [c.pointer for c in r.calibration.choices] == ["/currency", "/channel"]
        for c in r.calibration.choices:
            assert sum(c.probabilities) == pytest.approx(1.0)
            assert c.chosen == c.options[int(np.argmax(c.probabilities))]
        assert r.value.currency.value == r.calibration.choices[0].chosen
    with pytest.raises(ValueError, match="JSON Schema"):
        corral.generate(smol_model, "hi", regex="[a-z]{1,3}", calibrate="N/A", max_new_tokens=5)
    with pytest.raises(ValueError, match="JSON Schema"):
        corral.generate(smol_model, "hi", calibrate="N/A", max_new_tokens=5)
    with pytest.raises(ValueError, match="stream"):
        corral.generate(smol_model, "hi", schema=RECEIPT, calibrate="N/A", on_text=lambda i, d: None)
    with pytest.raises(TypeError, match="calibrate is bool"):
        corral.generate(smol_model, "hi", schema=RECEIPT, calibrate=True)
