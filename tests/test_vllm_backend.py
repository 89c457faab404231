"""corral as vLLM's structured-output backend (corral.vllm.plugin, corral.vllm._backend): request
routing without vLLM; with vLLM (the vLLM CI step, ``.ci/vllm``) every vLLM constraint field and
corral's own arguments, the host-conformance table, a compile that takes seconds while the batch
keeps decoding, n-gram speculative decoding equal to decoding without drafts, and a constraint
that fails in the engine failing only its own request.
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from corral.vllm._spec import MARKER, from_structured_outputs, request_from_key, routed_grammar

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
GBNF = 'root ::= "SELECT " col " FROM users"\ncol ::= "name" | "id" | "email"'
LARK = 'start: "SELECT " COL " FROM users"\nCOL: "name" | "id" | "email"'
SQL = re.compile(r"SELECT (name|id|email) FROM users")

# ---------------------------------------------------------------------- routing (no vLLM)


@pytest.mark.parametrize(
    "kind, text, expect",
    [
        ("JSON", json.dumps(PERSON), "json_schema"),
        ("JSON_OBJECT", "", "json_object"),
        ("REGEX", r"ORD-\d{5}", "regex"),
        ("CHOICE", json.dumps(["yes", "no"]), "choices"),
        ("GRAMMAR", GBNF, "grammar"),
        ("GRAMMAR", LARK, "grammar"),
        ("STRUCTURAL_TAG", json.dumps({"type": "structural_tag", "structures": [], "triggers": []}), None),
    ],
)
def test_request_from_key_every_kind(kind, text, expect):
    if expect is None:  # an empty structural tag is a client error, refused by name
        with pytest.raises(ValueError, match="corral"):
            request_from_key(kind, text)
        return
    request, budget = request_from_key(kind, text)
    assert request.spec.kind == expect and budget is None


def test_routed_form_round_trips_options_slots_and_budget():
    args = {"grammar": 'root ::= "cc=" ${cc}', "slots": {"cc": ["a", "b"]}}
    request, budget = request_from_key("GRAMMAR", routed_grammar(args, 33))
    assert budget == 33 and request.slots == {"cc": ["a", "b"]} and request.spec.kind == "grammar"
    so = type("SO", (), {"grammar": routed_grammar({"json_schema": PERSON}, None)})()
    assert from_structured_outputs(so) == {"json_schema": PERSON}
    with pytest.raises(ValueError, match="max_tokens"):
        request_from_key("GRAMMAR", MARKER + json.dumps({"corral": {"regex": "a"}, "max_tokens": 0}))
    with pytest.raises(ValueError, match="corral arguments"):
        request_from_key("GRAMMAR", MARKER + json.dumps(["regex"]))
    with pytest.raises(ValueError, match="JSON data"):
        routed_grammar({"json_schema": object()}, None)
    with pytest.raises(ValueError, match="unknown structured-output kind"):
        request_from_key("NOPE", "x")


def test_structured_outputs_options_become_schema_options():
    from types import SimpleNamespace

    fields = dict.fromkeys(
        ("json", "regex", "choice", "grammar", "json_object", "structural_tag", "whitespace_pattern")
    )
    so = SimpleNamespace(
        **{**fields, "json": PERSON, "disable_any_whitespace": True, "disable_additional_properties": False}
    )
    assert from_structured_outputs(so) == {"json_schema": PERSON, "schema_options": {"whitespace": "compact"}}
    so.whitespace_pattern, so.disable_any_whitespace = r"[ \t\n\r]{0,8}", False
    assert from_structured_outputs(so)["schema_options"] == {"whitespace": "flexible", "max_whitespace": 8}
    so.whitespace_pattern = r"[,;]*"
    with pytest.raises(ValueError, match="whitespace_pattern"):
        from_structured_outputs(so)
    so = SimpleNamespace(
        **{**fields, "regex": "a+", "disable_any_whitespace": True, "disable_additional_properties": False}
    )
    with pytest.raises(ValueError, match="do not apply"):
        from_structured_outputs(so)


# ---------------------------------------------------------------------- with vLLM


@pytest.fixture(scope="module")
def backend_llm(model_dir):
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    return _llm(model_dir)


def _llm(model_dir, **more):
    """vLLM's offline LLM on SmolLM2 with corral as its structured-output backend (float32, as
    the other vLLM tests)."""
    from vllm import LLM

    from corral.vllm.plugin import register

    register()  # offline: LLM checks structured_outputs_config before vLLM loads its plugins
    return LLM(
        model=model_dir,
        enforce_eager=True,
        max_model_len=2048,
        dtype="float32",
        seed=0,
        structured_outputs_config={"backend": "corral"},
        **more,
    )


def _chat(llm, prompts, params):
    msgs = [[{"role": "user", "content": p}] for p in prompts]
    return [o.outputs[0] for o in llm.chat(msgs, params, use_tqdm=False)]


def test_plugin_entry_point_is_installed(vllm_mod):
    """vLLM finds the plugin by its entry point (the command-line route needs no register())."""
    from importlib.metadata import entry_points

    found = {e.name: e.value for e in entry_points(group="vllm.general_plugins")}
    assert found.get("corral_backend") == "corral.vllm.plugin:register"
    from vllm.config import StructuredOutputsConfig

    from corral.vllm.plugin import register

    register()
    assert StructuredOutputsConfig(backend="corral").backend == "corral"
    with pytest.raises(Exception, match="corral"):
        StructuredOutputsConfig(backend="corrall")  # still a closed list: a typo is refused


def test_every_vllm_field_kind(backend_llm):
    import jsonschema
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams as SO

    tag = {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": ["<call>"],
            "tags": [
                {
                    "begin": "<call>",
                    "content": {"type": "json_schema", "json_schema": PERSON},
                    "end": "</call>",
                }
            ],
        },
    }
    jobs = [
        ("Extract the person as JSON: John Smith is 42.", SO(json=PERSON)),
        (
            "Extract the person as JSON: John Smith is 42.",
            SO(json=json.dumps(PERSON), disable_any_whitespace=True),
        ),
        ("A JSON object describing a cat.", SO(json_object=True)),
        ("Give an order id.", SO(regex=r"ORD-\d{5}")),
        ("Is the sky blue? Answer yes or no.", SO(choice=["yes", "no"])),
        ("An SQL query listing the names of all users:", SO(grammar=GBNF)),
        ("An SQL query listing the names of all users:", SO(grammar=LARK)),
        ("Call <call> with the person John Smith, 42.", SO(structural_tag=json.dumps(tag))),
    ]
    params = [SamplingParams(max_tokens=100, temperature=0.0, structured_outputs=so) for _, so in jobs]
    outs = _chat(backend_llm, [p for p, _ in jobs], params)
    texts = [o.text for o in outs]
    jsonschema.validate(json.loads(texts[0]), PERSON)
    assert texts[0].startswith('{\n  "'), texts[0]  # corral's pretty layout: corral decoded it
    jsonschema.validate(json.loads(texts[1]), PERSON)
    assert "\n" not in texts[1] and ": " not in texts[1], texts[1]  # disable_any_whitespace followed
    assert isinstance(json.loads(texts[2]), dict)
    assert re.fullmatch(r"ORD-\d{5}", texts[3]), texts[3]
    assert texts[4] in ("yes", "no")
    assert SQL.fullmatch(texts[5]) and SQL.fullmatch(texts[6]), texts[5:7]
    for m in re.finditer(r"<call>(.*?)</call>", texts[7], re.S):
        jsonschema.validate(json.loads(m.group(1)), PERSON)
    assert all(o.finish_reason == "stop" for o in outs), [(o.text, o.finish_reason) for o in outs]


def test_corral_arguments_through_xargs(backend_llm):
    """corral's own kinds (slots, tool formats, thinking blocks) reach the backend as they reach
    the logits processor: vllm_xargs' flat form and extra_args' nested form."""
    from host_cases import split_thinking
    from vllm import SamplingParams

    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string", "maxLength": 20}},
                    "required": ["city"],
                    "additionalProperties": False,
                },
            },
        }
    ]
    jobs = [
        (
            "Cost center?",
            {"corral_grammar": 'root ::= "cc=" ${cc}', "corral_slots": '{"cc": ["CC-104", "CC-109"]}'},
        ),
        (
            "What is the weather in Paris?",
            {"corral": {"tools": tools, "tool_choice": "required", "tool_format": "hermes"}},
        ),
        (
            "Is 17 prime? Think, then answer yes or no.",
            {"corral": {"choices": ["yes", "no"], "thinking": {"budget_tokens": 24}}},
        ),
    ]
    params = [SamplingParams(max_tokens=120, temperature=0.0, extra_args=x) for _, x in jobs]
    outs = _chat(backend_llm, [p for p, _ in jobs], params)
    assert outs[0].text in ("cc=CC-104", "cc=CC-109"), outs[0].text
    call = re.fullmatch(r"<tool_call>\n(.*)\n</tool_call>", outs[1].text, re.S)
    assert call, outs[1].text
    assert json.loads(call.group(1))["name"] == "get_weather"
    reasoning, answer = split_thinking(outs[2].text)
    assert reasoning and answer in ("yes", "no"), outs[2].text


def test_host_cases_through_the_backend(backend_llm):
    """The host-conformance table (tests/host_cases.py) through the structured-output backend:
    every case satisfied within its budget (the budget case included: the backend steers to a
    complete output without scores)."""
    from host_cases import CASES, run_on_vllm

    for case in CASES:
        out = run_on_vllm(backend_llm, case)
        case.check(out.text)
        assert len(out.token_ids) <= case.max_tokens, (case.name, len(out.token_ids))


def _slow_schema(n: int = 2000) -> dict:
    """A real compile of a couple of seconds: many nested objects with patterns, ranges, formats
    and distinct enum arrays (SmolLM2's vocabulary)."""
    props = {}
    for i in range(n):
        props[f"field_{i}"] = {
            "type": "object",
            "properties": {
                "code": {"type": "string", "pattern": f"^[A-Z]{{2}}{i % 7}-[0-9]{{3,6}}$"},
                "when": {"type": "string", "format": "date-time"},
                "qty": {"type": "integer", "minimum": i, "maximum": 1000 + i},
                "tags": {
                    "type": "array",
                    "items": {"enum": [f"t{j}" for j in range(8)]},
                    "uniqueItems": True,
                },
            },
            "required": ["code", "qty"],
        }
    return {"type": "object", "properties": props, "required": ["field_0"]}


def test_slow_compile_does_not_stall_the_batch(backend_llm):
    """Requests already decoding keep decoding while another request's schema compiles for
    seconds: vLLM's manager compiles in the background and its scheduler holds that request
    back. Measured: the gaps between the running requests' steps while the compile runs."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams as SO

    engine = backend_llm.llm_engine
    free = SamplingParams(max_tokens=400, temperature=0.0, ignore_eos=True)
    regex = SamplingParams(max_tokens=400, temperature=0.0, structured_outputs=SO(regex=r"[a-z ]{400}"))
    for i, p in enumerate((free, regex)):
        engine.add_request(f"run-{i}", "Write a long story about a cat.", p)
    steps: list[tuple[float, int]] = []  # (time, tokens the running requests got this step)

    def step() -> list:
        outs = engine.step()
        steps.append((time.perf_counter(), sum(1 for o in outs if o.request_id.startswith("run-"))))
        return outs

    for _ in range(5):  # warm: both running
        step()
    slow = SamplingParams(max_tokens=20, temperature=0.0, structured_outputs=SO(json=_slow_schema()))
    t_admit = time.perf_counter()
    # Admission (vLLM's API side: corral's check against a byte vocabulary) runs in the caller;
    # from its return on, the engine compiles on its own threads.
    engine.add_request("slow", "A big object:", slow)
    # A request arriving after it, on a schema already compiled, is served at once: it does not
    # queue behind the slow compile (vLLM's own compile pool has one thread on two cores).
    engine.add_request(
        "cached", "Letters:", SamplingParams(max_tokens=4, structured_outputs=SO(regex=r"[a-z ]{400}"))
    )
    t0 = time.perf_counter()
    steps.append((t0, 0))
    first: dict[str, float] = {}
    while engine.has_unfinished_requests():
        for o in step():
            if o.request_id in ("slow", "cached") and o.outputs and o.outputs[0].token_ids:
                first.setdefault(o.request_id, time.perf_counter())
    first_slow = first.get("slow")
    assert first_slow is not None
    waited = first_slow - t0
    assert first["cached"] - t0 < 0.3 * waited, (first["cached"] - t0, waited)
    during = [(t, n) for t, n in steps if t0 < t < first_slow]
    gaps = [b[0] - a[0] for a, b in zip(steps, steps[1:], strict=False) if t0 <= a[0] and b[0] < first_slow]
    print(
        f"admission {t0 - t_admit:.2f} s; the slow request's first token {waited:.2f} s later; "
        f"{len(during)} steps meanwhile, the longest {max(gaps):.3f} s"
    )
    assert waited > 1.0, "the schema compiled too fast to show anything"
    # The running requests got tokens on steps taken while the slow schema compiled, and no
    # step took a large part of the compile (a stalled batch shows one gap of the whole compile).
    assert sum(n for _, n in during) >= 10
    assert max(gaps) < 0.5 * waited, (max(gaps), waited)


def test_bad_constraint_fails_only_its_own_request(backend_llm, monkeypatch):
    """A constraint that cannot be met in the engine (a think block whose budget cannot hold its
    markers in this vocabulary, which admission cannot see; a bad regex admitted because
    admission did not wait for its check) ends its own request with an error; the others in the
    batch complete normally. Waiting for the check, the same regex is refused at admission with
    corral's message."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams as SO

    engine = backend_llm.llm_engine
    monkeypatch.setenv("CORRAL_VLLM_CHECK_MS", "0")  # admit without waiting for the check
    good = SamplingParams(max_tokens=20, temperature=0.0, structured_outputs=SO(regex=r"ORD-\d{5}"))
    think = {"corral": {"choices": ["yes", "no"], "thinking": {"budget_tokens": 1}}}
    engine.add_request("good", "Order id:", good)
    engine.add_request("budget", "Is it?", SamplingParams(max_tokens=20, extra_args=think))
    engine.add_request("regex", "x", SamplingParams(max_tokens=20, structured_outputs=SO(regex="(ab")))
    finished = {}
    while engine.has_unfinished_requests():
        for o in engine.step():
            if o.finished:
                finished[o.request_id] = o.outputs[0]
    assert re.fullmatch(r"ORD-\d{5}", finished["good"].text) and finished["good"].finish_reason == "stop"
    for rid in ("budget", "regex"):
        assert finished[rid].finish_reason == "error" and finished[rid].text == "", (rid, finished[rid])
    monkeypatch.setenv("CORRAL_VLLM_CHECK_MS", "-1")  # wait for the check: a 400 before the engine
    bad = SamplingParams(max_tokens=5, structured_outputs=SO(regex="(ab"))
    with pytest.raises(Exception, match="regex constraint does not compile.*unterminated"):
        backend_llm.generate(["x"], bad, use_tqdm=False)


def test_admission_waits_only_so_long(vllm_mod, monkeypatch):
    """Admission (vLLM's API side) waits at most CORRAL_VLLM_CHECK_MS for a constraint's check:
    a schema whose check takes seconds is admitted in about that long, not after the check, and
    a malformed one is still refused at once."""
    from vllm.sampling_params import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams as SO

    from corral.vllm.plugin import route_to_corral

    monkeypatch.setenv("CORRAL_VLLM_CHECK_MS", "50")
    p = SamplingParams(max_tokens=5, structured_outputs=SO(json=_slow_schema(3000)))
    t0 = time.perf_counter()
    route_to_corral(p, tokenizer=object())
    took = time.perf_counter() - t0
    assert took < 1.0, took  # the slow schema's conversion alone takes seconds
    assert p.structured_outputs.grammar.startswith(MARKER) and p.structured_outputs._backend == "corral"
    with pytest.raises(ValueError, match="not valid JSON"):
        route_to_corral(SamplingParams(structured_outputs=SO(json="{nope")), tokenizer=object())
    with pytest.raises(ValueError, match="both"):
        both = SamplingParams(structured_outputs=SO(regex="a"), extra_args={"corral_regex": "b"})
        route_to_corral(both, tokenizer=object())


def test_ngram_speculative_decoding_equals_greedy(backend_llm, model_dir):
    """n-gram (prompt lookup) drafting with corral as the backend: drafts are proposed, validated
    and partly accepted, every output is valid, and greedy outputs equal the run without drafts."""
    import jsonschema
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams as SO

    prompts = [
        'Extract the person as JSON: John Smith is 42. {"name": "John Smith", "age": 42}',
        'Ann Lee is 7. As JSON: {\n  "name": "Ann Lee",\n  "age": 7\n}',
        "Order ORD-12345 was shipped; repeat the order id ORD-12345:",
    ]
    params = [
        SamplingParams(max_tokens=60, temperature=0.0, structured_outputs=SO(json=PERSON)),
        SamplingParams(max_tokens=60, temperature=0.0, structured_outputs=SO(json=PERSON)),
        SamplingParams(max_tokens=20, temperature=0.0, structured_outputs=SO(regex=r"ORD-\d{5}")),
    ]
    plain = _chat(backend_llm, prompts, params)
    spec = _llm(
        model_dir,
        speculative_config={
            "method": "ngram",
            "num_speculative_tokens": 4,
            "prompt_lookup_max": 4,
            "prompt_lookup_min": 2,
        },
        disable_log_stats=False,
    )
    try:
        drafted = _chat(spec, prompts, params)
        counters = {m.name: getattr(m, "value", 0) for m in spec.get_metrics()}
    finally:
        del spec
    for a, b in zip(plain, drafted, strict=True):
        assert a.text == b.text, (a.text, b.text)
    for o in drafted[:2]:
        jsonschema.validate(json.loads(o.text), PERSON)
    assert re.fullmatch(r"ORD-\d{5}", drafted[2].text)
    assert counters.get("vllm:spec_decode_num_draft_tokens", 0) > 0, counters
    assert counters.get("vllm:spec_decode_num_accepted_tokens", 0) > 0, counters
