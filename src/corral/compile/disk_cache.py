"""The compile cache's directory: compiled constraints persisted across processes and restarts.

In:  a directory, a size bound, and a codec that turns a compiled constraint into bytes and back
     for a tokenizer (:class:`EntryCodec`; the default, :class:`ArtifactCodec`, is the
     ``.corral`` artifact container of :mod:`corral.compile.artifact`).
Out: :class:`DiskCache` — ``load(key, tokenizer)`` (the constraint, or None: compile it) and
     ``store(key, tokenizer, value)``; :class:`~corral.compile.cache.CompileCache` calls both.

Invariants:
* A reader never sees a half-written entry: an entry is written to a temporary file in the same
  directory, flushed and fsynced, then renamed over its name (``os.replace`` is atomic), so a
  name holds either nothing or one whole entry. Two processes writing the same key each rename
  a whole entry; the last one wins and both are valid.
* Nothing in an entry is trusted: a file whose envelope (magic, version, the digest it was
  written under, its length, the SHA-256 of its payload) does not check out, or whose payload
  the codec refuses, is counted ``corrupt``, deleted and compiled again. An entry written under
  another key, tokenizer, engine version or codec has another file name (the name is the
  SHA-256 of all four), so it is never even read; copied under the wrong name, its stored digest
  does not match.
* No request text reaches the file system: names are hex digests.
* The directory is bounded: after a write, when the entries' total size passes ``max_bytes``,
  the least recently used entries (by modification time, which a hit refreshes) are deleted,
  oldest first. Deleting is safe under concurrent readers: a reader that opened the file keeps
  reading it (POSIX unlink semantics), one that comes after misses and compiles.
* A directory that cannot be created degrades to no disk cache, one that cannot be written to
  to read-only, each with one logged warning; a failed write or read is a miss, never a failed
  request.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "DEFAULT_MAX_BYTES",
    "ArtifactCodec",
    "DiskCache",
    "EntryCodec",
    "disk_cache_from_env",
    "parse_size",
]

log = logging.getLogger("corral.compile.cache")

#: Default bound of a cache directory: 1 GiB.
DEFAULT_MAX_BYTES = 1 << 30
ENV_DIR = "CORRAL_CACHE_DIR"
ENV_MAX = "CORRAL_CACHE_MAX_BYTES"

_MAGIC = b"CRLCACHE"
_VERSION = 1
# magic, envelope version (u16), the entry's digest (32 bytes), payload length (u64), payload SHA-256
_HEADER = struct.Struct("<8sH32sQ32s")
_SUFFIX = ".entry"
_TMP_PREFIX = ".tmp-"
# A temporary file older than this is a crashed writer's: the eviction scan deletes it.
_STALE_TMP_S = 600.0
# Full directory rescans (other processes' writes) at least every this many of our own writes.
_RESCAN_EVERY = 64


class EntryCodec(Protocol):
    """How a compiled constraint becomes an entry's payload and back."""

    #: Identifies the payload format: part of every entry's name, so a codec change never reads
    #: another codec's entries.
    name: str

    def dumps(self, value: Any) -> bytes:
        """The payload for ``value``; raises for a value the codec cannot store (not cached)."""
        ...

    def loads(self, data: bytes, tokenizer: Any) -> Any:
        """The compiled constraint from a payload, for ``tokenizer``; raises for bytes it refuses."""
        ...


class ArtifactCodec:
    """Entries as ``.corral`` artifacts (:func:`corral.compile.artifact.dumps` / ``loads``):
    every kind of constraint, its spec and options, the engine bytes, content-hashed, loaded by
    the artifact's strict parser (which also checks the loaded spec has the entry's key).

    ``compress``: zlib the body (smaller directory, slower load; off by default: a cache is
    for speed, see ``bench/bench_cache.py``)."""

    def __init__(self, compress: bool = False) -> None:
        from corral.compile import artifact

        self._artifact = artifact
        self.compress = compress
        self.name = f"corral-artifact/{artifact.FORMAT_VERSION}"

    def dumps(self, value: Any) -> bytes:
        return bytes(self._artifact.dumps(value, compress=self.compress))

    def loads(self, data: bytes, tokenizer: Any) -> Any:
        return self._artifact.loads(data, tokenizer)


def parse_size(text: str | int) -> int:
    """A byte count from ``1073741824``, ``512M``, ``1G``, ``64KiB`` (binary units)."""
    if isinstance(text, int):
        n = text
    else:
        s = text.strip().upper().removesuffix("B").removesuffix("I")
        scale = 1
        for suffix, mult in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40)):
            if s.endswith(suffix):
                s, scale = s[:-1], mult
                break
        try:
            n = int(float(s) * scale) if "." in s else int(s) * scale
        except ValueError:
            raise ValueError(f"not a size: {text!r} (bytes, or a number with K, M, G or T)") from None
    if n < 0:
        raise ValueError(f"a size must be >= 0, got {text!r}")
    return n


