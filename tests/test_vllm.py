"""corral inside vLLM (corral.vllm): request parsing everywhere; the logits processor's batch
bookkeeping and real generation with vLLM's offline ``LLM`` on SmolLM2 where vLLM is installed
(the vLLM CI step, ``.ci/vllm``; the main test run skips those).
"""

from __future__ import annotations

import json
import os
import re
from types import SimpleNamespace

import pytest

from corral.vllm import check_spec, request_spec

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
ITEM = {
    "type": "object",
    "properties": {
        "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{3}$"},
        "qty": {"type": "integer", "minimum": 1, "maximum": 99},
    },
    "required": ["sku", "qty"],
    "additionalProperties": False,
}

# ---------------------------------------------------------------------- request arguments (no vLLM)


def test_request_spec_forms():
    assert request_spec(None) is None
    assert request_spec({"other": 1}) is None
    nested = request_spec({"corral": {"json_schema": PERSON}})
    flat = request_spec({"corral_json_schema": json.dumps(PERSON)})
    assert nested == flat and nested is not None and nested.kind == "json_schema"
    assert dict(nested.options) == {"whitespace": "pretty", "escapes": "canonical"}
    opts = request_spec({"corral": {"json": True, "schema_options": {"whitespace": "flexible"}}})
    assert opts is not None and opts.options["whitespace"] == "flexible"
    assert request_spec({"corral_regex": r"\d+"}) == request_spec({"corral": {"regex": r"\d+"}})
    ch = request_spec({"corral_choices": ["yes", "no"]})
    assert ch is not None and ch.payload == ("yes", "no")
    # Property order is part of the constraint: these two are different specs.
    a = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    b = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}}}
    assert request_spec({"corral": {"json_schema": a}}) != request_spec({"corral": {"json_schema": b}})


def test_request_slots_tools_and_limits():
    from corral.vllm import parse_request

    r = parse_request({"corral_grammar": 'root ::= "cc=" ${cc}', "corral_slots": '{"cc": ["a", "b"]}'})
    assert r is not None and r.slots == {"cc": ["a", "b"]} and r.spec.kind == "grammar"
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    t = parse_request({"corral": {"tools": tools, "tool_choice": "required"}})
    assert t is not None and t.spec.kind == "tools" and t.spec.tool_mode == "required"
    flat = parse_request({"corral_tools": json.dumps(tools), "corral_tool_choice": "required"})
    assert flat is not None and flat.spec == t.spec
    lim = parse_request({"corral": {"regex": "a+", "limits": {"max_dfa_states": 100}}})
    assert lim is not None and dict(lim.spec.limits) == {"max_dfa_states": 100}
    with pytest.raises(ValueError, match="unknown limit"):
        parse_request({"corral": {"regex": "a+", "limits": {"max_bogus": 1}}})
    with pytest.raises(ValueError, match="slots must be an object"):
        parse_request({"corral": {"regex": "a+", "slots": ["x"]}})


def test_request_tool_formats_and_parallel_calls():
    """The family formats reach vLLM through the same spec: nested and flat forms agree."""
    from corral.vllm import parse_request

    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    nested = {"tools": tools, "tool_choice": "required", "tool_format": "hermes", "parallel_tool_calls": True}
    t = parse_request({"corral": nested})
    assert t is not None and t.spec.tool_format == "hermes" and t.spec.parallel
    flat = parse_request(
        {
            "corral_tools": json.dumps(tools),
            "corral_tool_choice": "required",
            "corral_tool_format": "hermes",
            "corral_parallel_tool_calls": "true",
        }
    )
    assert flat is not None and flat.spec == t.spec
    with pytest.raises(ValueError, match="tool format must be one of"):
        parse_request({"corral": {**nested, "tool_format": "xml"}})
    with pytest.raises(ValueError, match="parallel"):
        parse_request({"corral": {**nested, "parallel_tool_calls": "yes"}})


@pytest.mark.parametrize(
    "args, message",
    [
        ({"corral": "x"}, "must be an object"),
        ({"corral": {"regex": "a", "choices": ["b"]}}, "give one constraint"),
        ({"corral": {"rgx": "a"}}, "unknown argument"),
        ({"corral": {"regex": 5}}, "must be a string"),
        ({"corral": {"choices": []}}, "empty"),
        ({"corral": {"choices": ["a", "a"]}}, "twice"),
        ({"corral_json_schema": "{not json"}, "not valid JSON"),
        ({"corral": {"regex": "a", "schema_options": {"whitespace": "compact"}}}, "apply to json_schema"),
        ({"corral": {"regex": "a"}, "corral_regex": "b"}, "given twice"),
    ],
)
def test_request_spec_errors(args, message):
    with pytest.raises(ValueError, match=message):
        request_spec(args)


