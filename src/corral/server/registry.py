"""The server's constraint registry: named, versioned JSON Schemas, regexes and grammars that a
request names instead of sending (``invoice@3``; ``invoice`` is its latest live version).

In:  the files of ``--schema-dir`` at start-up, and versions PUT through the admin API
     (:mod:`corral.server.admin`).
Out: :class:`~corral.compile.ConstraintSpec` objects by reference, already compiled into the
     server's compile cache (a request by name is a cache hit).

The layout of a schema dir and the bodies a PUT takes: :mod:`corral.server.constraint_files`
(``invoice@3.json``, ``route@2.regex``, ``sql@1.gbnf`` / ``.lark``, signed ``.corral``
artifacts; a plain ``invoice.json`` is version 1). "latest" is the highest live version.

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
* An artifact is loaded only with trusted keys (its signature is checked before its body is
  read: :func:`corral.compile.artifact.loads`), and only if this server would compile its spec
  the same way (same limits and schema options): what is served is exactly what was signed.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corral.compile import CompileCache, ConstraintSpec, SchemaConverter, compile_constraint_async
from corral.errors import ArtifactError, CorralError
from corral.server.constraint_files import Source, check_name, check_version, parse_ref, scan_dir
from corral.server.errors import APIError, error_from_exception
from corral.server.logs import log_event
from corral.tokenizer import Tokenizer

__all__ = ["MAX_VERSIONS", "ConstraintRegistry", "Version", "named_constraint", "served_version"]


def _bad(message: str, param: str | None, code: str) -> APIError:
    return APIError(400, message, code, param)


#: Most versions the registry holds (all names together); a PUT beyond it is refused (409).
MAX_VERSIONS = 4096

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
            "kind": self.spec.kind,
            "format": "artifact" if self.source.kind == "artifact" else "source",
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
    tokenizer : Tokenizer
        The served vocabulary (part of each version's key).
    cache : CompileCache
        Where versions are compiled (in its background threads) and kept.
    configure : callable
        spec -> the spec with the operator's limits and schema options.
    converter : SchemaConverter or None
        The server's schema-conversion process.
    persist_dir : Path or None
        Write PUT versions into this schema dir (temp file + rename) and remove deleted ones.
    trusted_keys : keys or None
        Ed25519 public keys (``.pub`` paths, PEM, raw): signed ``.corral`` artifacts by one of
        them may be uploaded or put in the schema dir. None: artifacts are refused.
    artifact_limits : mapping or None
        Engine limits an artifact's automata are checked against when loaded (the operator's
        ``--limit`` values).
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        cache: CompileCache,
        configure: Callable[[ConstraintSpec], ConstraintSpec] = lambda spec: spec,
        converter: SchemaConverter | None = None,
        persist_dir: Path | None = None,
        trusted_keys: Any = None,
        artifact_limits: Mapping[str, int] | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.cache = cache
        self.converter = converter
        self._configure = configure
        self._tokenizer_hash = tokenizer.hash
        self.persist_dir = persist_dir
        # Parsed now, so a bad key file (or no cryptography package) stops the start-up.
        if trusted_keys:
            from corral.compile.signing import public_keys

            self.trusted_keys: list[bytes] | None = public_keys(trusted_keys)
        else:
            self.trusted_keys = None
        self.artifact_limits = dict(artifact_limits or {})
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
        param = "schema" if source.kind == "json_schema" else source.kind
        try:
            spec = source.spec(f"registry:{name}@{version}")
            configured = self._configure(spec)
        except (CorralError, ValueError, TypeError) as e:
            raise error_from_exception(e, param) from None
        key = configured.key(self._tokenizer_hash)
        if source.kind == "artifact" and key != spec.key(self._tokenizer_hash):
            raise APIError(
                400,
                "the artifact was compiled with other engine limits or schema options than this server "
                "applies (--limit / --schema-option): compile it with the same ones",
                "artifact_options_mismatch",
            )
        return configured, key

    def _compile(self, spec: ConstraintSpec, source: Source) -> Future[Any]:
        """The compile cache's future for ``spec``: compiled in its background threads, or for an
        artifact the loaded constraint filed under the key a compile would use."""
        if source.loaded is not None:
            loaded = source.loaded
            return self.cache.get(spec.key(self._tokenizer_hash), lambda: loaded, spec.kind)[0]
        return compile_constraint_async(spec, self.tokenizer, cache=self.cache, converter=self.converter)[0]

    def load_artifact(self, data: bytes) -> Source:
        """The :class:`Source` of signed ``.corral`` bytes, loaded and verified (CPU work: call
        it off the event loop). Raises APIError: 403 ``artifact_upload_off`` without trusted
        keys; 400 ``artifact_<reason>`` for each refusal of the loader (``unsigned``,
        ``wrong_key``, ``tampered``, ``wrong_vocabulary``, ``engine_version``, ``corrupt``, ...)."""
        if self.trusted_keys is None:
            raise APIError(
                403,
                "artifact uploads are off: start corral serve with --trusted-keys KEY.pub",
                "artifact_upload_off",
            )
        from corral.compile.artifact import loads

        try:
            loaded = loads(data, self.tokenizer, trusted_keys=self.trusted_keys, **self.artifact_limits)
        except ArtifactError as e:
            raise APIError(400, str(e), f"artifact_{e.reason}") from None
        except (CorralError, ValueError, TypeError) as e:
            raise error_from_exception(e, "artifact") from None
        return Source("artifact", bytes(data), loaded=loaded)

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
        self, name: str, version: int, key: str, spec: ConstraintSpec, source: Source
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
            fut = self._compile(spec, source)
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
        live, fut = self._claim(name, number, key, spec, source)
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
        fname, data = source.file(name, version)
        fd, tmp = tempfile.mkstemp(prefix=f".{fname}.", suffix=".tmp", dir=self.persist_dir)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
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
                if source.kind == "artifact":
                    source = self.load_artifact(source.value)
                spec, key = self._prepare(name, version, source)
                self._compile(spec, source).result()
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
