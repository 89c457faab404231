"""W202: oneOf branches that overlap, shown by a value that matches two of them.

Invariants: a finding is always backed by evidence — a concrete value (the shortest value
corral's own matcher completes for one branch) that ``jsonschema`` accepts under both branches —
so there are no false positives; the work is bounded (at most ``max_compiles`` branch compiles
per schema, each on a 256-token byte vocabulary) and any branch that cannot be compiled or
validated on its own (a ``$ref`` into the rest of the document, a remote ``$ref``) is skipped.
"""

from __future__ import annotations

import json
from typing import Any

from corral.errors import CorralError
from corral.linter.schema_checks import Finding, _nodes
from corral.tokenizer import Tokenizer

__all__ = ["oneof_overlaps"]


def _standalone(branch: dict[str, Any], root: Any) -> dict[str, Any]:
    out = dict(branch)
    if isinstance(root, dict):
        for k in ("$defs", "definitions"):
            if k in root and k not in out:
                out[k] = root[k]
    return out


def _sample(schema: dict[str, Any], tok: Tokenizer) -> Any:
    from corral.schema import compile_json_schema

    try:
        g = compile_json_schema(schema, tok, whitespace="compact", max_convert_ms=500)
        text = g.matcher().shortest_completion(4096)
        return json.loads(text)
    except (CorralError, ValueError):
        return _NO_SAMPLE


_NO_SAMPLE = object()


def _valid(schema: dict[str, Any], value: Any) -> bool | None:
    import jsonschema

    try:
        return bool(jsonschema.Draft202012Validator(schema).is_valid(value))
    except Exception:  # noqa: BLE001 — evidence only: a branch we cannot validate is skipped
        return None


def oneof_overlaps(
    root: Any, tok: Tokenizer, max_compiles: int = 64, max_branches: int = 16
) -> list[Finding]:
    """A W202 finding for each oneOf with two branches that one value satisfies."""
    out: list[Finding] = []
    budget = max_compiles
    for node, ptr in _nodes(root):
        if budget <= 0:
            break
        branches = node.get("oneOf") if isinstance(node, dict) else None
        if not isinstance(branches, list) or not 2 <= len(branches) <= max_branches:
            continue
        schemas = [_standalone(b, root) if isinstance(b, dict) else None for b in branches]
        found = False
        for i, si in enumerate(schemas):
            if si is None or budget <= 0 or found:
                break
            budget -= 1
            value = _sample(si, tok)
            if value is _NO_SAMPLE or _valid(si, value) is not True:
                continue
            for j, sj in enumerate(schemas):
                if j != i and sj is not None and _valid(sj, value) is True:
                    shown = json.dumps(value, ensure_ascii=False)
                    shown = shown if len(shown) <= 60 else shown[:57] + "..."
                    out.append(
                        Finding(
                            "W202",
                            f"oneOf branches {i} and {j} both accept {shown}: "
                            "oneOf rejects a value that matches two branches",
                            f"{ptr}/oneOf",
                        )
                    )
                    found = True
                    break
    return out
