"""The ``.corral`` file: a whole compiled constraint, written once and loaded anywhere without
compiling, optionally signed with Ed25519.

In:  a :class:`~corral.compile.constraint.Constraint` (what ``compile_constraint`` and the hosts
     produce; a bare :class:`~corral.CompiledGrammar` is wrapped as
     :meth:`Constraint.from_grammar` does) — or the bytes of a file, a tokenizer and optionally
     the trusted public keys.
Out: the file's bytes (:func:`dumps`, :func:`save_artifact`) — or the same ``Constraint``,
     reading outputs back as a freshly compiled one does, with masks identical at every step
     (:func:`loads`, :func:`load_artifact`).

Format (every integer little-endian; documented in ``docs/guides/artifacts.md``)::

    magic            8  b"\\x89CORRAL\\n"
    format version   2  FORMAT_VERSION
    flags            2  bit 0: the body is zlib-compressed; other bits must be 0
    engine version   1 + n  length (1..64), ASCII: the engine that compiled it
    tokenizer hash   1 + n  length (1..128), ASCII: Tokenizer.hash of its vocabulary
    body length      4  bytes stored
    raw body length  4  bytes after decompression (at most MAX_BODY_BYTES)
    body             .  (zlib of) meta length u32, meta JSON (UTF-8), blob count u32,
                        per blob: length u32 + engine artifact (CompiledGrammar.to_bytes)
    content hash    32  SHA-256 of every byte before it
    signature      100  optional, to the end of the file: b"ED25", the signer's raw public
                        key (32), Ed25519 signature (64) of every byte before the block

The meta JSON holds the constraint tree: for each node the spec (kind, payload, options,
limits, tools, think block), what its grammar is (which blob; for JSON Schemas the schema, the
keyword report and the generated grammar text), and the nested constraints that read outputs
back (a think block's answer, structural tags' segment readers).

Invariants:
* The parser is strict and executes nothing: fixed-width fields, every length checked against
  the bytes that remain before it is used, exact end of file, decompression bounded by the
  declared raw length, JSON decoded in C (too deep is refused), every meta field checked, and
  the engine blobs go through the engine's own strict loader (``CompiledGrammar.from_bytes``).
* The order of checks makes each refusal's ``reason`` mean one thing: ``bad_magic``,
  ``unsupported_version``, ``corrupt`` (the envelope), then — with trusted keys, before any of
  the body is read — ``unsigned`` / ``wrong_key`` / ``tampered``, then the content hash
  (``tampered`` when signed, ``corrupt`` when not), ``engine_version``, ``wrong_vocabulary``,
  and ``corrupt`` for anything wrong inside the body.
* A loaded constraint's spec has the same cache key as the one compiled (checked on load), so
  a persistent cache can file loaded constraints under the key a compile would use.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import struct
import tempfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corral import _native
from corral.compile.constraint import Constraint
from corral.compile.signing import fingerprint
from corral.compile.spec import KINDS, ConstraintSpec
from corral.engine import CompiledGrammar
from corral.errors import ArtifactError
from corral.grammar.json_schema import SchemaReport
from corral.grammar.json_schema.options import ReportEntry
from corral.grammar.tools import Tool
from corral.schema import JsonSchemaGrammar
from corral.tokenizer import Tokenizer

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "ArtifactInfo",
    "dumps",
    "inspect",
    "load_artifact",
    "loads",
    "save_artifact",
]

MAGIC = b"\x89CORRAL\n"
FORMAT_VERSION = 1
MAX_BODY_BYTES = 512 * 1024 * 1024
"""The largest body the loader inflates (a hostile length cannot make it allocate more)."""
_FLAG_ZLIB = 1
_SIG_TAG = b"ED25"
_SIG_LEN = 4 + 32 + 64
_HASH_LEN = 32
_MAX_BLOBS = 256
_MAX_NODES = 256
_REPORT_STATUSES = {"enforced", "checked after decoding", "ignored"}


@dataclass(frozen=True)
class ArtifactInfo:
    """What a ``.corral`` file's envelope says (read without loading the constraint).

    ``signer`` is the signing key's fingerprint (``ed25519:...``), None when unsigned;
    ``verified`` is True only when the signature was checked against a trusted key."""

    format_version: int
    engine_version: str
    tokenizer_hash: str
    compressed: bool
    content_hash: str
    signer: str | None
    verified: bool
    size: int


# ---------------------------------------------------------------------- writing


def dumps(compiled: Constraint | CompiledGrammar, *, signing_key: Any = None, compress: bool = True) -> bytes:
    """The ``.corral`` bytes of ``compiled``; signed with ``signing_key`` (an Ed25519 private
    key: object, PEM, or key file path; needs the ``sign`` extra) when given. ``compress``:
    zlib the body (smaller files; see the guide for what it costs to load).

    Raises :class:`corral.SlotError` for a constraint whose slots are bound (save the skeleton
    and bind after loading), ValueError for a payload that is not JSON (NaN, ...)."""
    c = compiled if isinstance(compiled, Constraint) else Constraint.from_grammar(compiled)
    tokenizer = c.grammar.tokenizer
    blobs: list[bytes] = []
    meta = {"key": c.spec.key(tokenizer.hash), "root": _node(c, blobs)}
    text = json.dumps(meta, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    parts = [_u32(len(text.encode("utf-8"))), text.encode("utf-8"), _u32(len(blobs))]
    for b in blobs:
        parts += [_u32(len(b)), b]
    raw = b"".join(parts)
    if len(raw) > MAX_BODY_BYTES:
        raise ValueError(f"the compiled constraint is {len(raw)} bytes, over {MAX_BODY_BYTES}")
    body = zlib.compress(raw, 6) if compress else raw
    engine = _native.artifact_versions()["engine_version"].encode("ascii")
    tok_hash = tokenizer.hash.encode("ascii")
    head = b"".join(
        [
            MAGIC,
            struct.pack("<HH", FORMAT_VERSION, _FLAG_ZLIB if compress else 0),
            bytes([len(engine)]),
            engine,
            bytes([len(tok_hash)]),
            tok_hash,
            struct.pack("<II", len(body), len(raw)),
            body,
        ]
    )
    out = head + hashlib.sha256(head).digest()
    if signing_key is not None:
        from corral.compile.signing import sign

        public, signature = sign(out, signing_key)
        out += _SIG_TAG + public + signature
    return out


def save_artifact(
    compiled: Constraint | CompiledGrammar,
    path: str | os.PathLike[str],
    *,
    signing_key: Any = None,
    compress: bool = True,
) -> Path:
    """Write :func:`dumps` of ``compiled`` to ``path`` atomically (a reader never sees half a
    file: written beside it, then renamed over it). Returns the path."""
    data = dumps(compiled, signing_key=signing_key, compress=compress)
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 is for the temporary name, not the artifact
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _node(c: Constraint, blobs: list[bytes]) -> dict[str, Any]:
    if len(blobs) >= _MAX_BLOBS:
        raise ValueError(f"a constraint with more than {_MAX_BLOBS} grammars cannot be saved")
    g = c.grammar
    blobs.append(g.to_bytes())  # SlotError for a binding
    grammar: dict[str, Any] = {"blob": len(blobs) - 1, "source": g.source}
    if isinstance(g, JsonSchemaGrammar):
        same = g.schema is c.spec.schema or g.schema == c.spec.schema
        grammar["json_schema"] = {
            "schema": None if same else [g.schema],
            "report": {
                # A capped uniqueItems entry carries its cap as a fifth element; the rest stay
                # four strings, as files written before that field have them.
                "entries": [
                    [
                        e.pointer,
                        e.keyword,
                        e.status,
                        e.detail,
                        *([] if e.capped_at is None else [e.capped_at]),
                    ]
                    for e in g.report.entries
                ],
                "slots": {k: list(v) for k, v in g.report.slots.items()},
            },
            "grammar_source": g.grammar_source,
        }
    s = c.spec
    spec = {
        "kind": s.kind,
        "payload": list(s.payload) if isinstance(s.payload, tuple) else s.payload,
        "options": dict(s.options),
        "limits": dict(s.limits),
        "tools": [{**t.as_json(), "index": t.index} for t in s.tools],
        "tool_mode": s.tool_mode,
        "thinking": dict(s.thinking) if s.thinking is not None else None,
        "param": s.param,
    }
    return {
        "spec": spec,
        "grammar": grammar,
        "source_len": c.source_len,
        "answer": _node(c.answer, blobs) if c.answer is not None else None,
        "readers": [None if r is None else _node(r, blobs) for r in c.readers],
    }


def _u32(n: int) -> bytes:
    return struct.pack("<I", n)


# ---------------------------------------------------------------------- reading


class _Reader:
    """Bounds-checked reads from the envelope; every failure is ``corrupt`` naming the field."""

    def __init__(self, data: bytes, end: int) -> None:
        self.data, self.pos, self.end = data, 0, end

    def take(self, n: int, field: str) -> bytes:
        if n < 0 or n > self.end - self.pos:
            raise _corrupt(
                f"{field} at byte {self.pos} runs past the end ({n} bytes, {self.end - self.pos} left)"
            )
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def u8(self, field: str) -> int:
        return self.take(1, field)[0]

    def u16(self, field: str) -> int:
        return int(struct.unpack("<H", self.take(2, field))[0])

    def u32(self, field: str) -> int:
        return int(struct.unpack("<I", self.take(4, field))[0])

    def text(self, field: str, max_len: int) -> str:
        at = self.pos
        n = self.u8(field + " length")
        if not 1 <= n <= max_len:
            raise _corrupt(f"{field} at byte {at}: length {n} is outside [1, {max_len}]")
        raw = self.take(n, field)
        if not all(0x20 <= b < 0x7F for b in raw):
            raise _corrupt(f"{field} at byte {at + 1} is not printable ASCII")
        return raw.decode("ascii")


def _corrupt(message: str) -> ArtifactError:
    return ArtifactError(f"corrupt .corral file: {message}", "corrupt")


@dataclass
class _Envelope:
    info: ArtifactInfo
    body: bytes
    raw_len: int


def _envelope(data: Any, trusted_keys: Any) -> _Envelope:
    """Parse and check the envelope (magic, versions, lengths, signature, content hash); the
    body is returned still compressed and unread."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"a .corral file's data must be bytes, got {type(data).__name__}")
    data = bytes(data)
    if data[: len(MAGIC)] != MAGIC:
        raise ArtifactError("not a .corral file (bad magic number)", "bad_magic")
    r = _Reader(data, len(data))
    r.take(len(MAGIC), "magic")
    version = r.u16("format version")
    if version != FORMAT_VERSION:
        raise ArtifactError(
            f".corral format version {version} is not supported (this corral reads {FORMAT_VERSION})",
            "unsupported_version",
        )
    flags = r.u16("flags")
    if flags & ~_FLAG_ZLIB:
        raise _corrupt(f"unknown flags 0x{flags:04x} at byte 10")
    engine = r.text("engine version", 64)
    tok_hash = r.text("tokenizer hash", 128)
    body_len = r.u32("body length")
    raw_len = r.u32("raw body length")
    if raw_len > MAX_BODY_BYTES or (not flags & _FLAG_ZLIB and raw_len != body_len):
        raise _corrupt(f"raw body length {raw_len} at byte {r.pos - 4} is invalid")
    body = r.take(body_len, "body")
    hashed_end = r.pos
    stored_hash = r.take(_HASH_LEN, "content hash")
    rest = len(data) - r.pos
    signer_raw: bytes | None = None
    signature = b""
    if rest:
        if rest != _SIG_LEN or data[r.pos : r.pos + 4] != _SIG_TAG:
            raise _corrupt(f"{rest} unexpected bytes after the content hash at byte {r.pos}")
        signer_raw = data[r.pos + 4 : r.pos + 36]
        signature = data[r.pos + 36 :]
    signed_part = data[: hashed_end + _HASH_LEN]
    verified = False
    if trusted_keys is not None:  # signature before anything in the body is read
        from corral.compile.signing import public_keys, verify

        keys = public_keys(trusted_keys)
        if signer_raw is None:
            raise ArtifactError("the .corral file is not signed, and trusted keys were given", "unsigned")
        if signer_raw not in keys:
            raise ArtifactError(
                f"the .corral file is signed by {fingerprint(signer_raw)}, which is not a trusted key",
                "wrong_key",
            )
        if not verify(signed_part, signer_raw, signature):
            raise ArtifactError(
                f"the signature by {fingerprint(signer_raw)} does not match the file's contents: "
                "it was modified after signing",
                "tampered",
            )
        verified = True
    digest = hashlib.sha256(data[:hashed_end]).digest()
    if digest != stored_hash:
        if signer_raw is not None:
            raise ArtifactError("the content hash does not match: the signed file was modified", "tampered")
        raise _corrupt("the content hash does not match the contents (damaged or modified)")
    ours = _native.artifact_versions()["engine_version"]
    if engine != ours:
        raise ArtifactError(
            f"the .corral file was compiled by engine {engine!r}, this is {ours!r}: compile it again",
            "engine_version",
        )
    info = ArtifactInfo(
        format_version=version,
        engine_version=engine,
        tokenizer_hash=tok_hash,
        compressed=bool(flags & _FLAG_ZLIB),
        content_hash=digest.hex(),
        signer=fingerprint(signer_raw) if signer_raw is not None else None,
        verified=verified,
        size=len(data),
    )
    return _Envelope(info, body, raw_len)


