"""The server's constraint registry: named, versioned JSON Schemas, regexes and grammars that a
request names instead of sending (``invoice@3``; ``invoice`` is its latest live version).

In:  the files of ``--schema-dir`` at start-up, and versions PUT through the admin API
     (:mod:`corral.server.admin`).
Out: :class:`~corral.compile.ConstraintSpec` objects by reference, already compiled into the
     server's compile cache (a request by name is a cache hit).

File layout of a schema dir (other files, and names starting with ``.``, are ignored)::

    invoice@3.json    version 3 of "invoice": a JSON Schema, or an OpenAI
                      {"name", "schema", "strict"} object (its "name" must match the file's)
    route@2.regex     a regular expression: the file's text, one trailing newline dropped
    sql@1.gbnf        a grammar, GBNF with /regex/ terminals
    sql@2.lark        a grammar in Lark syntax
    invoice.json      no "@": version 1 (the layout from before versions; an OpenAI object's
                      "name" names it, as it always did)

Names are 1-128 characters from ``A-Z a-z 0-9 _ - .``, starting with a letter or digit; versions
are decimal integers from 1 without leading zeros; "latest" is the highest live version.

Invariants:
* A version is immutable: putting ``invoice@3`` again with the same content changes nothing; with
  other content it is refused (409), so a client pinned to ``invoice@3`` always gets one grammar.
* A version goes live only after it compiled (on the compile cache's background threads, so the
  decode loop keeps running) and, when persisting, after its file is written; a failure leaves the
  registry as it was.
* The live table is replaced whole under a lock (copy on write) and read without one: a request
  resolves its name against the table before a PUT/DELETE or the one after, never a mix.
* A DELETE only removes the version from the table: requests that already resolved it hold its
  spec (and then its compiled constraint), so they finish unchanged.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corral.compile import ConstraintSpec
from corral.errors import CorralError
from corral.grammar import bounded_json
from corral.server.errors import APIError, error_from_exception
from corral.server.logs import log_event

__all__ = [
    "EXTENSIONS",
    "MAX_VERSIONS",
    "ConstraintRegistry",
    "Source",
    "Version",
    "named_constraint",
    "parse_ref",
    "scan_dir",
    "served_version",
    "source_from_body",
]

#: File extension -> (constraint kind, grammar syntax).
EXTENSIONS: dict[str, tuple[str, str]] = {
    ".json": ("json_schema", ""),
    ".regex": ("regex", ""),
    ".gbnf": ("grammar", "gbnf"),
    ".lark": ("grammar", "lark"),
}

#: Most versions the registry holds (all names together); a PUT beyond it is refused (409).
MAX_VERSIONS = 4096

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")
_VERSION = re.compile(r"[1-9][0-9]{0,8}")
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
        ``"json_schema"``, ``"regex"`` or ``"grammar"``.
    value : Any
        The schema (dict/bool), the pattern or the grammar text.
    strict : bool
        OpenAI's ``strict`` for a schema.
    syntax : str
        A grammar's syntax: ``"gbnf"``, ``"lark"`` or ``""`` (told apart from the text).
    """

    kind: str
    value: Any
    strict: bool = False
    syntax: str = ""

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
        return ConstraintSpec.grammar(self.value, param=param, syntax=self.syntax or "auto")

    def as_json(self) -> dict[str, Any]:
        """The PUT body that gives this source back."""
        if self.kind == "json_schema":
            return {"schema": self.value, "strict": self.strict}
        if self.kind == "regex":
            return {"regex": self.value}
        return {"grammar": self.value, **({"syntax": self.syntax} if self.syntax else {})}

    def file(self, name: str, version: int) -> tuple[str, str]:
        """(file name, text) for a schema dir; :func:`scan_dir` reads it back to this source."""
        ref = f"{name}@{version}"
        if self.kind == "json_schema":
            doc = {"name": name, "schema": self.value, "strict": self.strict}
            return ref + ".json", json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
        if self.kind == "regex":
            return ref + ".regex", self.value + "\n"  # the newline is dropped again on reading
        from corral.grammar.lark import grammar_syntax

        syntax = self.syntax or grammar_syntax(self.value)
        return f"{ref}.{'lark' if syntax == 'lark' else 'gbnf'}", self.value


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
            raise _bad("schema must be a JSON Schema (an object or a boolean)", "schema", "invalid_schema")
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


# ---------------------------------------------------------------------- the registry


@dataclass(frozen=True)
class Version:
    """One live version: its source, its (configured) spec and where it came from."""

    name: str
    version: int
    source: Source
    spec: ConstraintSpec
    key: str  # the compile cache key (content + options + limits + tokenizer): equal iff same grammar
    created: float
    origin: str  # "schema-dir" or "admin"
    path: Path | None  # its file in the schema dir, if it has one

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    def as_json(self, latest: bool, source: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "object": "corral.constraint",
            "id": self.ref,
            "name": self.name,
            "version": self.version,
            "kind": self.source.kind,
            "latest": latest,
            "sha256": self.key,
            "created": int(self.created),
            "origin": self.origin,
            "persisted": self.path is not None,
        }
        if source:
            out["source"] = self.source.as_json()
        return out


