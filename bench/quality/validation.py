"""Checks after decoding on the extraction set: how many outputs pass a few business rules under
each ``on_invalid`` policy, and what the recovery costs.

    python bench/quality/validation.py                                  # Qwen, all 64 items
    python bench/quality/validation.py --per-schema 4 --models smollm2-135m

The rules (:data:`RULES`) are ones a team would write for these documents, not fitted to the
answers: amounts add up (line items to the invoice total, receipt items to the receipt total),
and what is extracted is in the document (every price as written, vendor / merchant / names,
e-mail, phone, city, speakers). Every gold answer passes them (checked at start). Each item is
decoded constrained (the schema, greedy) with ``checks=RULES[schema]``:
- ``report``: the output as decoded; valid = passes the schema and every rule;
- ``backtrack`` / ``retry`` (with the errors appended to the prompt): run on the items that
  failed under ``report`` (the others are unchanged by construction), ``--tries`` more attempts.

Reported per policy: items passing every rule, field accuracy against the gold answers (as in
``run.py``), the extra tokens and forward passes the policy decoded, and the wall time of the
whole set under it (the first attempts plus the policy's extra work).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import data  # noqa: E402
from run import extraction_prompt, score  # noqa: E402

import corral  # noqa: E402
from corral import CheckFailure  # noqa: E402

Rule = Callable[[Any], Any]


def _in(text: str, value: Any) -> bool:
    return value is None or str(value).strip().casefold() in text.casefold()


def _money_in(text: str, amount: float) -> bool:
    return f"{amount:.2f}" in text


def rules_for(schema_name: str, source: str) -> list[Rule]:
    """The checks for one item (``source``: the document the model read)."""

    def adds_up(lines_key: str, amount: Callable[[dict[str, Any]], float]) -> Rule:
        def rule(v: dict[str, Any]) -> CheckFailure | None:
            s = round(sum(amount(x) for x in v[lines_key]), 2)
            if abs(s - v["total"]) > 0.011:
                return CheckFailure(f"the {lines_key} add up to {s:.2f}, not {v['total']}", "/total")
            return None

        rule.__name__ = f"{lines_key}_add_up"
        return rule

    def prices_as_written(lines_key: str, field: str) -> Rule:
        def rule(v: dict[str, Any]) -> list[CheckFailure]:
            return [
                CheckFailure(f"{x[field]:.2f} is not in the document", f"/{lines_key}/{i}/{field}")
                for i, x in enumerate(v[lines_key])
                if not _money_in(source, x[field])
            ]

        rule.__name__ = f"{field}s_in_document"
        return rule

    def grounded(*fields: str) -> Rule:
        def rule(v: dict[str, Any]) -> list[CheckFailure]:
            out = []
            for f in fields:
                values = v[f] if isinstance(v[f], list) else [v[f]]
                for i, x in enumerate(values):
                    if not _in(source, x):
                        path = f"/{f}/{i}" if isinstance(v[f], list) else f"/{f}"
                        out.append(CheckFailure(f"{x!r} is not in the document", path))
            return out

        rule.__name__ = "in_document"
        return rule

    if schema_name == "invoice":
        return [
            prices_as_written("line_items", "unit_price"),
            adds_up("line_items", lambda x: x["quantity"] * x["unit_price"]),
            grounded("vendor", "invoice_number"),
        ]
    if schema_name == "receipt":
        return [
            prices_as_written("items", "price"),
            adds_up("items", lambda x: x["price"]),
            grounded("merchant"),
        ]
    if schema_name == "contact":
        return [grounded("name", "company", "email", "phone")]
    return [grounded("title", "city", "speakers")]


def _passes(rules: list[Rule], value: Any) -> bool:
    from corral.generation.validation import run_checks

    return not run_checks(rules, value, None, "", None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="qwen2.5-coder-0.5b")
    ap.add_argument("--per-schema", type=int, default=16)
    ap.add_argument(
        "--start", type=int, default=0, help="first item index per schema (with --per-schema: a slice)"
    )
    ap.add_argument("--tries", type=int, default=2)
    ap.add_argument("--schemas", default=",".join(data.SCHEMAS), help="comma-separated schema names")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--max-new-tokens", type=int, default=400)
    args = ap.parse_args()
    items = [
        it
        for it in data.extraction_items()
        if args.start <= int(it["id"].rsplit("-", 1)[1]) < args.per_schema
        and it["schema_name"] in args.schemas.split(",")
    ]
    for it in items:  # the rules hold for every gold answer
        assert _passes(rules_for(it["schema_name"], it["prompt"]), it["gold"]), it["id"]
    print(
        "| model | policy | pass every rule | field accuracy | extra tokens | extra forward passes | wall s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        model = corral.load_model(name, threads=args.threads)
        results: dict[str, list[Any]] = {"report": [], "backtrack": [], "retry": []}
        walls = dict.fromkeys(results, 0.0)
        for it in items:
            rules = rules_for(it["schema_name"], it["prompt"])
            kw: dict[str, Any] = {
                "schema": it["schema"],
                "max_new_tokens": args.max_new_tokens,
                "checks": rules,
            }
            t0 = time.perf_counter()
            first = corral.generate(model, extraction_prompt(it), **kw)
            t_first = time.perf_counter() - t0
            walls["report"] += t_first
            results["report"].append(first)
            for policy in ("backtrack", "retry"):
                if first.valid:
                    results[policy].append(first)
                    continue
                t0 = time.perf_counter()
                r = corral.generate(
                    model, extraction_prompt(it), on_invalid=policy, max_tries=args.tries, **kw
                )
                # The policy re-decodes the first attempt (greedy: the same output): not its cost.
                walls[policy] += time.perf_counter() - t0 - t_first
                results[policy].append(r)
                print(
                    f"<!-- {it['id']} {policy}: {'passes' if r.valid else 'still fails'} after "
                    f"{r.validation.retried} more attempt(s), {r.validation.extra_tokens} extra tokens -->",
                    flush=True,
                )
            fails = [f"{f.check} {f.path}" for f in first.validation.failures]
            print(f"<!-- {it['id']}: {'ok' if first.valid else fails} -->", flush=True)
        for policy, rs in results.items():
            ok = sum(r.valid for r in rs)
            right = total = 0
            for r, it in zip(rs, items, strict=True):
                a, b = score(r.validation.value, it["gold"])
                right, total = right + a, total + b
            extra_tokens = sum(r.validation.extra_tokens for r in rs)
            extra_passes = sum(r.forward_passes for r in rs) - sum(
                r.forward_passes for r in results["report"]
            )
            wall = walls["report"] + (walls[policy] if policy != "report" else 0.0)
            print(
                f"| {name} | {policy} | {ok}/{len(rs)} | {right / total:.1%} | {extra_tokens} | "
                f"{extra_passes} | {wall:.1f} |",
                flush=True,
            )
        del model
    return 0


if __name__ == "__main__":
    sys.exit(main())