def inspect(data: Any, *, trusted_keys: Any = None) -> ArtifactInfo:
    """Check a ``.corral`` file's envelope — magic, versions, content hash and, with
    ``trusted_keys``, its signature — without a tokenizer or loading the constraint (what
    ``corral verify`` runs). Raises :class:`corral.ArtifactError` like :func:`loads`."""
    return _envelope(data, trusted_keys).info


def loads(
    data: Any,
    tokenizer: Tokenizer,
    *,
    trusted_keys: Any = None,
    **limits: int,
) -> Constraint:
    """The compiled constraint in ``.corral`` bytes, for ``tokenizer``, without compiling.

    ``trusted_keys``: Ed25519 public keys (objects, PEM, raw 32 bytes or ``.pub`` paths; one or
    an iterable). When given, the file must carry a valid signature by one of them, checked
    before any of its body is parsed. ``limits`` (engine limits, see ``corral.DEFAULT_LIMITS``)
    replace the ones stored with each grammar and are checked against its automata: pass them
    for files from a source you do not trust.

    Raises
    ------
    ArtifactError
        ``reason``: ``bad_magic``, ``unsupported_version``, ``unsigned``, ``wrong_key``,
        ``tampered``, ``engine_version``, ``wrong_vocabulary`` or ``corrupt``.
    LimitExceeded
        A grammar exceeds ``limits``.
    ImportError
        ``trusted_keys`` given without the ``cryptography`` package (the ``sign`` extra).
    """
    if not isinstance(tokenizer, Tokenizer):
        raise TypeError(f"expected a corral.Tokenizer, got {type(tokenizer).__name__}")
    env = _envelope(data, trusted_keys)
    if env.info.tokenizer_hash != tokenizer.hash:
        raise ArtifactError(
            f"the .corral file was compiled for vocabulary {env.info.tokenizer_hash[:16]}..., "
            f"not this tokenizer's ({tokenizer.hash[:16]}...)",
            "wrong_vocabulary",
        )
    raw = _inflate(env) if env.info.compressed else env.body
    meta, blobs = _body(raw)
    loader = _Loader(blobs, tokenizer, limits)
    try:
        constraint = loader.node(meta.get("root"), "root", 0)
        key = constraint.spec.key(tokenizer.hash)
    except RecursionError:
        raise _corrupt("the constraint's data nests too deeply") from None
    if meta.get("key") != key:
        raise _corrupt("the stored cache key does not match the constraint's spec")
    if loader.used != set(range(len(blobs))):
        raise _corrupt("a grammar blob is not referenced by the constraint, or referenced twice")
    return constraint


