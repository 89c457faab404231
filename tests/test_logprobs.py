"""OpenAI ``logprobs`` on ``corral serve``: the masked, renormalised distribution, streamed too.

A real server (SmolLM2) answers; the test replays each sampled step itself — the model's logits
from a fresh forward pass in this process, the mask from the public matcher API — and checks
the server's logprob, its allowed-token count and its top choices against that hand computation.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from server_helpers import Server, serve_bundled

import corral
from corral.backends.loading import model_name

MODEL = model_name(None)
BACKEND = "llama.cpp" if importlib.util.find_spec("llama_cpp") else "transformers"

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 12}, "n": {"type": "integer"}},
    "required": ["city", "n"],
    "additionalProperties": False,
}
MESSAGES = [{"role": "user", "content": "Give the city of Paris and the number 7 as JSON."}]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve_bundled(tmp_path_factory, "logprobs", "--backend", BACKEND)


@pytest.fixture(scope="module")
def backend() -> corral.backends.Backend:
    return corral.load_model(backend=BACKEND, verbose=False)


def _post(server: Server, path: str, body: dict[str, Any]) -> Any:
    r = server.http.post(path, json={"model": MODEL, **body})
    assert r.status_code == 200, r.text
    return r.json()


def _chat_body(**kw: Any) -> dict[str, Any]:
    return {
        "messages": MESSAGES,
        "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": SCHEMA}},
        "temperature": 0,
        "max_tokens": 40,
        **kw,
    }


def _masked_logprobs(
    backend: corral.backends.Backend, prompt: list[int], done: list[int], allowed: list[int]
) -> np.ndarray:
    """The hand computation: log-softmax over the allowed tokens of the model's next-token logits."""
    row = backend.new_batch().forward([prompt + done])[0]
    if not isinstance(row, np.ndarray):
        row = row.detach().float().cpu().numpy()
    raw = np.asarray(row, dtype=np.float64)
    masked = np.full_like(raw, -np.inf)
    masked[allowed] = raw[allowed]
    top = masked[allowed].max()
    return masked - top - np.log(np.exp(masked[allowed] - top).sum())


def test_chat_logprobs_match_a_hand_computation_under_the_mask(server: Server, backend: Any) -> None:
    body = _post(server, "/v1/chat/completions", _chat_body(logprobs=True, top_logprobs=3, corral_trace=True))
    choice = body["choices"][0]
    content = choice["logprobs"]["content"]
    trace = choice["corral"]["trace"]
    assert "".join(c["token"] for c in content) == choice["message"]["content"]
    assert len(trace) == len(content) and [t["token"] for t in trace] == [c["token"] for c in content]
    json.loads(choice["message"]["content"])  # valid, and the logprobs cover all of it
    for c in content:
        assert c["logprob"] <= 0.0 and np.isfinite(c["logprob"])
        lps = [a["logprob"] for a in c["top_logprobs"]]
        assert len(lps) <= 3 and lps == sorted(lps, reverse=True) and all(lp <= 0.0 for lp in lps)
        assert bytes(c["bytes"]).decode("utf-8", errors="replace") == c["token"]
    assert sum(c["logprob"] for c in content) <= 0.0
    assert any(t["how"] == "forced" for t in trace) and any(t["how"] == "sampled" for t in trace)

    tok = backend.tokenizer
    grammar = corral.compile_constraint(
        corral.ConstraintSpec.json_schema(SCHEMA, {"strict": False}), tok
    ).grammar
    prompt = backend.render(MESSAGES, chat=True)
    m = grammar.matcher()
    mask = corral.allocate_bitmask(1, tok)
    done: list[int] = []
    checked = 0
    for t, c in zip(trace, content, strict=True):
        if t["how"] == "sampled" and checked < 8:
            m.fill_next_token_bitmask(mask, 0)
            allowed = corral.allowed_tokens(mask[0], tok)
            lp = _masked_logprobs(backend, prompt, done, allowed)
            assert t["allowed"] == len(allowed)
            assert c["logprob"] == pytest.approx(lp[t["id"]], abs=2e-3)
            # Greedy: the chosen token is the most likely allowed one, and the alternatives are
            # the next most likely allowed tokens, by the hand computation too.
            assert c["top_logprobs"][0]["token"] == c["token"]
            best = np.argsort(-lp)[: len(c["top_logprobs"])]
            assert [a["logprob"] for a in c["top_logprobs"]] == pytest.approx(lp[best].tolist(), abs=2e-3)
            assert all(r["id"] not in set(allowed) for r in t["removed"])  # forbidden by the mask
            checked += 1
        elif t["how"] != "sampled":
            assert c["logprob"] == 0.0 and t["allowed"] is None  # forced: no alternative, no pass
        assert m.accept_token(t["id"])
        done.append(t["id"])
    assert checked >= 2
    # The mask-density counters agree with the trace.
    stats = choice["corral"]["stats"]
    sampled = [t for t in trace if t["how"] == "sampled"]
    assert stats["sampled"] == len(sampled) and stats["forced"] == len(trace) - len(sampled)
    assert stats["allowed_total"] >= sum(t["allowed"] for t in sampled)
    assert choice["corral"]["validation"] == {"valid": True, "error": None}


