"""The OpenAI wire format: request bodies checked and turned into a :class:`GenRequest`, and
results turned into response objects and stream chunks.

Only what corral implements is accepted; a field whose effect corral cannot honour (``stop``,
penalties, ``echo``, ``suffix``, non-text content parts) is a 400 rather than being
silently ignored. Fields that change nothing here (``user``, ``metadata``, ``store``, ...) are
accepted; any other field is reported as ignored, or refused when it looks like a constraint
(:mod:`corral.server.fields`). vLLM's constraint fields (``structured_outputs``, ``guided_*``)
are read by :func:`vllm_constraint`. Tools: ``tools``, ``tool_choice`` (none / auto / required
/ named), ``parallel_tool_calls`` and corral's ``tool_format``
(:mod:`corral.grammar.tool_formats`); a chat template that declares tools renders them (and past
calls) itself.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.compile import ConstraintSpec, spec_from_args
from corral.compile.vllm_fields import CONSTRAINT_FIELDS, GUIDED_FIELDS, VLLMFieldError, constraint_args
from corral.errors import CorralError
from corral.grammar.tool_formats import FORMATS, get_format, history
from corral.grammar.tools import ToolCall, choice_note
from corral.runtime.sampling import SamplingParams
from corral.server.errors import APIError, error_from_exception
from corral.server.fields import check_fields
from corral.server.logprobs import TraceRequest, parse_trace
from corral.server.registry import named_constraint
from corral.server.tool_stream import call_json
from corral.server.tools import Tool, assistant_calls, parse_tool_choice, parse_tools, tools_prompt

__all__ = [
    "GenRequest",
    "json_object_spec",
    "parse_chat",
    "parse_completion",
    "schema_spec",
    "tools_spec",
    "vllm_constraint",
]

FINISH = {"complete": "stop", "max_tokens": "length", "cancelled": "stop", "error": "stop"}


@dataclass
class GenRequest:
    """A generation request, endpoint-independent."""

    endpoint: str  # "chat" | "completions"
    model: str
    prompts: list[Any]  # chat: one message list; completions: one or more strings
    n: int
    max_tokens: int | None
    params: SamplingParams
    stream: bool
    include_usage: bool
    spec: ConstraintSpec | None
    tools: list[Tool] = field(default_factory=list)
    tool_mode: str = "none"
    slots: dict[str, list[str]] | None = None  # corral extension: values of x-corral-slot fields
    trace: TraceRequest | None = None  # logprobs / top_logprobs, and the corral_trace extension
    template_tools: list[dict[str, Any]] | None = None  # tools for a template that renders them
    template_kwargs: dict[str, Any] | None = None  # chat_template_kwargs
    ignored: list[str] = field(default_factory=list)  # fields that changed nothing (reported)


def _slots(body: dict[str, Any]) -> dict[str, list[str]] | None:
    """``corral_slots``: {slot name: [allowed strings]} for the schema's ``x-corral-slot`` fields."""
    v = body.get("corral_slots")
    if v is None:
        return None
    if not isinstance(v, dict) or not all(
        isinstance(k, str) and isinstance(x, list) and all(isinstance(s, str) for s in x)
        for k, x in v.items()
    ):
        raise _bad(
            "corral_slots must be an object mapping slot names to arrays of strings",
            "corral_slots",
            "invalid_slots",
        )
    return {k: list(x) for k, x in v.items()}


def _bad(message: str, param: str | None = None, code: str = "invalid_request") -> APIError:
    return APIError(400, message, code, param)


def _number(body: dict[str, Any], name: str, default: float, lo: float, hi: float) -> float:
    v = body.get(name)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (lo <= v <= hi):
        raise _bad(f"{name} must be a number in [{lo}, {hi}], got {v!r}", name)
    return float(v)


def _int(body: dict[str, Any], name: str, lo: int, hi: int | None = None) -> int | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
        bound = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise _bad(f"{name} must be an integer {bound}, got {v!r}", name)
    return v