Table = dict[str, dict[int, Version]]


class ConstraintRegistry(Mapping[str, ConstraintSpec]):
    """Named, versioned constraints: a read-only mapping ``"name@version"`` (or ``"name"``, the
    latest) -> configured spec for the request path, and :meth:`put` / :meth:`delete` for the
    admin API.

    Parameters
    ----------
    configure : callable
        spec -> the spec with the operator's limits and schema options.
    compile : callable
        configured spec -> future of its compiled constraint (the server's compile cache).
    tokenizer_hash : str
        The served vocabulary (part of each version's key).
    persist_dir : Path or None
        Write PUT versions into this schema dir (temp file + rename) and remove deleted ones.
    """

    def __init__(
        self,
        configure: Callable[[ConstraintSpec], ConstraintSpec],
        compile: Callable[[ConstraintSpec], Future[Any]],
        tokenizer_hash: str,
        persist_dir: Path | None = None,
    ) -> None:
        self._configure = configure
        self._compile = compile
        self._tokenizer_hash = tokenizer_hash
        self.persist_dir = persist_dir
        self._lock = threading.Lock()
        self._table: Table = {}  # replaced whole, never mutated (see the module's invariants)
        self._pending: dict[tuple[str, int], tuple[str, Future[Any]]] = {}

    # ------------------------------------------------------------ reading (request path)

    def lookup(self, ref: Any, param: str = "name") -> Version | None:
        """The live version a reference names (None: not registered; raises APIError naming
        ``param`` for a malformed reference)."""
        name, version = parse_ref(ref, param)
        versions = self._table.get(name)
        if not versions:
            return None
        return versions.get(version if version is not None else max(versions))

    def __getitem__(self, ref: str) -> ConstraintSpec:
        try:
            found = self.lookup(ref)
        except APIError:
            found = None
        if found is None:
            raise KeyError(ref)
        return found.spec

    def __iter__(self) -> Iterator[str]:
        table = self._table
        return iter([v.ref for versions in table.values() for v in versions.values()])

    def __len__(self) -> int:
        return sum(len(v) for v in self._table.values())

    def versions(self, name: str) -> dict[int, Version]:
        """The live versions of one name (empty if none)."""
        return dict(self._table.get(name, {}))

    def latest(self, name: str) -> int | None:
        """The latest live version number of ``name`` (None if it has none)."""
        versions = self._table.get(name)
        return max(versions) if versions else None

    def missing(self, ref: str) -> str:
        """Why ``ref`` resolves to nothing, for an error message."""
        name, version = parse_ref(ref)
        live = sorted(self._table.get(name, {}))
        if not live:
            return f"{name!r} is not a registered constraint"
        return f"{name} has no version {version} (live versions: {', '.join(map(str, live))})"

    def listing(self) -> list[dict[str, Any]]:
        table = self._table
        return [
            v.as_json(latest=n == max(versions))
            for name in sorted(table)
            for versions in [table[name]]
            for n, v in sorted(versions.items())
        ]

    # ------------------------------------------------------------ writing

    def _prepare(self, name: str, version: int, source: Source) -> tuple[ConstraintSpec, str]:
        try:
            spec = self._configure(source.spec(f"registry:{name}@{version}"))
        except (CorralError, ValueError, TypeError) as e:
            raise error_from_exception(e, source.kind if source.kind != "json_schema" else "schema") from None
        return spec, spec.key(self._tokenizer_hash)

    def _swap(self, add: list[Version], remove: tuple[str, int] | None = None) -> None:
        """Publish a copy of the table with ``add`` in and ``remove`` out (lock held by the
        caller): readers hold the old table or the new one, never a table being changed."""
        table = {n: dict(vs) for n, vs in self._table.items()}
        for v in add:
            table.setdefault(v.name, {})[v.version] = v
        if remove is not None:
            table.get(remove[0], {}).pop(remove[1], None)
        self._table = {n: vs for n, vs in table.items() if vs}

    def _claim(
        self, name: str, version: int, key: str, spec: ConstraintSpec
    ) -> tuple[Version | None, Future[Any]]:
        """Under the lock: the live version if identical, else a compile future (shared with a PUT
        of the same content already compiling); 409 for other content or a full registry."""
        with self._lock:
            live = self._table.get(name, {}).get(version)
            pending = self._pending.get((name, version))
            other = live.key if live is not None else pending[0] if pending is not None else None
            if other is not None and other != key:
                raise APIError(
                    409,
                    f"{name}@{version} already exists with other content (sha256 {other[:12]}...); "
                    "versions are immutable: PUT a new version",
                    "version_conflict",
                    "version",
                )
            if live is not None:
                return live, Future()
            if pending is not None:
                return None, pending[1]
            if len(self) + len(self._pending) >= MAX_VERSIONS:
                raise APIError(
                    409, f"the registry holds {MAX_VERSIONS} versions: delete some first", "registry_full"
                )
            fut = self._compile(spec)
            self._pending[name, version] = (key, fut)
            return None, fut

    async def put(
        self, name: str, version: Any, source: Source, origin: str = "admin"
    ) -> tuple[Version, bool]:
        """Compile, validate and publish ``name@version`` (awaiting its background compile).
        Returns (the live version, whether it is new). Raises APIError: 400 for a bad name,
        version or constraint (naming the keyword), 409 for a conflicting version."""
        name, number = check_name(name), check_version(version)
        spec, key = self._prepare(name, number, source)
        t0 = time.perf_counter()
        live, fut = self._claim(name, number, key, spec)
        if live is not None:
            return live, False
        try:
            # shielded: a PUT that times out must not cancel a compile other requests share
            await asyncio.shield(asyncio.wrap_future(fut))
            path = await asyncio.to_thread(self._persist, name, number, source)
        except BaseException as e:
            with self._lock:
                if self._pending.get((name, number), (None, None))[1] is fut:
                    del self._pending[name, number]
            if isinstance(e, asyncio.CancelledError):
                raise
            raise error_from_exception(e, "schema" if source.kind == "json_schema" else source.kind) from None
        new = Version(name, number, source, spec, key, time.time(), origin, path)
        with self._lock:
            self._pending.pop((name, number), None)
            live = self._table.get(name, {}).get(number)
            if live is not None:  # a PUT of the same content finished first
                return live, False
            self._swap([new])
        log_event(
            "constraint_added",
            constraint=new.ref,
            kind=source.kind,
            origin=origin,
            sha256=key,
            seconds=round(time.perf_counter() - t0, 4),
        )
        return new, True

    def delete(self, name: str, version: Any) -> Version:
        """Take ``name@version`` out of service (404 if it is not live); requests already holding
        it finish with it. With persistence its file is removed too."""
        name, number = check_name(name), check_version(version)
        with self._lock:
            gone = self._table.get(name, {}).get(number)
            if gone is None:
                raise APIError(404, self.missing(f"{name}@{number}"), "constraint_not_found", "version")
            self._swap([], (name, number))
        if self.persist_dir is not None and gone.path is not None:
            gone.path.unlink(missing_ok=True)
        log_event("constraint_deleted", constraint=gone.ref)
        return gone

    def _persist(self, name: str, version: int, source: Source) -> Path | None:
        """Write the version's file atomically (temp file in the same dir, fsync, rename): a
        reader or a restart sees the old directory or the new file whole, never part of it."""
        if self.persist_dir is None:
            return None
        fname, text = source.file(name, version)
        fd, tmp = tempfile.mkstemp(prefix=f".{fname}.", suffix=".tmp", dir=self.persist_dir)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.persist_dir / fname)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return self.persist_dir / fname

    def load_dir(self, path: Path) -> None:
        """Compile and publish every constraint of a schema dir (start-up: synchronous; a
        failure is a :class:`~corral.errors.CorralError` naming the file)."""
        loaded: list[Version] = []
        for name, version, source, f in scan_dir(path):
            t0 = time.perf_counter()
            try:
                spec, key = self._prepare(name, version, source)
                self._compile(spec).result()
            except Exception as e:
                err = error_from_exception(e)
                at = f" (at {err.pointer})" if err.pointer and err.pointer not in err.message else ""
                raise CorralError(f"--schema-dir: {f.name}: {err.message}{at}") from None
            loaded.append(Version(name, version, source, spec, key, f.stat().st_mtime, "schema-dir", f))
            log_event("precompiled", schema=f"{name}@{version}", seconds=round(time.perf_counter() - t0, 4))
        with self._lock:
            self._swap(loaded)


