"""Tool calls in every built-in format through vLLM (the vLLM CI step, ``.ci/vllm``).

The same guarantees the server's tests check through the openai client, here with corral as
vLLM's logits processor on SmolLM2: under ``required`` and a named ``tool_choice`` every reply
parses with its family's parser into at least one call (exactly one without parallel calls),
each naming a declared tool (the named one, when named) with arguments valid for its schema;
under ``auto`` the reply is prose or such calls, and with an answer schema the prose is a
schema-valid answer; greedy replies equal corral's own decode loop on the same prompt.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from host_cases import TOOLS

from corral.grammar.tool_formats import FORMATS, get_format, parse_reply
from corral.grammar.tools import tools_prompt
from corral.vllm import request_spec

PROMPTS = [
    "What is the weather in Paris, in celsius?",
    "Add 2 and 3. Also, what's the weather in Oslo in fahrenheit?",
]
ANSWER = {
    "type": "object",
    "properties": {"reply": {"type": "string", "maxLength": 40}},
    "required": ["reply"],
    "additionalProperties": False,
}
NAMED = {"type": "function", "function": {"name": "add"}}
MAX_TOKENS = 120


def _params(fmt: str, choice: Any, parallel: bool, answer: bool = False) -> dict[str, Any]:
    args: dict[str, Any] = {
        "tools": TOOLS,
        "tool_choice": choice,
        "tool_format": fmt,
        "parallel_tool_calls": parallel,
    }
    if answer:
        args["json_schema"] = ANSWER
    return {"corral": args}


def _messages(extra: dict[str, Any], prompt: str) -> list[dict[str, str]]:
    """The prompt with the system note the server would add for a template without tools."""
    spec = request_spec(extra)
    assert spec is not None and spec.kind == "tools"
    payload = spec.payload or {}
    fmt, parallel = payload.get("format", "json"), bool(payload.get("parallel"))
    name = spec.tools[0].name if len(spec.tools) == 1 and len(TOOLS) > 1 else None
    note = tools_prompt(spec.tools, spec.tool_mode, name, fmt, parallel)
    return [{"role": "system", "content": note}, {"role": "user", "content": prompt}]


def _check_calls(text: str, fmt: str, *, parallel: bool, named: str | None, need_call: bool) -> None:
    """Parse ``text`` with the family's parser: every call declared, valid, and as many as allowed."""
    content, calls, error = parse_reply(text, get_format(fmt))
    assert error is None, (fmt, text, error)
    if need_call:
        assert calls, (fmt, text)
    if not parallel:
        assert len(calls) <= 1, (fmt, text)
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    for c in calls:
        assert c.name in by_name, (fmt, text)
        if named is not None:
            assert c.name == named, (fmt, text)
        jsonschema.validate(c.arguments, by_name[c.name])
    if not calls:
        assert content, (fmt, text)  # auto chose prose: something was said


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_tool_formats_on_vllm(llm, fmt):
    """Every tool_choice form and parallel flag in one batch per format, greedy and sampled."""
    from vllm import SamplingParams

    cases = [
        (choice, parallel, prompt, seed)
        for choice in ("required", NAMED, "auto")
        for parallel in (False, True)
        for prompt in PROMPTS
        for seed in (None, 7)
    ]
    extras = [_params(fmt, choice, parallel) for choice, parallel, _, _ in cases]
    params = [
        SamplingParams(
            max_tokens=MAX_TOKENS,
            temperature=0.0 if seed is None else 1.0,
            seed=seed,
            extra_args=extra,
        )
        for extra, (_, _, _, seed) in zip(extras, cases, strict=True)
    ]
    msgs = [_messages(extra, prompt) for extra, (_, _, prompt, _) in zip(extras, cases, strict=True)]
    outs = [o.outputs[0] for o in llm.chat(msgs, params, use_tqdm=False)]
    for (choice, parallel, _, _), out in zip(cases, outs, strict=True):
        named = choice["function"]["name"] if isinstance(choice, dict) else None
        # Calls are budget-safe: a reply that ran to max_tokens still parses with no error (a
        # call cut short would not); only free prose under auto may be cut.
        _check_calls(out.text, fmt, parallel=parallel, named=named, need_call=choice != "auto")


def test_auto_with_answer_schema_on_vllm(llm):
    """tool_choice auto + an answer schema: a valid call, or prose that is a schema-valid answer."""
    from vllm import SamplingParams

    prompts = ["Say hello to Ann.", "What is the weather in Rome in celsius?"]
    cases = [(fmt, p) for fmt in sorted(FORMATS) for p in prompts]
    extras = [_params(fmt, "auto", False, answer=True) for fmt, _ in cases]
    params = [SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0, extra_args=e) for e in extras]
    msgs = [_messages(e, p) for e, (_, p) in zip(extras, cases, strict=True)]
    for (fmt, _), o in zip(cases, llm.chat(msgs, params, use_tqdm=False), strict=True):
        text = o.outputs[0].text
        content, calls, error = parse_reply(text, get_format(fmt))
        if calls:
            _check_calls(text, fmt, parallel=False, named=None, need_call=True)
        else:
            assert error is None and content is not None, (fmt, text)
            jsonschema.validate(json.loads(text), ANSWER)


def test_greedy_tool_call_equals_corral_generate(llm):
    """Hosts agree: vLLM's greedy call equals corral.generate's for the same chat, per format
    (corral.generate adds the same system note the test sends vLLM)."""
    from vllm import SamplingParams

    import corral

    model = corral.load_model(backend="transformers")
    user = [{"role": "user", "content": PROMPTS[0]}]
    fmts = sorted(FORMATS)
    extras = [_params(fmt, "required", False) for fmt in fmts]
    params = [SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0, extra_args=e) for e in extras]
    outs = llm.chat([_messages(e, PROMPTS[0]) for e in extras], params, use_tqdm=False)
    for fmt, out in zip(fmts, outs, strict=True):
        ref = corral.generate(
            model, user, tools=TOOLS, tool_choice="required", tool_format=fmt, max_new_tokens=MAX_TOKENS
        )
        assert out.outputs[0].text == ref.text, fmt
