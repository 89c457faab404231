"""``corral.generate`` / ``corral.stream``: constrained generation with a real model.

Example (needs ``corral[hf]`` and the bundled model)::

    model = corral.load_model()                      # SmolLM2-135M-Instruct, offline
    r = corral.generate(model, "Name a colour as JSON.",
                        schema={"type": "object", "properties": {"colour": {"type": "string"}},
                                "required": ["colour"]})
    r.value        # {'colour': 'blue'}  — always parses and validates
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.backends.base import Backend, Prompt
from corral.backends.loading import load_model
from corral.compile import Constraint, compile_constraint, spec_from_args
from corral.engine import CompiledGrammar
from corral.errors import BudgetError
from corral.generation.decode import RowOutput, TextCallback, check_context, decode
from corral.generation.scoring import answer_ids, score_continuations
from corral.grammar.tool_formats import detect_format, get_format, history
from corral.grammar.tools import ToolCall, choice_note, tools_prompt
from corral.runtime.sampling import SamplingParams

__all__ = ["GenerationResult", "generate", "stream", "TextStream", "as_backend", "best_choices"]


@dataclass
class GenerationResult:
    """One generated output.

    Attributes
    ----------
    text : str
        The output text.
    value : Any
        The parsed output: a Pydantic instance (when a model was given), a JSON value
        (schemas, JSON mode), a :class:`corral.ToolCall` (tools; the text itself when
        ``tool_choice="auto"`` and the model answered in prose), the chosen string (choices) or
        the text (regex, grammar); None for free generation or when ``error`` is set.
    error : str or None
        Why the output did not parse/validate (only possible for keywords the schema report
        lists as checked after decoding, or free generation), else None.
    stop_reason : str
        "complete" (the model or the constraint ended it), "max_tokens" (the budget ran out;
        constrained output is still complete and valid), or "error".
    truncated : bool
        True when the output was finished early with the shortest valid completion so that it
        fits ``max_new_tokens``.
    prompt_tokens, completion_tokens : int
        Token counts.
    forward_passes : int
        Model forward passes this output took (jump-ahead appends forced tokens without one).
    forced_tokens : int
        Tokens appended by jump-ahead.
    reasoning : str or None
        The think block's text (``thinking=``; without its markers), kept out of ``value``;
        None without a think block.
    tool_calls : list of ToolCall
        Tools: every call of the reply, in order (empty when it answered without one).
    content : str or None
        Tools: the reply's prose or answer text (None when it is only calls).
    validation : ValidationReport or None
        With ``checks`` / ``on_invalid``: which checks ran, what failed and what was retried
        (:class:`corral.generation.validation.ValidationReport`); else None.
    calibration : CalibrationReport or None
        With ``calibrate``: each closed choice of the output, its calibrated probabilities, the
        value decoded before and the one written
        (:class:`corral.generation.calibrated_values.CalibrationReport`); else None.
    tokens : list of int
        The output's token ids.
    timing : dict
        Seconds: ``compile`` (constraint), ``decode`` (the whole batch), ``forward``, ``mask``
        (mask computation and bookkeeping), ``total``.
    """

    text: str
    value: Any
    error: str | None
    stop_reason: str
    truncated: bool
    prompt_tokens: int
    completion_tokens: int
    forward_passes: int
    forced_tokens: int
    timing: dict[str, float] = field(default_factory=dict)
    reasoning: str | None = None
    tokens: list[int] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    content: str | None = None
    validation: Any = None
    calibration: Any = None

    @property
    def valid(self) -> bool:
        """Did the output parse (and validate, for a schema)?"""
        return self.error is None


def as_backend(model: Any, tokenizer: Any = None) -> Backend:
    """A corral backend from what the user has: a Backend, a path (loaded once and kept), or a
    transformers model plus its tokenizer."""
    if isinstance(model, Backend):
        return model
    if model is None or isinstance(model, (str, os.PathLike)):
        key = str(model)
        if key not in _LOADED:
            _LOADED[key] = load_model(model)
        return _LOADED[key]
    if hasattr(model, "config") and hasattr(model, "forward"):
        if tokenizer is None:
            raise TypeError("a transformers model needs its tokenizer: generate(model, ..., tokenizer=tok)")
        from corral.backends.hf import TransformersBackend

        return TransformersBackend(model, tokenizer)
    raise TypeError(f"cannot generate with a {type(model).__name__}: pass corral.load_model(...) or a path")


_LOADED: dict[str, Backend] = {}


def _is_single(prompt: Any) -> bool:
    if isinstance(prompt, str):
        return True
    if isinstance(prompt, Sequence) and prompt and all(isinstance(m, Mapping) for m in prompt):
        return True  # one chat
    return False


def generate(
    model: Any,
    prompt: Prompt | Sequence[Prompt],
    *,
    schema: Any = None,
    regex: str | None = None,
    grammar: Any = None,
    choices: Sequence[str] | None = None,
    json: bool = False,
    tools: Sequence[Any] | None = None,
    tool_choice: Any = None,
    parallel_tool_calls: bool = False,
    tool_format: str = "auto",
    structural_tags: Any = None,
    triggers: Sequence[str] | None = None,
    thinking: Any = None,
    slots: Mapping[str, Sequence[str]] | None = None,
    limits: Mapping[str, int] | None = None,
    tokenizer: Any = None,
    max_new_tokens: int = 512,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int | None = None,
    jump_ahead: bool = True,
    chat: bool | None = None,
    schema_options: dict[str, Any] | None = None,
    on_text: TextCallback | None = None,
    checks: Sequence[Any] | None = None,
    on_invalid: str = "report",
    max_tries: int = 2,
    retry_feedback: bool = True,
    calibrate: Any = None,
) -> Any:
    """Generate output constrained by one constraint, for one prompt or a batch.

    Parameters
    ----------
    model
        A backend from :func:`corral.load_model`, a model path, or a transformers model (with
        ``tokenizer=``).
    prompt
        Text, chat messages (``[{"role": "user", "content": ...}]``), or a list of either for a
        batch (decoded together, one forward pass per step for the whole batch).
    schema, regex, grammar, choices, json
        The constraint — at most one: a JSON Schema (dict/text) or Pydantic model/type; a
        regular expression (full match); grammar text (GBNF + ``/regex/``) or a compiled
        grammar; a list of allowed strings; or ``json=True`` for any JSON value. None of them:
        free generation. Under greedy decoding, ``choices`` returns the most probable choice as
        a whole answer (scored exactly, as :func:`corral.classify` does); with sampling, the
        choices are decoded token by token under the mask.
    tools, tool_choice
        Tool calling instead of the constraints above: ``tools`` are OpenAI tool objects,
        Pydantic models or Python functions with type hints; ``tool_choice`` is ``"auto"``
        (default: a call or a plain-text reply), ``"required"`` (a call) or a tool's name. The
        tools are described to the model in a system message (or, when the chat template
        declares tools in the format used, by the template itself); ``value`` is a
        :class:`corral.ToolCall` naming a declared tool with arguments valid for it, and
        ``tool_calls`` / ``content`` hold every call and the prose. With ``schema`` too (and
        ``tool_choice="auto"``) the reply is a call or an answer valid for the schema.
    parallel_tool_calls
        Allow one or more calls in a reply (``value`` is then the list when there are several).
    tool_format
        The call syntax: ``"auto"`` (default: the format the model's chat template declares,
        else ``"json"``), ``"json"``, ``"hermes"``, ``"llama3"`` or ``"mistral"`` (see
        :mod:`corral.grammar.tool_formats`).
    structural_tags, triggers
        Free text in which each trigger opens a constrained segment: ``structural_tags`` is a
        list of ``{"begin": "<tool_call>", "schema": {...}, "end": "</tool_call>"}`` tags (or
        ``"regex"``, ``"grammar"``, ``"content"``; or XGrammar's ``{"type": "structural_tag",
        "format": {"type": "triggered_tags", ...}}``); ``triggers`` default to the begins.
        ``value`` is the list of :class:`corral.compile.thinking.Segment` (each validated).
    thinking
        A think block before the answer: ``True``, a budget in tokens, or ``{"budget_tokens": N,
        "open": ..., "close": ..., "optional": bool}``. The markers default to the model's own
        (``<think>``/``</think>`` when its vocabulary has them, else ``Reasoning: `` /
        ``\nAnswer: ``). The block takes at most ``budget_tokens`` tokens (markers included):
        the close marker is forced in time. The answer (any constraint above, or free text)
        never sees the block; ``reasoning`` holds its text.
    slots
        Values for the constraint's slots (``x-corral-slot`` strings in a schema, ``${name}``
        in a grammar): ``{"cost_center": ["CC-104", "CC-109"]}``, bound without recompiling.
    limits
        Engine limits (see ``corral.DEFAULT_LIMITS``) for compiling the constraint.
    max_new_tokens
        Output budget. Constrained output is steered to finish within it, valid; if even the
        shortest valid output cannot fit, :class:`corral.BudgetError` is raised before decoding.
    temperature, top_p, top_k, seed
        Sampling (temperature 0 = greedy); applied after the mask.
    jump_ahead
        Append the tokens the constraint forces without a forward pass each.
    chat
        Render text prompts with the model's chat template (default: when it has one).
    schema_options
        Options for :func:`corral.compile_json_schema` (whitespace, extra_properties, budgets,
        ...). Generation defaults to ``whitespace="pretty"`` (indent 2, the layout forced) and
        ``escapes="canonical"`` (one spelling per string, as ``json.dumps(ensure_ascii=False)``):
        see ``corral.compile.SCHEMA_DEFAULTS``.
    on_text
        ``on_text(row, delta)`` is called with each new piece of text (streaming).
    checks, on_invalid, max_tries, retry_feedback
        Checks after decoding (callables on the parsed value; see
        :mod:`corral.generation.validation`) and what to do when one — or the schema's own
        post-decode validation — fails: ``"report"`` (``error`` says what failed),
        ``"backtrack"`` (JSON: resample the failing value with the rejected choice excluded) or
        ``"retry"`` (regenerate; with ``retry_feedback`` the error is appended to the prompt),
        up to ``max_tries`` more attempts. ``validation`` on the result reports it.
    calibrate
        Contextual calibration of the output's closed choices (JSON Schema only): the
        content-free version of the prompt — the same instructions with the document replaced
        by ``"N/A"`` — or a list of them. At each ``enum`` (or boolean, or ``const`` union) of
        the output, every option is scored as a whole value after the prompt and after the
        content-free prompt(s), with the same output before it, and the best option once the
        model's prior is divided out is written; what follows a changed value is decoded again.
        ``calibration`` on the result lists each choice (:mod:`corral.generation.calibrated_values`).

    Returns
    -------
    GenerationResult, or a list of them for a batch (in prompt order).
    """
    if checks is not None or on_invalid != "report":
        args = dict(locals())  # generate's own arguments (nothing else is bound yet)
        policy = {k: args.pop(k) for k in ("checks", "on_invalid", "max_tries", "retry_feedback")}
        del args["model"], args["prompt"]
        from corral.generation.validation import generate_checked

        return generate_checked(model, prompt, args, **policy)
    t0 = time.perf_counter()
    backend = as_backend(model, tokenizer)
    single = _is_single(prompt)
    prompts: list[Prompt] = [prompt] if single else list(prompt)  # type: ignore[list-item,arg-type]
    if not prompts:
        return []
    params = SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k, seed=seed)
    fmt, structured = _tool_format(backend, tool_format, tools, tool_choice, chat)
    tool_args = {"tool_format": fmt, "parallel_tool_calls": parallel_tool_calls} if fmt else {}
    constraint = _constraint(
        backend,
        schema=schema,
        regex=regex,
        grammar=grammar,
        choices=choices,
        json=json,
        tools=tools,
        tool_choice=tool_choice,
        structural_tags=structural_tags,
        triggers=triggers,
        thinking=thinking,
        schema_options=schema_options,
        limits=limits,
        **tool_args,
    )
    template_tools = None
    if constraint is not None:
        constraint = constraint.bind(slots)
        if constraint.kind == "tools":
            named = _named(tool_choice)
            if structured:  # the chat template describes the tools in the model's own format
                template_tools = [{"type": "function", "function": t.as_json()} for t in constraint.tools]
                note = choice_note(constraint.tool_mode, named)
            else:
                note = tools_prompt(
                    constraint.tools, constraint.tool_mode, named, fmt or "json", parallel_tool_calls
                )
            # Past calls in message prompts: as the template renders them, or written in fmt.
            prompts = [
                p if isinstance(p, str) else history(p, get_format(fmt or "json"), structured)
                for p in prompts
            ]
            if note:
                prompts = [_with_system_note(p, note, chat) for p in prompts]
    elif slots:
        raise ValueError("slots given without a constraint")
    t_compile = time.perf_counter() - t0
    ids = [backend.render(p, chat=chat, tools=template_tools) for p in prompts]
    for i, p in enumerate(ids):
        check_context(backend, len(p), max_new_tokens, "" if single else f"prompt {i}: ")
    if constraint is not None and constraint.kind == "choices" and params.greedy and constraint.think is None:
        return _best_choices(
            backend, prompts, chat, constraint, max_new_tokens, on_text, single, t0, t_compile
        )
    cf_ids = None if calibrate is None else _content_free_ids(backend, constraint, calibrate, chat, on_text)
    grammar_c = constraint.grammar if constraint is not None else None
    outs, stats = decode(
        backend,
        ids,
        [grammar_c] * len(ids),
        max_new_tokens=max_new_tokens,
        params=params,
        jump_ahead=jump_ahead,
        on_text=on_text,
        think=constraint.think if constraint is not None else None,
    )
    timing = {
        "compile": t_compile,
        "decode": stats.total_s,
        "forward": stats.forward_s,
        "mask": stats.mask_s,
        "total": time.perf_counter() - t0,
    }
    if cf_ids is not None:
        assert constraint is not None
        _calibrate(backend, constraint, ids, cf_ids, outs, max_new_tokens, params)
        timing["total"] = time.perf_counter() - t0
    results = [_result(backend, constraint, o, timing) for o in outs]
    return results[0] if single else results


def _content_free_ids(
    backend: Backend, constraint: Constraint | None, calibrate: Any, chat: bool | None, on_text: Any
) -> list[list[int]]:
    """``generate(calibrate=...)``'s content-free prompts, rendered (checked before decoding)."""
    from corral.generation.calibrated_values import content_free_prompts

    if constraint is None or constraint.kind != "json_schema" or constraint.think is not None:
        raise ValueError("calibrate needs a JSON Schema constraint (schema=...) without a think block")
    if on_text is not None:
        raise ValueError("calibrate cannot stream: a calibrated value may replace text already decoded")
    return [backend.render(p, chat=chat) for p in content_free_prompts(calibrate)]


