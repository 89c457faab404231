"""Tool calling on the wire: a request's ``tools`` / ``tool_choice`` checked and reported in the
OpenAI error format. What a tool is, the call schema and reading calls back live in
:mod:`corral.grammar.tools` (the library uses them too).
"""

from __future__ import annotations

import json
from typing import Any

from corral.errors import ToolError
from corral.grammar.tools import Tool, tools_from, tools_prompt
from corral.server.errors import APIError, error_from_exception

__all__ = ["Tool", "assistant_calls", "parse_tool_choice", "parse_tools", "tools_prompt"]


def parse_tools(raw: Any) -> list[Tool]:
    """Check a request's ``tools`` and return them. Raises APIError 400 (code
    ``invalid_tools``) for anything contradictory: not a list, a non-function tool, a missing,
    malformed or duplicate name, parameters that are not a valid JSON Schema for an object."""
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise APIError(400, "tools must be a non-empty array of tool objects", "invalid_tools", "tools")
    try:
        return tools_from(raw, "tools")
    except ToolError as e:
        raise error_from_exception(e) from None


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


def assistant_calls(raw: Any, where: str) -> list[tuple[str, str, Any]]:
    """(id, name, arguments) of an assistant message's ``tool_calls`` (the arguments JSON string
    decoded; an object as sent stays as is). Raises APIError 400 naming the bad entry."""
    if not isinstance(raw, list):
        raise APIError(400, f"{where} must be an array", "invalid_request", where)
    out = []
    for k, c in enumerate(raw):
        fn = c.get("function") if isinstance(c, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(name, str) or not isinstance(fn, dict):
            raise APIError(400, f"{where}[{k}].function.name is missing", "invalid_request", f"{where}[{k}]")
        args: Any = fn.get("arguments") or "{}"
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                raise APIError(
                    400, f"{where}[{k}].function.arguments is not JSON", "invalid_request", f"{where}[{k}]"
                ) from None
        cid = c.get("id") if isinstance(c.get("id"), str) else f"call_{k}"
        out.append((cid, name, args))
    return out