def _common(body: dict[str, Any], max_n: int) -> tuple[SamplingParams, int, int | None, bool, bool]:
    for name in ("frequency_penalty", "presence_penalty"):
        if body.get(name) not in (None, 0, 0.0):
            raise _bad(f"{name} is not supported", name, "unsupported_parameter")
    if body.get("stop") not in (None, [], ""):
        raise _bad(
            "stop sequences are not supported: constrain the output instead", "stop", "unsupported_parameter"
        )
    if body.get("logit_bias"):
        raise _bad("logit_bias is not supported", "logit_bias", "unsupported_parameter")
    temperature = _number(body, "temperature", 1.0, 0.0, 2.0)
    top_p = _number(body, "top_p", 1.0, 0.0, 1.0)
    if top_p == 0.0:
        raise _bad("top_p must be > 0", "top_p")
    top_k = _int(body, "top_k", 0) or 0  # corral extension
    seed = _int(body, "seed", -(2**63))
    n = _int(body, "n", 1, max_n) or 1
    max_tokens = _int(body, "max_completion_tokens", 1)
    if max_tokens is None:
        max_tokens = _int(body, "max_tokens", 1)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _bad("stream must be a boolean", "stream")
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise _bad("stream_options must be an object", "stream_options")
    include_usage = bool(opts.get("include_usage", False))
    params = SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k, seed=seed)
    return params, n, max_tokens, stream, include_usage


