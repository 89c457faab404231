"""``corral generate``: constrained generation from the command line.

One prompt (``--prompt`` / ``--prompt-file``) prints the output (or, with ``--json``, an object
with the output, the parsed value and statistics); ``--input prompts.jsonl`` runs a batch and
writes one JSON line per input line, in order.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from corral.cli import MAX_ARG_DEPTH, MODEL_HELP
from corral.cli.precheck import check_constraint, check_sampling
from corral.grammar import bounded_json
from corral.progress import Progress

WHITESPACE = ("pretty", "flexible", "compact")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "generate",
        help="generate output constrained by a JSON Schema, regex, grammar or choices",
        description="Generate with a local model; the output is guaranteed to match the constraint.",
    )
    src = p.add_argument_group("prompt (one of)")
    src.add_argument("--prompt", help="the prompt text")
    src.add_argument("--prompt-file", type=Path, help="read the prompt from a file")
    src.add_argument(
        "--input",
        type=Path,
        help='batch: a JSONL file, one prompt per line: a string, {"prompt": ...} or {"messages": [...]}',
    )
    con = p.add_argument_group("constraint (at most one)")
    con.add_argument("--schema", help="a JSON Schema: a file path or inline JSON")
    con.add_argument("--regex", help="a regular expression the whole output must match")
    con.add_argument("--grammar", type=Path, help="a grammar file (GBNF + /regex/ terminals)")
    con.add_argument("--choices", help="comma-separated allowed outputs (or a JSON array)")
    con.add_argument("--json-mode", action="store_true", help="any JSON value")
    p.add_argument(
        "--model",
        help=MODEL_HELP,
    )
    p.add_argument("--backend", default="auto", choices=("auto", "transformers", "llama.cpp"))
    p.add_argument(
        "--threads", type=int, default=None, help="forward-pass threads (default: available cores)"
    )
    p.add_argument("--system", help="a system message (chat models)")
    p.add_argument("--no-chat", action="store_true", help="do not apply the chat template to text prompts")
    p.add_argument("--max-new-tokens", type=int, default=512)
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--no-jump-ahead", action="store_true", help="one forward pass per token, forced or not")
    p.add_argument(
        "--whitespace",
        choices=WHITESPACE,
        default="pretty",
        help="JSON layout for --schema/--json-mode (default pretty: indent 2, fully forced)",
    )
    p.add_argument("--stream", action="store_true", help="print text as it is generated (single prompt)")
    p.add_argument("--json", action="store_true", help="print a JSON object with the output and statistics")
    p.add_argument("--output", type=Path, help="write results here instead of stdout")
    p.add_argument("--batch-size", type=int, default=8, help="prompts decoded together with --input")
    p.set_defaults(func=run)


def _schema_arg(text: str) -> Any:
    path = Path(text)
    if text.lstrip().startswith(("{", "[", "true", "false")) and not path.exists():
        raw = text
    else:
        if not path.is_file():
            raise ValueError(f"--schema: no such file: {text}")
        raw = path.read_text(encoding="utf-8")
    try:
        return bounded_json.loads(raw, MAX_ARG_DEPTH, "max_arg_depth", "--schema")
    except ValueError as e:
        raise ValueError(f"--schema is not valid JSON: {e}") from None


def _choices_arg(text: str) -> list[str]:
    if text.lstrip().startswith("["):
        value = bounded_json.loads(text, MAX_ARG_DEPTH, "max_arg_depth", "--choices")
        if not isinstance(value, list):
            raise ValueError("--choices JSON must be an array of strings")
        return value
    return [c.strip() for c in text.split(",")]


def constraint_kwargs(args: argparse.Namespace, *, exactly_one: bool = False) -> dict[str, Any]:
    """The generate() keyword arguments for the constraint options (``exactly_one``: one must
    be given, as ``corral compile`` needs); ``--whitespace`` goes to schema constraints."""
    kw: dict[str, Any] = {}
    if args.schema is not None:
        kw["schema"] = _schema_arg(args.schema)
    if args.regex is not None:
        kw["regex"] = args.regex
    if args.grammar is not None:
        kw["grammar"] = args.grammar.read_text(encoding="utf-8")
    if args.choices is not None:
        kw["choices"] = _choices_arg(args.choices)
    if args.json_mode:
        kw["json"] = True
    if len(kw) > 1 or (exactly_one and not kw):
        how = "exactly" if exactly_one else "at most"
        raise ValueError(f"give {how} one of --schema, --regex, --grammar, --choices, --json-mode")
    if args.whitespace is not None and ("schema" in kw or "json" in kw):
        kw["schema_options"] = {"whitespace": args.whitespace}
    return kw


def _prompt(args: argparse.Namespace, item: Any) -> Any:
    """A prompt as generate() takes it: chat messages when a system message is given."""
    if isinstance(item, str) and args.system:
        return [{"role": "system", "content": args.system}, {"role": "user", "content": item}]
    return item


def _read_jsonl(path: Path) -> list[Any]:
    items: list[Any] = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                raise ValueError(f"{path}:{n}: empty line (one prompt per line)")
            try:
                obj = json.loads(line)
            except ValueError as e:
                raise ValueError(f"{path}:{n}: not JSON: {e}") from None
            if isinstance(obj, dict):
                if "messages" in obj:
                    obj = obj["messages"]
                elif "prompt" in obj:
                    obj = obj["prompt"]
                else:
                    raise ValueError(f'{path}:{n}: expected a "prompt" or "messages" field')
            if not (isinstance(obj, str) or isinstance(obj, list)):
                raise ValueError(f"{path}:{n}: a prompt must be a string or a list of messages")
            items.append(obj)
    if not items:
        raise ValueError(f"{path}: no prompts")
    return items


def result_dict(r: Any) -> dict[str, Any]:
    value = r.value
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    return {
        "text": r.text,
        "value": value,
        "valid": r.valid,
        "error": r.error,
        "stop_reason": r.stop_reason,
        "truncated": r.truncated,
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "forward_passes": r.forward_passes,
        "forced_tokens": r.forced_tokens,
        "seconds": round(r.timing.get("total", 0.0), 4),
    }


def run(args: argparse.Namespace) -> int:
    import corral

    sources = [x for x in (args.prompt, args.prompt_file, args.input) if x is not None]
    if len(sources) != 1:
        raise ValueError("give exactly one of --prompt, --prompt-file, --input")
    if args.max_new_tokens < 1:
        raise ValueError("--max-new-tokens must be at least 1")
    if args.batch_size < 1:
        raise ValueError("--batch-size must be at least 1")
    kw = constraint_kwargs(args)
    # Everything a user can get wrong is checked before the model loads (seconds): the sampling
    # settings, the prompts, and the constraint compiled on the model's vocabulary alone.
    check_sampling(args.temperature, args.top_p, args.top_k, args.seed)
    items = _read_jsonl(args.input) if args.input is not None else None
    text = None
    if args.prompt is not None:
        text = args.prompt
    elif args.prompt_file is not None:
        text = args.prompt_file.read_text(encoding="utf-8")
    if args.output is not None and not args.output.parent.is_dir():
        raise ValueError(f"--output: no such directory: {args.output.parent}")
    check_constraint(args.model, kw)
    model = corral.load_model(args.model, backend=args.backend, threads=args.threads)
    gen: dict[str, Any] = dict(
        kw,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        seed=args.seed,
        jump_ahead=not args.no_jump_ahead,
        chat=False if args.no_chat else None,
    )
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        if items is not None:
            return _run_batch(args, model, gen, out, items)
        assert text is not None  # exactly one source was given
        prompt = _prompt(args, text)
        if args.stream:
            s = corral.stream(model, prompt, **gen)
            for delta in s:
                print(delta, end="", flush=True, file=sys.stdout if not args.json else sys.stderr)
            print(file=sys.stdout if not args.json else sys.stderr)
            r = s.result
            assert r is not None  # set when the iteration ends without an exception
        else:
            r = corral.generate(model, prompt, **gen)
        if args.json:
            print(json.dumps(result_dict(r), ensure_ascii=False), file=out)
        elif not args.stream:
            print(r.text, file=out)
        return 0 if r.valid or not kw else 1
    finally:
        if out is not sys.stdout:
            out.close()


def _run_batch(args: argparse.Namespace, model: Any, gen: dict[str, Any], out: Any, items: list[Any]) -> int:
    import corral

    bar = Progress(len(items), "generate")
    failures = 0
    try:
        for start in range(0, len(items), args.batch_size):
            chunk = [_prompt(args, x) for x in items[start : start + args.batch_size]]
            results = corral.generate(model, chunk, **gen)
            for r in results:
                failures += 0 if r.valid else 1
                print(json.dumps(result_dict(r), ensure_ascii=False), file=out, flush=True)
            bar.update(len(chunk))
    finally:
        bar.close()
    return 1 if failures and "schema" in gen else 0
