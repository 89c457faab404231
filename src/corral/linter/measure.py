"""What a constraint costs and how tight it is, measured by compiling it on a tokenizer.

Invariants: every measurement runs corral's own compile path with the options the user gave, so
what lint reports is what a host would pay; the walk is seeded (the same input gives the same
figures on the same tokenizer) and bounded in steps; a compile error becomes an E100 finding
with the error's own position, never an exception out of lint.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from corral.errors import CompileError, CorralError, LimitExceeded, SchemaError
from corral.linter.schema_checks import Finding
from corral.tokenizer import Tokenizer

__all__ = ["Cost", "Tightness", "byte_tokenizer", "measure"]

_LOOSE_SHARE = 0.9  # W302: the mask allows more than 90% of the vocabulary on average
_MIN_STEPS = 16  # a walk does not choose to end before this many steps


@dataclass
class Cost:
    """Compile cost, with the limit each figure is held against (milliseconds, counts)."""

    convert_ms: float | None = None
    compile_ms: float = 0.0
    first_mask_ms: float = 0.0
    grammar_bytes: int = 0
    grammar_rules: int = 0
    terminals: int = 0
    mask_cache_entries: int = 0
    mask_cache_bytes: int = 0
    budgets: dict[str, int] = field(default_factory=dict)


@dataclass
class Tightness:
    """The share of the vocabulary the mask allows at each step of a seeded random walk."""

    steps: int = 0
    mean_share: float = 0.0
    min_share: float = 0.0
    max_share: float = 0.0
    forced_steps: int = 0  # steps where exactly one token was allowed
    loose_steps: int = 0  # steps where more than half the vocabulary was allowed
    completed: bool = False  # the walk reached an accepting state and stopped
    sample: str = ""  # the walk's output (what a model that samples uniformly might write)


def byte_tokenizer() -> Tokenizer:
    """A 256-token vocabulary (one token per byte, plus EOS): compiles in microseconds, used when
    no model tokenizer is given (static checks, sample instances); cost figures on it say
    little about a real vocabulary."""
    return Tokenizer.from_tokens([bytes([i]) for i in range(256)] + [b""], eos_ids=[256], name="bytes")


def _error_finding(e: CorralError, kind: str) -> Finding:
    code = getattr(e, "code", "corral_error")
    msg = f"{code}: {getattr(e, 'message', str(e))}"
    if isinstance(e, SchemaError):
        return Finding("E100", msg, pointer=e.pointer)
    if isinstance(e, CompileError):
        return Finding("E100", msg, line=e.line, column=e.column)
    if isinstance(e, LimitExceeded):
        return Finding("E100", f"{code}: {e}", pointer="#" if kind == "json_schema" else None)
    return Finding("E100", f"{code}: {e}")


def _compile(
    kind: str, source: Any, tok: Tokenizer, options: dict[str, Any]
) -> tuple[Any, Cost, list[Finding]]:
    from corral.engine import DEFAULT_LIMITS, compile_grammar, compile_regex

    cost = Cost()
    findings: list[Finding] = []
    limits = {k: v for k, v in options.items() if k in DEFAULT_LIMITS}
    cost.budgets["max_compile_ms"] = int(limits.get("max_compile_ms", DEFAULT_LIMITS["max_compile_ms"]))
    t0 = time.perf_counter()
    if kind == "json_schema":
        import dataclasses

        from corral.grammar.json_schema import SchemaOptions, schema_to_grammar
        from corral.schema import _check_regex, schema_grammar, schema_of

        names = {f.name for f in dataclasses.fields(SchemaOptions)}
        opts = SchemaOptions(**{k: v for k, v in options.items() if k in names})
        cost.budgets["max_convert_ms"] = int(opts.max_convert_ms or 0)
        raw, _ = schema_of(source)
        text, report = schema_to_grammar(raw, opts, check_regex=_check_regex)
        t1 = time.perf_counter()
        cost.convert_ms = (t1 - t0) * 1e3
        for e in report.checked_after():
            why = f": {e.detail}" if e.detail and e.detail != e.status else ""
            findings.append(
                Finding("W201", f"{e.keyword} is checked after decoding, not by the mask{why}", e.pointer)
            )
        findings.extend(_capped_unique_arrays(report))
        grammar: Any = schema_grammar(raw, text, report, tok, limits)
        cost.compile_ms = (time.perf_counter() - t1) * 1e3
    elif kind == "regex":
        grammar = compile_regex(source, tok, **limits)
        cost.compile_ms = (time.perf_counter() - t0) * 1e3
    else:
        grammar = compile_grammar(source, tok, syntax="lark" if kind == "lark" else "gbnf", **limits)
        cost.compile_ms = (time.perf_counter() - t0) * 1e3
    text = grammar.grammar_text
    cost.grammar_bytes = len(text.encode("utf-8"))
    cost.grammar_rules = sum(1 for line in text.splitlines() if "::=" in line)
    cost.terminals = int(grammar._native.num_terminals)
    return grammar, cost, findings


def _capped_unique_arrays(report: Any) -> list[Finding]:
    """W210 for each ``uniqueItems`` array the mask closes at ``max_unique_items`` items (no
    ``maxItems``, or a larger one): stricter than the schema, so longer valid arrays are never
    generated. Read from the entries' ``capped_at`` field (ReportEntry), not their wording."""
    return [
        Finding(
            "W210",
            f"uniqueItems is enforced up to {e.capped_at} items (max_unique_items): the mask closes "
            "the array there; set maxItems (or max_unique_items) to say how many are wanted",
            e.pointer,
        )
        for e in report.enforced()
        if e.keyword == "uniqueItems" and e.capped_at is not None
    ]


