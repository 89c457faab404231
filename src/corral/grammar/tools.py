"""Tool calling as a constraint: tool definitions checked, turned into one call schema, read back.

In:  tools as the user has them — OpenAI tool objects (``{"type": "function", "function":
     {"name", "description", "parameters"}}``), bare ``{"name", "parameters"}`` objects, Pydantic
     models (the model's name and fields) or Python functions with type hints.
Out: :class:`Tool` records; :func:`call_schema`, the JSON Schema of one call of any of them;
     :func:`read_call`, a decoded call checked against its tool.

Call format (what the model writes, in the json.dumps(indent=2) layout)::

    {"name": "<one of the tools>", "arguments": {<an object valid for that tool's parameters>}}

The call schema is the union of every allowed tool's call (``anyOf`` over tools, each branch with
``name`` fixed by ``const`` and ``arguments`` set to the tool's ``parameters``), so the model cannot
name a tool that does not exist or pass arguments that violate its parameters. For
``tool_choice="auto"`` the grammar also allows a plain-text reply (any text that does not start
with ``{`` or whitespace); a reply that starts with ``{`` is a call.

Each tool's ``parameters`` is embedded at ``#/anyOf/<i>/properties/arguments``; its local
``$ref``s are rewritten to point there, and :func:`tool_pointer` maps an error at such a pointer
back to ``tools[<i>].function.parameters`` and the pointer inside it.

Invariant: a :class:`Tool`'s ``parameters`` is a valid JSON Schema describing an object (checked
with ``jsonschema``'s meta-schema when the tool is built).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.errors import ToolError

__all__ = [
    "AUTO_RULES",
    "AUTO_START",
    "TOOL_CHOICES",
    "Tool",
    "ToolCall",
    "call_schema",
    "check_call",
    "choice_note",
    "read_call",
    "tool_pointer",
    "tools_from",
    "tools_prompt",
]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ARGS_PREFIX = re.compile(r"^#/anyOf/(\d+)/properties/(?:arguments|parameters)(/.*)?$")
# The start rule of the tool_choice="auto" grammar: a tool call (the schema's root) or text.
AUTO_START = "corral-reply"
AUTO_RULES = f"\n{AUTO_START} ::= root | corral-text\ncorral-text ::= /(?s)[^{{\\s].*/\n"
TOOL_CHOICES = ("none", "auto", "required")


@dataclass(frozen=True)
class Tool:
    """One function tool: its name, description and parameters schema (an object schema).

    ``model`` is the Pydantic model the tool was given as (calls then carry an instance of it);
    ``function`` the Python function (``ToolCall.invoke`` calls it)."""

    name: str
    description: str
    parameters: dict[str, Any]
    index: int  # position in the list the tools were given in
    model: Any = field(default=None, compare=False)
    function: Callable[..., Any] | None = field(default=None, compare=False)

    def as_json(self) -> dict[str, Any]:
        """The plain-data form (what the compile key hashes)."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(frozen=True)
class ToolCall:
    """A decoded tool call.

    Attributes
    ----------
    name : str
        The tool called (always one of the declared tools).
    arguments : dict
        The arguments as decoded JSON (validated against the tool's parameters).
    value : Any
        The arguments as the tool was declared: a Pydantic instance for a model tool, else the
        dict.
    """

    name: str
    arguments: dict[str, Any]
    value: Any = field(default=None, compare=False)
    tool: Tool | None = field(default=None, compare=False, repr=False)

    def invoke(self) -> Any:
        """Call the Python function the tool was declared as, with the decoded arguments."""
        fn = self.tool.function if self.tool is not None else None
        if fn is None:
            raise TypeError(f"tool {self.name!r} was not given as a Python function")
        return fn(**self.arguments)


def tools_from(raw: Any, param: str = "tools") -> list[Tool]:
    """Check tool definitions and return them. Raises :class:`corral.errors.ToolError` (with
    ``param`` the offending field, e.g. ``tools[1].function.name``) for anything contradictory:
    not a list, a non-function tool, a missing, malformed or duplicate name, parameters that are
    not a valid JSON Schema for an object."""
    if isinstance(raw, (str, bytes, dict)) or not isinstance(raw, Sequence) or not raw:
        raise ToolError(f"{param} must be a non-empty list", param)
    tools: list[Tool] = []
    seen: set[str] = set()
    for i, t in enumerate(raw):
        where = f"{param}[{i}]"
        tool = _one_tool(t, i, where)
        if tool.name in seen:
            raise ToolError(f"{where}: duplicate function name {tool.name!r}", f"{where}.function.name")
        seen.add(tool.name)
        tools.append(tool)
    return tools