def _calibrate(
    backend: Backend,
    constraint: Constraint,
    ids: list[list[int]],
    cf_ids: list[list[int]],
    outs: list[RowOutput],
    max_new_tokens: int,
    params: SamplingParams,
) -> None:
    """Each complete row's closed choices calibrated, in place (``RowOutput.calibration``)."""
    from corral.generation.calibrated_values import calibrate_output

    for p, o in zip(ids, outs, strict=True):
        if o.error or o.stop_reason != "complete":
            continue
        o.tokens, o.calibration = calibrate_output(
            backend, constraint, p, cf_ids, o.tokens, max_new_tokens=max_new_tokens, params=params
        )
        o.forward_passes += o.calibration.forward_passes


def _constraint(backend: Backend, *, grammar: Any, **args: Any) -> Constraint | None:
    """The compiled constraint of generate()'s arguments (None: free generation)."""
    if isinstance(grammar, CompiledGrammar):
        options = ("schema_options", "limits")
        given = [k for k, v in args.items() if v not in (None, False) and k not in options]
        if given:
            raise ValueError(f"give one constraint, not grammar and {' and '.join(given)}")
        return Constraint.from_grammar(grammar)
    if args.get("tool_choice") == "none":
        args = {**args, "tools": None, "tool_choice": None}
    spec = spec_from_args({**args, "grammar": grammar})
    return None if spec is None else compile_constraint(spec, backend.tokenizer)