def load_artifact(
    path: str | os.PathLike[str],
    tokenizer: Tokenizer,
    *,
    trusted_keys: Any = None,
    **limits: int,
) -> Constraint:
    """:func:`loads` of the file at ``path``: the compiled constraint ``corral compile -o`` (or
    :func:`save_artifact`) wrote, ready for ``generate(grammar=...)`` / hosts, or
    ``.grammar.matcher()``."""
    return loads(Path(path).read_bytes(), tokenizer, trusted_keys=trusted_keys, **limits)


def _inflate(env: _Envelope) -> bytes:
    d = zlib.decompressobj()
    try:
        raw = d.decompress(env.body, env.raw_len + 1)
        raw += d.flush(env.raw_len + 1 - len(raw)) if len(raw) <= env.raw_len else b""
    except zlib.error as e:
        raise _corrupt(f"the compressed body does not inflate ({e})") from None
    if len(raw) != env.raw_len or not d.eof or d.unused_data:
        raise _corrupt(f"the body inflates to other than its declared {env.raw_len} bytes")
    return raw


def _body(raw: bytes) -> tuple[dict[str, Any], list[bytes]]:
    r = _Reader(raw, len(raw))
    text = r.take(r.u32("meta length"), "meta")
    count = r.u32("blob count")
    if count > _MAX_BLOBS:
        raise _corrupt(f"{count} grammar blobs (at most {_MAX_BLOBS})")
    blobs = [r.take(r.u32(f"blob {i} length"), f"blob {i}") for i in range(count)]
    if r.pos != len(raw):
        raise _corrupt(f"{len(raw) - r.pos} unexpected bytes after the last blob")
    try:  # the C decoder stops at Python's recursion limit (RecursionError), never overflows
        meta = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _corrupt(f"the meta is not valid JSON ({e})") from None
    if not isinstance(meta, dict):
        raise _corrupt("the meta is not an object")
    return meta, blobs


