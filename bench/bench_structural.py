"""Think blocks and structural tags: what they cost next to the constraint they wrap.

Prints, on one real vocabulary, side by side in one run:

* compile time (uncached, this thread) and lowered grammar size: a schema alone; the same schema
  after a think block; free text with three structural tags over two triggers;
* per-token mask time (p50 / p99, ``fill_next_token_bitmask``) along a fixed output, tokenized
  as the tokenizer would, on a fresh compile (first pass: lazy mask computation included) and
  again on the same grammar (second pass: cached): the think block's free text vs a JSON
  string's contents of the same text (the lexeme every schema has), and prose with tool calls
  under the structural tags;
* the thinking budget's own per-step cost (:meth:`corral.runtime.thinking.ThinkBudget.narrow`),
  far from the budget (a check) and near it (the mask narrowed).

Usage: python bench/bench_structural.py [--vocab llama32|smollm2]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

import corral
from corral import models
from corral.compile import spec_from_args
from corral.compile.build import compile_spec
from corral.runtime.thinking import ThinkBudget
from corral.runtime.tokens import tools_for

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 40}, "unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
NOTE = {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}
TAGS = [
    {"begin": "<function=get_weather>", "schema": WEATHER, "end": "</function>"},
    {"begin": "<function=note>", "schema": NOTE, "end": "</function>"},
    {"begin": "<tool_call>", "regex": "[a-z]{1,8}", "end": "</tool_call>"},
]
PROSE = (
    "The user asks about the weather in a city, so I should look it up first; then I can say "
    "whether an umbrella is needed and what to wear. Temperatures are in celsius here. "
) * 2


def _tokenizer(name: str) -> corral.Tokenizer:
    if name == "smollm2":
        return corral.Tokenizer.from_gguf(models.smollm2_gguf_path())
    return corral.Tokenizer.from_file(models.llama32_tokenizer_path())


def _compile(args: dict[str, Any], tok: corral.Tokenizer) -> tuple[Any, float]:
    spec = spec_from_args(args)
    assert spec is not None
    best = float("inf")
    c = None
    for _ in range(7):
        t0 = time.perf_counter()
        c = compile_spec(spec, tok)
        best = min(best, time.perf_counter() - t0)
    return c, best


def _mask_times(grammar: Any, tok: corral.Tokenizer, text: str, start: str = "") -> list[float]:
    """Per-token mask times (seconds) along ``text`` after the prefix ``start``."""
    m = grammar.matcher()
    assert m.accept_string(start), start
    buf = np.zeros((1, (tok.width + 31) // 32), dtype=np.int32)
    times = []
    for t in tok.encode(text):
        t0 = time.perf_counter()
        m.fill_next_token_bitmask(buf, 0)
        times.append(time.perf_counter() - t0)
        assert m.accept_token(t), (text, t)
    return times


def _p(xs: list[float], q: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", default="llama32", choices=["llama32", "smollm2"])
    a = ap.parse_args()
    tok = _tokenizer(a.vocab)
    print(f"vocabulary: {a.vocab} ({tok.vocab_size} tokens)")
    plain, t_plain = _compile({"schema": WEATHER}, tok)
    think, t_think = _compile({"schema": WEATHER, "thinking": {"budget_tokens": 256}}, tok)
    st, t_st = _compile({"structural_tags": TAGS, "triggers": ["<function=", "<tool_call>"]}, tok)
    print("\ncompile (best of 7, uncached)        ms   lowered grammar chars")
    for name, c, t in (
        ("schema", plain, t_plain),
        ("think + schema", think, t_think),
        ("structural tags", st, t_st),
    ):
        print(f"  {name:<32} {t * 1e3:6.2f}   {len(c.grammar.grammar_text):>8}")
    print(f"  ratio think/schema {t_think / t_plain:.2f}x, structural/schema {t_st / t_plain:.2f}x")

    # The same free text, once as a JSON string's contents and once as the think block's text.
    note, _ = _compile({"schema": NOTE, "schema_options": {"whitespace": "compact"}}, tok)
    in_string = _mask_times(note.grammar, tok, PROSE, '{"note":"')
    opener = think.think.open.text
    in_block = _mask_times(think.grammar, tok, PROSE, opener)
    call = '<function=get_weather>{\n  "city": "Paris",\n  "unit": "celsius"\n}</function>'
    prose_calls = _mask_times(st.grammar, tok, PROSE[:200] + call + " Done. " + call)
    warm = [
        _mask_times(note.grammar, tok, PROSE, '{"note":"'),
        _mask_times(think.grammar, tok, PROSE, opener),
        _mask_times(st.grammar, tok, PROSE[:200] + call + " Done. " + call),
    ]
    print("\nmask per token (µs)                   first pass p50/p99   second pass p50/p99   tokens")
    names = ("JSON string contents (reference)", "think block text", "prose + tool calls (structural)")
    for name, xs, ws in zip(names, (in_string, in_block, prose_calls), warm, strict=True):
        first = f"{_p(xs, 0.5):8.1f} {_p(xs, 0.99):8.1f}"
        print(f"  {name:<34} {first}   {_p(ws, 0.5):8.1f} {_p(ws, 0.99):8.1f}  {len(xs):>6}")
    print(
        f"  ratio think/string p50 {_p(in_block, 0.5) / _p(in_string, 0.5):.2f}x, "
        f"structural/string p50 {_p(prose_calls, 0.5) / _p(in_string, 0.5):.2f}x"
    )

    # The budget's own cost per step.
    tools = tools_for(tok)
    row = np.zeros((tok.width + 31) // 32, dtype=np.int32)
    far = ThinkBudget(think.think, tools)
    far.accept(tok.encode(opener + "I think"))
    near = ThinkBudget(think.think, tools)
    near.accept(tok.encode(opener + "I think"))
    near.used = near.budget - 2  # the next token matters
    for name, b in (("far from the budget", far), ("near the budget (narrowed)", near)):
        xs = []
        for _ in range(200):
            row[:] = -1
            t0 = time.perf_counter()
            b.narrow(row)
            xs.append(time.perf_counter() - t0)
        print(f"  ThinkBudget.narrow, {name:<27} p50 {statistics.median(xs) * 1e6:7.1f} µs")


if __name__ == "__main__":
    main()
