"""Task accuracy of the bundled models: are the answers right, not only valid?

    python bench/quality/run.py                                   # everything, both presets
    python bench/quality/run.py --per-schema 4 --tickets 30       # a bounded subset
    python bench/quality/run.py --models qwen2.5-coder-0.5b --modes free,constrained

Extraction (64 items, 4 schemas, ``data.py``), each mode on the same prompt (instructions, the
text, and the JSON Schema itself):
- ``free``: no constraint; the output is parsed the usual way (code fences stripped, the first
  ``{`` to the last ``}``) and validated with ``jsonschema``;
- ``constrained``: the schema as a constraint (pretty layout, jump-ahead on: corral's default);
- ``flexible``: constrained, ``whitespace="flexible"`` (the model chooses the layout);
- ``no-jump``: constrained, jump-ahead off;
- ``calibrated``: constrained, with ``calibrate=`` the same prompt with the document replaced by
  ``N/A`` (contextual calibration of the enums and booleans, ``corral.generation.calibrated_values``);
- ``free-1shot``, ``constrained-1shot``, ``calibrated-1shot``: the same three with one worked
  example first (a chat: the prompt for ``data.EXAMPLES``' document, its answer, then the item's
  prompt; the example is the same for every item of a schema and is not one of the 64).

Routing (90 tickets, 3 labels):
- ``classify``: ``corral.classify`` scores each label as the whole answer;
- ``answer-first`` / ``reasoning-first``: ``corral.generate`` with a schema whose ``queue`` enum
  comes before / after a short ``reasoning`` string.

Field accuracy counts every leaf of the gold answer (list lengths included) that the output has
equal (numbers by value, strings ignoring case and surrounding spaces); an unparseable output has
every field wrong; a parsed output that fails the schema still scores its fields (which favours
free generation). Item accuracy: every field right. Greedy decoding, batch 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import jsonschema

sys.path.insert(0, str(Path(__file__).resolve().parent))
import data  # noqa: E402

import corral  # noqa: E402

EXTRACTION_MODES = (
    "free",
    "constrained",
    "flexible",
    "no-jump",
    "calibrated",
    "free-1shot",
    "constrained-1shot",
    "calibrated-1shot",
)
ROUTING_MODES = ("classify", "answer-first", "reasoning-first")

DESCRIPTIONS = {
    "billing": "payments, charges, invoices, refunds, prices",
    "technical": "bugs, errors, crashes, something in the product not working",
    "account": "login, passwords, profile, users and team members, personal data",
}


def leaves(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """The gold answer's fields: every leaf by JSON pointer, plus each list's length."""
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in leaves(v, f"{path}/{k}")]
    if isinstance(value, list):
        out = [(f"{path}#len", len(value))]
        for i, v in enumerate(value):
            out += leaves(v, f"{path}/{i}")
        return out
    return [(path, value)]


def same(got: Any, want: Any) -> bool:
    if isinstance(want, bool) or isinstance(got, bool) or want is None or got is None:
        return got is want
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return abs(got - want) < 1e-6
    if isinstance(want, str) and isinstance(got, str):
        return got.strip().casefold() == want.strip().casefold()
    return bool(got == want)


def lookup(value: Any, path: str) -> tuple[bool, Any]:
    length = path.endswith("#len")
    for key in path.removesuffix("#len").lstrip("/").split("/") if path.strip("/#len") else []:
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return False, None
    if length:
        return (True, len(value)) if isinstance(value, list) else (False, None)
    return True, value


def score(pred: Any, gold: Any) -> tuple[int, int]:
    """(fields right, fields) of a parsed output against its gold answer."""
    fields = leaves(gold)
    right = 0
    if pred is not None:
        for path, want in fields:
            found, got = lookup(pred, path)
            right += found and same(got, want)
    return right, len(fields)


def parse_free(text: str) -> Any:
    """The usual way to read JSON out of free text: strip fences, take the outermost braces."""
    t = text.strip()
    if "```" in t:
        t = t.split("```", 2)[1].removeprefix("json").strip() if t.count("```") >= 2 else t.replace("```", "")
    start, end = t.find("{"), t.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        return json.loads(t[start : end + 1])
    except ValueError:
        return None


def extraction_prompt(item: dict[str, Any], document: str | None = None) -> str:
    """The item's prompt (with ``document`` in place of the item's own: the content-free
    prompt of ``calibrated`` mode)."""
    schema = json.dumps(item["schema"], separators=(",", ":"))
    text = item["prompt"] if document is None else item["prompt"].replace(item["document"], document)
    return f"{text}\n\nAnswer with one JSON object matching this JSON Schema:\n{schema}"


def extraction_chat(item: dict[str, Any], document: str | None = None) -> list[dict[str, str]]:
    """The one-shot prompt: the schema's worked example (``data.EXAMPLES``) as a first exchange,
    then the item's prompt (with ``document`` in place of the item's own)."""
    doc, answer = data.EXAMPLES[item["schema_name"]]
    return [
        {"role": "user", "content": extraction_prompt(item, doc)},
        {"role": "assistant", "content": json.dumps(answer, indent=2, ensure_ascii=False)},
        {"role": "user", "content": extraction_prompt(item, document)},
    ]


def run_extraction(model: Any, items: list[dict[str, Any]], mode: str, max_new_tokens: int) -> dict[str, Any]:
    stats: dict[str, Any] = defaultdict(float)
    per_schema: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    wrong: list[str] = []
    misses: dict[str, list[Any]] = {}
    t0 = time.perf_counter()
    for item in items:
        kw: dict[str, Any] = {"max_new_tokens": max_new_tokens}
        shot = mode.endswith("-1shot")
        prompt: Any = extraction_chat(item) if shot else extraction_prompt(item)
        if not mode.startswith("free"):
            kw["schema"] = item["schema"]
        if mode == "flexible":
            kw["schema_options"] = {"whitespace": "flexible"}
        if mode == "no-jump":
            kw["jump_ahead"] = False
        if mode == "calibrated":
            kw["calibrate"] = extraction_prompt(item, "N/A")
        if mode == "calibrated-1shot":
            kw["calibrate"] = extraction_chat(item, "N/A")
        r = corral.generate(model, prompt, **kw)
        value = parse_free(r.text) if mode.startswith("free") else (r.value if r.valid else None)
        try:
            jsonschema.validate(value, item["schema"])
            valid = value is not None
        except jsonschema.ValidationError:
            valid = False
        right, n = score(value, item["gold"])
        stats["valid"] += valid
        stats["fields_right"] += right
        stats["fields"] += n
        stats["items_right"] += right == n
        stats["output_tokens"] += r.completion_tokens
        stats["forward_passes"] += r.forward_passes
        if r.calibration is not None:
            stats["calibrated_choices"] += len(r.calibration.choices)
            stats["calibration_changed"] += len(r.calibration.changed)
        per_schema[item["schema_name"]][0] += right
        per_schema[item["schema_name"]][1] += n
        if right != n:
            wrong.append(item["id"])
            misses[item["id"]] = [
                [p, w, lookup(value, p)[1]]
                for p, w in leaves(item["gold"])
                if not (lookup(value, p)[0] and same(lookup(value, p)[1], w))
            ]
    stats["wall_s"] = time.perf_counter() - t0
    stats["items"] = len(items)
    return {**stats, "per_schema": dict(per_schema), "wrong_items": wrong, "misses": misses}


def routing_schema(reasoning_first: bool) -> dict[str, Any]:
    props: dict[str, Any] = {
        "reasoning": {"type": "string", "maxLength": 80},
        "queue": {"enum": data.LABELS},
    }
    order = ["reasoning", "queue"] if reasoning_first else ["queue", "reasoning"]
    return {
        "type": "object",
        "properties": {k: props[k] for k in order},
        "required": order,
        "additionalProperties": False,
    }


def routing_prompt(text: str, reasoning_first: bool) -> str:
    legend = "\n".join(f"- {k}: {v}" for k, v in DESCRIPTIONS.items())
    order = (
        "a one-sentence reasoning, then the queue"
        if reasoning_first
        else "the queue, then a one-sentence reasoning"
    )
    return f"Route this support ticket to one queue:\n{legend}\nAnswer as JSON: {order}.\n\nTicket: {text}"


def run_routing(model: Any, tickets: list[tuple[str, str]], mode: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    preds: list[str | None] = []
    passes = tokens = 0
    if mode == "classify":
        results = corral.classify(model, [t for t, _ in tickets], data.LABELS, descriptions=DESCRIPTIONS)
        preds = [r.label for r in results]
    else:
        first = mode == "reasoning-first"
        schema = routing_schema(first)
        for text, _ in tickets:
            r = corral.generate(model, routing_prompt(text, first), schema=schema, max_new_tokens=80)
            preds.append(r.value["queue"] if r.valid else None)
            passes += r.forward_passes
            tokens += r.completion_tokens
    right = sum(p == g for p, (_, g) in zip(preds, tickets, strict=True))
    counts = {label: preds.count(label) for label in data.LABELS}
    return {
        "items": len(tickets),
        "right": right,
        "wall_s": time.perf_counter() - t0,
        "forward_passes": passes,
        "output_tokens": tokens,
        "predicted": counts,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="smollm2-135m,qwen2.5-coder-0.5b")
    ap.add_argument("--modes", default=",".join(EXTRACTION_MODES + ROUTING_MODES))
    ap.add_argument("--per-schema", type=int, default=16, help="extraction items per schema (max 16)")
    ap.add_argument("--tickets", type=int, default=90, help="routing tickets (max 90, labels balanced)")
    ap.add_argument("--backend", default="auto", choices=("auto", "transformers", "llama.cpp"))
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--max-new-tokens", type=int, default=400)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = set(modes) - set(EXTRACTION_MODES + ROUTING_MODES)
    if unknown:
        ap.error(f"unknown modes {sorted(unknown)}")
    all_items = data.extraction_items()
    items = [it for it in all_items if int(it["id"].rsplit("-", 1)[1]) < args.per_schema]
    tickets = data.routing_tickets()[: args.tickets]
    report: dict[str, Any] = {}
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        model = corral.load_model(name, backend=args.backend, threads=args.threads)
        print(f"== {name}: {model.describe()}", flush=True)
        report[name] = {}
        for mode in modes:
            if mode in EXTRACTION_MODES:
                s = run_extraction(model, items, mode, args.max_new_tokens)
                report[name][mode] = s
                per = ", ".join(f"{k} {r / n:.0%}" for k, (r, n) in s["per_schema"].items())
                print(
                    f"| {name} | extraction {mode} | {s['valid']:.0f}/{s['items']} | "
                    f"{s['fields_right'] / s['fields']:.1%} | {s['items_right']:.0f}/{s['items']} | "
                    f"{s['wall_s']:.1f} | {s['forward_passes']:.0f} | {s['output_tokens']:.0f} | {per} |",
                    flush=True,
                )
            else:
                s = run_routing(model, tickets, mode)
                report[name][mode] = s
                acc = s["right"] / s["items"]
                print(
                    f"| {name} | routing {mode} | {s['right']}/{s['items']} ({acc:.0%}) | "
                    f"{s['wall_s']:.1f} | {s['forward_passes']} | predicted {s['predicted']} |",
                    flush=True,
                )
        del model
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