def named_constraint(
    registry: Mapping[str, Any], ref: Any, param: str, kinds: tuple[str, ...] = ()
) -> ConstraintSpec:
    """The spec a request names (``"invoice"`` or ``"invoice@3"``), for the request path: 400
    naming ``param`` for a malformed or unknown reference, or one of another kind than ``kinds``.
    ``registry`` is a :class:`ConstraintRegistry` or a plain ``{name: spec}`` mapping."""
    if isinstance(registry, ConstraintRegistry):
        found = registry.lookup(ref, param)
        if found is None:
            raise _bad(registry.missing(ref), param, "unknown_constraint")
        spec = found.spec
    else:
        if not isinstance(ref, str) or ref not in registry:
            raise _bad(f"{ref!r} is not a registered constraint", param, "unknown_constraint")
        spec = registry[ref]
    if kinds and spec.kind not in kinds:
        raise _bad(
            f"{ref} is a {spec.kind} constraint; name it in corral_constraint instead",
            param,
            "wrong_constraint_kind",
        )
    return spec


def served_version(spec: ConstraintSpec | None) -> dict[str, str]:
    """``{"x-corral-constraint": "invoice@3"}`` for a spec the registry served, else ``{}`` (the
    response header that tells a client which version answered it)."""
    param = spec.param if spec is not None else ""
    return {"x-corral-constraint": param[len("registry:") :]} if param.startswith("registry:") else {}