def _tool_format(
    backend: Backend, tool_format: str, tools: Any, tool_choice: Any, chat: bool | None
) -> tuple[str | None, bool]:
    """(format, structured) for a tools call: the format asked for (``"auto"``: the one the
    chat template declares) and whether the template renders the tools itself. (None, False)
    without tools."""
    if not tools or tool_choice == "none":
        return None, False
    declared = detect_format(backend.chat_template_source) if chat is not False else "json"
    fmt = declared if tool_format in ("auto", None) else tool_format
    get_format(fmt)  # ValueError for an unknown name
    return fmt, declared != "json" and fmt == declared


def _named(tool_choice: Any) -> str | None:
    if isinstance(tool_choice, Mapping):
        fn = tool_choice.get("function", tool_choice)
        return fn.get("name") if isinstance(fn, Mapping) else None
    if isinstance(tool_choice, str) and tool_choice not in ("auto", "required", "none"):
        return tool_choice
    return None


def _with_system_note(prompt: Prompt, note: str, chat: bool | None) -> Prompt:
    """The prompt with the tools described in its system message (a new one first if none);
    raw text prompts (``chat=False``) get the note before the text."""
    if isinstance(prompt, str) and chat is False:
        return f"{note}\n\n{prompt}"
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
    if messages and messages[0].get("role") == "system":
        messages[0]["content"] = f"{messages[0].get('content', '')}\n\n{note}"
    else:
        messages.insert(0, {"role": "system", "content": note})
    return messages