@pytest.mark.parametrize(
    "args, message",
    [
        ({"corral": {"regex": "(ab"}}, "does not compile"),
        ({"corral": {"regex": "a{0,100000}"}}, "max_nfa_states"),
        ({"corral": {"grammar": "root ::= undefined"}}, "does not compile"),
        ({"corral": {"json_schema": {"type": "nosuchtype"}}}, "does not compile"),
        ({"corral": {"grammar": 'root ::= "x" ${v}', "slots": {"v": []}}}, "does not compile"),
    ],
)
def test_check_spec_refuses_bad_constraints(args, message):
    from corral.vllm import parse_request

    spec = parse_request(args)
    assert spec is not None
    with pytest.raises(ValueError, match=message):
        check_spec(spec)


# ---------------------------------------------------------------------- with vLLM


def _stub_model_config(model_dir):
    """The parts of vLLM's ModelConfig the processor reads (no engine needed)."""
    return SimpleNamespace(
        tokenizer=model_dir,
        tokenizer_revision=None,
        trust_remote_code=False,
        try_get_generation_config=lambda: {},
        get_vocab_size=lambda: 49152,
    )


@pytest.fixture(scope="module")
def proc(model_dir):
    """The processor on a stub vLLM config (no engine): batch bookkeeping, exactly."""
    from corral.vllm import CorralLogitsProcessor

    mc = _stub_model_config(model_dir)
    import torch

    return CorralLogitsProcessor(SimpleNamespace(model_config=mc), torch.device("cpu"), False)


def _allowed(logits_row):
    import torch

    return set(torch.nonzero(torch.isfinite(logits_row)).flatten().tolist())


def test_processor_batch_changes(proc, vllm_mod):
    import torch
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality

    tok = proc.tokenizer
    digits = SamplingParams(max_tokens=50, extra_args={"corral": {"regex": "[0-9]+"}})
    yes_no = SamplingParams(max_tokens=50, extra_args={"corral": {"choices": ["yes", "no"]}})
    free = SamplingParams(max_tokens=50)
    out0: list[int] = []
    out1: list[int] = []
    out2: list[int] = []
    proc.update_state(
        BatchUpdate(3, [], [(0, digits, None, out0), (1, free, None, out1), (2, yes_no, None, out2)], [])
    )
    logits = proc.apply(torch.zeros(3, 49152))
    a0, a1, a2 = (_allowed(logits[i]) for i in range(3))
    assert len(a1) == 49152  # unconstrained row untouched
    assert a0 and all(re.fullmatch(rb"[0-9]+", tok.decode([t])) for t in a0)
    assert all(b"yes".startswith(tok.decode([t])) or b"no".startswith(tok.decode([t])) for t in a2)
    assert not (a0 | a2) & set(tok.special_ids)  # never a special token before an accept state
    # Row 0 produces "12"; then rows 0 and 2 swap; row 1 leaves and row 2 moves to 1.
    out0.extend(tok.encode("12"))
    proc.update_state(BatchUpdate(3, [], [], [(0, 2, MoveDirectionality.SWAP)]))
    logits = proc.apply(torch.zeros(3, 49152))
    assert _allowed(logits[0]) == a2 and tok.eos_ids[0] in _allowed(logits[2])
    proc.update_state(BatchUpdate(2, [1], [], [(2, 1, MoveDirectionality.UNIDIRECTIONAL)]))
    logits = proc.apply(torch.zeros(2, 49152))
    assert tok.eos_ids[0] in _allowed(logits[1]) and _allowed(logits[0]) == a2
    # Preemption: the digits request leaves and comes back (at another index) with its output.
    proc.update_state(BatchUpdate(1, [1], [], []))
    proc.update_state(BatchUpdate(2, [], [(1, digits, None, out0)], []))
    logits = proc.apply(torch.zeros(2, 49152))
    assert tok.eos_ids[0] in _allowed(logits[1]) and _allowed(logits[1]) - {tok.eos_ids[0]} <= a0
    # Budget steering: one token left -> one allowed token that leaves the output complete.
    short = SamplingParams(max_tokens=len(out0) + 1, extra_args={"corral": {"regex": "[0-9]+"}})
    proc.update_state(BatchUpdate(2, [], [(1, short, None, out0)], []))
    logits = proc.apply(torch.zeros(2, 49152))
    (only,) = _allowed(logits[1])
    assert only == tok.eos_ids[0] or re.fullmatch(rb"[0-9]+", tok.decode([only]))
    proc.update_state(BatchUpdate(0, [1, 0], [], []))
    assert not proc.rows


