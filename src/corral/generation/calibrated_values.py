"""Contextual calibration of the closed choices inside JSON output (``generate(calibrate=...)``).

A small model asked for ``"currency": "EUR" | "USD" | "GBP" | "CHF"`` tends to write the option
it likes best whatever the document says (often the first one the schema lists): the same
label prior that :func:`corral.classify`'s ``calibrate`` divides out. Here it is divided out at
every closed choice of a JSON output: an ``enum`` (or a ``const`` set under ``anyOf``/``oneOf``,
``null`` included), or a boolean.

In:  a backend, the compiled JSON Schema constraint, the prompt's ids, one or more
     *content-free* prompts (the same instructions with the document replaced by ``"N/A"``,
     ``""``, ...), and a decoded output.
Out: the output with each closed choice replaced by its best option after calibration (what
     follows a changed value is decoded again under the mask), and a :class:`CalibratedChoice`
     per choice.

How, at each choice in output order: every option is scored as a whole value — the log
probability of its tokens after the prompt plus the output before it (the same prefix after
each content-free prompt gives the prior) — and the option with the highest
``softmax(scores) / prior`` is written (sampled from that distribution when sampling). Options
that are a token-prefix of another one would need the token after them to be scored fairly, so
such a choice keeps the decoded value.

Invariant: the output stays decoded under the constraint's mask: the kept prefix and the chosen
option are replayed through a fresh matcher (an option the matcher refuses is not a candidate),
and the rest is decoded by :func:`corral.generation.validation.resample_from`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from corral.backends.base import Backend
from corral.compile import Constraint
from corral.generation.scoring import SharedPrefix, calibrated_probs, content_free_prior, score_continuations
from corral.generation.validation import resample_from, value_span
from corral.runtime.sampling import SamplingParams
from corral.runtime.tokens import tools_for

__all__ = [
    "CalibratedChoice",
    "CalibrationReport",
    "calibrate_output",
    "closed_choices",
    "content_free_prompts",
]

#: Choices looked at per output (each may decode the rest of the output again).
MAX_CHOICES = 32
#: Options per choice, and bytes per option, beyond which a choice keeps its decoded value.
MAX_OPTIONS = 64
MAX_OPTION_BYTES = 256
_MAX_SCHEMA_DEPTH = 64


@dataclass
class CalibratedChoice:
    """One closed choice of the output: where (JSON pointer), the options (JSON values), their
    calibrated probabilities, the value decoded before calibration and the one written."""

    pointer: str
    options: list[Any]
    probabilities: list[float]
    before: Any
    chosen: Any

    @property
    def changed(self) -> bool:
        return _spell(self.before) != _spell(self.chosen)


@dataclass
class CalibrationReport:
    """What ``calibrate`` did to one output: each choice looked at, and the extra forward
    passes and tokens it cost (the scoring passes, and the output decoded again after a changed
    value)."""

    choices: list[CalibratedChoice] = field(default_factory=list)
    forward_passes: int = 0
    extra_tokens: int = 0

    @property
    def changed(self) -> list[CalibratedChoice]:
        return [c for c in self.choices if c.changed]


def content_free_prompts(calibrate: Any) -> list[Any]:
    """``generate``'s ``calibrate`` as a list of prompts: one prompt (text or chat messages) or
    a list of them."""
    if isinstance(calibrate, str) or (
        isinstance(calibrate, Sequence) and calibrate and all(isinstance(m, Mapping) for m in calibrate)
    ):
        return [calibrate]
    if isinstance(calibrate, Sequence) and not isinstance(calibrate, (bytes, bytearray)):
        prompts = list(calibrate)
        if not prompts:
            raise ValueError("calibrate needs at least one content-free prompt")
        for i, p in enumerate(prompts):
            chat = isinstance(p, Sequence) and all(isinstance(m, Mapping) for m in p)
            if not (isinstance(p, str) or chat):
                raise TypeError(f"calibrate[{i}] is {type(p).__name__}: give prompts (text or chat messages)")
        return prompts
    raise TypeError(
        f"calibrate is {type(calibrate).__name__}: give the content-free prompt(s), e.g. the "
        "prompt with its document replaced by 'N/A'"
    )


def _spell(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def _resolve(root: Any, schema: Any, depth: int) -> Any:
    """Follow local ``$ref``s (``#/...``) of ``schema``; None when one cannot be followed."""
    while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str):
        if depth > _MAX_SCHEMA_DEPTH:
            return None
        ref = schema["$ref"]
        if not ref.startswith("#"):
            return None
        target: Any = root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and part in target:
                target = target[part]
            else:
                return None
        schema, depth = target, depth + 1
    return schema