def _result(
    backend: Backend, constraint: Constraint | None, out: RowOutput, timing: dict[str, float]
) -> GenerationResult:
    text = backend.tokenizer.decode(out.tokens).decode("utf-8", errors="replace")
    value: Any = None
    error: str | None = out.error or None
    reasoning = constraint.split(text)[0] if constraint is not None else None
    calls: list[ToolCall] = []
    content = None
    if constraint is not None and error is None:
        if constraint.spec.without_thinking().kind == "tools":
            reply = constraint.read_tools(text)
            value, error, calls, content = reply.value, reply.error, list(reply.calls), reply.content
        else:
            value, error = constraint.read(text)
        if error is not None:
            value = None
    return GenerationResult(
        text=text,
        value=value,
        error=error,
        stop_reason=out.stop_reason,
        truncated=out.truncated,
        prompt_tokens=out.prompt_tokens,
        completion_tokens=len(out.tokens),
        forward_passes=out.forward_passes,
        forced_tokens=out.forced_tokens,
        timing=dict(timing),
        reasoning=reasoning,
        tokens=list(out.tokens),
        tool_calls=calls,
        content=content,
        calibration=out.calibration,
    )


def best_choices(
    backend: Backend,
    prompts: Sequence[Prompt],
    constraint: Constraint,
    *,
    chat: bool | None,
    max_new_tokens: int,
) -> list[GenerationResult]:
    """Greedy ``choices`` for already compiled ``constraint``: each prompt's most probable choice
    as a whole answer (what :func:`generate` returns; the server's ``/v1/completions`` calls it)."""
    t0 = time.perf_counter()
    out = _best_choices(backend, list(prompts), chat, constraint, max_new_tokens, None, False, t0, 0.0)
    return list(out)