def test_completions_logprobs(server: Server) -> None:
    body = _post(
        server,
        "/v1/completions",
        {"prompt": "The order id is", "regex": r" ORD-[0-9]{5}", "logprobs": 2, "temperature": 0},
    )
    choice = body["choices"][0]
    lp = choice["logprobs"]
    assert "".join(lp["tokens"]) == choice["text"]
    assert all(x <= 0.0 for x in lp["token_logprobs"])
    assert lp["text_offset"] == [sum(len(t) for t in lp["tokens"][:i]) for i in range(len(lp["tokens"]))]
    assert all(1 <= len(d) <= 2 and all(v <= 0.0 for v in d.values()) for d in lp["top_logprobs"])
    assert "corral" not in choice  # the trace is opt-in


def test_free_generation_logprobs_are_the_models_own(server: Server) -> None:
    body = _post(
        server,
        "/v1/chat/completions",
        {"messages": MESSAGES, "temperature": 0, "max_tokens": 4, "logprobs": True, "corral_trace": True},
    )
    trace = body["choices"][0]["corral"]["trace"]
    assert trace and all(t["how"] == "sampled" and t["removed"] == [] for t in trace)
    assert body["choices"][0]["logprobs"]["content"][0]["top_logprobs"] == []  # none asked for


def test_streamed_logprobs_equal_the_response(server: Server) -> None:
    req = _chat_body(logprobs=True, top_logprobs=2, corral_trace=True)
    whole = _post(server, "/v1/chat/completions", req)["choices"][0]
    content: list[dict[str, Any]] = []
    trace: list[dict[str, Any]] = []
    text, final = "", {}
    with server.http.stream(
        "POST", "/v1/chat/completions", json={"model": MODEL, **req, "stream": True}
    ) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for c in json.loads(line[6:])["choices"]:
                text += c["delta"].get("content") or ""
                if c.get("logprobs"):
                    content += c["logprobs"]["content"]
                ext = c.get("corral") or {}
                trace += ext.get("trace", [])
                if "validation" in ext:
                    final = ext
    assert text == whole["message"]["content"]
    assert content == whole["logprobs"]["content"]
    assert trace == whole["corral"]["trace"]
    assert final["validation"] == {"valid": True, "error": None}
    assert final["stats"] == whole["corral"]["stats"]


def test_openai_client_reads_logprobs(server: Server) -> None:
    r = server.client.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        temperature=0,
        max_tokens=6,
        logprobs=True,
        top_logprobs=1,  # type: ignore[arg-type]
    )
    lp = r.choices[0].logprobs
    assert lp is not None and lp.content
    assert "".join(t.token for t in lp.content) == r.choices[0].message.content
    assert all(t.logprob <= 0.0 for t in lp.content)


@pytest.mark.parametrize(
    "path,extra,param",
    [
        ("/v1/chat/completions", {"top_logprobs": 2}, "top_logprobs"),
        ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ("/v1/chat/completions", {"logprobs": 3}, "logprobs"),
        ("/v1/completions", {"logprobs": "many"}, "logprobs"),
        ("/v1/completions", {"top_logprobs": 2}, "top_logprobs"),
        ("/v1/chat/completions", {"corral_trace": "yes"}, "corral_trace"),
    ],
)
def test_bad_logprob_options_are_400(server: Server, path: str, extra: dict[str, Any], param: str) -> None:
    base: dict[str, Any] = {"messages": MESSAGES} if "chat" in path else {"prompt": "hi"}
    r = server.http.post(path, json={"model": MODEL, "max_tokens": 2, **base, **extra})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_token_entries_account_for_every_output_token() -> None:
    from corral.runtime.trace import StepRecord, StepTrace
    from corral.server.logprobs import token_entries

    # leading [1, 2]; step 7 (+ forced 8, 9); last step 5 (+ forced 6).
    trace = StepTrace(top_k=2, leading=[1, 2])
    trace.steps = [
        StepRecord(7, -0.5, 10, [(7, -0.5), (3, -1.2)], [(4, -0.1)], forced=[8, 9]),
        StepRecord(5, -0.25, 3, [(5, -0.25)], [], forced=[6]),
    ]
    tokens = [1, 2, 7, 8, 9, 5, 6]
    entries = token_entries(trace, tokens)
    assert [e.id for e in entries] == tokens
    how = [e.how for e in entries]
    assert how == ["forced", "forced", "sampled", "forced", "forced", "sampled", "forced"]
    assert entries[2].allowed == 10 and entries[2].removed == ((4, -0.1),)
    assert all(e.logprob == 0.0 for e in entries if e.how != "sampled")
    # While streaming, only steps whose successor exists are complete.
    assert [e.id for e in token_entries(trace, tokens[:5], steps=1)] == [1, 2, 7, 8, 9]
    # An EOS that ends the row is no output token.
    eos = StepTrace(steps=[StepRecord(7, -0.5, 10, forced=[8]), StepRecord(0, -0.01, 1)])
    assert [(e.id, e.how) for e in token_entries(eos, [7, 8])] == [(7, "sampled"), (8, "forced")]
    # A row cut short by its budget: the last step was rolled back, the completion appended.
    cut = StepTrace(tail=[30, 31], steps=[StepRecord(7, -0.5, 10), StepRecord(9, -0.7, 4)])
    entries = token_entries(cut, [7, 30, 31])
    assert [(e.id, e.how) for e in entries] == [(7, "sampled"), (30, "completion"), (31, "completion")]