def _options(root: Any, schema: Any, depth: int = 0) -> list[Any] | None:
    """The closed set of values ``schema`` allows (enum, const, boolean, null, and unions of
    them under anyOf/oneOf), or None when it is not a closed choice."""
    s = _resolve(root, schema, depth)
    if not isinstance(s, Mapping) or depth > _MAX_SCHEMA_DEPTH:
        return None
    if "enum" in s and isinstance(s["enum"], list):
        return list(s["enum"])
    if "const" in s:
        return [s["const"]]
    for key in ("anyOf", "oneOf"):
        branches = s.get(key)
        if isinstance(branches, list) and branches:
            out: list[Any] = []
            for b in branches:
                got = _options(root, b, depth + 1)
                if got is None:
                    return None
                out += [v for v in got if _spell(v) not in {_spell(x) for x in out}]
            return out
    t = s.get("type")
    types = [t] if isinstance(t, str) else t if isinstance(t, list) else None
    plain = not (s.keys() - {"type", "description", "title"})
    if types and plain and all(x in ("boolean", "null") for x in types):
        return ([True, False] if "boolean" in types else []) + ([None] if "null" in types else [])
    return None


def _children(root: Any, schema: Any, value: Any, depth: int) -> Iterator[tuple[str, Any, Any]]:
    """(key, subschema, subvalue) of an object's properties / an array's items, as far as the
    schema names them plainly (``properties``, ``items``, ``prefixItems``)."""
    s = _resolve(root, schema, depth)
    if not isinstance(s, Mapping):
        return
    if isinstance(value, dict):
        props = s.get("properties")
        if isinstance(props, Mapping):
            for k, v in value.items():
                if k in props:
                    yield k.replace("~", "~0").replace("/", "~1"), props[k], v
    elif isinstance(value, list):
        given = s.get("prefixItems")
        prefix: list[Any] = given if isinstance(given, list) else []
        items = s.get("items")
        for i, v in enumerate(value):
            if i < len(prefix):
                yield str(i), prefix[i], v
            elif isinstance(items, Mapping):
                yield str(i), items, v


def closed_choices(schema: Any, value: Any) -> list[tuple[str, list[Any]]]:
    """``(pointer, options)`` of every closed choice of ``value`` under ``schema`` with at least
    two options, in the order the value lists them (the output's order)."""
    out: list[tuple[str, list[Any]]] = []

    def walk(sub: Any, v: Any, pointer: str, depth: int) -> None:
        if depth > _MAX_SCHEMA_DEPTH:
            return
        opts = _options(schema, sub)
        if opts is not None:
            if len(opts) >= 2:
                out.append((pointer, opts))
            return
        for key, child, cv in _children(schema, sub, v, 0):
            walk(child, cv, f"{pointer}/{key}", depth + 1)

    walk(schema, value, "", 0)
    return out


def _lookup(value: Any, pointer: str) -> Any:
    for part in [p.replace("~1", "/").replace("~0", "~") for p in pointer.lstrip("/").split("/") if pointer]:
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


