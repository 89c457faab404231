"""Constraint sources for the registry (:mod:`corral.server.registry`): names and versions, the
bodies the admin API takes, and the files of a schema dir.

File layout of a schema dir (other files, and names starting with ``.``, are ignored)::

    invoice@3.json    version 3 of "invoice": a JSON Schema, or an OpenAI
                      {"name", "schema", "strict"} object (its "name" must match the file's)
    route@2.regex     a regular expression: the file's text, one trailing newline dropped
    sql@1.gbnf        a grammar, GBNF with /regex/ terminals
    sql@2.lark        a grammar in Lark syntax
    sql@3.corral      a signed compiled artifact (``corral compile --sign``; needs trusted keys)
    invoice.json      no "@": version 1 (the layout from before versions; an OpenAI object's
                      "name" names it, as it always did)

Names are 1-128 characters from ``A-Z a-z 0-9 _ - .``, starting with a letter or digit; versions
are decimal integers from 1 without leading zeros.

Invariant: :meth:`Source.file` writes what :func:`scan_dir` reads back to an equal source, so a
persisted version has the same content (and cache key) after a restart.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corral.compile import ConstraintSpec
from corral.errors import CorralError
from corral.grammar import bounded_json
from corral.server.errors import APIError

__all__ = [
    "EXTENSIONS",
    "Source",
    "check_name",
    "check_version",
    "parse_ref",
    "scan_dir",
    "source_from_body",
]

#: File extension -> (constraint kind, grammar syntax).
EXTENSIONS: dict[str, tuple[str, str]] = {
    ".json": ("json_schema", ""),
    ".regex": ("regex", ""),
    ".gbnf": ("grammar", "gbnf"),
    ".lark": ("grammar", "lark"),
    ".corral": ("artifact", ""),
}

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")
_VERSION = re.compile(r"[1-9][0-9]{0,8}")
_NOT_A_SCHEMA = "schema must be a JSON Schema (an object or a boolean)"
_DEPTH = 900  # deepest JSON read from a file or a PUT body, as for request bodies


def _bad(message: str, param: str | None = None, code: str = "invalid_constraint") -> APIError:
    return APIError(400, message, code, param)


def check_name(name: Any, param: str = "name") -> str:
    """``name`` if it is a valid constraint name (400 otherwise)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise _bad(
            f"{name!r} is not a valid constraint name: 1-128 characters from A-Z a-z 0-9 _ - ., "
            "starting with a letter or digit",
            param,
            "invalid_name",
        )
    return name


def check_version(version: Any, param: str = "version") -> int:
    """A version given as text or int, as an int from 1 (400 otherwise)."""
    text = str(version) if isinstance(version, int) and not isinstance(version, bool) else version
    if not isinstance(text, str) or not _VERSION.fullmatch(text):
        raise _bad(
            f"{version!r} is not a valid version: a decimal integer from 1, without leading zeros",
            param,
            "invalid_version",
        )
    return int(text)


def parse_ref(ref: Any, param: str = "name") -> tuple[str, int | None]:
    """``"invoice@3"`` -> ``("invoice", 3)``; ``"invoice"`` -> ``("invoice", None)`` (latest)."""
    if not isinstance(ref, str):
        raise _bad(
            f"{param} must be a constraint name such as 'invoice' or 'invoice@3'", param, "invalid_name"
        )
    name, at, version = ref.partition("@")
    try:
        return check_name(name, param), (check_version(version, param) if at else None)
    except APIError as e:
        raise _bad(f"{ref!r}: {e.message}" if at else e.message, param, e.code) from None


@dataclass(frozen=True)
class Source:
    """A constraint as written: what a file or a PUT body holds.

    Attributes
    ----------
    kind : str
        ``"json_schema"``, ``"regex"``, ``"grammar"`` or ``"artifact"`` (a ``.corral`` file).
    value : Any
        The schema (dict/bool), the pattern, the grammar text or the artifact's bytes.
    strict : bool
        OpenAI's ``strict`` for a schema.
    syntax : str
        A grammar's syntax: ``"gbnf"``, ``"lark"`` or ``""`` (told apart from the text).
    loaded : Constraint or None
        An artifact's compiled constraint, once loaded and verified (not part of the content:
        the bytes are).
    """

    kind: str
    value: Any
    strict: bool = False
    syntax: str = ""
    loaded: Any = field(default=None, compare=False, repr=False)

    def spec(self, param: str) -> ConstraintSpec:
        """The constraint (raises corral's errors / ValueError / TypeError for a bad value)."""
        if self.kind == "json_schema":
            if not isinstance(self.value, (dict, bool)):
                raise _bad(
                    "schema must be a JSON Schema (an object or a boolean)", "schema", "invalid_schema"
                )
            return ConstraintSpec.json_schema(self.value, {"strict": self.strict}, param=param)
        if self.kind == "regex":
            return ConstraintSpec.regex(self.value, param=param)
        if self.kind == "artifact":
            if self.loaded is None:  # pragma: no cover - the registry loads before it asks
                raise ValueError("the artifact has not been loaded")
            spec: ConstraintSpec = dataclasses.replace(self.loaded.spec, param=param)
            return spec
        return ConstraintSpec.grammar(self.value, param=param, syntax=self.syntax or "auto")

    def as_json(self) -> dict[str, Any]:
        """The PUT body that gives this source back (an artifact: its size and SHA-256)."""
        if self.kind == "json_schema":
            return {"schema": self.value, "strict": self.strict}
        if self.kind == "regex":
            return {"regex": self.value}
        if self.kind == "artifact":
            return {"artifact": {"bytes": len(self.value), "sha256": hashlib.sha256(self.value).hexdigest()}}
        return {"grammar": self.value, **({"syntax": self.syntax} if self.syntax else {})}

    def file(self, name: str, version: int) -> tuple[str, bytes]:
        """(file name, bytes) for a schema dir; :func:`scan_dir` reads it back to this source."""
        ref = f"{name}@{version}"
        if self.kind == "json_schema":
            doc = {"name": name, "schema": self.value, "strict": self.strict}
            return ref + ".json", (json.dumps(doc, ensure_ascii=False, indent=2) + "\n").encode()
        if self.kind == "regex":
            return ref + ".regex", (self.value + "\n").encode()  # the newline is dropped on reading
        if self.kind == "artifact":
            return ref + ".corral", bytes(self.value)
        from corral.grammar.lark import grammar_syntax

        syntax = self.syntax or grammar_syntax(self.value)
        return f"{ref}.{'lark' if syntax == 'lark' else 'gbnf'}", self.value.encode()


