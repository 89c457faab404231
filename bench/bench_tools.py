"""Tool calling: free generation vs corral in the model's own format vs corral's plain JSON.

A set of 52 prompts written for this benchmark (single calls, parallel calls, no call needed,
multi-turn with a tool result), each with its gold calls, run on each bundled model in three
modes, side by side in one run:

(a) ``free``: no constraint; the tools described as the model expects (through its chat
    template when the template declares tools, else corral's system note), the reply read by
    the family's usual parser (:func:`corral.grammar.tool_formats.parse_reply`);
(b) ``own``: corral, ``tool_choice="auto"``, parallel calls on, in the format the model's chat
    template declares (Qwen: hermes ``<tool_call>``; SmolLM2 declares none, so (b) is json);
(c) ``json``: corral with the plain JSON union (corral's system note).

Every mode's prompt is rendered the same way for its format and every reply is read by the same
parser, so the columns compare the constraint alone. Reported per mode: replies that parse,
calls that name a real tool, calls whose arguments validate, prompts where the right tools were
chosen (no call where none is needed), prompts whose calls equal the gold exactly (names and
arguments), and wall time.

Usage: python bench/bench_tools.py [--model smollm2-135m|qwen2.5-coder-0.5b ...]
       [--modes free,own,json] [--limit N] [--max-tokens N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import jsonschema

import corral
from corral.compile import ConstraintSpec, compile_constraint
from corral.generation.decode import decode
from corral.grammar.tool_formats import calls_text, detect_format, get_format, parse_reply
from corral.grammar.tools import choice_note, tools_from, tools_prompt
from corral.runtime.sampling import SamplingParams


def _fn(name: str, desc: str, props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    params = {
        "type": "object",
        "properties": props,
        "required": list(props) if required is None else required,
        "additionalProperties": False,
    }
    return {"type": "function", "function": {"name": name, "description": desc, "parameters": params}}


S = {"type": "string", "maxLength": 40}
TOOLS = [
    _fn(
        "get_weather",
        "Get the current weather for a city",
        {"city": S, "unit": {"enum": ["celsius", "fahrenheit"]}},
    ),
    _fn("add", "Add two integers", {"a": {"type": "integer"}, "b": {"type": "integer"}}),
    _fn("multiply", "Multiply two integers", {"a": {"type": "integer"}, "b": {"type": "integer"}}),
    _fn(
        "convert_currency",
        "Convert an amount of money from one currency to another",
        {
            "amount": {"type": "number"},
            "source": {"enum": ["USD", "EUR", "GBP", "JPY"]},
            "target": {"enum": ["USD", "EUR", "GBP", "JPY"]},
        },
    ),
    _fn("set_timer", "Set a timer for a number of minutes", {"minutes": {"type": "integer", "minimum": 1}}),
    _fn("get_time", "Get the current local time in a city", {"city": S}),
    _fn(
        "translate",
        "Translate a text into a language",
        {"text": S, "language": {"enum": ["French", "German", "Spanish", "Italian"]}},
    ),
]
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


def W(city: str, unit: str = "celsius") -> tuple[str, dict[str, Any]]:
    return ("get_weather", {"city": city, "unit": unit})


def A(a: int, b: int) -> tuple[str, dict[str, Any]]:
    return ("add", {"a": a, "b": b})


def M(a: int, b: int) -> tuple[str, dict[str, Any]]:
    return ("multiply", {"a": a, "b": b})


def C(amount: float, source: str, target: str) -> tuple[str, dict[str, Any]]:
    return ("convert_currency", {"amount": amount, "source": source, "target": target})


def T(minutes: int) -> tuple[str, dict[str, Any]]:
    return ("set_timer", {"minutes": minutes})


def TM(city: str) -> tuple[str, dict[str, Any]]:
    return ("get_time", {"city": city})


def TR(text: str, language: str) -> tuple[str, dict[str, Any]]:
    return ("translate", {"text": text, "language": language})


# (kind, user message or (user, [previous calls], [results]), gold calls)
SINGLE = [
    ("What is the weather in Paris, in celsius?", [W("Paris")]),
    ("How warm is it in Tokyo right now? Use celsius.", [W("Tokyo")]),
    ("Tell me the weather in New York in fahrenheit.", [W("New York", "fahrenheit")]),
    ("Is it raining in London? Answer in celsius.", [W("London")]),
    ("What is 17 plus 25?", [A(17, 25)]),
    ("Add 100 and 250.", [A(100, 250)]),
    ("What's 3 + 4?", [A(3, 4)]),
    ("Compute 12 times 11.", [M(12, 11)]),
    ("Multiply 7 by 8.", [M(7, 8)]),
    ("What is 9 multiplied by 6?", [M(9, 6)]),
    ("Convert 50 USD to EUR.", [C(50, "USD", "EUR")]),
    ("How many yen is 20 GBP? Convert it.", [C(20, "GBP", "JPY")]),
    ("Convert 1000 JPY into USD.", [C(1000, "JPY", "USD")]),
    ("Set a timer for 10 minutes.", [T(10)]),
    ("Start a 25 minute timer please.", [T(25)]),
    ("Remind me in 5 minutes with a timer.", [T(5)]),
    ("What time is it in Sydney?", [TM("Sydney")]),
    ("Tell me the current time in Berlin.", [TM("Berlin")]),
    ("Translate 'good morning' into French.", [TR("good morning", "French")]),
    ("How do you say 'thank you' in German? Use the translator.", [TR("thank you", "German")]),
    ("Translate 'where is the station' to Spanish.", [TR("where is the station", "Spanish")]),
    ("Weather in Madrid in celsius, please.", [W("Madrid")]),
    ("What is 45 plus 55?", [A(45, 55)]),
    ("Convert 75 EUR to GBP.", [C(75, "EUR", "GBP")]),
    ("What time is it now in Toronto?", [TM("Toronto")]),
]
PARALLEL = [
    ("What is the weather in Paris and in Rome, in celsius?", [W("Paris"), W("Rome")]),
    ("Add 2 and 3, and also multiply 4 by 5.", [A(2, 3), M(4, 5)]),
    ("What time is it in Tokyo and in London?", [TM("Tokyo"), TM("London")]),
    ("Set a 5 minute timer and a 15 minute timer.", [T(5), T(15)]),
    ("Convert 10 USD to EUR and 10 USD to GBP.", [C(10, "USD", "EUR"), C(10, "USD", "GBP")]),
    ("Get the weather in Oslo in celsius and the time in Oslo.", [W("Oslo"), TM("Oslo")]),
    ("Translate 'hello' into French and into Italian.", [TR("hello", "French"), TR("hello", "Italian")]),
    ("Add 1 and 1, then add 2 and 2.", [A(1, 1), A(2, 2)]),
    (
        "What's the weather in Berlin in fahrenheit and the time in Berlin?",
        [W("Berlin", "fahrenheit"), TM("Berlin")],
    ),
    ("Multiply 3 by 3 and multiply 6 by 7.", [M(3, 3), M(6, 7)]),
]
NONE = [
    ("Hi! How are you today?", []),
    ("Write a haiku about the sea.", []),
    ("What is the capital of France?", []),
    ("Thanks, that is all I needed.", []),
    ("Who wrote Romeo and Juliet?", []),
    ("Tell me a short joke.", []),
    ("What does CPU stand for?", []),
    ("Say goodbye in one sentence.", []),
]
# (user, the calls already made, their results, gold for the next turn)
TURNS = [
    ("What is the weather in Paris, in celsius?", [W("Paris")], ["Sunny, 22 degrees"], []),
    ("What is 17 plus 25?", [A(17, 25)], ["42"], []),
    ("Convert 50 USD to EUR.", [C(50, "USD", "EUR")], ["46.1 EUR"], []),
    ("What time is it in Sydney?", [TM("Sydney")], ["14:05"], []),
    ("Add 2 and 3, then multiply the result by 4.", [A(2, 3)], ["5"], [M(5, 4)]),
    (
        "Get the weather in Rome in celsius, then set a timer for as many minutes as degrees.",
        [W("Rome")],
        ["Cloudy, 18 degrees"],
        [T(18)],
    ),
    ("What is 6 times 7? Then add 8 to it.", [M(6, 7)], ["42"], [A(42, 8)]),
    (
        "Convert 100 GBP to USD, then convert that many USD to EUR.",
        [C(100, "GBP", "USD")],
        ["127"],
        [C(127, "USD", "EUR")],
    ),
    (
        "Translate 'cat' into German and then tell me the time in Berlin.",
        [TR("cat", "German")],
        ["Katze"],
        [TM("Berlin")],
    ),
]


def cases() -> list[tuple[str, list[dict[str, Any]], list[tuple[str, dict[str, Any]]]]]:
    """(kind, messages in OpenAI form, gold calls) for every prompt."""
    out: list[tuple[str, list[dict[str, Any]], list[tuple[str, dict[str, Any]]]]] = []
    for kind, rows in (("single", SINGLE), ("parallel", PARALLEL), ("none", NONE)):
        out += [(kind, [{"role": "user", "content": u}], gold) for u, gold in rows]
    for u, made, results, gold in TURNS:
        calls = [
            {"id": f"call_{k}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for k, (n, a) in enumerate(made)
        ]
        msgs = [{"role": "user", "content": u}, {"role": "assistant", "content": "", "tool_calls": calls}]
        msgs += [{"role": "tool", "tool_call_id": f"call_{k}", "content": r} for k, r in enumerate(results)]
        out.append(("multi-turn", msgs, gold))
    return out


def render(
    backend: Any, messages: list[dict[str, Any]], fmt: str, tools: list[Any], choice: str = "auto"
) -> list[int]:
    """Token ids of a prompt for format ``fmt``: through the template's own tool support when it
    declares that format, else corral's system note with past calls written in ``fmt``."""
    structured = detect_format(backend.chat_template_source) == fmt and fmt != "json"
    msgs: list[dict[str, Any]] = []
    for m in messages:
        m = dict(m)
        if m.get("tool_calls"):
            pairs = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in m["tool_calls"]]
            if structured:
                m["tool_calls"] = [
                    {**c, "function": {"name": n, "arguments": a}}
                    for c, (n, a) in zip(m["tool_calls"], pairs, strict=True)
                ]
            else:
                m = {"role": "assistant", "content": calls_text(pairs, get_format(fmt))}
        msgs.append(m)
    if structured:  # as the library does: the template describes the tools, a note the choice
        note = choice_note(choice, None)
        system = [{"role": "system", "content": note}] if note else []
        return backend.render([*system, *msgs], chat=True, tools=TOOLS)
    note = tools_prompt(tools, choice, None, fmt, True)
    return backend.render([{"role": "system", "content": note}, *msgs], chat=True)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return float(a) == float(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def score(text: str, fmt: str, gold: list[tuple[str, dict[str, Any]]]) -> dict[str, int]:
    _content, calls, error = parse_reply(text, get_format(fmt))
    real = [c for c in calls if c.name in PARAMS]
    valid = 0
    for c in real:
        try:
            jsonschema.validate(c.arguments, PARAMS[c.name])
            valid += 1
        except jsonschema.ValidationError:
            pass
    names_ok = sorted(c.name for c in calls) == sorted(n for n, _ in gold)
    exact = (
        names_ok
        and len(calls) == len(gold)
        and all(any(c.name == n and _same(c.arguments, a) for c in calls) for n, a in gold)
    )
    attempted = bool(calls) or error is not None
    return {
        "replies": 1,
        "attempted": int(attempted),
        "parsed": int(attempted and error is None),
        "calls": len(calls),
        "real": len(real),
        "valid": valid,
        "right_tools": int(names_ok),
        "exact": int(exact),
    }


def run_mode(
    backend: Any, mode: str, items: list[Any], max_tokens: int, choice: str = "auto"
) -> tuple[dict[str, float], list[str]]:
    declared = detect_format(backend.chat_template_source)
    fmt = "json" if mode == "json" else declared
    tools = tools_from(TOOLS)
    grammar = None
    if mode != "free":
        spec = ConstraintSpec.tool_calls(tools, choice, tool_format=fmt, parallel=True)
        grammar = compile_constraint(spec, backend.tokenizer).grammar
    totals: dict[str, float] = {}
    texts = []
    t0 = time.perf_counter()
    for _kind, msgs, gold in items:
        ids = render(backend, msgs, fmt, tools, choice)
        outs, _ = decode(
            backend, [ids], [grammar], max_new_tokens=max_tokens, params=SamplingParams(temperature=0.0)
        )
        text = backend.tokenizer.decode(outs[0].tokens).decode("utf-8", errors="replace")
        texts.append(text)
        for k, v in score(text, fmt, gold).items():
            totals[k] = totals.get(k, 0) + v
    totals["seconds"] = time.perf_counter() - t0
    totals["format"] = fmt  # type: ignore[assignment]
    return totals, texts


def _pct(n: float, d: float) -> str:
    return f"{100 * n / d:5.1f}%" if d else "   n/a"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", action="append", help="preset name (repeatable); default: both bundled models")
    ap.add_argument("--modes", default="free,own,json")
    ap.add_argument("--limit", type=int, default=0, help="first N prompts of each kind (0: all)")
    ap.add_argument("--max-tokens", type=int, default=80)
    ap.add_argument("--dump", help="write every reply to this JSON file")
    ap.add_argument(
        "--tool-choice",
        default="auto",
        choices=("auto", "required"),
        help="required: the constrained modes must call (use with --kinds single,parallel)",
    )
    ap.add_argument("--kinds", default="single,parallel,none,multi-turn", help="prompt kinds to run")
    args = ap.parse_args()
    items = [it for it in cases() if it[0] in args.kinds.split(",")]
    if args.limit:
        seen: dict[str, int] = {}
        items = [
            it
            for it in items
            if seen.setdefault(it[0], 0) < args.limit and not seen.update({it[0]: seen[it[0]] + 1})
        ]
    dump: dict[str, Any] = {}
    print(
        f"{len(items)} prompts: "
        + ", ".join(
            f"{k} {sum(1 for i in items if i[0] == k)}" for k in ("single", "parallel", "none", "multi-turn")
        )
    )
    cols = ("parse", "real tool", "valid args", "right tools", "exact args")
    header = f"{'model':<20} {'mode':<6} {'format':<7} " + " ".join(f"{c:>11}" for c in cols) + "  seconds"
    for name in args.model or ["smollm2-135m", "qwen2.5-coder-0.5b"]:
        backend = corral.load_model(name, backend="llama.cpp", threads=1)
        print(header)
        for mode in args.modes.split(","):
            if (
                mode == "own"
                and detect_format(backend.chat_template_source) == "json"
                and "json" in args.modes
            ):
                print(f"{name:<20} {'own':<6} (the template declares no tool format: same as json)")
                continue
            t, texts = run_mode(backend, mode, items, args.max_tokens, args.tool_choice)
            dump[f"{name}/{mode}"] = texts
            n = t["replies"]
            print(
                f"{name:<20} {mode:<6} {t['format']:<7} {_pct(t['parsed'], t['attempted']):>11} "
                f"{_pct(t['real'], t['calls']):>11} {_pct(t['valid'], t['calls']):>11} "
                f"{_pct(t['right_tools'], n):>11} {_pct(t['exact'], n):>11} {t['seconds']:8.1f}",
                flush=True,
            )
    if args.dump:
        with open(args.dump, "w") as f:
            json.dump(dump, f, indent=1)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