def _want(value: Any, types: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in _as_tuple(types)):
        raise _corrupt(f"{where} has the wrong type ({type(value).__name__})")
    return value


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


class _Loader:
    """Rebuilds the constraint tree from checked meta; each blob is used exactly once."""

    def __init__(self, blobs: list[bytes], tokenizer: Tokenizer, limits: Mapping[str, int]) -> None:
        self.blobs, self.tokenizer, self.limits = blobs, tokenizer, limits
        self.used: set[int] = set()
        self.nodes = 0

    def node(self, value: Any, where: str, depth: int) -> Constraint:
        self.nodes += 1
        if depth > 4 or self.nodes > _MAX_NODES:
            raise _corrupt(f"{where}: the constraint tree nests too deep or has too many nodes")
        n = _want(value, dict, where)
        spec = self.spec(n.get("spec"), where + ".spec")
        g = _want(n.get("grammar"), dict, where + ".grammar")
        grammar = self.grammar(g, spec, where + ".grammar")
        source_len = _want(n.get("source_len"), int, where + ".source_len")
        answer = n.get("answer")
        readers = _want(n.get("readers"), list, where + ".readers")
        think = None
        if spec.thinking is not None:
            from corral.compile.thinking import think_format

            try:
                think = think_format(spec.thinking, self.tokenizer)
            except (TypeError, ValueError, KeyError, AttributeError) as e:
                raise _corrupt(f"{where}: bad think block ({e})") from None
        return Constraint(
            spec,
            grammar,
            source_len,
            think=think,
            answer=None if answer is None else self.node(answer, where + ".answer", depth + 1),
            readers=tuple(
                None if r is None else self.node(r, f"{where}.readers[{i}]", depth + 1)
                for i, r in enumerate(readers)
            ),
        )

    def spec(self, value: Any, where: str) -> ConstraintSpec:
        s = _want(value, dict, where)
        kind = _want(s.get("kind"), str, where + ".kind")
        if kind not in KINDS:
            raise _corrupt(f"{where}.kind {kind!r} is not a constraint kind")
        options = _want(s.get("options"), dict, where + ".options")
        limits = _want(s.get("limits"), dict, where + ".limits")
        for k, v in limits.items():
            _want(v, int, f"{where}.limits.{k}")
        tools = []
        for i, t in enumerate(_want(s.get("tools"), list, where + ".tools")):
            t = _want(t, dict, f"{where}.tools[{i}]")
            name = _want(t.get("name"), str, f"{where}.tools[{i}].name")
            desc = _want(t.get("description"), str, f"{where}.tools[{i}].description")
            params = _want(t.get("parameters"), dict, f"{where}.tools[{i}].parameters")
            index = _want(t.get("index"), int, f"{where}.tools[{i}].index")
            tools.append(Tool(name, desc, params, index))
        payload = s.get("payload")
        if kind == "choices":
            payload = tuple(_want(payload, list, where + ".payload"))
        thinking = s.get("thinking")
        if thinking is not None:
            _want(thinking, dict, where + ".thinking")
        return ConstraintSpec(
            kind,
            payload,
            options,
            limits,
            tools=tuple(tools),
            tool_mode=_want(s.get("tool_mode"), str, where + ".tool_mode"),
            thinking=thinking,
            param=_want(s.get("param"), str, where + ".param"),
        )

    def grammar(self, g: dict[str, Any], spec: ConstraintSpec, where: str) -> CompiledGrammar:
        index = _want(g.get("blob"), int, where + ".blob")
        if not 0 <= index < len(self.blobs) or index in self.used:
            raise _corrupt(f"{where}.blob {index} is out of range or used twice")
        self.used.add(index)
        source = _want(g.get("source"), str, where + ".source")
        loaded = CompiledGrammar.from_bytes(self.blobs[index], self.tokenizer, **self.limits)
        js = g.get("json_schema")
        if js is None:
            loaded.source = source
            return loaded
        js = _want(js, dict, where + ".json_schema")
        stored = js.get("schema")
        if stored is None:
            try:
                schema = spec.schema
            except Exception as e:  # a tools spec whose call schema cannot be rebuilt
                raise _corrupt(f"{where}: the spec's schema cannot be rebuilt ({e})") from None
        else:
            if not isinstance(stored, list) or len(stored) != 1:
                raise _corrupt(f"{where}.json_schema.schema is not a one-element list")
            schema = stored[0]
        if not isinstance(schema, (dict, bool)):
            raise _corrupt(f"{where}: the schema is not an object or boolean")
        rep = _want(js.get("report"), dict, where + ".json_schema.report")
        items = _want(rep.get("entries"), list, where + ".report.entries")
        # Checked in bulk (set(map(...)) runs in C): a big schema has thousands of entries. The
        # few with a fifth element (a uniqueItems cap, a positive integer) are checked apart.
        if not set(map(type, items)) <= {list} or not set(map(len, items)) <= {4, 5}:
            raise _corrupt(f"{where}.report.entries are not [pointer, keyword, status, detail] strings")
        capped = [item for item in items if len(item) == 5]
        if capped:
            if not all(type(item[4]) is int and item[4] > 0 for item in capped):
                raise _corrupt(f"{where}.report.entries: a cap (fifth element) is not a positive integer")
            plain = [item if len(item) == 4 else item[:4] for item in items]
        else:
            plain = items
        if (
            not set(map(type, itertools.chain.from_iterable(plain))) <= {str}
            or not {item[2] for item in plain} <= _REPORT_STATUSES
        ):
            raise _corrupt(f"{where}.report.entries are not [pointer, keyword, status, detail] strings")
        entries = [ReportEntry(*item) for item in items]
        slots: dict[str, list[str]] = {}
        for name, ptrs in _want(rep.get("slots"), dict, where + ".report.slots").items():
            _want(ptrs, list, f"{where}.report.slots.{name}")
            if not all(isinstance(p, str) for p in ptrs):
                raise _corrupt(f"{where}.report.slots.{name} is not a list of pointers")
            slots[name] = list(ptrs)
        text = _want(js.get("grammar_source"), str, where + ".json_schema.grammar_source")
        report = SchemaReport(entries, slots)
        return JsonSchemaGrammar(loaded._native, self.tokenizer, schema, report, text)