def test_processor_steers_unfinished_output(proc, vllm_mod):
    import torch
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdate

    tok = proc.tokenizer
    from corral.generation.decode import needed_tokens
    from corral.vllm._spec import compile_spec

    spec = request_spec({"corral": {"json_schema": PERSON}})
    assert spec is not None
    budget = needed_tokens(compile_spec(spec, tok).grammar.matcher(), proc.tools, 1000) + 3
    out: list[int] = []
    p = SamplingParams(max_tokens=budget, extra_args={"corral": {"json_schema": PERSON}})
    proc.update_state(BatchUpdate(1, [], [(0, p, None, out)], []))
    for _ in range(budget):  # the model "wants" a long name: highest score on "a"
        scores = torch.zeros(1, 49152)
        scores[0, tok.encode("a")[0]] = 10.0
        allowed = _allowed(proc.apply(scores)[0])
        t = max(allowed, key=lambda i: float(scores[0, i]))
        if t in tok.eos_ids:
            break
        out.append(t)
    text = tok.decode(out).decode()
    assert len(out) <= budget and set(json.loads(text)) == {"name", "age"}, text
    proc.update_state(BatchUpdate(0, [0], [], []))


def test_processor_v2_reads_token_history(model_dir, vllm_mod):
    """The v2-runner processor (vLLM's GPU default; not runnable on the CPU build) on stub runner
    state: rows are request slots, output tokens come from the token history."""
    import numpy as np
    import torch
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import LogitsProcessor as V1
    from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor as V2

    from corral.vllm import CorralLogitsProcessor, CorralLogitsProcessorV2

    # One name for both runners: each runner's loader accepts it.
    assert issubclass(CorralLogitsProcessor, V1) and issubclass(CorralLogitsProcessor, V2)
    mc = _stub_model_config(model_dir)
    hist = torch.zeros(4, 64, dtype=torch.int32)
    prompt_len = torch.tensor([3, 3, 3, 3])
    total_len = prompt_len.clone()
    rs = SimpleNamespace(
        device=torch.device("cpu"),
        all_token_ids=SimpleNamespace(gpu=hist),
        prompt_len=SimpleNamespace(gpu=prompt_len),
        total_len=SimpleNamespace(gpu=total_len),
    )
    proc = CorralLogitsProcessor(SimpleNamespace(model_config=mc, speculative_config=None), rs)
    assert isinstance(proc._v2, CorralLogitsProcessorV2)
    tok = proc.tokenizer
    digits = SamplingParams(max_tokens=50, extra_args={"corral": {"regex": "[0-9]+"}})
    assert proc.add_request(2, digits) and not proc.add_request(0, SamplingParams(max_tokens=5))

    def step(slots):
        ctx = SimpleNamespace(idx_mapping_np=np.array(slots))
        return proc.apply(torch.zeros(len(slots), 49152), ctx)

    logits = step([0, 2])
    assert len(_allowed(logits[0])) == 49152
    first = _allowed(logits[1])
    assert first and all(re.fullmatch(rb"[0-9]+", tok.decode([t])) for t in first)
    ids = tok.encode("12")
    for t in ids:  # one token per step, as the runner commits them
        hist[2, int(total_len[2])] = t
        total_len[2] += 1
        logits = step([2, 0])
    assert tok.eos_ids[0] in _allowed(logits[0]) and len(_allowed(logits[1])) == 49152
    assert proc.rows[2].output == ids
    # Preempted and resumed in another slot: caught up from the history in one read.
    hist[1, 3 : 3 + len(ids)] = torch.tensor(ids)
    total_len[1] = 3 + len(ids)
    assert proc.add_request(1, digits)
    logits = step([1])
    assert proc.rows[1].output == ids and tok.eos_ids[0] in _allowed(logits[0])