def _one_tool(t: Any, i: int, where: str) -> Tool:
    if isinstance(t, Tool):  # already checked
        return dataclasses.replace(t, index=i)
    if isinstance(t, dict):
        if "function" in t or "type" in t:
            if t.get("type", "function") != "function":
                raise ToolError(f'{where}: only {{"type": "function"}} tools are supported', where)
            fn = t.get("function")
            if not isinstance(fn, dict):
                raise ToolError(f"{where}: missing the function object", f"{where}.function")
            base = f"{where}.function"
        else:
            fn, base = t, where
        name = fn.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ToolError(
                f"{where}: the function name must be 1-64 characters of [A-Za-z0-9_-], got {name!r}",
                f"{base}.name",
            )
        desc = fn.get("description") or ""
        if not isinstance(desc, str):
            raise ToolError(f"{where}: description must be a string", base)
        params = fn.get("parameters", {"type": "object", "properties": {}})
        _check_parameters(params, f"{base}.parameters")
        return Tool(name, desc, params, i)
    if isinstance(t, type) and hasattr(t, "model_json_schema"):  # a Pydantic model
        params = t.model_json_schema()
        params.pop("title", None)
        _check_parameters(params, f"{where}.parameters")
        return Tool(_checked_name(t.__name__, where), _doc(t), params, i, model=t)
    if callable(t):
        params = _function_parameters(t, where)
        _check_parameters(params, f"{where}.parameters")
        return Tool(_checked_name(getattr(t, "__name__", ""), where), _doc(t), params, i, function=t)
    raise ToolError(
        f"{where}: a tool is an OpenAI tool object, a Pydantic model or a function, got {type(t).__name__}",
        where,
    )


def _checked_name(name: str, where: str) -> str:
    if not _NAME.match(name):
        raise ToolError(f"{where}: the tool name {name!r} is not 1-64 characters of [A-Za-z0-9_-]", where)
    return name


