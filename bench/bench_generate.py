"""Generation benchmark: SmolLM2-135M-Instruct on this CPU, free vs constrained vs jump-ahead.

For every prompt of the JSON-extraction set (bench/extraction_set.py, 36 items) and the
example tasks (examples/tasks/), one output per mode, batch size 1, greedy:

  free      corral's loop, no constraint (the schema is only described in the prompt)
  masked    corral's loop, schema enforced, one forward pass per token (jump_ahead=False)
  jump      corral's loop, schema enforced, jump-ahead on (the default)
  hf        transformers model.generate(), no constraint             (--hf)
  hf+corral model.generate() with corral.TransformersLogitsProcessor       (--hf)
  hf+xgr    model.generate() with XGrammar's LogitsProcessor         (--hf, if installed)

Printed per mode: outputs that parse and validate, output tokens, forward passes, wall time,
ms per output token, and the share of decode time spent on masks. Targets (issue 4): masked
within 5% of free per output token; jump needs >= 1.5x fewer forward passes than output tokens
and is faster end to end than free.

    python bench/bench_generate.py                  # corral modes, all 40 prompts (~5 min)
    python bench/bench_generate.py --hf --limit 12  # plus model.generate() with processors
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema

sys.path.insert(0, str(Path(__file__).resolve().parent))

from extraction_set import items  # noqa: E402

import corral  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def workload(limit: int | None) -> list[tuple[str, str, dict[str, Any]]]:
    out = [(f"extract-{i:02d}", p, s) for i, (p, s) in enumerate(items())]
    for path in sorted((ROOT / "examples" / "tasks").glob("*.json")):
        task = json.loads(path.read_text())
        if "schema" in task:
            out.append((path.stem, task["prompt"], task["schema"]))
    return out[:limit] if limit else out


def valid(text: str, schema: dict[str, Any]) -> bool:
    try:
        jsonschema.validate(json.loads(text), schema)
        return True
    except (ValueError, jsonschema.ValidationError):
        return False


class Tally:
    def __init__(self, name: str) -> None:
        self.name = name
        self.n = self.ok = self.tokens = self.passes = 0
        self.wall = self.decode = self.mask = 0.0
        self.texts: list[str] = []

    def add(
        self, ok: bool, tokens: int, passes: int, wall: float, decode: float = 0.0, mask: float = 0.0
    ) -> None:
        self.n += 1
        self.ok += ok
        self.tokens += tokens
        self.passes += passes
        self.wall += wall
        self.decode += decode
        self.mask += mask

    def row(self) -> list[str]:
        per_tok = 1000 * self.wall / max(1, self.tokens)
        share = f"{100 * self.mask / self.decode:.1f}%" if self.decode else "-"
        return [
            self.name,
            f"{self.ok}/{self.n}",
            str(self.tokens),
            str(self.passes) if self.passes else "-",
            f"{self.tokens / max(1, self.passes):.2f}" if self.passes else "-",
            f"{self.wall:.1f}",
            f"{per_tok:.1f}",
            share,
        ]


def run_corral(model: Any, work: list[Any], mode: str, max_new: int) -> Tally:
    # Every mode starts cold (compile cache and lazily-filled mask caches), as a new schema does.
    corral.compile.clear_cache()
    t = Tally(mode)
    for _, prompt, schema in work:
        kw: dict[str, Any] = {} if mode == "free" else {"schema": schema, "jump_ahead": mode == "jump"}
        t0 = time.perf_counter()
        r = corral.generate(model, prompt, max_new_tokens=max_new, **kw)
        wall = time.perf_counter() - t0
        t.add(
            valid(r.text, schema),
            r.completion_tokens,
            r.forward_passes,
            wall,
            r.timing["decode"],
            r.timing["mask"],
        )
        t.texts.append(r.text)
    return t


def run_hf(model: Any, work: list[Any], mode: str, max_new: int) -> Tally | None:
    hf_model, tok = model.model, model.hf_tokenizer
    t = Tally(mode)
    xgr = None
    if mode == "hf+xgr":
        try:
            import xgrammar as xgr
        except ImportError:
            print("hf+xgr: xgrammar not installed, skipped", file=sys.stderr)
            return None
        info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=model.tokenizer.width)
        compiler = xgr.GrammarCompiler(info)
    for _, prompt, schema in work:
        text = tok.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
        )
        enc = tok(text, return_tensors="pt", add_special_tokens=False)
        t0 = time.perf_counter()
        procs = []
        if mode == "hf+corral":
            g = corral.compile_json_schema(schema, model.tokenizer, whitespace="pretty")
            procs = [corral.TransformersLogitsProcessor(g, max_new_tokens=max_new)]
        elif mode == "hf+xgr":
            procs = [
                xgr.contrib.hf.LogitsProcessor(compiler.compile_json_schema(json.dumps(schema), indent=2))
            ]
        out = hf_model.generate(**enc, logits_processor=procs, max_new_tokens=max_new, do_sample=False)
        wall = time.perf_counter() - t0
        gen = out[0, enc["input_ids"].shape[1] :]
        eos = set(model.tokenizer.eos_ids)
        n = sum(1 for x in gen.tolist() if x not in eos)
        t.add(valid(tok.decode(gen, skip_special_tokens=True), schema), n, 0, wall)
    return t


def main() -> int:
    ap = argparse.ArgumentParser(description="generation benchmark (SmolLM2 on CPU)")
    ap.add_argument("--model", default=None, help="default: bundled SmolLM2-135M-Instruct")
    ap.add_argument("--backend", default="transformers", choices=("transformers", "llama.cpp"))
    ap.add_argument("--limit", type=int, default=None, help="first N prompts only")
    ap.add_argument("--max-new-tokens", type=int, default=160)
    ap.add_argument("--modes", default="free,masked,jump")
    ap.add_argument("--hf", action="store_true", help="also model.generate() with logits processors")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", type=Path, help="write the table as JSON here")
    args = ap.parse_args()
    model = corral.load_model(args.model, backend=args.backend, threads=args.threads)
    work = workload(args.limit)
    print(f"{model.describe()}; {len(work)} prompts; max_new_tokens={args.max_new_tokens}", flush=True)
    corral.generate(model, "warm-up", regex="[a-z]{1,4}")
    tallies = []
    for mode in args.modes.split(","):
        tallies.append(run_corral(model, work, mode, args.max_new_tokens))
        print("  done:", mode, flush=True)
    if args.hf and args.backend == "transformers":
        for mode in ("hf", "hf+corral", "hf+xgr"):
            t = run_hf(model, work, mode, args.max_new_tokens)
            if t is not None:
                tallies.append(t)
                print("  done:", mode, flush=True)
    head = ["mode", "valid", "out tokens", "fwd passes", "tok/pass", "wall s", "ms/out tok", "mask share"]
    rows = [head] + [t.row() for t in tallies]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
    by = {t.name: t for t in tallies}
    if {"free", "masked", "jump"} <= set(by):
        f, m, j = by["free"], by["masked"], by["jump"]
        per = lambda t: t.wall / max(1, t.tokens)  # noqa: E731
        print(f"\nmasked / free, per output token: {per(m) / per(f):.3f}")
        print(f"jump: output tokens / forward passes: {j.tokens / max(1, j.passes):.2f}")
        print(f"jump / free, wall time: {j.wall / f.wall:.3f}")
        same = sum(a == b for a, b in zip(m.texts, j.texts, strict=True))
        print(f"jump vs masked: {same}/{len(j.texts)} outputs identical")
    if args.json:
        args.json.write_text(json.dumps([dict(zip(head, t.row(), strict=True)) for t in tallies], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