def _engine_version() -> str:
    from corral._native import artifact_versions

    v = artifact_versions()
    return f"{v['engine_version']}/{v['format_version']}"


class DiskCache:
    """A bounded directory of compiled constraints shared by processes (see the module doc).

    Parameters
    ----------
    directory : str or Path
        Created if missing (with parents).
    codec : EntryCodec
        How entries are written and read.
    max_bytes : int
        Bound on the total size of the entries (LRU eviction past it).
    events : callable or None
        ``events(name)`` for each ``hit``, ``miss``, ``write``, ``eviction``, ``corrupt`` and
        ``write_error`` (a host's metrics: :meth:`corral.telemetry.quality.QualityMetrics.disk_cache`);
        more listeners: :meth:`subscribe`.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        codec: EntryCodec,
        max_bytes: int = DEFAULT_MAX_BYTES,
        events: Callable[[str], None] | None = None,
    ) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.directory = Path(directory)
        self.codec = codec
        self.max_bytes = max_bytes
        self._listeners: list[Callable[[str], None]] = [events] if events is not None else []
        self._lock = threading.Lock()
        self._warned = False
        self.counts = dict.fromkeys(("hit", "miss", "write", "eviction", "corrupt", "write_error"), 0)
        self._engine = _engine_version()
        self.enabled = True
        self.writable = True
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            self.enabled = self.writable = False
            self._warn(f"compile cache directory {str(self.directory)!r} cannot be created ({e}); "
                       "compiled constraints are cached in memory only")  # fmt: skip
            return
        try:  # can we write here? (os.access says yes to root on a read-only mount)
            fd, probe = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=self.directory)
            os.close(fd)
            os.unlink(probe)
        except OSError as e:
            self.writable = False
            self._warn(f"compile cache directory {str(self.directory)!r} is not writable ({e}); "
                       "existing entries are read, new ones are kept in memory only")  # fmt: skip
        self._approx = self._scan_total() if self.writable else 0
        self._writes = 0

    # ------------------------------------------------------------------ names and events

    def subscribe(self, fn: Callable[[str], None]) -> None:
        """Also report events to ``fn`` (once per distinct listener)."""
        with self._lock:
            if fn not in self._listeners:
                self._listeners.append(fn)

    def _event(self, name: str) -> None:
        with self._lock:
            self.counts[name] += 1
            listeners = list(self._listeners)
        for fn in listeners:
            try:
                fn(name)
            except Exception:  # a broken metrics sink must not fail a compile
                log.debug("compile cache: event listener failed", exc_info=True)

    def _warn(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("%s", message)

    def digest(self, key: str, tokenizer: Any) -> bytes:
        """The 32-byte digest naming ``key``'s entry for ``tokenizer`` under this engine and codec."""
        tok = str(getattr(tokenizer, "hash", ""))
        text = "\0".join(("corral-cache", key, tok, self._engine, self.codec.name))
        return hashlib.sha256(text.encode("utf-8")).digest()

    def path(self, key: str, tokenizer: Any) -> Path:
        """Where ``key``'s entry for ``tokenizer`` lives (a hex name: no request text)."""
        return self.directory / (self.digest(key, tokenizer).hex() + _SUFFIX)

    # ------------------------------------------------------------------ reading

    def load(self, key: str, tokenizer: Any) -> Any | None:
        """The compiled constraint stored for ``key``, or None (missing, or corrupt: deleted).
        Never raises."""
        if not self.enabled:
            return None
        digest = self.digest(key, tokenizer)
        path = self.directory / (digest.hex() + _SUFFIX)
        try:
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                blob = f.read()
        except OSError:  # missing, evicted meanwhile, or unreadable: compile
            self._event("miss")
            return None
        payload = self._unwrap(blob, digest)
        value = None
        if payload is not None:
            try:
                value = self.codec.loads(payload, tokenizer)
            except Exception as e:  # whatever the codec refuses (ArtifactError, ValueError, ...)
                log.info("compile cache: entry %s refused by the codec (%s: %s)", path.name,
                         type(e).__name__, e)  # fmt: skip
        if value is None:
            self._discard(path, st)
            self._event("corrupt")
            return None
        if self.writable:  # touch: the LRU order is by modification time
            with contextlib.suppress(OSError):
                os.utime(path)
        self._event("hit")
        return value

    @staticmethod
    def _unwrap(blob: bytes, digest: bytes) -> bytes | None:
        """The payload of an entry written under ``digest``, or None if any check fails."""
        if len(blob) < _HEADER.size:
            return None
        magic, version, stored, length, sha = _HEADER.unpack_from(blob)
        if magic != _MAGIC or version != _VERSION or stored != digest:
            return None
        payload = blob[_HEADER.size :]
        if len(payload) != length or hashlib.sha256(payload).digest() != sha:
            return None
        return payload

    def _discard(self, path: Path, st: os.stat_result) -> None:
        """Delete a refused entry unless another process has meanwhile replaced it."""
        if not self.writable:
            return
        try:
            now = os.stat(path)
            if (now.st_ino, now.st_dev) == (st.st_ino, st.st_dev):
                os.unlink(path)
        except OSError:
            pass

    # ------------------------------------------------------------------ writing

    def store(self, key: str, tokenizer: Any, value: Any) -> bool:
        """Write ``value`` as ``key``'s entry (atomically); True when written. Never raises:
        a value the codec cannot store is skipped, a failed write counted ``write_error``."""
        if not self.writable:
            return False
        try:
            payload = self.codec.dumps(value)
        except Exception as e:  # not storable (a kind the codec does not cover): memory only
            log.debug("compile cache: not stored (%s: %s)", type(e).__name__, e)
            return False
        digest = self.digest(key, tokenizer)
        header = _HEADER.pack(_MAGIC, _VERSION, digest, len(payload), hashlib.sha256(payload).digest())
        size = len(header) + len(payload)
        if size > self.max_bytes:
            return False  # larger than the whole bound: never fits
        final = self.directory / (digest.hex() + _SUFFIX)
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=self.directory)
            with os.fdopen(fd, "wb") as f:
                f.write(header)
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, final)
            tmp = None
        except OSError as e:
            self._warn(f"compile cache: writing to {str(self.directory)!r} failed ({e}); "
                       "continuing with the memory cache")  # fmt: skip
            self._event("write_error")
            return False
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        self._event("write")
        with self._lock:
            self._approx += size
            self._writes += 1
            due = self._approx > self.max_bytes or self._writes % _RESCAN_EVERY == 0
        if due:
            self.evict()
        return True

    # ------------------------------------------------------------------ bounding

    def _entries(self) -> list[tuple[float, int, Path]]:
        """(mtime, size, path) of every entry; stale temporary files are deleted on the way."""
        out: list[tuple[float, int, Path]] = []
        now = time.time()
        try:
            it = list(os.scandir(self.directory))
        except OSError:
            return out
        for d in it:
            try:
                st = d.stat(follow_symlinks=False)
            except OSError:
                continue
            if d.name.endswith(_SUFFIX) and d.is_file(follow_symlinks=False):
                out.append((st.st_mtime, st.st_size, Path(d.path)))
            elif d.name.startswith(_TMP_PREFIX) and now - st.st_mtime > _STALE_TMP_S:
                with contextlib.suppress(OSError):
                    os.unlink(d.path)
        return out

    def _scan_total(self) -> int:
        return sum(size for _, size, _ in self._entries())

    def evict(self) -> int:
        """Delete least recently used entries until the directory is within ``max_bytes``;
        returns how many this call deleted."""
        if not self.writable:
            return 0
        entries = sorted(self._entries(), key=lambda e: e[0])
        total = sum(size for _, size, _ in entries)
        removed = 0
        for _, size, path in entries:
            if total <= self.max_bytes:
                break
            try:
                os.unlink(path)
            except FileNotFoundError:  # another process evicted it first
                total -= size
                continue
            except OSError:
                continue
            total -= size
            removed += 1
            self._event("eviction")
        with self._lock:
            self._approx = total
        return removed

    def stats(self) -> dict[str, int]:
        """Event counts of this process (hit, miss, write, eviction, corrupt, write_error) and
        the directory's current entries and bytes."""
        entries = self._entries() if self.enabled else []
        with self._lock:
            out = dict(self.counts)
        out["entries"] = len(entries)
        out["bytes"] = sum(size for _, size, _ in entries)
        return out


def disk_cache_from_env(environ: Any = None) -> DiskCache | None:
    """The directory cache ``CORRAL_CACHE_DIR`` names (bounded by ``CORRAL_CACHE_MAX_BYTES``,
    default 1 GiB), or None when it is unset."""
    env = os.environ if environ is None else environ
    directory = env.get(ENV_DIR, "")
    if not directory:
        return None
    max_bytes = parse_size(env.get(ENV_MAX, "") or DEFAULT_MAX_BYTES)
    return DiskCache(directory, ArtifactCodec(), max_bytes)
