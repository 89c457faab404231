"""The host-conformance cases: the same constraints, run on every host that decodes with corral
(its own loop, the server, the transformers and llama-cpp-python processors — tests/test_hosts.py
— and vLLM in its own CI step — tests/test_vllm.py), each output checked the same way.

A case is plain data: a prompt, the constraint as ``corral.generate`` keyword arguments (which
every host turns into the same ``ConstraintSpec``), slot values, a token budget and a check of the
decoded text. Hosts differ only in how they are driven.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jsonschema

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
ANSWER_FIRST = {
    "type": "object",
    "properties": {
        "answer": {"enum": ["yes", "no"]},
        "reasoning": {"type": "string", "maxLength": 60},
    },
    "required": ["answer", "reasoning"],
    "additionalProperties": False,
}
REASONING_FIRST = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string", "maxLength": 60},
        "answer": {"enum": ["yes", "no"]},
    },
    "required": ["reasoning", "answer"],
    "additionalProperties": False,
}
SLOTTED = {
    "type": "object",
    "properties": {"cost_center": {"type": "string", "x-corral-slot": "cc"}, "amount": {"type": "integer"}},
    "required": ["cost_center", "amount"],
    "additionalProperties": False,
}
STORY = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "story": {"type": "string"}},
    "required": ["title", "story"],
    "additionalProperties": False,
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather for a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "maxLength": 30},
                    "unit": {"enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city", "unit"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
                "additionalProperties": False,
            },
        },
    },
]
SQL = 'root ::= "SELECT " cols " FROM " name ";"\ncols ::= name ("," " "? name)*\nname ::= [a-z_]{1,12}\n'
# The same language as SQL, written in Lark (every host gets Lark through the one spec).
SQL_LARK = 'start: "SELECT " cols " FROM " NAME ";"\ncols: NAME ("," " "? NAME)*\nNAME: /[a-z_]{1,12}/\n'
SQL_RE = re.compile(r"SELECT [a-z_]{1,12}(, ?[a-z_]{1,12})* FROM [a-z_]{1,12};")


def _schema_check(schema: dict[str, Any], order: list[str] | None = None) -> Callable[[str], None]:
    def check(text: str) -> None:
        value = json.loads(text)
        jsonschema.validate(value, schema)
        if order is not None:
            assert list(value) == order, (order, text)

    return check


def _person_model() -> Any:
    """A Pydantic model (built lazily: pydantic is a test dependency, not the vLLM venv's)."""
    import pydantic

    class Person(pydantic.BaseModel):
        name: str = pydantic.Field(max_length=20)
        age: int = pydantic.Field(ge=0)

    return Person


def _pydantic_check(text: str) -> None:
    _person_model().model_validate_json(text)


def _tool_check(text: str) -> None:
    call = json.loads(text)
    tool = next(t for t in TOOLS if t["function"]["name"] == call["name"])
    jsonschema.validate(call["arguments"], tool["function"]["parameters"])
    assert set(call) == {"name", "arguments"}


THINK_OPEN, THINK_CLOSE = "Reasoning: ", "\nAnswer: "  # SmolLM2 has no think tokens: the plain pair
THINK_BUDGET = 12


def split_thinking(text: str) -> tuple[str, str]:
    """(reasoning, answer) of a think-then-answer output in the plain section pair."""
    assert text.startswith(THINK_OPEN), text
    reasoning, sep, answer = text[len(THINK_OPEN) :].partition(THINK_CLOSE)
    assert sep, text
    return reasoning, answer


def _think_check(text: str) -> None:
    _reasoning, answer = split_thinking(text)
    jsonschema.validate(json.loads(answer), ANSWER_FIRST)


CALL_TAGS = [
    {"begin": "<tool_call>", "schema": TOOLS[0]["function"]["parameters"], "end": "</tool_call>"},
]


def _structural_check(text: str) -> None:
    """Free text with zero or more well-formed <tool_call> segments, each valid."""
    pos = 0
    while (at := text.find("<tool_call>", pos)) >= 0:
        start = at + len("<tool_call>")
        stop = text.index("</tool_call>", start)
        jsonschema.validate(json.loads(text[start:stop]), CALL_TAGS[0]["schema"])
        pos = stop + len("</tool_call>")


def _slot_check(text: str) -> None:
    value = json.loads(text)
    jsonschema.validate(value, SLOTTED)
    assert value["cost_center"] in ("CC-104", "CC-209"), text


@dataclass(frozen=True)
class HostCase:
    """One constraint case. ``args`` are ``corral.generate``'s constraint keyword arguments
    (``schema`` may be the marker ``"pydantic:Person"``: each host builds the model itself);
    ``chat`` renders the prompt with the chat template (tool calls need the system note);
    ``agree`` marks cases whose greedy output must be identical across hosts that share weights
    (budget-cut and whole-choice-scored cases are decided differently by design)."""

    name: str
    prompt: str
    args: dict[str, Any]
    check: Callable[[str], None]
    max_tokens: int = 80
    slots: dict[str, list[str]] | None = None
    chat: bool = False
    agree: bool = True
    budget_cut: bool = False
    thinking: bool = False
    tags: tuple[str, ...] = field(default_factory=tuple)

    def constraint_args(self) -> dict[str, Any]:
        """The keyword arguments with the Pydantic marker resolved."""
        if self.args.get("schema") == "pydantic:Person":
            return {**self.args, "schema": _person_model()}
        return dict(self.args)

    def json_schema(self) -> Any:
        """The schema as JSON (what a wire protocol carries)."""
        s = self.args.get("schema")
        if s == "pydantic:Person":
            return _person_model().model_json_schema()
        if isinstance(s, str):
            return json.loads(s)
        return s


CASES = [
    HostCase(
        "pydantic",
        "Extract the person as JSON: John Smith is 42 years old.\nJSON:",
        {"schema": "pydantic:Person"},
        _pydantic_check,
    ),
    HostCase(
        "json_text",
        "Extract the person as JSON: Ann Lee is 7.\nJSON:",
        {"schema": json.dumps(PERSON)},
        _schema_check(PERSON),
    ),
    HostCase(
        "regex", "An order id, like ORD-12345:", {"regex": r"ORD-\d{5}"}, lambda t: _match(r"ORD-\d{5}", t)
    ),
    HostCase(
        "grammar",
        "An SQL query listing the names of all users:",
        {"grammar": SQL},
        lambda t: _match(SQL_RE.pattern, t),
        max_tokens=40,
    ),
    HostCase(
        "lark",
        "An SQL query listing the names of all users:",
        {"grammar": SQL_LARK},
        lambda t: _match(SQL_RE.pattern, t),
        max_tokens=40,
    ),
    HostCase(
        "choices",
        "Is the sky blue? Answer yes or no:",
        {"choices": ["yes", "no", "maybe"]},
        lambda t: _is_in(t, ("yes", "no", "maybe")),
        agree=False,
    ),
    HostCase(
        "tools",
        "What is the weather in Paris, in celsius?",
        {"tools": TOOLS, "tool_choice": "required"},
        _tool_check,
        chat=True,
    ),
    HostCase(
        "slots",
        "Book 120 euros to cost center CC-209 as JSON:",
        {"schema": SLOTTED},
        _slot_check,
        slots={"cc": ["CC-104", "CC-209"]},
    ),
    HostCase(
        "budget",
        "Write a very long story with a title, as JSON:",
        {"schema": STORY},
        _schema_check(STORY),
        max_tokens=16,
        agree=False,
        budget_cut=True,
    ),
    HostCase(
        "answer_first",
        "Is 17 a prime number? Answer as JSON:",
        {"schema": ANSWER_FIRST},
        _schema_check(ANSWER_FIRST, ["answer", "reasoning"]),
    ),
    HostCase(
        "reasoning_first",
        "Is 17 a prime number? Answer as JSON:",
        {"schema": REASONING_FIRST},
        _schema_check(REASONING_FIRST, ["reasoning", "answer"]),
    ),
    HostCase(
        "thinking",
        "Is 17 a prime number? Think briefly, then answer as JSON.\n",
        {"schema": ANSWER_FIRST, "thinking": {"budget_tokens": THINK_BUDGET}},
        _think_check,
        max_tokens=60,
        agree=False,  # jump-ahead spells the forced close marker; a processor lets the model spell it
        thinking=True,
    ),
    HostCase(
        "structural",
        'Weather in Paris? Reply with <tool_call>{"city": ..., "unit": ...}</tool_call>.\nReply:',
        {"structural_tags": CALL_TAGS},
        _structural_check,
        max_tokens=40,
    ),
]
"""In order: ``answer_first`` is compiled right before ``reasoning_first`` (same properties, other
order), the property-order regression on every host's cache."""


def _match(pattern: str, text: str) -> None:
    assert re.fullmatch(pattern, text), (pattern, text)


def _is_in(text: str, options: tuple[str, ...]) -> None:
    assert text in options, text


def vllm_args(case: HostCase) -> dict[str, Any]:
    """A case's constraint as vLLM ``extra_args`` (plain data: schemas as JSON)."""
    args = {k: v for k, v in case.args.items() if k != "schema"}
    if "schema" in case.args:
        args["json_schema"] = case.json_schema()
    if case.slots:
        args["slots"] = case.slots
    return {"corral": args}


def run_on_vllm(llm: Any, case: HostCase) -> Any:
    """One case through a vLLM ``LLM`` (greedy, the case's budget, its constraint in
    ``extra_args``): the request's first output. Tool cases get corral's tool prompt as a system
    message, as the other hosts do."""
    from vllm import SamplingParams

    from corral.grammar.tools import tools_prompt
    from corral.vllm import request_spec

    params = SamplingParams(max_tokens=case.max_tokens, temperature=0.0, extra_args=vllm_args(case))
    if not case.chat:
        return llm.generate([case.prompt], params, use_tqdm=False)[0].outputs[0]
    spec = request_spec(vllm_args(case))
    msgs = [{"role": "user", "content": case.prompt}]
    if spec is not None and spec.kind == "tools":
        msgs.insert(0, {"role": "system", "content": tools_prompt(spec.tools, spec.tool_mode)})
    return llm.chat([msgs], params, use_tqdm=False)[0].outputs[0]
