"""Checks after decoding, and what to do when one fails: report, backtrack or retry.

    def totals(inv):                               # a business rule the grammar cannot express
        s = sum(i["quantity"] * i["unit_price"] for i in inv["line_items"])
        if abs(s - inv["total"]) > 0.01:
            return corral.CheckFailure(f"line items sum to {s}, not {inv['total']}", "/total")

    r = corral.generate(model, prompt, schema=Invoice, checks=[totals], on_invalid="backtrack")
    r.validation.checks, r.validation.failures, r.validation.attempts   # what ran, failed, was retried

In:  :func:`corral.generate`'s arguments plus ``checks`` (callables on the parsed value) and
     ``on_invalid``.
Out: the :class:`~corral.generation.api.GenerationResult` of the last attempt, with
     ``validation`` (a :class:`ValidationReport`) and ``error`` set when a check still fails.

A check is called with the parsed value (a Pydantic instance, a JSON value, ...). It passes by
returning None or True; it fails by returning False, a message, a :class:`CheckFailure` (which
may name the JSON pointer of the value at fault) or a list of them, or by raising. The schema
itself (and a Pydantic model's validators, run by ``parse``) counts as the check ``"schema"``.

Policies when something fails:
* ``"report"``: nothing more; the result says what failed.
* ``"retry"``: generate again, up to ``max_tries`` times; with ``retry_feedback`` the failed
  output and the failures are appended to the prompt (without it a greedy retry would repeat
  itself, so it stops as soon as an output repeats).
* ``"backtrack"``: for JSON output, roll the matcher back to the start of the value the failing
  check points at (a :class:`CheckFailure` path, or a Pydantic / JSON Schema error location)
  and decode from there again with every value rejected there so far excluded (a token that
  would write one again, or a number extending one, is taken back and the next best drawn), up
  to ``max_tries`` times; the output before that value is kept as it was, what follows it is
  decoded again. A failure without a path backtracks to the start of the output.

Invariant: every output the policies produce is decoded under the constraint's mask (the
backtrack loop replays the kept prefix through a fresh matcher), so it stays valid for the
constraint whatever the checks say.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from corral.backends.base import Backend, Prompt
from corral.compile import Constraint
from corral.engine import fill_next_token_bitmasks
from corral.generation.scoring import SharedPrefix
from corral.runtime.budget import fits
from corral.runtime.jump import forced_tokens
from corral.runtime.masks import allowed_ids, apply_token_bitmask_, full_bitmask
from corral.runtime.sampling import SamplingParams, make_generator, sample
from corral.runtime.tokens import tools_for

__all__ = ["POLICIES", "Attempt", "CheckFailure", "ValidationReport", "run_checks", "value_span"]

POLICIES = ("report", "backtrack", "retry")
Check = Callable[[Any], Any]


@dataclass
class CheckFailure:
    """One failed check: what it says and, when known, the JSON pointer of the value at fault
    (``"/line_items/0/unit_price"``; None: the whole output)."""

    message: str
    path: str | None = None
    check: str = ""


@dataclass
class Attempt:
    """One output the policy produced: ``how`` it was made ("initial", "retry", "backtrack"),
    its text, the checks that failed on it, the tokens it decoded (a backtrack counts only those
    after the kept prefix) and, for a backtrack, the pointer of the value it resampled."""

    how: str
    text: str
    failures: list[CheckFailure]
    tokens: int
    path: str | None = None


@dataclass
class ValidationReport:
    """What the checks did for one output.

    Attributes
    ----------
    policy : str
        ``on_invalid``.
    checks : list of str
        The checks that ran (``"schema"`` first, then each callable's name).
    attempts : list of Attempt
        The initial output and every retry / backtrack, in order; the last one is the result.
    value : Any
        The returned output's parsed value, even when a check failed on it (the result's
        ``value`` is None then).
    """

    policy: str
    checks: list[str]
    attempts: list[Attempt] = field(default_factory=list)
    value: Any = None

    @property
    def failures(self) -> list[CheckFailure]:
        """What still fails on the returned output (empty: it passed every check)."""
        return self.attempts[-1].failures if self.attempts else []

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def retried(self) -> int:
        """Attempts after the first."""
        return max(0, len(self.attempts) - 1)

    @property
    def extra_tokens(self) -> int:
        """Tokens decoded by the attempts after the first (the policy's cost)."""
        return sum(a.tokens for a in self.attempts[1:])


def _name(check: Check) -> str:
    return str(getattr(check, "__name__", None) or type(check).__name__)


def _as_failures(outcome: Any, name: str) -> list[CheckFailure]:
    if outcome is None or outcome is True:
        return []
    if outcome is False:
        return [CheckFailure(f"{name} returned False", None, name)]
    if isinstance(outcome, str):
        return [CheckFailure(outcome, None, name)]
    if isinstance(outcome, CheckFailure):
        return [CheckFailure(outcome.message, outcome.path, outcome.check or name)]
    if isinstance(outcome, Sequence) and all(isinstance(x, CheckFailure) for x in outcome):
        return [f for x in outcome for f in _as_failures(x, name)]
    raise TypeError(
        f"check {name} returned {type(outcome).__name__}: return None/True (pass), or False, a "
        "message or corral.CheckFailure (fail)"
    )


def _pointer(loc: Sequence[Any]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in loc)


def _schema_failures(constraint: Constraint | None, text: str, error: str | None) -> list[CheckFailure]:
    """The schema check: the output's own validation error, located when it can be (Pydantic's
    ``loc``, JSON Schema's path)."""
    if error is None:
        return []
    path = None
    spec = constraint.spec if constraint is not None else None
    try:
        if spec is not None and spec.model is not None:
            import pydantic

            try:
                spec.model.model_validate_json(text) if hasattr(spec.model, "model_validate_json") else None
            except pydantic.ValidationError as e:
                errs = e.errors()
                path = _pointer(errs[0]["loc"]) if errs else None
        elif spec is not None and spec.kind == "json_schema" and isinstance(spec.schema, Mapping):
            import jsonschema

            best = jsonschema.exceptions.best_match(
                jsonschema.Draft202012Validator(spec.schema).iter_errors(json.loads(text))
            )
            path = _pointer(best.absolute_path) if best is not None else None
    except Exception:  # locating is a bonus: the failure stands without a path
        path = None
    return [CheckFailure(error, path, "schema")]


def run_checks(
    checks: Sequence[Check], value: Any, constraint: Constraint | None, text: str, error: str | None
) -> list[CheckFailure]:
    """Every failure of one output: the schema's (when it did not validate), else each check's.
    A check that raises fails with the exception's message."""
    failures = _schema_failures(constraint, text, error)
    if failures:
        return failures
    for check in checks:
        name = _name(check)
        try:
            outcome = check(value)
        except Exception as e:
            failures.append(CheckFailure(f"{type(e).__name__}: {e}", None, name))
            continue
        failures.extend(_as_failures(outcome, name))
    return failures


def value_span(text: str, pointer: str | None) -> tuple[int, int] | None:
    """``(start, end)`` character offsets of the JSON value at ``pointer`` in ``text`` (the whole
    value, quotes and brackets included); None when the text is not JSON or has no such value."""
    dec = json.JSONDecoder()

    def ws(i: int) -> int:
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        return i

    parts = (
        []
        if not pointer
        else [p.replace("~1", "/").replace("~0", "~") for p in pointer.lstrip("/").split("/")]
    )
    try:
        i = ws(0)
        for part in parts:
            if text.startswith("{", i):
                i = ws(i + 1)
                while True:
                    key, i = dec.raw_decode(text, i)
                    i = ws(ws(i) + 1)  # past the colon
                    if key == part:
                        break
                    _, i = dec.raw_decode(text, i)
                    i = ws(i)
                    if not text.startswith(",", i):
                        return None
                    i = ws(i + 1)
            elif text.startswith("[", i) and part.isdigit():
                i = ws(i + 1)
                for _ in range(int(part)):
                    _, i = dec.raw_decode(text, i)
                    i = ws(i)
                    if not text.startswith(",", i):
                        return None
                    i = ws(i + 1)
            else:
                return None
        _, end = dec.raw_decode(text, i)
        return i, end
    except (ValueError, RecursionError):
        return None


@dataclass
class _Decoded:
    tokens: list[int]
    new_tokens: int
    forward_passes: int
    truncated: bool


def _only_end_left(m: Any, scratch: np.ndarray, eos: set[int], width: int) -> bool:
    """Accepting, and nothing but an end token may follow: the output is complete."""
    if not m.is_accepting():
        return False
    m.fill_next_token_bitmask(scratch, 0)
    allowed = allowed_ids(scratch[0], width)
    return bool(len(allowed)) and set(allowed.tolist()) <= eos


# Most tokens redrawn at one step because they would write a rejected value again.
_MAX_REDRAWS = 256


def _repeats(written: bytes, paths: Sequence[bytes]) -> bool:
    """Does ``written`` (bytes decoded since the branch point) write a rejected value again? A
    value is rejected with everything that extends it: for a number, its digits continued too
    (a model that wrote 10 and was refused tends to write 100 next)."""
    return any(written.startswith(p) for p in paths)


def _any_finite(row: Any) -> bool:
    """Is any logit of a row finite (a torch tensor, or a numpy array without torch)?"""
    if isinstance(row, np.ndarray):
        return bool(np.isfinite(row).any())
    return bool(row.isfinite().any())


def resample_from(
    backend: Backend,
    constraint: Constraint,
    prompt_ids: list[int],
    tokens: list[int],
    start_byte: int,
    rejected: Sequence[bytes],
    max_new_tokens: int,
    params: SamplingParams,
    generator: Any = None,
    prefix: SharedPrefix | None = None,
) -> _Decoded | None:
    """Decode ``constraint``'s output again from the value that starts at ``start_byte`` of a
    previous output ``tokens``: the tokens before the last token boundary at or before it are
    kept (replayed through a fresh matcher), and the rest is decoded under the mask as
    :func:`corral.generate` would (jump-ahead, budget kept), except that no value in
    ``rejected`` (each a value's bytes) may be written there again: a token that would (with
    what the constraint forces after it) is taken back and the next best one drawn. None when
    the kept prefix no longer matches or every way on is rejected. ``prefix``: the prompt's KV
    cache already computed (a :class:`~corral.generation.scoring.SharedPrefix` of ``prompt_ids``),
    forked instead of prefilling the prompt again."""
    tok = backend.tokenizer
    tools = tools_for(tok)
    eos = set(tok.eos_ids)
    old = tok.decode(tokens)
    ends = np.cumsum([len(tok.decode([t])) for t in tokens]) if tokens else np.zeros(0)
    k = int(np.searchsorted(ends, start_byte, side="right"))
    lead = old[(int(ends[k - 1]) if k else 0) : start_byte]  # between the kept tokens and the value
    paths = [lead + r for r in rejected]
    m = constraint.grammar.matcher()
    for t in tokens[:k]:
        if not m.accept_token(t):
            return None
    scratch = np.zeros((1, (tok.width + 31) // 32), dtype=np.int32)
    out = list(tokens[:k])
    out += forced_tokens(m, tools, scratch, max_new_tokens - len(out))
    pending = list(prompt_ids) + out
    if prefix is not None and len(pending) > len(prefix.ids) and pending[: len(prefix.ids)] == prefix.ids:
        batch = prefix.batch.fork([0])
        pending = pending[len(prefix.ids) :]
    else:
        batch = backend.new_batch()
    passes = 0
    truncated = False
    gen = generator if generator is not None or params.greedy else make_generator(params)
    while True:
        logits = batch.forward([pending])
        passes += 1
        mask = full_bitmask(1, tok.width)
        fill_next_token_bitmasks([m], mask, [0])
        apply_token_bitmask_(logits, mask)
        for _ in range(_MAX_REDRAWS):
            if not _any_finite(logits[0]):
                return None  # every way on writes a rejected value again
            t = sample(logits, params, gen)[0]
            if t in eos and m.is_accepting():
                return _Decoded(out, len(out) - k, passes, truncated)
            if not m.accept_token(t):
                return None
            if not fits(m, tools, max_new_tokens - len(out) - 1):
                m.rollback(1)
                tail = tools.encode_exact(m.shortest_completion())
                if not all(m.accept_token(x) for x in tail):
                    return None
                return _Decoded(out + tail, len(out) + len(tail) - k, passes, True)
            forced = forced_tokens(m, tools, scratch, max_new_tokens - len(out) - 1)
            if paths and _repeats(tok.decode([*out[k:], t, *forced]), paths):
                m.rollback(1 + len(forced))
                logits[0, t] = float("-inf")
                continue
            break
        else:
            return None
        out += [t, *forced]
        pending = [t, *forced]
        if m.error or _only_end_left(m, scratch, eos, tok.width) or len(out) >= max_new_tokens:
            return _Decoded(out, len(out) - k, passes, truncated)


def feedback_prompt(prompt: Prompt, text: str, failures: Sequence[CheckFailure], chat: bool | None) -> Prompt:
    """The prompt for a retry with feedback: the failed output and what was wrong with it."""
    problems = "; ".join(f"{f.path}: {f.message}" if f.path else f.message for f in failures)
    note = f"That answer is not acceptable: {problems}. Answer again, correcting it."
    if isinstance(prompt, str) and chat is False:
        return f"{prompt}\n\nA previous answer was:\n{text}\n{note}\n"
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
    return [*messages, {"role": "assistant", "content": text}, {"role": "user", "content": note}]


_CONSTRAINT_ARGS = (
    "schema",
    "regex",
    "grammar",
    "choices",
    "json",
    "tools",
    "tool_choice",
    "structural_tags",
    "triggers",
    "thinking",
    "schema_options",
    "limits",
)
_JSON_KINDS = ("json_schema", "json", "json_object")


def _message(failures: Sequence[CheckFailure]) -> str:
    return "; ".join(
        f"check {f.check} failed" + (f" at {f.path}" if f.path else "") + f": {f.message}" for f in failures
    )


def generate_checked(
    model: Any,
    prompt: Any,
    args: dict[str, Any],
    *,
    checks: Sequence[Check] | None,
    on_invalid: str,
    max_tries: int,
    retry_feedback: bool,
) -> Any:
    """:func:`corral.generate` with ``checks`` and an ``on_invalid`` policy (see the module doc);
    ``args`` are generate's other keyword arguments."""
    from corral.generation.api import _constraint, _is_single, as_backend, generate

    if on_invalid not in POLICIES:
        raise ValueError(f"on_invalid must be one of {', '.join(map(repr, POLICIES))}, got {on_invalid!r}")
    if isinstance(max_tries, bool) or not isinstance(max_tries, int) or max_tries < 0:
        raise ValueError(f"max_tries must be an integer >= 0, got {max_tries!r}")
    checks = list(checks or ())
    for c in checks:
        if not callable(c):
            raise TypeError(f"checks must be callables, got {type(c).__name__}")
    backend = as_backend(model, args.pop("tokenizer", None))
    cargs = {k: args[k] for k in _CONSTRAINT_ARGS}
    constraint = _constraint(backend, **cargs)
    if constraint is not None:
        constraint = constraint.bind(args.get("slots"))
    if on_invalid == "backtrack" and (
        constraint is None or constraint.kind not in _JSON_KINDS or constraint.think is not None
    ):
        raise ValueError(
            'on_invalid="backtrack" needs a JSON constraint (schema, Pydantic model or json=True) '
            'without a think block; use "retry" for other outputs'
        )
    single = _is_single(prompt)
    prompts = [prompt] if single else list(prompt)
    firsts = generate(backend, prompts, **args)
    ctx = _Ctx(backend, constraint, checks, on_invalid, max_tries, retry_feedback, args)
    out = [ctx.recover(p, r) for p, r in zip(prompts, firsts, strict=True)]
    return out[0] if single else out


@dataclass
class _Ctx:
    backend: Backend
    constraint: Constraint | None
    checks: list[Check]
    policy: str
    max_tries: int
    feedback: bool
    args: dict[str, Any]

    def _check(self, r: Any) -> list[CheckFailure]:
        value = r.value if self.constraint is not None else r.text
        _, answer = self.constraint.split(r.text) if self.constraint is not None else (None, r.text)
        return run_checks(self.checks, value, self.constraint, answer, r.error)

    def recover(self, prompt: Any, r: Any) -> Any:
        import dataclasses

        names = ["schema", *(_name(c) for c in self.checks)]
        report = ValidationReport(self.policy, names)
        failures = self._check(r)
        report.attempts.append(Attempt("initial", r.text, failures, r.completion_tokens))
        passes = r.forward_passes
        if failures and self.policy == "retry":
            r, passes = self._retry(prompt, r, report, passes)
        elif failures and self.policy == "backtrack":
            r, passes = self._backtrack(prompt, r, report, passes)
        report.value = r.value
        final = report.failures
        error = r.error if r.error is not None or not final else _message(final)
        return dataclasses.replace(
            r, error=error, value=None if error else r.value, validation=report, forward_passes=passes
        )

    def _retry(self, prompt: Any, r: Any, report: ValidationReport, passes: int) -> tuple[Any, int]:
        from corral.generation.api import generate

        seen = {r.text}
        for _ in range(self.max_tries):
            p = (
                feedback_prompt(prompt, r.text, report.failures, self.args.get("chat"))
                if self.feedback
                else prompt
            )
            r2 = generate(self.backend, p, **self.args)
            passes += r2.forward_passes
            if r2.text in seen and not self.feedback and self.args.get("temperature", 0.0) == 0:
                break  # greedy, same prompt: every further try would repeat this output
            seen.add(r2.text)
            r = r2
            failures = self._check(r)
            report.attempts.append(Attempt("retry", r.text, failures, r.completion_tokens))
            if not failures:
                break
        return r, passes

    def _backtrack(self, prompt: Any, r: Any, report: ValidationReport, passes: int) -> tuple[Any, int]:
        import dataclasses

        assert self.constraint is not None
        tok = self.backend.tokenizer
        prompt_ids = self.backend.render(prompt, chat=self.args.get("chat"))
        a = self.args
        params = SamplingParams(
            temperature=a.get("temperature", 0.0),
            top_p=a.get("top_p", 1.0),
            top_k=a.get("top_k", 0),
            seed=a.get("seed"),
        )
        gen = None if params.greedy else make_generator(params)
        rejected: dict[str | None, list[bytes]] = {}
        tokens = list(r.tokens)
        for _ in range(self.max_tries):
            # The first failure that names a value found in the output; else the whole output.
            located = [f.path for f in report.failures if f.path and value_span(r.text, f.path) is not None]
            path = located[0] if located else None
            span = value_span(r.text, path) or (0, len(r.text))
            start = len(r.text[: span[0]].encode("utf-8"))
            seen = rejected.setdefault(path, [])
            seen.append(r.text[span[0] : span[1]].encode("utf-8"))
            got = resample_from(
                self.backend,
                self.constraint,
                prompt_ids,
                tokens,
                start,
                seen,
                a.get("max_new_tokens", 512),
                params,
                gen,
            )
            if got is None:
                break  # nothing else can be written there
            passes += got.forward_passes
            tokens = got.tokens
            text = tok.decode(tokens).decode("utf-8", errors="replace")
            value, error = self.constraint.read(text)
            r = dataclasses.replace(
                r,
                text=text,
                value=None if error else value,
                error=error,
                tokens=list(tokens),
                completion_tokens=len(tokens),
                truncated=got.truncated,
                stop_reason="max_tokens" if got.truncated else "complete",
            )
            failures = self._check(r)
            report.attempts.append(Attempt("backtrack", text, failures, got.new_tokens, path))
            if not failures:
                break
        return r, passes