def _best_choices(
    backend: Backend,
    prompts: list[Prompt],
    chat: bool | None,
    constraint: Constraint,
    max_new_tokens: int,
    on_text: TextCallback | None,
    single: bool,
    t0: float,
    t_compile: float,
) -> Any:
    """Greedy decoding over a closed set of choices is the choice with the highest probability
    as a whole answer (its tokens, then the end token) — scored exactly, in one or two forward
    passes, so it agrees with :func:`corral.classify`. Token-by-token greedy could commit to a
    shared first token and miss the most probable choice."""
    import numpy as np

    choices = list(constraint.choices or ())
    texts = [backend.render_text(p, chat=chat) for p in prompts]
    ids = [backend.encode(t, add_special=a) for t, a in texts]
    conts = [[answer_ids(backend, t, i, c, a) for c in choices] for (t, a), i in zip(texts, ids, strict=True)]
    t1 = time.perf_counter()
    # The end token is scored only when a choice is a token-prefix of another (as classify does).
    prefix_pair = any(len(a) < len(b) and b[: len(a)] == a for cs in conts for a in cs for b in cs)
    end_ids = backend.tokenizer.eos_ids if prefix_pair else ()
    scores = score_continuations(backend, ids, conts, end_ids=end_ids)
    for p, cs in enumerate(conts):
        for c, toks in enumerate(cs):
            if len(toks) > max_new_tokens:
                scores[p, c] = -np.inf
    if not np.isfinite(scores.max(axis=1)).all():
        raise BudgetError(f"no choice fits in max_new_tokens={max_new_tokens} tokens")
    decode_s = time.perf_counter() - t1
    # The prompts, then (for multi-token choices or end tokens) the continuations forked from them.
    passes = 2 if end_ids or any(len(x) > 1 for cs in conts for x in cs) else 1
    results = []
    for p, row in enumerate(scores):
        best = int(np.argmax(row))
        text = choices[best]
        if on_text is not None:
            on_text(p, text)
        timing = {"compile": t_compile, "decode": decode_s, "forward": decode_s, "mask": 0.0}
        timing["total"] = time.perf_counter() - t0
        results.append(
            GenerationResult(
                text=text,
                value=text,
                error=None,
                stop_reason="complete",
                truncated=False,
                prompt_tokens=len(ids[p]),
                completion_tokens=len(conts[p][best]),
                forward_passes=passes,
                forced_tokens=0,
                timing=timing,
            )
        )
    return results[0] if single else results


