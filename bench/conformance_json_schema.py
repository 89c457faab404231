"""JSON Schema conformance: the official test suite through corral's grammar.

For every schema of ``JSON-Schema-Test-Suite/tests/draft2020-12/*.json`` (read from
``../shared/data`` when present, or ``--suite DIR``), compile it with
``corral.compile_json_schema`` against the Llama 3.2 tokenizer and feed each test instance —
``json.dumps(instance)`` and the compact form — as that tokenizer's tokens through a matcher.
An instance is *accepted by the grammar* when every token is accepted and the matcher is then
complete. Per keyword file it prints:

* schemas compiled / refused (unsupported or contradictory, with the first reason);
* valid instances accepted (completeness; target >= 95% among compiled schemas);
* invalid instances wrongly accepted by the grammar where the report claims the grammar enforces
  everything (soundness; target 0) — and, separately, those the report lists as checked after
  decoding, which ``JsonSchemaGrammar.validate`` then rejects.

Run:  python bench/conformance_json_schema.py [--suite DIR] [--files a.json,b.json] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import corral
from corral import models

DEFAULT_SUITE = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "data"
    / "JSON-Schema-Test-Suite"
    / "tests"
    / "draft2020-12"
)


def accepts(g: corral.JsonSchemaGrammar, tok: corral.Tokenizer, text: str) -> bool:
    m = g.matcher()
    return all(m.accept_token(t) for t in tok.encode(text)) and m.is_accepting()


def accepts_instance(g: corral.JsonSchemaGrammar, tok: corral.Tokenizer, inst: Any) -> bool:
    """Does the grammar accept the instance in both spellings (default ``json.dumps``, and
    compact with non-ASCII kept)?"""
    texts = {json.dumps(inst), json.dumps(inst, separators=(",", ":"), ensure_ascii=False)}
    return all(accepts(g, tok, t) for t in texts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", type=Path, default=DEFAULT_SUITE)
    ap.add_argument("--files", default="", help="comma-separated keyword files (default: all)")
    ap.add_argument("--markdown", action="store_true", help="print the summary as a Markdown table")
    ap.add_argument("--verbose", action="store_true", help="print every wrong accept / reject")
    ap.add_argument(
        "--extra-properties",
        default="spec",
        choices=["spec", "schema"],
        help="undeclared properties: the spec default (as the suite assumes) or only when allowed",
    )
    args = ap.parse_args()
    if not args.suite.is_dir():
        print(f"test suite not found at {args.suite} (pass --suite)", file=sys.stderr)
        return 2
    tok = corral.Tokenizer.from_file(models.llama32_tokenizer_path())
    files = sorted(args.suite.glob("*.json"))
    if args.files:
        wanted = set(args.files.split(","))
        files = [f for f in files if f.name in wanted]
    rows = []
    totals: dict[str, int] = defaultdict(int)
    t0 = time.perf_counter()
    for f in files:
        groups = json.loads(f.read_text())
        st: dict[str, Any] = defaultdict(int)
        st["reason"] = ""
        for grp in groups:
            schema = grp["schema"]
            try:
                g = corral.compile_json_schema(schema, tok, extra_properties=args.extra_properties)
            except (corral.CorralError, RecursionError) as e:
                st["refused"] += 1
                st["reason"] = st["reason"] or f"{type(e).__name__}: {str(e)[:70]}"
                continue
            st["compiled"] += 1
            post = g.report.post_checks
            for test in grp["tests"]:
                inst = test["data"]
                ok = accepts_instance(g, tok, inst)
                if test["valid"]:
                    st["valid"] += 1
                    st["valid_ok"] += ok
                    if not ok and args.verbose:
                        print(f"  rejected valid: {f.name}: {grp['description']} / {test['description']}")
                else:
                    st["invalid"] += 1
                    if ok and not post:
                        st["unsound"] += 1
                        print(
                            f"  WRONG ACCEPT: {f.name}: {grp['description']} / {test['description']}: "
                            f"{json.dumps(inst)}"
                        )
                    elif ok and post:
                        st["post"] += 1
                        try:
                            g.validate(json.dumps(inst))
                            st["post_missed"] += 1
                        except corral.OutputValidationError:
                            pass
        rows.append((f.stem, st))
        for k in ("compiled", "refused", "valid", "valid_ok", "invalid", "unsound", "post", "post_missed"):
            totals[k] += st[k]
    elapsed = time.perf_counter() - t0
    hdr = (
        "keyword",
        "compiled",
        "refused",
        "valid accepted",
        "invalid wrongly accepted",
        "left to validate()",
    )
    if args.markdown:
        print("| " + " | ".join(hdr) + " |")
        print("|" + "---|" * len(hdr))
    else:
        print(f"{hdr[0]:<24} {hdr[1]:>8} {hdr[2]:>8} {hdr[3]:>16} {hdr[4]:>26} {hdr[5]:>18}")

    def line(name: str, st: dict[str, Any]) -> None:
        pct = 100.0 * st["valid_ok"] / st["valid"] if st["valid"] else 100.0
        cells = (
            name,
            str(st["compiled"]),
            str(st["refused"]),
            f"{st['valid_ok']}/{st['valid']} ({pct:.0f}%)",
            str(st["unsound"]),
            f"{st['post']} ({st['post_missed']} missed)",
        )
        if args.markdown:
            print("| " + " | ".join(cells) + " |")
        else:
            print(
                f"{cells[0]:<24} {cells[1]:>8} {cells[2]:>8} {cells[3]:>16} {cells[4]:>26} {cells[5]:>18}"
                + (f"   {st['reason']}" if st.get("reason") else "")
            )

    for name, st in rows:
        line(name, st)
    line("TOTAL", totals)
    print(f"\n{len(files)} files in {elapsed:.1f} s; corral {corral.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
