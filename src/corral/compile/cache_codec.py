"""How the compile cache's directory stores a compiled constraint: the codecs behind
:class:`~corral.compile.disk_cache.EntryCodec`.

* :class:`ArtifactCodec` — the ``.corral`` artifact container (:mod:`corral.compile.artifact`:
  the spec, its options and the engine bytes, content-hashed); the default when it is present.
* :class:`EngineCodec` — a minimal stand-in over ``CompiledGrammar.to_bytes()`` plus the spec
  as JSON, for regex, grammar and choices constraints only (everything else is not stored and
  stays memory-only). Kept isolated here so it can be dropped once the artifact container is
  the only format.

A codec's ``name`` is part of every entry's file name, so entries of one codec are never read by
another.
"""

from __future__ import annotations

import json
import struct
from typing import Any

__all__ = ["ArtifactCodec", "EngineCodec", "default_codec"]

_JSON_LEN = struct.Struct("<I")
# Largest spec header the stand-in codec reads (the payload is a regex / grammar / choice list).
_MAX_SPEC_BYTES = 64 * 1024 * 1024


class ArtifactCodec:
    """Entries as ``.corral`` artifacts (:func:`corral.compile.artifact.dumps` / ``loads``)."""

    def __init__(self) -> None:
        from corral.compile import artifact

        self._artifact = artifact
        self.name = f"corral-artifact/{getattr(artifact, 'FORMAT_VERSION', 1)}"

    def dumps(self, value: Any) -> bytes:
        return bytes(self._artifact.dumps(value))

    def loads(self, data: bytes, tokenizer: Any) -> Any:
        return self._artifact.loads(data, tokenizer)


class EngineCodec:
    """Regex, grammar and choices constraints as (spec JSON, engine bytes); other kinds raise
    ``TypeError`` from :meth:`dumps` (not stored)."""

    name = "corral-engine-spec/1"
    _KINDS = ("regex", "grammar", "choices")

    def dumps(self, value: Any) -> bytes:
        from corral.compile.constraint import Constraint
        from corral.schema import JsonSchemaGrammar

        if not isinstance(value, Constraint) or isinstance(value.grammar, JsonSchemaGrammar):
            raise TypeError("only regex, grammar and choices constraints are stored")
        spec = value.spec
        if spec.kind not in self._KINDS or spec.thinking is not None or value.answer or value.readers:
            raise TypeError(f"a {spec.kind} constraint is not stored by {self.name}")
        payload = list(spec.payload) if spec.kind == "choices" else spec.payload
        head = {
            "kind": spec.kind,
            "payload": payload,
            "options": dict(spec.options),
            "limits": dict(spec.limits),
            "param": spec.param,
            "source_len": value.source_len,
        }
        text = json.dumps(head, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
        return _JSON_LEN.pack(len(text)) + text + value.grammar.to_bytes()

    def loads(self, data: bytes, tokenizer: Any) -> Any:
        from corral.compile.constraint import Constraint
        from corral.compile.spec import ConstraintSpec
        from corral.engine import DEFAULT_LIMITS, CompiledGrammar

        if len(data) < _JSON_LEN.size:
            raise ValueError("entry too short")
        (n,) = _JSON_LEN.unpack_from(data)
        if n > _MAX_SPEC_BYTES or _JSON_LEN.size + n > len(data):
            raise ValueError("bad spec length")
        head = json.loads(data[_JSON_LEN.size : _JSON_LEN.size + n].decode("utf-8", "surrogatepass"))
        if not isinstance(head, dict) or head.get("kind") not in self._KINDS:
            raise ValueError("bad spec")
        payload = head["payload"]
        if head["kind"] == "choices":
            if not isinstance(payload, list) or not all(isinstance(c, str) for c in payload):
                raise ValueError("bad choices")
            payload = tuple(payload)
        elif not isinstance(payload, str):
            raise ValueError("bad payload")
        spec = ConstraintSpec(
            head["kind"],
            payload,
            options=dict(head.get("options") or {}),
            limits={str(k): int(v) for k, v in dict(head.get("limits") or {}).items()},
            param=str(head.get("param", "")),
        )
        # The spec's limits, not the bytes' own: the loader checks the automata against them.
        limits = {**DEFAULT_LIMITS, **spec.limits}
        grammar = CompiledGrammar.from_bytes(data[_JSON_LEN.size + n :], tokenizer, **limits)
        return Constraint(spec, grammar, int(head.get("source_len", 0)))


def default_codec() -> Any:
    """The artifact container when :mod:`corral.compile.artifact` is present, else the stand-in."""
    try:
        return ArtifactCodec()
    except ImportError:
        return EngineCodec()
