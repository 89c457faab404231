"""Tool calling: the tools' definitions checked, turned into one constraint, and read back.

Call format (what the model writes, in the json.dumps(indent=2) layout)::

    {"name": "<one of the tools>", "arguments": {<an object valid for that tool's parameters>}}

The constraint is the union of every allowed tool's call (``anyOf`` over tools, each branch with
``name`` fixed by ``const`` and ``arguments`` set to the tool's ``parameters`` schema), so the
model cannot name a tool that does not exist or pass arguments that violate its parameters. For
``tool_choice="auto"`` the grammar also allows a plain-text reply (any text that does not start
with ``{`` or whitespace); a reply that starts with ``{`` is a tool call.

Each tool's ``parameters`` is embedded at ``#/anyOf/<i>/properties/arguments``; its local
``$ref``s are rewritten to point there, and errors the schema compiler reports at such a
pointer are mapped back to ``tools[<i>].function.parameters`` and the pointer inside it.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

from corral.errors import SchemaError
from corral.server.errors import APIError

__all__ = ["Tool", "call_schema", "map_schema_error", "parse_tool_choice", "parse_tools", "tools_prompt"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ARGS_PREFIX = re.compile(r"^#/anyOf/(\d+)/properties/arguments(/.*)?$")
# The start rule of the tool_choice="auto" grammar: a tool call (the schema's root) or text.
AUTO_START = "corral-reply"
AUTO_RULES = f"\n{AUTO_START} ::= root | corral-text\ncorral-text ::= /(?s)[^{{\\s].*/\n"


@dataclass(frozen=True)
class Tool:
    """One function tool: its name, description and parameters schema (an object schema)."""

    name: str
    description: str
    parameters: dict[str, Any]
    index: int  # position in the request's ``tools``

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


def parse_tools(raw: Any) -> list[Tool]:
    """Check a request's ``tools`` and return them. Raises APIError 400 (code
    ``invalid_tools``) for anything contradictory: not a list, a non-function tool, a missing,
    malformed or duplicate name, parameters that are not a valid JSON Schema for an object."""
    if not isinstance(raw, list) or not raw:
        raise APIError(400, "tools must be a non-empty array", "invalid_tools", "tools")
    tools: list[Tool] = []
    seen: set[str] = set()
    for i, t in enumerate(raw):
        where = f"tools[{i}]"
        if not isinstance(t, dict) or t.get("type", "function") != "function":
            raise APIError(
                400, f'{where}: only {{"type": "function"}} tools are supported', "invalid_tools", where
            )
        fn = t.get("function")
        if not isinstance(fn, dict):
            raise APIError(400, f"{where}: missing the function object", "invalid_tools", f"{where}.function")
        name = fn.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise APIError(
                400,
                f"{where}: the function name must be 1-64 characters of [A-Za-z0-9_-], got {name!r}",
                "invalid_tools",
                f"{where}.function.name",
            )
        if name in seen:
            raise APIError(
                400, f"{where}: duplicate function name {name!r}", "invalid_tools", f"{where}.function.name"
            )
        seen.add(name)
        desc = fn.get("description") or ""
        if not isinstance(desc, str):
            raise APIError(
                400, f"{where}: description must be a string", "invalid_tools", f"{where}.function"
            )
        params = fn.get("parameters", {"type": "object", "properties": {}})
        _check_parameters(params, f"{where}.function.parameters")
        tools.append(Tool(name, desc, params, i))
    return tools


def _check_parameters(params: Any, where: str) -> None:
    if not isinstance(params, dict):
        raise APIError(400, f"{where} must be a JSON Schema object", "invalid_tools", where)
    kind = params.get("type", "object")
    if kind != "object" and not (isinstance(kind, list) and kind == ["object"]):
        raise APIError(
            400, f'{where} must describe an object ("type": "object"), got {kind!r}', "invalid_tools", where
        )
    import jsonschema

    cls = jsonschema.validators.validator_for(params, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(params)
    except jsonschema.SchemaError as e:
        pointer = "#" + "".join(f"/{p}" for p in e.absolute_path)
        raise APIError(
            400,
            f"{where} is not a valid JSON Schema: {e.message} (at {pointer})",
            "invalid_tools",
            where,
            pointer,
        ) from None


def parse_tool_choice(raw: Any, tools: list[Tool] | None) -> tuple[str, str | None]:
    """(mode, name): mode "none", "auto" or "required", and the one tool's name for a named
    choice (mode "required"). Default: "auto" with tools, "none" without."""
    if raw is None:
        return ("auto" if tools else "none"), None
    if raw in ("none", "auto", "required"):
        if raw != "none" and not tools:
            raise APIError(400, f'tool_choice "{raw}" needs tools', "invalid_tools", "tool_choice")
        return str(raw), None
    if isinstance(raw, dict) and raw.get("type", "function") == "function":
        name = (raw.get("function") or {}).get("name") if isinstance(raw.get("function"), dict) else None
        if not isinstance(name, str):
            raise APIError(400, "tool_choice.function.name is missing", "invalid_tools", "tool_choice")
        if not tools or name not in {t.name for t in tools}:
            raise APIError(
                400,
                f"tool_choice names {name!r}, which is not among the tools",
                "invalid_tools",
                "tool_choice",
            )
        return "required", name
    raise APIError(
        400,
        'tool_choice must be "none", "auto", "required" or a named function',
        "invalid_tools",
        "tool_choice",
    )


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


def call_schema(tools: list[Tool]) -> dict[str, Any]:
    """The JSON Schema of one call of any of ``tools`` (branch ``i`` is ``tools[i]``)."""
    branches = []
    for i, t in enumerate(tools):
        params = _rebase_refs(copy.deepcopy(t.parameters), f"#/anyOf/{i}/properties/arguments")
        branches.append(
            {
                "type": "object",
                "properties": {"name": {"const": t.name}, "arguments": params},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    return {"anyOf": branches}


def map_schema_error(e: SchemaError, tools: list[Tool]) -> APIError:
    """A compile error of the call schema, reported against the tool it came from."""
    kind = "unsupported_schema" if type(e).__name__ == "UnsupportedSchemaError" else "invalid_tools"
    m = _ARGS_PREFIX.match(e.pointer or "")
    if m and int(m.group(1)) < len(tools):
        tool = tools[int(m.group(1))]
        pointer = "#" + (m.group(2) or "")
        where = f"tools[{tool.index}].function.parameters"
        return APIError(400, f"{where}: {e.message} (at {pointer})", kind, where, pointer)
    return APIError(400, f"tools: {e}", kind, "tools", e.pointer)


def tools_prompt(tools: list[Tool], mode: str, name: str | None) -> str:
    """The system-prompt text that tells the model about the tools and the call format."""
    lines = [
        "You can call functions. To call one, reply with only a JSON object "
        '{"name": <function name>, "arguments": <object of arguments>}.',
    ]
    if name is not None:
        lines.append(f"Call the function {name}.")
    elif mode == "required":
        lines.append("You must call one of the functions.")
    else:
        lines.append("If no function is needed, reply in plain text instead.")
    lines.append("Functions:")
    for t in tools:
        desc = f": {t.description}" if t.description else ""
        lines.append(
            f"- {t.name}{desc} Arguments (JSON Schema): {json.dumps(t.parameters, separators=(',', ':'))}"
        )
    return "\n".join(lines)