class TextStream:
    """Iterator over the text deltas of one generation; ``.result`` holds the
    :class:`GenerationResult` once the iteration ends. Decoding runs in a background thread."""

    def __init__(self, run: Any) -> None:
        self._q: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.result: GenerationResult | None = None

        def target() -> None:
            try:
                r = run(lambda _row, delta: self._q.put(("text", delta)))
                self._q.put(("done", r))
            except BaseException as e:  # handed to the consumer, re-raised there
                self._q.put(("error", e))

        self._thread = threading.Thread(target=target, daemon=True)
        self._thread.start()

    def __iter__(self) -> Iterator[str]:
        while True:
            kind, payload = self._q.get()
            if kind == "text":
                yield payload
            elif kind == "done":
                self.result = payload
                return
            else:
                raise payload


def stream(model: Any, prompt: Prompt, **kwargs: Any) -> TextStream:
    """Like :func:`generate` for one prompt, but returns an iterator of text deltas as they are
    decoded; the final :class:`GenerationResult` is ``stream.result`` after the loop.

    >>> s = corral.stream(model, "Say hi", regex="[A-Za-z ]{1,20}")  # doctest: +SKIP
    >>> for delta in s: print(delta, end="")                          # doctest: +SKIP
    """
    if not _is_single(prompt):
        raise TypeError("stream() takes one prompt; use generate(..., on_text=...) for a batch")
    backend = as_backend(model, kwargs.pop("tokenizer", None))
    return TextStream(lambda cb: generate(backend, prompt, on_text=cb, **kwargs))
