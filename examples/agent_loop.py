"""A small agent loop that runs offline on the bundled SmolLM2-135M-Instruct.

The model thinks in a bounded block, calls a local Python function (the call always names a
declared tool with valid arguments), reads the function's result and answers in prose:

    python examples/agent_loop.py "What is the weather in Paris?"
"""

from __future__ import annotations

import json
import sys
from typing import Any

import corral


def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
    """Get the current weather for a city."""
    temps = {"paris": 18, "london": 14, "rome": 24}
    t = temps.get(city.strip().lower(), 20)
    if unit == "fahrenheit":
        t = round(t * 9 / 5 + 32)
    return {"city": city, "temperature": t, "unit": unit, "sky": "clear"}


def run(question: str, model: Any = None, think_tokens: int = 24) -> dict[str, Any]:
    """One turn: think, call a tool, feed the result back, answer. Returns what happened."""
    model = model if model is not None else corral.load_model()
    messages: list[dict[str, str]] = [{"role": "user", "content": question}]
    step = corral.generate(
        model, messages, tools=[get_weather], tool_choice="required", thinking=think_tokens, max_new_tokens=96
    )
    call = step.value  # a corral.ToolCall: a declared tool, arguments valid for it
    result = call.invoke()
    messages += [
        {"role": "assistant", "content": json.dumps({"name": call.name, "arguments": call.arguments})},
        {"role": "tool", "content": json.dumps(result)},
    ]
    answer = corral.generate(model, messages, max_new_tokens=60)
    return {
        "reasoning": step.reasoning,
        "call": {"name": call.name, "arguments": call.arguments},
        "result": result,
        "answer": answer.text,
    }


if __name__ == "__main__":
    out = run(sys.argv[1] if len(sys.argv) > 1 else "What is the weather in Paris?")
    print(f"thought:  {out['reasoning']!r}")
    print(f"called:   {out['call']['name']}({out['call']['arguments']}) -> {out['result']}")
    print(f"answered: {out['answer']}")