def source_from_body(body: Any) -> Source:
    """The :class:`Source` of an admin PUT body: one of ``{"schema": ..., "strict": bool}``,
    ``{"regex": "..."}`` or ``{"grammar": "...", "syntax": "gbnf"|"lark"}`` (400 otherwise)."""
    if not isinstance(body, dict):
        raise _bad('the body must be a JSON object such as {"schema": {...}}', None, "invalid_body")
    given = [k for k in ("schema", "regex", "grammar") if k in body]
    if len(given) != 1:
        raise _bad(
            'the body needs exactly one of "schema", "regex" or "grammar"'
            + (f", not {' and '.join(given)}" if given else ""),
            given[1] if len(given) > 1 else None,
            "invalid_body",
        )
    allowed = {"schema": {"schema", "strict", "name"}, "regex": {"regex"}, "grammar": {"grammar", "syntax"}}
    unknown = sorted(set(body) - allowed[given[0]])
    if unknown:
        raise _bad(f"unknown field(s) {unknown} in a {given[0]} body", unknown[0], "invalid_body")
    if given[0] == "schema":
        strict = body.get("strict", False)
        if not isinstance(strict, bool):
            raise _bad("strict must be a boolean", "strict", "invalid_body")
        if not isinstance(body["schema"], (dict, bool)):
            raise _bad(_NOT_A_SCHEMA, "schema", "invalid_schema")
        return Source("json_schema", body["schema"], strict)
    value = body[given[0]]
    if not isinstance(value, str) or not value:
        raise _bad(f"{given[0]} must be a non-empty string", given[0], "invalid_body")
    syntax = body.get("syntax", "")
    if syntax not in ("", "auto", "gbnf", "lark"):
        raise _bad(f"syntax must be 'gbnf', 'lark' or 'auto', got {syntax!r}", "syntax", "invalid_body")
    return Source(given[0], value, syntax="" if syntax == "auto" else syntax)


# ---------------------------------------------------------------------- the schema dir


def _read(f: Path, kind: str, syntax: str) -> tuple[str | None, Source]:
    """(the name an OpenAI object inside gives, or None; the source) of one file."""
    try:
        if kind == "artifact":  # loaded and verified by the registry, which holds the keys
            return None, Source("artifact", f.read_bytes())
        text = f.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CorralError(f"--schema-dir: cannot read {f}: {e}") from None
    if kind == "regex":
        return None, Source("regex", text[:-1] if text.endswith("\n") else text)
    if kind == "grammar":
        return None, Source("grammar", text, syntax=syntax)
    try:
        doc = bounded_json.loads(text, _DEPTH, "max_body_depth", str(f))
    except (ValueError, CorralError) as e:
        raise CorralError(f"--schema-dir: {f} is not JSON: {e}") from None
    if isinstance(doc, dict) and isinstance(doc.get("schema"), (dict, bool)) and "name" in doc:
        return str(doc["name"]), Source("json_schema", doc["schema"], bool(doc.get("strict", False)))
    return None, Source("json_schema", doc)


def scan_dir(path: Path) -> list[tuple[str, int, Source, Path]]:
    """``(name, version, source, file)`` for every constraint file of a schema dir (layout in the
    module docstring), sorted by name and version. Raises :class:`~corral.errors.CorralError`
    naming the file for a missing directory, unreadable or non-JSON files, bad names or versions,
    and two files for one version — before any model is loaded."""
    if not path.is_dir():
        raise CorralError(f"--schema-dir: not a directory: {path}")
    seen: dict[tuple[str, int], Path] = {}
    out: list[tuple[str, int, Source, Path]] = []
    for f in sorted(path.iterdir()):
        kind_syntax = EXTENSIONS.get(f.suffix)
        if kind_syntax is None or f.name.startswith(".") or not f.is_file():
            continue
        stem, at, version_text = f.stem.partition("@")
        named, source = _read(f, *kind_syntax)
        try:
            if at:
                name, version = check_name(stem), check_version(version_text)
                if named is not None and named != name:
                    raise _bad(f"its object is named {named!r}, but the file name says {name!r}")
            else:
                name, version = check_name(named if named is not None else stem), 1
        except APIError as e:
            raise CorralError(f"--schema-dir: {f.name}: {e.message}") from None
        if (name, version) in seen:
            raise CorralError(
                f"--schema-dir: {f.name} and {seen[name, version].name} are both {name}@{version}"
            )
        seen[name, version] = f
        out.append((name, version, source, f))
    return sorted(out, key=lambda t: (t[0], t[1]))
