"""The compile cache's directory (corral.compile.disk_cache): a second process loads instead of
compiling, with masks identical to a fresh compile; concurrent writers never expose a partial
entry; corrupt, truncated and foreign entries are refused, deleted and recompiled; the size bound
evicts least recently used entries first; an unusable directory degrades without failing."""

from __future__ import annotations

import json
import logging
import os
import random
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import corral
from corral.compile import CompileCache, ConstraintSpec, compile_constraint
from corral.compile.disk_cache import ArtifactCodec, DiskCache, disk_cache_from_env, parse_size

REGEXES = [
    r"[a-z]{3,8}@(example|corral)\.(com|org)",
    r"(19|20)[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])",
    r"(red|green|blue)( and (red|green|blue)){0,3}",
    r"\+?[0-9]{1,3} [0-9]{3} [0-9]{4}",
]


def _cache(directory: Path, max_bytes: int = 1 << 30, events: list[str] | None = None) -> CompileCache:
    disk = DiskCache(directory, ArtifactCodec(), max_bytes, events.append if events is not None else None)
    return CompileCache(1 << 28, disk=disk)


def _same_walks(
    a: corral.CompiledGrammar, b: corral.CompiledGrammar, seeds: int = 3, steps: int = 20
) -> None:
    tok = a.tokenizer
    ra, rb = corral.allocate_bitmask(1, tok), corral.allocate_bitmask(1, tok)
    for seed in range(seeds):
        rng = random.Random(seed)
        ma, mb = a.matcher(), b.matcher()
        for step in range(steps):
            ma.fill_next_token_bitmask(ra, 0)
            mb.fill_next_token_bitmask(rb, 0)
            assert np.array_equal(ra, rb), f"seed {seed} step {step}: masks differ"
            assert ma.is_accepting() == mb.is_accepting()
            ids = corral.allowed_tokens(ra[0], tok)
            if not ids or ma.is_terminated():
                break
            t = rng.choice(ids)
            assert ma.accept_token(t) and mb.accept_token(t)
        assert ma.shortest_completion() == mb.shortest_completion()