def test_structured_outputs_routed_to_corral(vllm_mod, monkeypatch):
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    from corral.vllm import CorralLogitsProcessor

    def params():
        return SamplingParams(max_tokens=10, structured_outputs=StructuredOutputsParams(json=PERSON))

    p = params()
    CorralLogitsProcessor.validate_params(p)  # not opted in: vLLM's backend keeps the request
    assert p.structured_outputs is not None and not p.extra_args
    monkeypatch.setenv("CORRAL_VLLM_STRUCTURED_OUTPUTS", "1")
    p = params()
    CorralLogitsProcessor.validate_params(p)
    assert p.structured_outputs is None
    assert request_spec(p.extra_args) == request_spec({"corral": {"json_schema": PERSON}})
    p = SamplingParams(max_tokens=10, structured_outputs=StructuredOutputsParams(choice=["a", "b"]))
    CorralLogitsProcessor.validate_params(p)
    assert request_spec(p.extra_args) == request_spec({"corral_choices": ["a", "b"]})
    both = SamplingParams(
        max_tokens=10,
        structured_outputs=StructuredOutputsParams(regex="a"),
        extra_args={"corral": {"regex": "b"}},
    )
    with pytest.raises(ValueError, match="both"):
        CorralLogitsProcessor.validate_params(both)


def _chat(llm, prompts, params):
    msgs = [[{"role": "user", "content": p}] for p in prompts]
    return [o.outputs[0] for o in llm.chat(msgs, params, use_tqdm=False)]


def test_mixed_batch(llm):
    from vllm import SamplingParams

    jobs = [
        ("Extract the person as JSON: John Smith is 42.", {"json_schema": PERSON}),
        ("Order: 3 units of ABC-123. Give the item as JSON.", {"json_schema": ITEM}),
        ("Give an order id.", {"regex": r"ORD-\d{5}"}),
        ("Is the sky blue? Answer yes or no.", {"choices": ["yes", "no"]}),
        ("A JSON object describing a cat.", {"json": True}),
        ("Say hello.", None),
        ("Extract the person as JSON: Ann Lee is 7.", {"json_schema": PERSON}),
    ]
    params = [
        SamplingParams(max_tokens=120, temperature=0.0, extra_args={"corral": c} if c is not None else None)
        for _, c in jobs
    ]
    free_alone = _chat(llm, ["Say hello."], SamplingParams(max_tokens=120, temperature=0.0))[0]
    outs = _chat(llm, [p for p, _ in jobs], params)
    import jsonschema

    for (prompt, c), o in zip(jobs, outs, strict=True):
        if c is None:
            assert o.text == free_alone.text  # unconstrained rows are untouched
            continue
        # "length": steered to a complete output within max_tokens, still valid.
        assert o.finish_reason in ("stop", "length"), (prompt, o.text)
        if "json_schema" in c:
            jsonschema.validate(json.loads(o.text), c["json_schema"])
        elif "json" in c:
            json.loads(o.text)
        elif "regex" in c:
            assert re.fullmatch(c["regex"], o.text), o.text
        else:
            assert o.text in c["choices"]


def test_greedy_equals_corral_generate(llm):
    """Same model, same constraint, greedy: vLLM + corral's processor writes what corral's own
    decode loop writes (outputs that end well before the budget, where corral.generate's exact
    budget finish and the processor's steering cannot differ)."""
    from vllm import SamplingParams

    import corral

    jobs = [
        ("Extract the person as JSON: John Smith is 42.", {"json_schema": PERSON}),
        ("Order: 3 units of ABC-123. Give the item as JSON.", {"json_schema": ITEM}),
        ("Give an order id.", {"regex": r"ORD-\d{5}"}),
    ]
    model = corral.load_model(backend="transformers")
    ref = [
        corral.generate(model, p, max_new_tokens=150, schema=c.get("json_schema"), regex=c.get("regex")).text
        for p, c in jobs
    ]
    params = [SamplingParams(max_tokens=150, temperature=0.0, extra_args={"corral": c}) for _, c in jobs]
    outs = _chat(llm, [p for p, _ in jobs], params)
    assert [o.text for o in outs] == ref


def test_sampling_batch_valid(llm):
    from vllm import SamplingParams

    params = SamplingParams(
        n=1, max_tokens=100, temperature=1.0, seed=3, extra_args={"corral": {"json_schema": ITEM}}
    )
    outs = _chat(llm, ["Give an item as JSON."] * 6, params)
    import jsonschema

    for o in outs:
        jsonschema.validate(json.loads(o.text), ITEM)