def _model(body: dict[str, Any], served: str, aliases: set[str]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("model is required", "model")
    if model != served and model not in aliases:
        raise APIError(
            404,
            f"The model {model!r} does not exist; this server serves {served!r}",
            "model_not_found",
            "model",
        )
    return served


def schema_spec(schema: Any, strict: bool, param: str) -> ConstraintSpec:
    """The spec of a ``json_schema`` response format / completions extension."""
    if not isinstance(schema, (dict, bool)):
        raise APIError(400, f"{param} must be a JSON Schema object", "invalid_schema", param)
    return ConstraintSpec.json_schema(schema, {"strict": bool(strict)}, param=param)


def json_object_spec(param: str) -> ConstraintSpec:
    """JSON mode: any JSON object."""
    return ConstraintSpec.json_object(param=param)


def tools_spec(tools: list[Tool], mode: str) -> ConstraintSpec:
    return ConstraintSpec.tool_calls(tools, mode, param="tools")


def _plain_spec(kind: str, value: Any) -> ConstraintSpec:
    """A regex / grammar / choices extension of /v1/completions (400 for a bad value)."""
    try:
        if kind == "regex":
            return ConstraintSpec.regex(value)
        if kind == "grammar":
            return ConstraintSpec.grammar(value)
        return ConstraintSpec.choices(value)
    except (TypeError, ValueError, CorralError) as e:
        raise error_from_exception(e, kind) from None


def _response_format(raw: Any, registry: Mapping[str, Any]) -> ConstraintSpec | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _bad("response_format must be an object", "response_format")
    kind = raw.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return json_object_spec("response_format")
    if kind == "structural_tag":  # vLLM's / XGrammar's shapes (corral.compile.thinking)
        try:
            return ConstraintSpec.structural_tag(raw, param="response_format")
        except (TypeError, ValueError, CorralError) as e:
            raise error_from_exception(e, "response_format") from None
    if kind == "json_schema":
        js = raw.get("json_schema")
        if not isinstance(js, dict):
            raise _bad("response_format.json_schema must be an object", "response_format.json_schema")
        schema = js.get("schema")
        if schema is None:
            # corral extension: a registered schema by name ("invoice@3", or "invoice": the latest).
            name = js.get("name")
            if name is None:
                raise _bad(
                    "response_format.json_schema has no schema (and no name of a registered schema)",
                    "response_format.json_schema.schema",
                    "invalid_schema",
                )
            return named_constraint(registry, name, "response_format.json_schema.name", ("json_schema",))
        return schema_spec(schema, bool(js.get("strict", False)), "response_format.json_schema.schema")
    raise _bad(
        'response_format.type must be "text", "json_object", "json_schema" or "structural_tag", '
        f"got {kind!r}",
        "response_format.type",
    )


def vllm_constraint(body: Mapping[str, Any], others: Sequence[str] = ()) -> ConstraintSpec | None:
    """The constraint of vLLM's request fields: ``structured_outputs`` (an object) or the legacy
    top-level ``guided_*`` fields (None: neither is set). The one place a body's vLLM fields
    are read; the translation itself is :func:`corral.compile.vllm_fields.constraint_args`,
    shared with the vLLM integration. ``others``: the request's other constraint fields that are
    set (``response_format``, ...); one of them with a vLLM constraint is a 400 naming both, as
    are ``structured_outputs`` and ``guided_*`` together."""
    outputs = body.get("structured_outputs")
    legacy = [old for old in GUIDED_FIELDS if body.get(old) is not None]
    if outputs is None and not legacy:
        return None
    if outputs is not None and not isinstance(outputs, dict):
        raise _bad("structured_outputs must be an object", "structured_outputs")
    if outputs is not None:
        fields: Mapping[str, Any] = outputs
        names = {f: f"structured_outputs.{f}" for f in outputs}
        if legacy:
            given = [names[f] for f in CONSTRAINT_FIELDS if outputs.get(f) is not None] or [
                "structured_outputs"
            ]
            raise _bad(f"give one constraint, not {given[0]} and {legacy[0]}", legacy[0])
    else:
        fields = {GUIDED_FIELDS[old]: body[old] for old in legacy}
        names = {GUIDED_FIELDS[old]: old for old in legacy}
    kinds = [f for f in CONSTRAINT_FIELDS if fields.get(f) is not None and fields.get(f) is not False]
    param = names[kinds[0]] if kinds else next(iter(names.values()), "structured_outputs")
    if others and not kinds:
        raise _bad(f"{param} shapes a structured_outputs or guided_* constraint, not {others[0]}", param)
    if others:
        raise _bad(f"give one constraint, not {others[0]} and {param}", param)
    try:
        args = constraint_args(fields, "structured_outputs", names)
        if args is None:  # vLLM refuses it too: structured_outputs without a constraint in it
            raise _bad("structured_outputs names no constraint: " + ", ".join(CONSTRAINT_FIELDS), param)
        spec = spec_from_args(args)
    except VLLMFieldError as e:
        raise _bad(str(e), e.field) from None
    except (TypeError, ValueError, CorralError) as e:
        raise error_from_exception(e, param) from None
    assert spec is not None  # args name a constraint
    return dataclasses.replace(spec, param=param)


def _content(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") not in ("text", "input_text"):
                raise _bad(
                    f"{where}[{j}]: only text content parts are supported",
                    f"{where}[{j}]",
                    "unsupported_content",
                )
            parts.append(str(part.get("text", "")))
        return "".join(parts)
    raise _bad(f"{where} must be a string or an array of content parts", where)


def _messages(raw: Any, fmt: str = "json", structured: bool = False) -> list[dict[str, Any]]:
    """Messages as the chat template takes them ({"role", "content"} strings). Assistant tool
    calls are kept as ``tool_calls`` (arguments as objects) for a template that renders them
    (``structured``), else written into the content in the call format ``fmt``; tool results
    keep the "tool" role."""
    if not isinstance(raw, list) or not raw:
        raise _bad("messages must be a non-empty array", "messages")
    out: list[dict[str, Any]] = []
    for i, m in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise _bad(f"{where} must be an object", where)
        role = m.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool", "function"):
            raise _bad(f"{where}.role {role!r} is not a chat role", f"{where}.role")
        text: str = _content(m.get("content"), f"{where}.content")
        role = {"developer": "system", "function": "tool"}.get(role, role)
        msg: dict[str, Any] = {"role": str(role), "content": text}
        if role == "assistant" and m.get("tool_calls"):
            calls = assistant_calls(m["tool_calls"], f"{where}.tool_calls")
            msg["tool_calls"] = [{"id": cid, "function": {"name": n, "arguments": a}} for cid, n, a in calls]
        if role == "tool" and structured and isinstance(m.get("tool_call_id"), str):
            msg["tool_call_id"] = m["tool_call_id"]
        out.append(msg)
    return history(out, get_format(fmt), structured)


def _tool_options(
    body: dict[str, Any], tools: list[Tool], defaults: tuple[str, str]
) -> tuple[str, bool, bool]:
    """(format, parallel, structured): the call format (corral's ``tool_format`` extension, else
    the server's), ``parallel_tool_calls`` (OpenAI's default: true) and whether the chat
    template renders the tools itself (it declares that same format)."""
    default, template = defaults
    fmt = body.get("tool_format", default)
    if fmt in (None, "auto"):
        fmt = default
    if fmt not in FORMATS:
        raise _bad(f"tool_format must be one of {sorted(FORMATS)} or 'auto', got {fmt!r}", "tool_format")
    parallel = body.get("parallel_tool_calls", True)
    if not isinstance(parallel, bool):
        raise _bad("parallel_tool_calls must be a boolean", "parallel_tool_calls")
    return fmt, parallel, bool(tools) and template != "json" and fmt == template


_RESERVED_TEMPLATE_VARS = {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"}


def _template_kwargs(body: dict[str, Any]) -> dict[str, Any] | None:
    kwargs = body.get("chat_template_kwargs")
    if kwargs is None:
        return None
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise _bad("chat_template_kwargs must be an object", "chat_template_kwargs")
    clash = sorted(set(kwargs) & _RESERVED_TEMPLATE_VARS)
    if clash:
        raise _bad(f"chat_template_kwargs may not set {clash}", "chat_template_kwargs")
    return dict(kwargs) or None


def _thinking(body: dict[str, Any]) -> Any:
    """corral's ``thinking`` extension (``{"budget_tokens": N}``, shaped like Anthropic's; also
    ``true`` or a number), else vLLM users' ``chat_template_kwargs: {"enable_thinking": true}``
    (a think block in the model's own markers, no budget). None: no think block."""
    thinking = body.get("thinking")
    kwargs = body.get("chat_template_kwargs")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise _bad("chat_template_kwargs must be an object", "chat_template_kwargs")
    if thinking is None and kwargs and kwargs.get("enable_thinking") is True:
        return True
    if thinking is not None and not isinstance(thinking, (dict, bool, int)):
        raise _bad('thinking must be an object such as {"budget_tokens": 256}', "thinking")
    return thinking


def parse_chat(
    body: dict[str, Any],
    served: str,
    aliases: set[str],
    registry: Mapping[str, Any],
    max_n: int,
    tool_formats: tuple[str, str] = ("json", "json"),
) -> GenRequest:
    """Check a ``/v1/chat/completions`` body (raises APIError). ``tool_formats``: (the call
    format requests get unless they name one, the format the chat template declares)."""
    ignored = check_fields(body, "chat")
    model = _model(body, served, aliases)
    params, n, max_tokens, stream, include_usage = _common(body, max_n)
    rf = body.get("response_format")
    others = [k for k in ("response_format", "corral_constraint") if body.get(k) is not None]
    if isinstance(rf, dict) and rf.get("type") == "text":  # asks for no constraint: no clash
        others.remove("response_format")
    spec = vllm = vllm_constraint(body, others)
    if vllm is None:
        spec = _response_format(rf, registry)
    if body.get("corral_constraint") is not None:  # corral extension: any registered constraint
        if spec is not None:
            raise _bad("give corral_constraint or response_format, not both", "corral_constraint")
        spec = named_constraint(registry, body["corral_constraint"], "corral_constraint")
    tools = parse_tools(body["tools"]) if body.get("tools") is not None else []
    mode, name = parse_tool_choice(body.get("tool_choice"), tools)
    fmt, parallel, structured = _tool_options(body, tools, tool_formats)
    messages = _messages(body.get("messages"), fmt, structured)
    template_tools = None
    if mode != "none":
        chosen = [t for t in tools if t.name == name] if name else tools
        answer = None
        if spec is not None and mode == "auto":  # a call, or an answer valid for the schema
            if spec.kind not in ("json_schema", "json_object"):
                raise _bad(
                    'tool_choice "auto" combines with a json_schema or json_object response_format only',
                    "response_format" if vllm is None else vllm.param,
                    "unsupported_parameter",
                )
            answer = spec.schema
        try:
            spec = ConstraintSpec.tool_calls(
                chosen, mode, param="tools", tool_format=fmt, parallel=parallel, answer=answer
            )
        except (TypeError, ValueError, CorralError) as e:
            raise error_from_exception(e, "tools") from None
        if structured:  # the template describes the tools and the format in its own words
            template_tools = [{"type": "function", "function": t.as_json()} for t in chosen]
            note = choice_note(mode, name)
        else:  # corral tells the model about the tools and the format
            note = tools_prompt(chosen, mode, name, fmt, parallel)
        if note and messages[0]["role"] == "system":
            messages[0] = {**messages[0], "content": messages[0]["content"] + "\n\n" + note}
        elif note:
            messages.insert(0, {"role": "system", "content": note})
    thinking = _thinking(body)
    if thinking is not None:
        try:
            spec = (spec if spec is not None else ConstraintSpec.text(param="thinking")).with_thinking(
                thinking
            )
        except (TypeError, ValueError) as e:
            raise _bad(str(e), "thinking") from None
    return GenRequest(
        "chat",
        model,
        [messages],
        n,
        max_tokens,
        params,
        stream,
        include_usage,
        spec,
        tools,
        mode,
        _slots(body),
        parse_trace(body, "chat"),
        template_tools,
        _template_kwargs(body),
        ignored,
    )


def parse_completion(
    body: dict[str, Any], served: str, aliases: set[str], registry: Mapping[str, Any], max_n: int
) -> GenRequest:
    """Check a ``/v1/completions`` body (raises APIError). corral extensions: ``regex``,
    ``grammar``, ``choices``, ``json_schema`` (a schema object), ``response_format``,
    ``corral_constraint`` (a registered constraint's name: ``"invoice@3"`` or ``"invoice"``),
    ``thinking`` (a think block before the answer; it stays in ``text``)."""
    ignored = check_fields(body, "completions")
    model = _model(body, served, aliases)
    prompt = body.get("prompt")
    prompts = [prompt] if isinstance(prompt, str) else prompt
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
        raise _bad("prompt must be a string or an array of strings", "prompt")
    if body.get("echo"):
        raise _bad("echo is not supported", "echo", "unsupported_parameter")
    if body.get("suffix"):
        raise _bad("suffix is not supported", "suffix", "unsupported_parameter")
    if body.get("best_of") not in (None, 1):
        raise _bad("best_of is not supported", "best_of", "unsupported_parameter")
    params, n, max_tokens, stream, include_usage = _common(body, max_n)
    given = [
        k
        for k in ("regex", "grammar", "choices", "json_schema", "response_format", "corral_constraint")
        if body.get(k) is not None
    ]
    if len(given) > 1:
        raise _bad(f"give one constraint, not {' and '.join(given)}", given[1])
    spec = vllm_constraint(body, given)
    if spec is None and given and given[0] in ("regex", "grammar", "choices"):
        spec = _plain_spec(given[0], body[given[0]])
    elif spec is None and "json_schema" in given:
        spec = schema_spec(body["json_schema"], False, "json_schema")
    elif spec is None and "response_format" in given:
        spec = _response_format(body["response_format"], registry)
    elif spec is None and "corral_constraint" in given:
        spec = named_constraint(registry, body["corral_constraint"], "corral_constraint")
    thinking = body.get("thinking")
    if thinking is not None:  # the block stays in the text: completions have no reasoning field
        try:
            spec = (spec if spec is not None else ConstraintSpec.text(param="thinking")).with_thinking(
                thinking
            )
        except (TypeError, ValueError) as e:
            raise _bad(str(e), "thinking") from None
    return GenRequest(
        "completions",
        model,
        prompts,
        n,
        max_tokens,
        params,
        stream,
        include_usage,
        spec,
        slots=_slots(body),
        trace=parse_trace(body, "completions"),
        ignored=ignored,
    )


# ---------------------------------------------------------------------- responses


def tool_call_json(call: ToolCall, call_id: str) -> dict[str, Any]:
    return call_json(call, call_id)


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def envelope(kind: str, rid: str, model: str, created: int | None = None) -> dict[str, Any]:
    prefix = "chatcmpl-" if kind.startswith("chat") else "cmpl-"
    return {
        "id": prefix + rid,
        "object": kind,
        "created": created if created is not None else int(time.time()),
        "model": model,
        "system_fingerprint": "corral",
    }
