"""``$ref`` resolution inside one schema document.

In:  a ``$ref`` string (``#``, ``#/json/pointer`` with ``~0``/``~1`` and percent escapes, or
     ``#name`` for an ``$anchor``) and the pointer where it was found.
Out: the target subschema and its canonical pointer (``"#" + fragment``), the key under which
     ``value_rule`` memoises it, so every path that reaches one target shares one rule and
     ``$ref`` cycles become grammar recursion.

Invariants: only same-document references are followed; a remote or relative ``$ref`` is an
``UnsupportedSchemaError``, a dangling one a ``SchemaError`` naming the pointer. ``deref``
follows chains of bare ``$ref``s (at most 32 hops) and stops at a ``$ref`` with sibling
keywords, which the caller must merge.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from corral.errors import SchemaError, UnsupportedSchemaError
from corral.grammar.json_schema.core import ConverterCore
from corral.grammar.json_schema.keywords import _ANNOTATIONS


class RefsMixin(ConverterCore):
    def resolve_ref(self, ref: str, pointer: str) -> tuple[Any, str]:
        if not isinstance(ref, str):
            raise SchemaError("$ref must be a string", pointer)
        if not ref.startswith("#"):
            raise UnsupportedSchemaError(
                f"remote or relative $ref {ref!r} is not supported (only '#...')", pointer
            )
        target: Any = self.root
        frag = unquote(ref[1:])
        if frag and not frag.startswith("/"):
            # A plain-name fragment: an $anchor.
            found = self._find_anchor(self.root, frag)
            if found is None:
                raise SchemaError(f"$ref {ref!r}: no $anchor named {frag!r}", pointer)
            return found, "#" + frag
        for part in [p for p in frag.split("/")[1:]] if frag else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                raise SchemaError(f"$ref {ref!r} points to nothing", pointer)
        return target, "#" + frag

    def _find_anchor(self, node: Any, name: str) -> Any:
        if isinstance(node, dict):
            if node.get("$anchor") == name or node.get("$id") == "#" + name or node.get("id") == "#" + name:
                return node
            for v in node.values():
                r = self._find_anchor(v, name)
                if r is not None:
                    return r
        elif isinstance(node, list):
            for v in node:
                r = self._find_anchor(v, name)
                if r is not None:
                    return r
        return None

    def deref(self, schema: Any, pointer: str) -> Any:
        seen = 0
        while isinstance(schema, dict) and "$ref" in schema and seen < 32:
            extra = {k for k in schema if k not in _ANNOTATIONS and k != "$ref"}
            if extra:
                return schema
            schema, pointer = self.resolve_ref(schema["$ref"], pointer)
            seen += 1
        return schema
