"""Classification over HTTP: ``POST /v1/classify`` and greedy ``choices`` on ``/v1/completions``
give what ``corral.classify`` / ``corral.generate(choices=...)`` give in the library for the
same inputs (a real ``corral serve`` on SmolLM2-135M, transformers, one thread), and bad
requests are 400s naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from server_helpers import Server, serve_bundled

import corral
from corral.classification import check_template

pytestmark = [pytest.mark.real_tokenizer, pytest.mark.slow]

pytest.importorskip("openai")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

MODEL = "SmolLM2-135M-Instruct"
TICKETS = [
    "I was charged twice for my subscription this month.",
    "The app crashes every time I open the settings page.",
    "How do I change the e-mail address on my account?",
]
LABELS = ["billing", "technical", "account"]
NESTED = ["refund", "refund_request", "billing"]  # a label that is a token-prefix of another
DESCRIPTIONS = {
    "billing": "payments and refunds",
    "technical": "bugs and errors",
    "account": "login, profile",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve_bundled(tmp_path_factory, "classify", "--backend", "transformers", "--max-batch", "4")


def _classify(server: Server, **body: Any) -> Any:
    return server.http.post("/v1/classify", json={"model": MODEL, **body})


def _same(got: dict[str, Any], want: corral.Classification) -> None:
    assert got["label"] == want.label
    assert got["top_label"] == want.top_label
    assert got["review"] is want.review
    assert list(got["probabilities"]) == list(want.probabilities)
    for lab, p in want.probabilities.items():
        assert got["probabilities"][lab] == pytest.approx(p, abs=1e-5), lab
    for lab, lp in want.logprobs.items():
        assert got["logprobs"][lab] == pytest.approx(lp, abs=1e-4), lab


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"descriptions": DESCRIPTIONS, "calibrate": True},
        {"threshold": 0.5, "temperature": 2.0, "length_normalize": True},
        {"options": {"calibrate": ["N/A", "nothing"], "template": "Ticket: {text}\nQueue ({labels}):"}},
    ],
    ids=["plain", "calibrated", "threshold", "nested-options"],
)
def test_classify_endpoint_agrees_with_library(
    server: Server, smol_model: Any, options: dict[str, Any]
) -> None:
    r = _classify(server, texts=TICKETS, labels=LABELS, **options)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "list" and [d["index"] for d in body["data"]] == [0, 1, 2]
    kwargs = {**options, **options.get("options", {})}
    kwargs.pop("options", None)
    want = corral.classify(smol_model, TICKETS, LABELS, **kwargs)
    for got, w in zip(body["data"], want, strict=True):
        _same(got, w)
        assert sum(got["probabilities"].values()) == pytest.approx(1.0)


def test_classify_endpoint_review_flag(server: Server, smol_model: Any) -> None:
    """A threshold above every probability sends every text to review (label null)."""
    body = _classify(server, texts=TICKETS[:2], labels=LABELS, threshold=1.0).json()
    assert [d["review"] for d in body["data"]] == [True, True]
    assert [d["label"] for d in body["data"]] == [None, None]
    want = corral.classify(smol_model, TICKETS[:2], LABELS)
    assert [d["top_label"] for d in body["data"]] == [w.label for w in want]


@pytest.mark.parametrize("choices", [LABELS, NESTED], ids=["distinct", "prefix-pair"])
def test_completions_choices_scored_like_classify(
    server: Server, smol_model: Any, choices: list[str]
) -> None:
    """Greedy ``choices`` on /v1/completions = the best whole answer, as the library scores it."""
    prompts = [f"Ticket: {t}\nQueue:" for t in TICKETS]
    r = server.client.completions.create(
        model=MODEL, prompt=prompts, extra_body={"choices": choices}, temperature=0, n=2
    )
    got = [c.text for c in sorted(r.choices, key=lambda c: c.index)]
    lib = corral.generate(smol_model, prompts, choices=choices, chat=False)
    cls = corral.classify(smol_model, prompts, choices, template="{text}", chat=False)
    assert got == [x.text for x in lib for _ in range(2)]
    assert [x.text for x in lib] == [c.label for c in cls]
    assert all(c.finish_reason == "stop" for c in r.choices)
    assert r.usage.completion_tokens > 0


def test_completions_choices_stream(server: Server, smol_model: Any) -> None:
    prompt = f"Ticket: {TICKETS[1]}\nQueue:"
    stream = server.client.completions.create(
        model=MODEL, prompt=prompt, extra_body={"choices": NESTED}, temperature=0, stream=True
    )
    text = "".join(c.choices[0].text for c in stream if c.choices)
    assert text == corral.generate(smol_model, prompt, choices=NESTED, chat=False).text


def test_completions_choices_sampled_stays_in_set(server: Server) -> None:
    """With sampling the choices are decoded token by token under the mask (not scored)."""
    r = server.client.completions.create(
        model=MODEL,
        prompt="Queue:",
        extra_body={"choices": NESTED},
        temperature=1.0,
        seed=3,
        n=4,
        max_tokens=8,
    )
    assert {c.text for c in r.choices} <= set(NESTED)


@pytest.mark.parametrize(
    ("body", "param", "needle"),
    [
        ({"texts": "one text", "labels": LABELS}, "texts", "array of strings"),
        ({"texts": ["a", 3], "labels": LABELS}, "texts[1]", "must be a string"),
        ({"texts": ["a"], "labels": ["x", "x"]}, None, "x"),
        ({"texts": ["a"], "labels": LABELS, "stream": True}, "stream", "unknown field"),
        ({"texts": ["a"], "labels": LABELS, "threshold": "high"}, "threshold", "number"),
        ({"texts": ["a"], "labels": LABELS, "threshold": 2}, None, "threshold"),
        ({"texts": ["a"], "labels": LABELS, "calibrate": []}, "calibrate", "non-empty"),
        ({"texts": ["a"], "labels": LABELS, "template": "{text.__class__}"}, None, "not allowed"),
        ({"texts": ["a"], "labels": LABELS, "template": "no placeholder"}, None, "{text}"),
        ({"texts": ["a"], "labels": LABELS, "descriptions": {"billing": 3}}, "descriptions", "strings"),
        ({"texts": ["a"] * 257, "labels": LABELS}, "texts", "at most 256"),
        (
            {"texts": ["a"], "labels": LABELS, "calibrate": True, "options": {"calibrate": False}},
            "calibrate",
            "twice",
        ),
        ({"texts": ["word " * 9000], "labels": LABELS}, None, "context"),
    ],
)
def test_classify_bad_requests(server: Server, body: dict[str, Any], param: str | None, needle: str) -> None:
    r = _classify(server, **body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert needle in err["message"]
    if param is not None:
        assert err["param"] == param


def test_classify_wrong_model_and_bad_json(server: Server) -> None:
    r = _classify(server, model="gpt-4", texts=["a"], labels=LABELS)
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    r = server.http.post("/v1/classify", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
    assert server.healthy()["status"] == "ok"


def test_classify_while_generating(server: Server) -> None:
    """Scoring runs between decoding steps: a generation in flight finishes, and both answer."""
    import threading

    out: dict[str, Any] = {}

    def gen() -> None:
        out["gen"] = server.client.completions.create(
            model=MODEL,
            prompt="Count: one two",
            extra_body={"regex": r"( [a-z]{3,5}){12}"},
            temperature=0,
            max_tokens=60,
        )

    t = threading.Thread(target=gen)
    t.start()
    r = _classify(server, texts=TICKETS, labels=LABELS)
    t.join(timeout=120)
    assert r.status_code == 200
    assert len(out["gen"].choices[0].text.split()) == 12


@pytest.mark.parametrize(
    "template", ["{text.__class__}", "{text[0]}", "{text!r}", "{text:>9}", "{secret}", "{", "plain"]
)
def test_check_template_refuses(template: str) -> None:
    with pytest.raises(ValueError):
        check_template(template)


def test_check_template_accepts() -> None:
    for t in ["{text}", "{instructions}\n{legend}\n{text} {{literal}} ({labels})"]:
        check_template(t)