def _walk(grammar: Any, tok: Tokenizer, steps: int, seed: int, cost: Cost) -> Tightness:
    rng = random.Random(seed)
    words = (tok.width + 31) // 32
    mask = np.zeros((1, words), dtype=np.int32)
    m = grammar.matcher()
    shares: list[float] = []
    forced = 0
    out = bytearray()
    eos = set(tok.eos_ids)
    n = tok.vocab_size
    pieces = tok.token_bytes
    t0 = time.perf_counter()
    m.fill_next_token_bitmask(mask, 0)
    cost.first_mask_ms = (time.perf_counter() - t0) * 1e3
    completed = False
    for step in range(steps):
        if step:
            m.fill_next_token_bitmask(mask, 0)
        bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[:n]
        allowed = np.flatnonzero(bits)
        if allowed.size == 0:
            break
        shares.append(allowed.size / n)
        forced += allowed.size == 1
        # Where the output may end, end one time in eight, and not in the first steps: walks
        # finish with real samples yet see enough steps of constraints that may end anywhere.
        ends = [int(t) for t in allowed if int(t) in eos]
        if ends and (allowed.size == len(ends) or (step >= _MIN_STEPS and rng.random() < 0.125)):
            completed = True
            break
        choices = [int(t) for t in allowed if int(t) not in eos]
        t = rng.choice(choices)
        if not m.accept_token(t):  # the mask allowed it: a refusal here is an engine bug
            raise AssertionError(f"the matcher refused token {t} its own mask allowed")
        out += pieces[t]
    stats = grammar.cache_stats()
    cost.mask_cache_entries = int(stats.get("entries", 0))
    cost.mask_cache_bytes = int(stats.get("bytes", 0))
    return Tightness(
        steps=len(shares),
        mean_share=float(np.mean(shares)) if shares else 0.0,
        min_share=min(shares) if shares else 0.0,
        max_share=max(shares) if shares else 0.0,
        forced_steps=forced,
        loose_steps=sum(1 for s in shares if s > _LOOSE_SHARE),
        completed=completed,
        sample=out.decode("utf-8", errors="replace"),
    )


def measure(
    kind: str, source: Any, tok: Tokenizer, options: dict[str, Any], steps: int = 48, seed: int = 0
) -> tuple[Cost | None, Tightness | None, list[Finding]]:
    """Compile ``source`` (kind ``json_schema``, ``regex`` or ``grammar``) on ``tok`` and walk it:
    (cost, tightness, findings). On a compile error: (None, None, [E100 finding])."""
    try:
        grammar, cost, findings = _compile(kind, source, tok, options)
    except CorralError as e:
        return None, None, [_error_finding(e, kind)]
    tight = _walk(grammar, tok, steps, seed, cost)
    for name, value in (("max_convert_ms", cost.convert_ms), ("max_compile_ms", cost.compile_ms)):
        budget = cost.budgets.get(name)
        if value is not None and budget and value >= budget / 2:
            findings.append(
                Finding(
                    "W301",
                    f"{name.removeprefix('max_').removesuffix('_ms')} took {value:.0f} ms "
                    f"of its {budget} ms limit ({name})",
                    "#" if kind == "json_schema" else None,
                )
            )
    # Only for regexes and grammars: a JSON Schema walk spends its steps inside free strings,
    # which W203 already reports; there a loose mask is the schema's meaning, not a mistake.
    if kind != "json_schema" and tight.steps >= 4 and tight.mean_share > _LOOSE_SHARE:
        findings.append(
            Finding(
                "W302",
                f"the mask allows {tight.mean_share:.0%} of the vocabulary on average over "
                f"{tight.steps} steps: it constrains little",
                "#" if kind == "json_schema" else None,
            )
        )
    return cost, tight, findings
