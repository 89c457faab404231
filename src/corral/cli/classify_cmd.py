"""``corral classify``: score a closed label set for every line of a JSONL file (or one text).

Output: one JSON line per input line, in order — the label (or null when routed to review by
``--threshold``), its probability and every label's probability; a bad input line becomes an
``{"line": n, "error": ...}`` line with ``--on-bad-line skip`` or stops the run (the default)
before any model work.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from corral.cli import MAX_ARG_DEPTH, MODEL_HELP
from corral.errors import CorralError
from corral.grammar import bounded_json
from corral.progress import Progress


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "classify",
        help="classify texts into a closed label set by scoring every label",
        description="Score each label as the model's whole answer; probabilities normalised over the labels.",
    )
    p.add_argument("--labels", required=True, help="comma-separated labels (or a JSON array)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", type=Path, help="JSONL: one object (or JSON string) per line")
    src.add_argument("--text", help="classify one text")
    p.add_argument("--text-field", default="text", help='field holding the text (default "text")')
    p.add_argument("--threshold", type=float, default=None, help="below it: label null, review true")
    p.add_argument("--output", type=Path, help="write JSONL here instead of stdout")
    p.add_argument("--on-bad-line", choices=("stop", "skip"), default="stop")
    p.add_argument("--descriptions", help="JSON object {label: description} (inline or a file)")
    p.add_argument("--template", default=None, help="prompt template with {text} (and {labels}, {legend})")
    p.add_argument("--system", help="a system message")
    p.add_argument("--no-chat", action="store_true", help="do not apply the chat template")
    p.add_argument("--length-normalize", action="store_true", help="mean log-probability per token")
    p.add_argument("--temperature", type=float, default=1.0, help="calibration temperature")
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="contextual calibration: divide out the label prior the model shows on content-free "
        "inputs (N/A, empty, [MASK]; scored again with each batch)",
    )
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument(
        "--model",
        help=MODEL_HELP,
    )
    p.add_argument("--backend", default="auto", choices=("auto", "transformers", "llama.cpp"))
    p.add_argument("--threads", type=int, default=None)
    p.set_defaults(func=run)


def _labels(text: str) -> list[str]:
    if text.lstrip().startswith("["):
        value = bounded_json.loads(text, MAX_ARG_DEPTH, "max_arg_depth", "--labels")
        if not isinstance(value, list):
            raise ValueError("--labels JSON must be an array of strings")
        return value
    return [x.strip() for x in text.split(",")]


def _descriptions(text: str | None) -> dict[str, str] | None:
    if text is None:
        return None
    raw = Path(text).read_text(encoding="utf-8") if Path(text).is_file() else text
    value = bounded_json.loads(raw, MAX_ARG_DEPTH, "max_arg_depth", "--descriptions")
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError("--descriptions must be a JSON object of strings")
    return value


Item = tuple[int, "dict[str, Any] | None", "str | None", "str | None"]


def read_items(path: Path, field: str) -> list[Item]:
    """(line number, the object or None, the text or None, the error or None) per line."""
    out: list[Item] = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                obj = json.loads(line)
            except ValueError as e:
                out.append((n, None, None, f"not JSON: {e}"))
                continue
            if isinstance(obj, str):
                out.append((n, None, obj, None))
            elif isinstance(obj, dict) and isinstance(obj.get(field), str):
                out.append((n, obj, obj[field], None))
            else:
                out.append((n, obj if isinstance(obj, dict) else None, None, f'no string field "{field}"'))
    return out


def run(args: argparse.Namespace) -> int:
    import corral
    from corral.classification import DEFAULT_TEMPLATE
    from corral.compile import validate_choices

    labels = _labels(args.labels)
    validate_choices(labels, what="label")
    if args.batch_size < 1:
        raise ValueError("--batch-size must be at least 1")
    kw: dict[str, Any] = dict(
        threshold=args.threshold,
        temperature=args.temperature,
        template=args.template or DEFAULT_TEMPLATE,
        descriptions=_descriptions(args.descriptions),
        system=args.system,
        chat=False if args.no_chat else None,
        length_normalize=args.length_normalize,
        calibrate=args.calibrate,
    )
    items: list[Item]
    if args.text is not None:
        items = [(1, None, args.text, None)]
    else:
        items = read_items(args.input, args.text_field)
        if not items:
            raise ValueError(f"{args.input}: no lines")
        bad = [(n, e) for n, _, _, e in items if e]
        if bad and args.on_bad_line == "stop":
            n, e = bad[0]
            raise ValueError(
                f"{args.input}:{n}: {e} ({len(bad)} bad line(s); --on-bad-line skip to continue)"
            )
    model = corral.load_model(args.model, backend=args.backend, threads=args.threads)
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    good = [(n, obj, text) for n, obj, text, e in items if e is None and text is not None]
    results: dict[int, dict[str, Any]] = {}
    bar = Progress(len(good), "classify", enabled=args.input is not None)
    try:
        for start in range(0, len(good), args.batch_size):
            chunk = good[start : start + args.batch_size]
            try:
                rs = corral.classify(
                    model, [t for _, _, t in chunk], labels, batch_size=args.batch_size, **kw
                )
                for (n, _, _), r in zip(chunk, rs, strict=True):
                    results[n] = r.to_dict()
            except CorralError:
                if args.on_bad_line == "stop":
                    raise
                for n, _, t in chunk:  # find the offending item(s), keep the rest
                    try:
                        results[n] = corral.classify(model, [t], labels, **kw)[0].to_dict()
                    except CorralError as one:
                        results[n] = {"error": str(one).replace("text 0: ", "")}
            bar.update(len(chunk))
    finally:
        bar.close()
    try:
        for n, obj, _, err in items:
            line: dict[str, Any] = {"line": n}
            if obj is not None and "id" in obj:
                line["id"] = obj["id"]
            line.update({"error": err} if err else results[n])
            print(json.dumps(line, ensure_ascii=False), file=out)
    finally:
        if out is not sys.stdout:
            out.close()
    return 0