def test_tiny_max_tokens_still_valid(llm):
    from vllm import SamplingParams

    # PERSON's shortest output is 15 SmolLM2 tokens ({"age": 0, "name": ""} laid out pretty).
    for n in (15, 18, 24):
        p = SamplingParams(max_tokens=n, temperature=0.0, extra_args={"corral": {"json_schema": PERSON}})
        o = _chat(llm, ["Describe a person with a very long name as JSON."], p)[0]
        assert len(o.token_ids) <= n
        value = json.loads(o.text)
        assert set(value) == {"name", "age"}, o.text


def test_bad_constraint_is_refused(llm):
    from vllm import SamplingParams

    # vLLM reports a validate_params ValueError as VLLMValidationError (HTTP 400 on the server).
    with pytest.raises(Exception, match="corral: the regex constraint does not compile"):
        llm.generate(
            ["x"], SamplingParams(max_tokens=5, extra_args={"corral": {"regex": "(ab"}}), use_tqdm=False
        )
    with pytest.raises(Exception, match="give one constraint"):
        llm.generate(
            ["x"],
            SamplingParams(max_tokens=5, extra_args={"corral": {"regex": "a", "json": True}}),
            use_tqdm=False,
        )
    # The engine is unharmed.
    p = SamplingParams(max_tokens=20, extra_args={"corral": {"choices": ["red", "green"]}})
    assert _chat(llm, ["A colour?"], p)[0].text in ("red", "green")


# ---------------------------------------------------------------------- vLLM's OpenAI server


@pytest.fixture(scope="module")
def server(model_dir):
    """vLLM's OpenAI server with corral's processor, response_format routed to corral."""
    import socket
    import subprocess
    import sys
    import tempfile
    import time
    import urllib.request

    pytest.importorskip("openai")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "CORRAL_VLLM_STRUCTURED_OUTPUTS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model_dir,
        "--served-model-name",
        "smollm2",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enforce-eager",
        "--max-model-len",
        "2048",
        "--dtype",
        "bfloat16",
        "--logits-processors",
        "corral.vllm:CorralLogitsProcessor",
    ]
    # The server's log goes to a file, not a pipe: nobody reads a pipe while the tests run, and
    # a server that logs more than the pipe holds would block on its next write.
    log = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"the server exited: {log.read()[-3000:]}")
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(1)
        else:
            pytest.fail("the server did not become healthy within 240 s")
        yield base + "/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_openai_server_xargs_and_response_format(server):
    import jsonschema
    import openai

    client = openai.OpenAI(base_url=server, api_key="none")
    msgs = [{"role": "user", "content": "Extract the person as JSON: John Smith is 42."}]
    r = client.chat.completions.create(
        model="smollm2",
        messages=msgs,
        max_tokens=80,
        temperature=0,
        extra_body={"vllm_xargs": {"corral_json_schema": json.dumps(PERSON)}},
    )
    jsonschema.validate(json.loads(r.choices[0].message.content), PERSON)
    r = client.chat.completions.create(
        model="smollm2",
        messages=msgs,
        max_tokens=80,
        temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}},
    )
    text = r.choices[0].message.content
    jsonschema.validate(json.loads(text), PERSON)
    assert text.startswith('{\n  "'), text  # corral's pretty layout: corral, not vLLM's backend, decoded it
    r = client.completions.create(
        model="smollm2",
        prompt="Order id:",
        max_tokens=20,
        temperature=0,
        extra_body={"vllm_xargs": {"corral_regex": r"ORD-\d{5}"}},
    )
    assert re.fullmatch(r"ORD-\d{5}", r.choices[0].text)
    with pytest.raises(openai.BadRequestError, match="does not compile"):
        client.completions.create(
            model="smollm2", prompt="x", max_tokens=5, extra_body={"vllm_xargs": {"corral_regex": "(ab"}}
        )


# ---------------------------------------------------------------------- host conformance


def test_host_cases(llm):
    """The host-conformance table (tests/host_cases.py) on vLLM: every case satisfied within its
    budget, and greedy outputs equal to corral's own loop where the cases say hosts agree."""
    from host_cases import CASES, run_on_vllm

    import corral

    model = corral.load_model(backend="transformers")
    for case in CASES:
        out = run_on_vllm(llm, case)
        case.check(out.text)
        assert len(out.token_ids) <= case.max_tokens, (case.name, len(out.token_ids))
        if case.agree:
            ref = corral.generate(
                model,
                case.prompt,
                **case.constraint_args(),
                slots=case.slots,
                max_new_tokens=case.max_tokens,
                chat=case.chat,
            )
            assert json.loads(out.text) == json.loads(ref.text) if case.chat else out.text == ref.text, (
                case.name
            )