def _entries(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.entry"))


def test_a_second_cache_loads_what_the_first_compiled(tmp_path: Path, smollm2: corral.Tokenizer) -> None:
    first = _cache(tmp_path)
    specs = [ConstraintSpec.regex(r) for r in REGEXES] + [ConstraintSpec.choices(["yes", "no", "maybe"])]
    compiled = [compile_constraint(s, smollm2, cache=first) for s in specs]
    assert first.stats()["compiles"] == len(specs) and first.stats()["disk_write"] == len(specs)
    assert len(_entries(tmp_path)) == len(specs)
    # no request text in the file system: names are digests
    assert all(len(p.stem) == 64 and all(c in "0123456789abcdef" for c in p.stem) for p in tmp_path.iterdir())

    events: list[str] = []
    second = _cache(tmp_path, events=events)
    for spec, c in zip(specs, compiled, strict=True):
        loaded = compile_constraint(spec, smollm2, cache=second)
        assert loaded.kind == c.kind and loaded.choices == c.choices
        assert loaded.grammar.grammar_text == c.grammar.grammar_text
        _same_walks(c.grammar, loaded.grammar)
    s = second.stats()
    assert (s["compiles"], s["loads"], s["disk_hit"]) == (0, len(specs), len(specs))
    assert events == ["hit"] * len(specs)
    # the memory cache in front: asking again touches neither disk nor compiler
    compile_constraint(specs[0], smollm2, cache=second)
    assert second.stats()["hits"] == 1 and second.stats()["disk_hit"] == len(specs)


def test_another_tokenizer_or_key_is_a_miss(
    tmp_path: Path, smollm2: corral.Tokenizer, llama32: corral.Tokenizer
) -> None:
    spec = ConstraintSpec.regex(REGEXES[0])
    compile_constraint(spec, smollm2, cache=_cache(tmp_path))
    other = _cache(tmp_path)
    c = compile_constraint(spec, llama32, cache=other)
    assert other.stats()["compiles"] == 1 and other.stats()["disk_miss"] == 1
    assert c.grammar.tokenizer is llama32
    assert len(_entries(tmp_path)) == 2  # one per vocabulary


def _spoil_truncate(p: Path, data: bytes) -> bytes:
    return data[: len(data) // 2]


def _spoil_flip_payload(p: Path, data: bytes) -> bytes:
    b = bytearray(data)
    b[-7] ^= 0x40
    return bytes(b)


def _spoil_flip_header(p: Path, data: bytes) -> bytes:
    b = bytearray(data)
    b[3] ^= 0x01  # the magic
    return bytes(b)


def _spoil_empty(p: Path, data: bytes) -> bytes:
    return b""


def _spoil_garbage(p: Path, data: bytes) -> bytes:
    return os.urandom(len(data))


@pytest.mark.parametrize(
    "spoil", [_spoil_truncate, _spoil_flip_payload, _spoil_flip_header, _spoil_empty, _spoil_garbage]
)
def test_a_corrupt_entry_is_discarded_recompiled_and_replaced(
    tmp_path: Path, smollm2: corral.Tokenizer, spoil: object
) -> None:
    spec = ConstraintSpec.regex(REGEXES[1])
    fresh = compile_constraint(spec, smollm2, cache=_cache(tmp_path))
    (path,) = _entries(tmp_path)
    good = path.read_bytes()
    path.write_bytes(spoil(path, good))  # type: ignore[operator]

    events: list[str] = []
    cache = _cache(tmp_path, events=events)
    again = compile_constraint(spec, smollm2, cache=cache)
    assert events == ["corrupt", "write"]
    assert cache.stats()["compiles"] == 1 and cache.stats()["loads"] == 0
    _same_walks(fresh.grammar, again.grammar)
    assert path.read_bytes() == good  # replaced by a whole, valid entry
    third = _cache(tmp_path)
    compile_constraint(spec, smollm2, cache=third)
    assert third.stats()["loads"] == 1


def test_a_valid_envelope_around_bytes_the_codec_refuses_is_corrupt(
    tmp_path: Path, smollm2: corral.Tokenizer
) -> None:
    """The envelope's checksum passes but the engine bytes inside are not a grammar (an entry
    written by a broken or hostile writer): the codec's strict loader refuses it."""
    spec = ConstraintSpec.regex(REGEXES[2])
    disk = DiskCache(tmp_path, ArtifactCodec())

    class Junk:
        name = disk.codec.name

        def dumps(self, value: object) -> bytes:
            return b"\x00" * 64 + b"not an artifact"

        def loads(self, data: bytes, tokenizer: object) -> object:
            raise AssertionError("never read through this codec")

    writer = DiskCache(tmp_path, Junk())  # same name, same digest, a payload the real codec refuses
    key = spec.key(smollm2.hash)
    assert writer.store(key, smollm2, object())
    assert disk.load(key, smollm2) is None
    assert disk.counts["corrupt"] == 1 and not _entries(tmp_path)


def test_an_entry_copied_under_another_name_is_refused(tmp_path: Path, smollm2: corral.Tokenizer) -> None:
    a, b = ConstraintSpec.regex(REGEXES[0]), ConstraintSpec.regex(REGEXES[3])
    compile_constraint(a, smollm2, cache=_cache(tmp_path))
    disk = DiskCache(tmp_path, ArtifactCodec())
    pa, pb = disk.path(a.key(smollm2.hash), smollm2), disk.path(b.key(smollm2.hash), smollm2)
    pb.write_bytes(pa.read_bytes())  # a's entry where b's belongs: the stored digest is a's
    cache = CompileCache(1 << 28, disk=disk)
    c = compile_constraint(b, smollm2, cache=cache)
    assert disk.counts["corrupt"] == 1 and cache.stats()["compiles"] == 1
    assert c.spec.payload == REGEXES[3] and c.grammar.matcher().accept_bytes(b"+1 555 0100")


def test_the_size_bound_evicts_least_recently_used_first(tmp_path: Path, smollm2: corral.Tokenizer) -> None:
    specs = [ConstraintSpec.choices([f"answer-{i}-{j}" for j in range(4)]) for i in range(4)]
    probe = _cache(tmp_path / "probe")
    compile_constraint(specs[0], smollm2, cache=probe)
    size = max(p.stat().st_size for p in _entries(tmp_path / "probe"))

    events: list[str] = []
    cache = _cache(tmp_path / "d", max_bytes=int(3.5 * size), events=events)
    disk = cache.disk
    assert disk is not None
    paths = []
    for i, spec in enumerate(specs[:3]):
        compile_constraint(spec, smollm2, cache=cache)
        p = disk.path(spec.key(smollm2.hash), smollm2)
        os.utime(p, (1_000_000 + i, 1_000_000 + i))  # written in order 0, 1, 2
        paths.append(p)
    assert "eviction" not in events
    # a hit (another process's cache) refreshes entry 0: entry 1 is now the oldest
    other = _cache(tmp_path / "d", max_bytes=int(3.5 * size))
    compile_constraint(specs[0], smollm2, cache=other)
    assert other.stats()["loads"] == 1 and paths[0].stat().st_mtime > time.time() - 60
    compile_constraint(specs[3], smollm2, cache=cache)  # over the bound: one eviction
    assert events.count("eviction") == 1
    assert not paths[1].exists()
    assert paths[0].exists() and paths[2].exists() and disk.path(specs[3].key(smollm2.hash), smollm2).exists()
    assert disk.stats()["bytes"] <= 3.5 * size


def test_an_entry_larger_than_the_bound_is_not_written(tmp_path: Path, smollm2: corral.Tokenizer) -> None:
    cache = _cache(tmp_path, max_bytes=100)
    c = compile_constraint(ConstraintSpec.regex(REGEXES[0]), smollm2, cache=cache)
    assert c.grammar.matcher().accept_bytes(b"abc@corral.org")
    assert not _entries(tmp_path) and cache.stats()["disk_write"] == 0


def test_a_directory_that_cannot_be_created_degrades_to_memory_with_one_warning(
    tmp_path: Path, smollm2: corral.Tokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with caplog.at_level(logging.WARNING, logger="corral.compile.cache"):
        cache = _cache(blocker / "cache")
        for r in REGEXES[:2]:
            assert compile_constraint(ConstraintSpec.regex(r), smollm2, cache=cache).grammar is not None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "memory only" in warnings[0].getMessage()
    assert cache.disk is not None and not cache.disk.enabled
    assert cache.stats()["compiles"] == 2 and cache.stats()["disk_write"] == 0


def test_failing_writes_degrade_with_one_warning(
    tmp_path: Path,
    smollm2: corral.Tokenizer,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The disk fills up (or the directory turns read-only) after start-up: every write fails,
    no request does, one warning is logged, and no temporary file is left behind."""
    cache = _cache(tmp_path)

    def full(*a: object, **k: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with caplog.at_level(logging.WARNING, logger="corral.compile.cache"):
        for r in REGEXES:
            compile_constraint(ConstraintSpec.regex(r), smollm2, cache=cache)
    assert sum(r.levelno == logging.WARNING for r in caplog.records) == 1
    assert cache.stats()["disk_write_error"] == len(REGEXES) and cache.stats()["compiles"] == len(REGEXES)
    assert list(tmp_path.iterdir()) == []


def test_a_read_only_directory_still_serves_its_entries(
    tmp_path: Path,
    smollm2: corral.Tokenizer,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = ConstraintSpec.regex(REGEXES[0])
    compile_constraint(spec, smollm2, cache=_cache(tmp_path))
    import tempfile

    def refuse(*a: object, **k: object) -> None:
        raise PermissionError(13, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with caplog.at_level(logging.WARNING, logger="corral.compile.cache"):
        cache = _cache(tmp_path)
        compile_constraint(spec, smollm2, cache=cache)
        compile_constraint(ConstraintSpec.regex(REGEXES[1]), smollm2, cache=cache)
    assert sum(r.levelno == logging.WARNING for r in caplog.records) == 1
    assert cache.disk is not None and not cache.disk.writable
    s = cache.stats()
    assert (s["loads"], s["compiles"], s["disk_write"], s["disk_write_error"]) == (1, 1, 0, 0)


def test_stale_temporary_files_are_swept(tmp_path: Path, smollm2: corral.Tokenizer) -> None:
    stale, fresh = tmp_path / ".tmp-crashed", tmp_path / ".tmp-writing"
    stale.write_bytes(b"half")
    fresh.write_bytes(b"half")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    disk = DiskCache(tmp_path, ArtifactCodec())
    disk.evict()
    assert not stale.exists() and fresh.exists()


_WORKER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    import corral
    from corral import models
    from corral.compile import CompileCache, ConstraintSpec, compile_constraint
    from corral.compile.disk_cache import ArtifactCodec, DiskCache

    directory, go, regexes = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
    tok = corral.Tokenizer.from_gguf(models.smollm2_gguf_path())
    cache = CompileCache(1 << 28, disk=DiskCache(directory, ArtifactCodec()))
    while not go.exists():
        time.sleep(0.01)
    out = []
    for r in regexes:
        c = compile_constraint(ConstraintSpec.regex(r), tok, cache=cache)
        out.append(c.grammar.grammar_text)
    print(json.dumps({"grammars": out, "stats": cache.stats()}))
    """
)


def test_two_processes_compiling_into_one_directory(tmp_path: Path, smollm2: corral.Tokenizer) -> None:
    directory, go = tmp_path / "cache", tmp_path / "go"
    regexes = REGEXES + [
        r"[A-Z][a-z]{2,9}( [A-Z][a-z]{2,9}){1,3}",
        r"#[0-9a-f]{6}|rgb\([0-9]{1,3}(,[0-9]{1,3}){2}\)",
    ]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(directory), str(go), json.dumps(order)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for order in (regexes, regexes[::-1])
    ]
    # A reader polling the directory while both write: every entry name it sees holds a whole,
    # valid entry (never a prefix of one).
    reader = DiskCache(directory, ArtifactCodec())
    names = {reader.path(ConstraintSpec.regex(r).key(smollm2.hash), smollm2).name: r for r in regexes}
    seen: set[str] = set()
    bad: list[str] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            for p in list(directory.glob("*.entry")) if directory.exists() else []:
                try:
                    data = p.read_bytes()
                except FileNotFoundError:
                    continue
                r = names.get(p.name)
                digest = reader.digest(ConstraintSpec.regex(r).key(smollm2.hash), smollm2) if r else b""
                if reader._unwrap(data, digest) is None:
                    bad.append(p.name)
                seen.add(p.name)
            time.sleep(0.005)

    watcher = threading.Thread(target=poll)
    watcher.start()
    go.touch()
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err.decode()
            results.append(json.loads(out))
    finally:
        stop.set()
        watcher.join()
    assert not bad, bad
    assert seen  # the reader saw entries appear while they were written
    expected = [corral.compile_regex(r, smollm2).grammar_text for r in regexes]
    assert results[0]["grammars"] == expected and results[1]["grammars"] == expected[::-1]
    # together the two compiled every constraint at least once; every one was written or loaded
    for r in results:
        assert r["stats"]["compiles"] + r["stats"]["loads"] == len(regexes)
    assert sorted(p.name for p in directory.iterdir()) == sorted(names)  # no temporary files left
    third = _cache(directory)
    for r in regexes:
        c = compile_constraint(ConstraintSpec.regex(r), smollm2, cache=third)
        _same_walks(corral.compile_regex(r, smollm2), c.grammar, seeds=1)
    assert third.stats()["loads"] == len(regexes) and third.stats()["compiles"] == 0


def test_sizes_parse() -> None:
    assert parse_size("1073741824") == 1 << 30
    assert parse_size("512M") == parse_size("512MiB") == 512 << 20
    assert parse_size("1.5G") == 3 << 29
    assert parse_size("64kb") == 64 << 10
    for bad in ("", "lots", "-1", "1X"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_the_environment_backs_the_default_cache(tmp_path: Path) -> None:
    assert disk_cache_from_env({}) is None
    d = disk_cache_from_env({"CORRAL_CACHE_DIR": str(tmp_path / "c"), "CORRAL_CACHE_MAX_BYTES": "2M"})
    assert d is not None and d.directory == tmp_path / "c" and d.max_bytes == 2 << 20 and d.enabled


def test_the_library_uses_corral_cache_dir_across_processes(tmp_path: Path) -> None:
    """``CORRAL_CACHE_DIR`` for the library: a second ``corral.compile_constraint`` process (the
    path ``corral.generate`` takes) loads what the first compiled."""
    code = textwrap.dedent(
        f"""
        import json
        import corral
        from corral import models
        from corral.compile import ConstraintSpec, compile_constraint, default_cache
        tok = corral.Tokenizer.from_gguf(models.smollm2_gguf_path())
        c = compile_constraint(ConstraintSpec.regex({REGEXES[1]!r}), tok)
        assert c.grammar.matcher().accept_bytes(b"2024-02-29")
        print(json.dumps(default_cache().stats()))
        """
    )
    env = dict(os.environ, CORRAL_CACHE_DIR=str(tmp_path))
    runs = [
        json.loads(
            subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, check=True).stdout
        )
        for _ in range(2)
    ]
    assert (runs[0]["compiles"], runs[0]["disk_write"]) == (1, 1)
    assert (runs[1]["compiles"], runs[1]["loads"], runs[1]["disk_hit"]) == (0, 1, 1)


def test_a_schema_with_its_model_round_trips_through_the_directory(
    tmp_path: Path, llama32: corral.Tokenizer
) -> None:
    """JSON Schemas are stored whole (schema, keyword report, grammar): the loaded constraint
    reads outputs back like the compiled one, into the Pydantic model asked for."""
    from pydantic import BaseModel, Field

    class Invoice(BaseModel):
        number: str = Field(pattern=r"^INV-[0-9]{4}$")
        total: float = Field(ge=0)
        lines: list[str] = Field(min_length=1, max_length=3)

    spec = ConstraintSpec.json_schema(Invoice)
    fresh = compile_constraint(spec, llama32, cache=_cache(tmp_path))
    cache = _cache(tmp_path)
    loaded = compile_constraint(spec, llama32, cache=cache)
    assert cache.stats()["loads"] == 1 and cache.stats()["compiles"] == 0
    _same_walks(fresh.grammar, loaded.grammar, seeds=2, steps=25)
    good = '{"number": "INV-0042", "total": 12.5, "lines": ["a"]}'
    value, error = loaded.read(good)
    assert error is None and isinstance(value, Invoice) and value.number == "INV-0042"
    assert loaded.read('{"number": "INV-0042", "total": -1, "lines": ["a"]}')[1] is not None
    assert loaded.grammar.report.entries == fresh.grammar.report.entries


def test_an_entry_evicted_by_another_process_is_a_miss(tmp_path: Path, smollm2: corral.Tokenizer) -> None:
    spec = ConstraintSpec.regex(REGEXES[0])
    compile_constraint(spec, smollm2, cache=_cache(tmp_path))
    DiskCache(tmp_path, ArtifactCodec(), max_bytes=0).evict()  # another process, a tighter bound
    assert not _entries(tmp_path)
    events: list[str] = []
    cache = _cache(tmp_path, events=events)
    assert compile_constraint(spec, smollm2, cache=cache).grammar.matcher().accept_bytes(b"abc@corral.com")
    assert events == ["miss", "write"]


def test_disk_events_reach_the_quality_metrics_with_bounded_labels(tmp_path: Path) -> None:
    from corral.telemetry.quality import QualityMetrics

    class Sink:
        def __init__(self, d: object) -> None:
            self.values: dict[str, float] = {}

        def inc(self, amount: float = 1.0, **labels: str) -> None:
            k = labels.get("event", "")
            self.values[k] = self.values.get(k, 0.0) + amount

        def observe(self, value: float, **labels: str) -> None:
            pass

    q = QualityMetrics(Sink)
    disk = DiskCache(tmp_path, ArtifactCodec())
    disk.subscribe(q.disk_cache)
    disk.subscribe(q.disk_cache)  # once per listener, however often a host subscribes
    assert (
        disk.load("0" * 64, corral.Tokenizer.from_tokens([b"a", b"<e>"], special_ids=[1], eos_ids=[1]))
        is None
    )
    q.disk_cache("something else")
    assert q.metrics["corral_compile_cache_disk_total"].values == {"miss": 1.0, "other": 1.0}


def test_a_failing_directory_never_fails_or_hangs_a_compile(
    tmp_path: Path, smollm2: corral.Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = _cache(tmp_path)
    assert cache.disk is not None

    def broken(*a: object) -> None:
        raise RuntimeError("a bug in the directory layer")

    monkeypatch.setattr(cache.disk, "load", broken)
    monkeypatch.setattr(cache.disk, "store", broken)
    spec = ConstraintSpec.regex(REGEXES[2])
    assert compile_constraint(spec, smollm2, cache=cache).grammar.matcher().accept_bytes(b"red and blue")
    from corral.compile import compile_constraint_async

    fut, _ = compile_constraint_async(ConstraintSpec.regex(REGEXES[3]), smollm2, cache=cache)
    assert fut.result(timeout=60).grammar.matcher().accept_bytes(b"+1 555 0100")
    assert cache.stats()["compiles"] == 2