def _doc(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.strip().split("\n\n")[0].replace("\n", " ")


def _function_parameters(fn: Callable[..., Any], where: str) -> dict[str, Any]:
    """An object schema for a function's keyword arguments, from its type hints (Pydantic)."""
    try:
        from pydantic import create_model
    except ImportError:  # pragma: no cover - pydantic is optional
        raise ToolError(
            f"{where}: tools given as functions need pydantic (pip install pydantic)", where
        ) from None
    try:
        sig = inspect.signature(fn)
        hints = _hints(fn)
    except (TypeError, ValueError, NameError) as e:
        raise ToolError(f"{where}: cannot read the signature of {fn!r}: {e}", where) from None
    fields: dict[str, Any] = {}
    for name, p in sig.parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ToolError(f"{where}: *args/**kwargs cannot be described as tool parameters", where)
        if name not in hints:
            raise ToolError(f"{where}: parameter {name!r} has no type hint", where)
        fields[name] = (hints[name], ... if p.default is p.empty else p.default)
    try:
        model = create_model(f"{getattr(fn, '__name__', 'tool')}_arguments", **fields)
        schema: dict[str, Any] = model.model_json_schema()
    except Exception as e:  # pydantic raises several types for unsupported hints
        raise ToolError(f"{where}: cannot build a JSON Schema from the type hints: {e}", where) from None
    schema.pop("title", None)
    return schema


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    import typing

    return typing.get_type_hints(fn)


def _check_parameters(params: Any, where: str) -> None:
    if not isinstance(params, dict):
        raise ToolError(f"{where} must be a JSON Schema object", where)
    kind = params.get("type", "object")
    if kind != "object" and not (isinstance(kind, list) and kind == ["object"]):
        raise ToolError(f'{where} must describe an object ("type": "object"), got {kind!r}', where)
    import jsonschema

    cls = jsonschema.validators.validator_for(params, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(params)
    except jsonschema.SchemaError as e:
        pointer = "#" + "".join(f"/{p}" for p in e.absolute_path)
        raise ToolError(
            f"{where} is not a valid JSON Schema: {e.message} (at {pointer})", where, pointer
        ) from None


def _rebase_refs(node: Any, base: str) -> Any:
    """A copy of ``node`` whose local ``$ref``s (``#...``) resolve under ``base``."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str) and v.startswith("#"):
                out[k] = base + v[1:]
            else:
                out[k] = _rebase_refs(v, base)
        return out
    if isinstance(node, list):
        return [_rebase_refs(v, base) for v in node]
    return node


def call_schema(tools: Sequence[Tool], args_key: str = "arguments") -> dict[str, Any]:
    """The JSON Schema of one call of any of ``tools`` (branch ``i`` is ``tools[i]``; the
    arguments under ``args_key``: Llama 3 writes ``parameters``)."""
    branches = []
    for i, t in enumerate(tools):
        params = _rebase_refs(copy.deepcopy(t.parameters), f"#/anyOf/{i}/properties/{args_key}")
        branches.append(
            {
                "type": "object",
                "properties": {"name": {"const": t.name}, args_key: params},
                "required": ["name", args_key],
                "additionalProperties": False,
            }
        )
    return {"anyOf": branches}


def tool_pointer(pointer: str, tools: Sequence[Tool], param: str = "tools") -> tuple[str, str] | None:
    """(field, pointer inside the tool's parameters) for a call-schema pointer that lies inside
    one tool's parameters, else None."""
    m = _ARGS_PREFIX.match(pointer or "")
    if not m or int(m.group(1)) >= len(tools):
        return None
    tool = tools[int(m.group(1))]
    return f"{param}[{tool.index}].function.parameters", "#" + (m.group(2) or "")


def read_call(text: str, tools: Sequence[Tool], validators: dict[str, Any]) -> tuple[Any, str | None]:
    """(ToolCall, error) for a decoded call; ``validators`` caches one jsonschema validator per
    tool name (filled on first use)."""
    try:
        obj = json.loads(text)
    except ValueError as e:
        return None, f"tool call is not JSON: {e}"
    name = obj.get("name") if isinstance(obj, dict) else None
    return check_call(name, obj.get("arguments") if isinstance(obj, dict) else None, tools, validators)


def check_call(
    name: Any, args: Any, tools: Sequence[Tool], validators: dict[str, Any]
) -> tuple[Any, str | None]:
    """(ToolCall, error) for a call's name and arguments checked against ``tools``: (None, why)
    for an unknown tool, (call, why) for arguments that violate its parameters."""
    tool = next((t for t in tools if t.name == name), None)
    if tool is None:  # impossible under the grammar; checked so a bug cannot pass silently
        return None, f"unknown tool {name!r}"
    if args is None:
        args = {}
    v = validators.get(tool.name)
    if v is None:
        from corral.schema import _validator

        v = validators[tool.name] = _validator(tool.parameters)
    errors = [e.message for e in v.iter_errors(args)]
    value: Any = args
    if not errors and tool.model is not None:
        try:
            value = tool.model.model_validate(args)
        except Exception as e:  # a Pydantic validator the schema cannot express
            errors = [str(e)]
    call = ToolCall(tool.name, args if isinstance(args, dict) else {}, value, tool)
    return call, ("arguments violate the parameters: " + "; ".join(errors[:3]) if errors else None)


_FORMAT_LINES = {
    "json": 'To call one, reply with only a JSON object {"name": <function name>, "arguments": '
    "<object of arguments>}.",
    "hermes": "To call one, reply with <tool_call>\n"
    '{"name": <function name>, "arguments": <object of arguments>}\n</tool_call>.',
    "llama3": 'To call one, reply with only a JSON object {"name": <function name>, "parameters": '
    "<object of arguments>}.",
    "mistral": 'To call one, reply with [TOOL_CALLS][{"name": <function name>, "arguments": '
    "<object of arguments>}].",
}
_SEVERAL = {
    "json": "To call several, write one object per line.",
    "hermes": "To call several, write one <tool_call> block per call.",
    "llama3": "To call several, separate the objects with '; '.",
    "mistral": "To call several, put every call in the list.",
}


def tools_prompt(
    tools: Sequence[Tool], mode: str, name: str | None = None, fmt: str = "json", parallel: bool = False
) -> str:
    """The system-prompt text that tells the model about the tools and the call format ``fmt``
    (a :data:`corral.grammar.tool_formats.FORMATS` name)."""
    lines = ["You can call functions. " + _FORMAT_LINES.get(fmt, _FORMAT_LINES["json"])]
    if parallel and name is None:
        lines.append(_SEVERAL.get(fmt, _SEVERAL["json"]))
    lines.append(choice_note(mode, name) or "If no function is needed, reply in plain text instead.")
    lines.append("Functions:")
    for t in tools:
        desc = f": {t.description}" if t.description else ""
        lines.append(
            f"- {t.name}{desc} Arguments (JSON Schema): {json.dumps(t.parameters, separators=(',', ':'))}"
        )
    return "\n".join(lines)


def choice_note(mode: str, name: str | None) -> str:
    """What the system prompt says about ``tool_choice`` ("" for ``auto``)."""
    if name is not None:
        return f"Call the function {name}."
    if mode == "required":
        return "You must call one of the functions."
    return ""