class _Contexts:
    """The prompt and the content-free prompts, each prefilled once and forked per choice."""

    def __init__(self, backend: Backend, prompt_ids: list[int], cf_ids: Sequence[list[int]]) -> None:
        self.backend = backend
        self.prompts = [prompt_ids, *cf_ids]
        self.prefixes: list[SharedPrefix] = []
        self.passes = 0

    def scores(self, kept: list[int], conts: list[list[int]]) -> np.ndarray:
        """``(1 + content-free prompts, options)`` log-probabilities of each option after each
        prompt followed by ``kept``."""
        if not self.prefixes:
            for p in self.prompts:
                batch = self.backend.new_batch()
                batch.forward([list(p)])
                self.prefixes.append(SharedPrefix(list(p), batch))
            self.passes += len(self.prompts)
        rows = []
        for p, prefix in zip(self.prompts, self.prefixes, strict=True):
            # A kept prefix of nothing (the root value is the choice) scores from a fresh batch.
            rows.append(score_continuations(self.backend, [p + kept], [conts], prefix=prefix)[0])
            self.passes += 1 + any(len(c) > 1 for c in conts)
        return np.stack(rows)


def calibrate_output(
    backend: Backend,
    constraint: Constraint,
    prompt_ids: list[int],
    cf_ids: Sequence[list[int]],
    tokens: list[int],
    *,
    max_new_tokens: int,
    params: SamplingParams,
) -> tuple[list[int], CalibrationReport]:
    """The output ``tokens`` with each closed choice calibrated (see the module docstring);
    returns the new tokens and the report."""
    tok = backend.tokenizer
    tools = tools_for(tok)
    report = CalibrationReport()
    ctx = _Contexts(backend, prompt_ids, cf_ids)
    rng = None if params.greedy else np.random.default_rng(params.seed)
    done: set[str] = set()
    schema = constraint.schema
    for _ in range(MAX_CHOICES):
        text = tok.decode(tokens).decode("utf-8", errors="replace")
        try:
            value = json.loads(text)
        except ValueError:
            break
        todo = [(p, o) for p, o in closed_choices(schema, value) if p not in done]
        if not todo:
            break
        pointer, options = todo[0]
        done.add(pointer)
        span = value_span(text, pointer)
        if span is None or len(options) > MAX_OPTIONS:
            continue
        start = len(text[: span[0]].encode("utf-8"))
        ends = np.cumsum([len(tok.decode([t])) for t in tokens])
        k = int(np.searchsorted(ends, start, side="right"))
        kept = tokens[:k]
        lead = tok.decode(tokens)[(int(ends[k - 1]) if k else 0) : start]
        spellings = [lead + _spell(o).encode("utf-8") for o in options]
        if any(len(s) > MAX_OPTION_BYTES + len(lead) for s in spellings) or any(
            a != b and b.startswith(a) for a in spellings for b in spellings
        ):
            continue
        m = constraint.grammar.matcher()
        if not all(m.accept_token(t) for t in kept):
            break
        cands, conts = [], []
        for o, s in zip(options, spellings, strict=True):
            ids = tools.encode_exact(s)
            n = 0
            for t in ids:
                if not m.accept_token(t):
                    break
                n += 1
            m.rollback(n)
            if ids and n == len(ids):
                cands.append(o)
                conts.append(ids)
        if len(cands) < 2:
            continue
        scores = ctx.scores(kept, conts)
        probs = calibrated_probs(scores[0], 1.0, content_free_prior(scores[1:]))
        pick = int(np.argmax(probs)) if rng is None else int(rng.choice(len(cands), p=probs))
        before = _lookup(value, pointer)
        choice = CalibratedChoice(pointer, cands, [float(x) for x in probs], before, cands[pick])
        report.choices.append(choice)
        if not choice.changed:
            continue
        new = kept + conts[pick]
        got = resample_from(
            backend,
            constraint,
            prompt_ids,
            new,
            len(tok.decode(new)),
            [],
            max_new_tokens,
            params,
            prefix=ctx.prefixes[0],
        )
        if got is None:
            report.choices[-1].chosen = before  # nothing valid follows it: keep the decoded value
            continue
        report.forward_passes += got.forward_passes
        report.extra_tokens += len(got.tokens) - len(kept)
        tokens = got.tokens
    report.forward_passes += ctx.passes
    return tokens, report
