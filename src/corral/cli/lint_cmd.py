"""``corral lint PATH... [--tokenizer T] [--format text|json] [--fail-on error|warning|never]``.

Exit status: 0 when nothing at or above ``--fail-on`` was found, 1 when something was, 2 for a
usage error (a path that does not exist, a tokenizer that cannot be read). The JSON output is
``corral.linter.LINT_REPORT_SCHEMA``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "lint",
        help="check schemas, regexes and grammars for contradictions, unenforced keywords and cost",
        description=(
            "Lint JSON Schemas (.json), grammars (.gbnf/.ebnf, Lark .lark) and regexes (.regex/.re): errors, "
            "warnings with rule codes, compile cost and mask tightness measured on a tokenizer."
        ),
    )
    p.add_argument(
        "paths", nargs="*", type=Path, help="files or directories (searched for the suffixes above)"
    )
    p.add_argument("--schema", action="append", default=[], help="a JSON Schema given inline (repeatable)")
    p.add_argument("--regex", action="append", default=[], help="a regex given inline (repeatable)")
    p.add_argument(
        "--tokenizer",
        help="tokenizer.json or .gguf to measure cost and tightness on (default: SmolLM2's "
        "vocabulary when installed, else a 256-token byte vocabulary)",
    )
    p.add_argument("--no-measure", action="store_true", help="static checks only: do not compile")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--fail-on", choices=("error", "warning", "never"), default="error")
    p.add_argument("--ignore", default="", help="comma-separated rule codes to drop, e.g. W203,W204")
    p.add_argument("--steps", type=int, default=48, help="steps of the tightness walk (default 48)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a schema option or engine limit, e.g. whitespace=compact, max_compile_ms=2000",
    )
    p.add_argument("--output", type=Path, help="write the report here instead of stdout")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def _options(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"--option {pair!r}: expected NAME=VALUE")
        try:
            out[name] = json.loads(value)
        except json.JSONDecodeError:
            out[name] = value
    return out


def _files(paths: list[Path]) -> list[Path]:
    from corral.linter import detect_kind

    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(f for f in p.rglob("*") if f.is_file() and detect_kind(f) is not None)
        elif p.is_file():
            if detect_kind(p) is None:
                raise ValueError(f"{p}: not a .json schema, .gbnf/.ebnf/.lark grammar or .regex/.re file")
            out.append(p)
        else:
            raise ValueError(f"{p}: no such file or directory")
    return out


def _tokenizer(spec: str | None) -> Any:
    from corral.tokenizer import Tokenizer

    if spec is None:
        try:
            from corral.models import smollm2_gguf_path

            return Tokenizer.from_gguf(smollm2_gguf_path())
        except FileNotFoundError:
            return None
    if spec == "bytes":
        return None
    path = Path(spec)
    if path.suffix == ".gguf":
        return Tokenizer.from_gguf(path)
    return Tokenizer.from_file(path)


def _text(results: list[Any]) -> str:
    from corral.linter import rule

    lines = []
    for r in results:
        for f in r.findings:
            where = f.pointer or (f"line {f.line}, column {f.column}" if f.line is not None else "")
            at = f" at {where}" if where else ""
            lines.append(f"{r.source}: {f.code} {rule(f.code).name}{at}: {f.message}")
        c, t = r.cost, r.tightness
        if c is not None:
            conv = (
                f"convert {c.convert_ms:.1f} ms (limit {c.budgets.get('max_convert_ms')}), "
                if c.convert_ms is not None
                else ""
            )
            lines.append(
                f"{r.source}: cost: {conv}compile {c.compile_ms:.1f} ms "
                f"(limit {c.budgets.get('max_compile_ms')}), first mask {c.first_mask_ms:.2f} ms, "
                f"grammar {c.grammar_bytes:,} bytes / {c.grammar_rules} rules / "
                f"{c.terminals} terminals, on {r.tokenizer}"
            )
        if t is not None and t.steps:
            lines.append(
                f"{r.source}: tightness: {t.steps} steps, mean {t.mean_share:.1%} of the vocabulary allowed "
                f"(min {t.min_share:.2%}, max {t.max_share:.1%}), {t.forced_steps} forced"
            )
    errors = sum(len(r.errors) for r in results)
    warnings = sum(len(r.warnings) for r in results)
    lines.append(f"{len(results)} checked: {errors} error(s), {warnings} warning(s)")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from corral.linter import lint, lint_file, report_json
    from corral.progress import Progress

    files = _files(args.paths)
    inline: list[tuple[str, str, str]] = [
        (s, "json_schema", f"--schema[{i}]") for i, s in enumerate(args.schema)
    ]
    inline += [(r, "regex", f"--regex[{i}]") for i, r in enumerate(args.regex)]
    if not files and not inline:
        raise ValueError("nothing to lint: give files, directories, --schema or --regex")
    tok = None if args.no_measure else _tokenizer(args.tokenizer)
    if tok is None and not args.no_measure:
        print(
            "corral lint: cost and tightness measured on a 256-token byte vocabulary (pass --tokenizer)",
            file=sys.stderr,
        )
    kw: dict[str, Any] = dict(
        tokenizer=tok,
        measure_cost=not args.no_measure,
        steps=args.steps,
        seed=args.seed,
        ignore=tuple(c.strip() for c in args.ignore.split(",") if c.strip()),
        **_options(args.option),
    )
    results = []
    bar = Progress(len(files) + len(inline), "lint", enabled=not args.no_progress)
    try:
        for text, kind, name in inline:
            results.append(lint(text, kind=kind, source=name, **kw))  # type: ignore[arg-type]
            bar.update()
        for f in files:
            results.append(lint_file(f, **kw))
            bar.update()
    finally:
        bar.close()
    out = json.dumps(report_json(results), indent=2) if args.format == "json" else _text(results)
    if args.output:
        args.output.write_text(out + "\n", encoding="utf-8")
    else:
        print(out)
    worst = {"error": [r.errors for r in results], "warning": [r.findings for r in results], "never": []}
    return 1 if any(worst[args.fail_on]) else 0
