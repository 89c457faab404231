"""The versioned constraint registry (``--schema-dir`` + the admin API, issue 17 part 4).

Two halves: the registry and the access check in this process on the real SmolLM2 vocabulary
(layout, versions, conflicts, persistence round trip, bad inputs), then one real ``corral serve``
process with the bundled model driven over HTTP and by the official ``openai`` client (token,
remote refusal, add / pin / replace / delete, requests by name and by version, a live swap
under load, a DELETE while a request uses the version).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from unittest import mock

import jsonschema
import pytest

from corral.backends.loading import model_name
from corral.compile import CompileCache, ConstraintSpec, compile_constraint
from corral.errors import CorralError
from corral.server.errors import APIError

pytest.importorskip("starlette")
from corral.server.admin import check_access, is_loopback  # noqa: E402
from corral.server.constraint_files import Source, parse_ref, scan_dir, source_from_body  # noqa: E402
from corral.server.registry import ConstraintRegistry, named_constraint  # noqa: E402

pytestmark = pytest.mark.real_tokenizer

INVOICE_1 = {
    "type": "object",
    "properties": {"vendor": {"type": "string", "maxLength": 20}},
    "required": ["vendor"],
    "additionalProperties": False,
}
INVOICE_2 = {
    "type": "object",
    "properties": {"total": {"type": "integer", "minimum": 0, "maximum": 999}},
    "required": ["total"],
    "additionalProperties": False,
}
GBNF = 'root ::= "yes" | "no"\n'
LARK = 'start: "up" | "down"\n'


def _registry(tok: Any, persist: Path | None = None, keys: Any = None) -> ConstraintRegistry:
    return ConstraintRegistry(tok, CompileCache(64 * 1024 * 1024), persist_dir=persist, trusted_keys=keys)


def _put(reg: ConstraintRegistry, ref: str, body: dict[str, Any]) -> tuple[Any, bool]:
    name, version = ref.split("@")
    return asyncio.run(reg.put(name, version, source_from_body(body)))


def _status(fn: Any, *args: Any) -> tuple[int, str, str]:
    with pytest.raises(APIError) as e:
        fn(*args)
    return e.value.status, e.value.code, e.value.message


# ---------------------------------------------------------------------- references and layout


@pytest.mark.parametrize(
    ("ref", "expect"),
    [("invoice", ("invoice", None)), ("invoice@3", ("invoice", 3)), ("a.b-c_d@12", ("a.b-c_d", 12))],
)
def test_references(ref: str, expect: tuple[str, int | None]) -> None:
    assert parse_ref(ref) == expect


@pytest.mark.parametrize(
    ("ref", "code"),
    [
        ("invoice@03", "invalid_version"),
        ("invoice@0", "invalid_version"),
        ("invoice@", "invalid_version"),
        ("invoice@x", "invalid_version"),
        ("", "invalid_name"),
        ("bad name", "invalid_name"),
        (".hidden", "invalid_name"),
        ("a/b", "invalid_name"),
        ("x" * 129, "invalid_name"),
        (7, "invalid_name"),
    ],
)
def test_bad_references_are_400_naming_the_field(ref: Any, code: str) -> None:
    with pytest.raises(APIError) as e:
        parse_ref(ref, "corral_constraint")
    assert (e.value.status, e.value.code, e.value.param) == (400, code, "corral_constraint")
    assert repr(ref) in e.value.message or "corral_constraint must be" in e.value.message


def test_schema_dir_layout(tmp_path: Path) -> None:
    (tmp_path / "invoice@2.json").write_text(json.dumps(INVOICE_2))
    (tmp_path / "invoice.json").write_text(json.dumps(INVOICE_1))  # the old flat layout: version 1
    (tmp_path / "legacy.json").write_text(json.dumps({"name": "word", "schema": INVOICE_1, "strict": True}))
    (tmp_path / "order@4.regex").write_text("ORD-[0-9]{5}\n")
    (tmp_path / "yn@1.gbnf").write_text(GBNF)
    (tmp_path / "dir@1.lark").write_text(LARK)
    (tmp_path / "README.md").write_text("ignored")
    (tmp_path / ".x@1.json.tmp").write_text("{half")  # a temp file of an interrupted write
    got = {(n, v): (s, f.name) for n, v, s, f in scan_dir(tmp_path)}
    assert got == {
        ("dir", 1): (Source("grammar", LARK, syntax="lark"), "dir@1.lark"),
        ("invoice", 1): (Source("json_schema", INVOICE_1), "invoice.json"),
        ("invoice", 2): (Source("json_schema", INVOICE_2), "invoice@2.json"),
        ("order", 4): (Source("regex", "ORD-[0-9]{5}"), "order@4.regex"),
        ("word", 1): (Source("json_schema", INVOICE_1, strict=True), "legacy.json"),
        ("yn", 1): (Source("grammar", GBNF, syntax="gbnf"), "yn@1.gbnf"),
    }


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"a.json": "{}", "a@1.json": "{}"}, "a@1.json and a.json are both a@1"),
        ({"a@01.json": "{}"}, "a@01.json: '01' is not a valid version"),
        ({"a b.json": "{}"}, "a b.json: 'a b' is not a valid constraint name"),
        ({"a@2.json": '{"name": "b", "schema": {}}'}, "its object is named 'b', but the file name says 'a'"),
        ({"a@1.json": "{not json"}, "a@1.json is not JSON"),
    ],
)
def test_bad_schema_dirs_are_refused_naming_the_file(
    tmp_path: Path, files: dict[str, str], message: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(CorralError, match=re.escape(message)):
        scan_dir(tmp_path)
    with pytest.raises(CorralError, match="not a directory"):
        scan_dir(tmp_path / "missing")


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ([], "invalid_body"),
        ({}, "invalid_body"),
        ({"schema": {}, "regex": "a"}, "invalid_body"),
        ({"schema": "x"}, "invalid_schema"),
        ({"schema": {}, "strict": "yes"}, "invalid_body"),
        ({"schema": {}, "extra": 1}, "invalid_body"),
        ({"regex": ""}, "invalid_body"),
        ({"grammar": 3}, "invalid_body"),
        ({"grammar": GBNF, "syntax": "ebnf"}, "invalid_body"),
    ],
)
def test_bad_put_bodies(body: Any, code: str) -> None:
    assert _status(source_from_body, body)[:2] == (400, code)


# ---------------------------------------------------------------------- versions


def test_add_pin_replace_delete(smollm2: Any) -> None:
    reg = _registry(smollm2)
    v1, new = _put(reg, "invoice@1", {"schema": INVOICE_1})
    assert new and reg["invoice"] is v1.spec and reg["invoice@1"] is v1.spec
    v3, _ = _put(reg, "invoice@3", {"schema": INVOICE_2, "strict": True})
    assert reg["invoice"] is v3.spec and reg["invoice@1"] is v1.spec  # latest moved; the pin holds
    assert reg["invoice"].schema == INVOICE_2 and reg["invoice@1"].schema == INVOICE_1
    assert sorted(reg) == ["invoice@1", "invoice@3"] and len(reg) == 2
    # The same content again: nothing changes; other content for a live version: 409.
    again, new = _put(reg, "invoice@1", {"schema": INVOICE_1})
    assert again is v1 and not new
    status, code, message = _status(_put, reg, "invoice@1", {"schema": INVOICE_2})
    assert (status, code) == (409, "version_conflict") and "immutable" in message
    assert reg["invoice@1"].schema == INVOICE_1
    # strict is part of the content: the same schema without it is another constraint.
    assert _status(_put, reg, "invoice@3", {"schema": INVOICE_2})[:2] == (409, "version_conflict")
    # Delete the latest: "invoice" falls back to the highest version left.
    assert reg.delete("invoice", "3") is v3
    assert reg["invoice"] is v1.spec and "invoice@3" not in reg
    assert _status(reg.delete, "invoice", "3")[:2] == (404, "constraint_not_found")
    assert "live versions: 1" in reg.missing("invoice@3")
    reg.delete("invoice", 1)
    assert "invoice" not in reg and reg.missing("invoice") == "'invoice' is not a registered constraint"


def test_put_refuses_bad_constraints_and_changes_nothing(smollm2: Any) -> None:
    reg = _registry(smollm2)
    with pytest.raises(APIError) as e:
        _put(reg, "bad@1", {"schema": {"type": "nonsense"}})
    assert (e.value.status, e.value.pointer) == (400, "#/type") and "nonsense" in e.value.message
    assert _status(_put, reg, "bad@1", {"regex": "a(b"})[0] == 400
    assert _status(_put, reg, "bad@1", {"grammar": "root ::= missing"})[0] == 400
    assert _status(_put, reg, "bad name@1", {"regex": "a"})[:2] == (400, "invalid_name")
    assert len(reg) == 0 and reg.listing() == []
    _put(reg, "bad@1", {"regex": "a"})  # a failed compile left no claim on the version behind
    assert reg["bad"].payload == "a"


def test_the_registry_is_bounded(smollm2: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import corral.server.registry as registry

    monkeypatch.setattr(registry, "MAX_VERSIONS", 2)
    reg = _registry(smollm2)
    _put(reg, "a@1", {"regex": "a"})
    _put(reg, "a@2", {"regex": "b"})
    assert _status(_put, reg, "b@1", {"regex": "c"})[:2] == (409, "registry_full")
    assert _put(reg, "a@2", {"regex": "b"})[1] is False  # an identical re-PUT is still answered
    reg.delete("a", 1)
    assert _put(reg, "b@1", {"regex": "c"})[1] is True


def test_kinds_and_named_lookups(smollm2: Any) -> None:
    reg = _registry(smollm2)
    _put(reg, "order@1", {"regex": "ORD-[0-9]{5}"})
    _put(reg, "yn@1", {"grammar": GBNF})
    _put(reg, "dir@1", {"grammar": LARK, "syntax": "lark"})
    assert named_constraint(reg, "order", "corral_constraint").kind == "regex"
    assert named_constraint(reg, "dir@1", "corral_constraint").options == {"syntax": "lark"}
    status, code, message = _status(named_constraint, reg, "order", "response_format", ("json_schema",))
    assert (status, code) == (400, "wrong_constraint_kind") and "corral_constraint" in message
    assert _status(named_constraint, reg, "order@2", "p")[:2] == (400, "unknown_constraint")
    assert _status(named_constraint, reg, "order@02", "p")[:2] == (400, "invalid_version")
    # A plain {name: spec} mapping (the protocol's own tests pass one) works the same way.
    plain = {"order": reg["order"]}
    assert named_constraint(plain, "order", "p") is reg["order"]
    assert _status(named_constraint, plain, "nope", "p")[:2] == (400, "unknown_constraint")


def test_persistence_round_trips_and_deletes_files(smollm2: Any, tmp_path: Path) -> None:
    (tmp_path / "person.json").write_text(json.dumps(INVOICE_1))
    reg = _registry(smollm2, tmp_path)
    reg.load_dir(tmp_path)
    assert reg["person@1"].schema == INVOICE_1
    for ref, body in [
        ("invoice@2", {"schema": INVOICE_2, "strict": True}),
        ("order@1", {"regex": "ORD-[0-9]{5}\n"}),  # a pattern ending in a newline survives
        ("yn@1", {"grammar": GBNF}),
        ("dir@1", {"grammar": LARK}),
    ]:
        _put(reg, ref, body)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["dir@1.lark", "invoice@2.json", "order@1.regex", "person.json", "yn@1.gbnf"]
    # A restart reads back the same constraints: the same keys (content + options + tokenizer).
    again = _registry(smollm2)
    again.load_dir(tmp_path)
    assert {r: again.lookup(r).key for r in again} == {r: reg.lookup(r).key for r in reg}  # type: ignore[union-attr]
    reg.delete("person", 1)
    reg.delete("order", 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir@1.lark", "invoice@2.json", "yn@1.gbnf"]
    # Without persistence a DELETE leaves the directory alone.
    again.delete("yn", 1)
    assert (tmp_path / "yn@1.gbnf").exists()


def test_schema_dir_compile_errors_name_the_file(smollm2: Any, tmp_path: Path) -> None:
    (tmp_path / "ok@1.json").write_text(json.dumps(INVOICE_1))
    (tmp_path / "broken@2.json").write_text(json.dumps({"type": "integer", "minimum": 5, "maximum": 2}))
    reg = _registry(smollm2)
    with pytest.raises(CorralError, match=r"broken@2\.json: the number bounds allow no value.* \(at #\)"):
        reg.load_dir(tmp_path)
    assert len(reg) == 0  # all or nothing


def test_readers_never_see_a_half_swapped_table(smollm2: Any) -> None:
    """Versions added and deleted while other threads resolve names: every read finds a live
    version (the one before or the one after), never nothing and never a KeyError."""
    reg = _registry(smollm2)
    _put(reg, "hot@1", {"regex": "a"})
    stop = threading.Event()
    seen: set[str] = set()
    errors: list[BaseException] = []

    def read() -> None:
        while not stop.is_set():
            try:
                seen.add(reg["hot"].payload)
            except BaseException as e:  # pragma: no cover - the failure being tested for
                errors.append(e)
                return

    threads = [threading.Thread(target=read) for _ in range(3)]
    for t in threads:
        t.start()
    for v in range(2, 12):
        _put(reg, f"hot@{v}", {"regex": "a" * v})
        reg.delete("hot", v - 1)
    stop.set()
    for t in threads:
        t.join()
    assert not errors and reg["hot"].payload == "a" * 11 and len(reg) == 1 and len(seen) > 1


# ---------------------------------------------------------------------- signed artifacts


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(trusted private key, another private key); the public halves beside them (``.pub``)."""
    pytest.importorskip("cryptography")
    from corral.compile.signing import write_keypair

    d = tmp_path_factory.mktemp("keys")
    return write_keypair(d / "trusted")[0], write_keypair(d / "other")[0]


def _artifact(tok: Any, schema: Any, key: Path | None) -> bytes:
    from corral.compile.artifact import dumps

    c = compile_constraint(
        ConstraintSpec.json_schema(schema, {"strict": False}), tok, cache=CompileCache(1 << 26)
    )
    return dumps(c, signing_key=key)


def test_signed_artifacts_go_live_without_compiling(
    smollm2: Any, keys: tuple[Path, Path], tmp_path: Path
) -> None:
    trusted, other = keys
    reg = _registry(smollm2, tmp_path, keys=[Path(str(trusted) + ".pub")])
    data = _artifact(smollm2, INVOICE_1, trusted)
    source = reg.load_artifact(data)
    v, new = asyncio.run(reg.put("inv", 1, source))
    assert new and reg["inv"].schema == INVOICE_1
    # The cache serves the loaded constraint itself under the key a compile would use.
    assert reg.cache.get(v.key, lambda: None)[0].result() is source.loaded
    assert v.as_json(True, source=True)["format"] == "artifact" and v.as_json(True)["kind"] == "json_schema"
    # The same constraint as a source is the same content: no conflict, nothing new.
    assert asyncio.run(reg.put("inv", 1, source_from_body({"schema": INVOICE_1}))) == (v, False)
    assert (tmp_path / "inv@1.corral").read_bytes() == data
    again = _registry(smollm2, keys=[Path(str(trusted) + ".pub")])
    again.load_dir(tmp_path)  # a restart loads the persisted artifact, verified again
    assert again.lookup("inv@1").key == v.key  # type: ignore[union-attr]
    with pytest.raises(CorralError, match=r"inv@1\.corral: artifact uploads are off"):
        _registry(smollm2).load_dir(tmp_path)  # no trusted keys: the file is refused at start-up
    tampered = bytearray(data)
    tampered[len(tampered) // 2] ^= 1
    for bad, code in [
        (_artifact(smollm2, INVOICE_2, None), "artifact_unsigned"),
        (_artifact(smollm2, INVOICE_2, other), "artifact_wrong_key"),
        (bytes(tampered), "artifact_tampered"),
        (b"not an artifact", "artifact_bad_magic"),
    ]:
        assert _status(reg.load_artifact, bad)[:2] == (400, code)
    assert _status(_registry(smollm2).load_artifact, data)[:2] == (403, "artifact_upload_off")


def test_artifacts_for_another_vocabulary_or_other_options_are_refused(
    smollm2: Any, llama32: Any, keys: tuple[Path, Path]
) -> None:
    pub = [Path(str(keys[0]) + ".pub")]
    data = _artifact(llama32, INVOICE_1, keys[0])
    assert _status(_registry(smollm2, keys=pub).load_artifact, data)[:2] == (400, "artifact_wrong_vocabulary")
    # A server that applies other schema options would compile this spec differently: refused.
    reg = ConstraintRegistry(
        smollm2, CompileCache(1 << 26), lambda s: s.with_options(whitespace="flexible"), trusted_keys=pub
    )
    source = reg.load_artifact(_artifact(smollm2, INVOICE_1, keys[0]))
    with pytest.raises(APIError) as e:
        asyncio.run(reg.put("inv", 1, source))
    assert (e.value.status, e.value.code) == (400, "artifact_options_mismatch") and len(reg) == 0


# ---------------------------------------------------------------------- access


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("10.0.0.7", False),
        ("192.168.1.2", False),
        ("::ffff:10.0.0.7", False),
        ("testclient", False),
        (None, False),
    ],
)
def test_loopback(host: str | None, local: bool) -> None:
    assert is_loopback(host) is local


TOKEN = "s3cret-admin-token-for-tests"


@pytest.mark.parametrize(
    ("token", "remote", "client", "auth", "expect"),
    [
        (None, False, "127.0.0.1", f"Bearer {TOKEN}", (404, "admin_api_off")),
        (TOKEN, False, "10.0.0.7", f"Bearer {TOKEN}", (403, "admin_remote_refused")),
        (TOKEN, False, "127.0.0.1", None, (401, "missing_token")),
        (TOKEN, False, "127.0.0.1", f"Basic {TOKEN}", (401, "missing_token")),
        (TOKEN, False, "127.0.0.1", "Bearer ", (401, "missing_token")),
        (TOKEN, False, "127.0.0.1", "Bearer wrong", (403, "invalid_token")),
        (TOKEN, False, "127.0.0.1", f"Bearer {TOKEN}x", (403, "invalid_token")),
        (TOKEN, True, "10.0.0.7", "Bearer wrong", (403, "invalid_token")),
        (TOKEN, True, "10.0.0.7", f"bearer {TOKEN}", None),
        (TOKEN, False, "::1", f"Bearer {TOKEN}", None),
    ],
)
def test_access(token: Any, remote: bool, client: str, auth: Any, expect: Any) -> None:
    if expect is None:
        check_access(token, remote, client, auth)
        return
    assert _status(check_access, token, remote, client, auth)[:2] == expect


# ---------------------------------------------------------------------- through a real server

BACKEND = "llama.cpp" if importlib.util.find_spec("llama_cpp") else "transformers"
MODEL = model_name(None)
AUTH = {"authorization": f"Bearer {TOKEN}"}
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}},
    "required": ["name"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, keys: tuple[Path, Path]) -> Iterator[Any]:
    pytest.importorskip("openai")
    from server_helpers import serve_bundled

    schemas = tmp_path_factory.mktemp("registry-dir")
    (schemas / "person.json").write_text(json.dumps(PERSON))  # the flat layout: person@1
    (schemas / "order@2.regex").write_text("ORD-[0-9]{5}\n")
    # The token comes from the environment (as operators should pass it: arguments show in ps).
    with mock.patch.dict(os.environ, {"CORRAL_ADMIN_TOKEN": TOKEN}):
        for srv in serve_bundled(
            tmp_path_factory, "registry", "--backend", BACKEND, "--schema-dir", str(schemas),
            "--registry-persist", "--max-batch", "8", "--trusted-keys", str(keys[0]) + ".pub",
        ):  # fmt: skip
            srv.schemas = schemas
            yield srv


def _admin(server: Any, method: str, path: str = "", body: Any = None, **kw: Any) -> Any:
    headers = kw.pop("headers", AUTH)
    url = "/v1/corral/constraints" + path
    if body is not None:
        kw["json"] = body
    return server.http.request(method, url, headers=headers, **kw)


def _chat(server: Any, fmt: dict[str, Any] | None = None, max_tokens: int = 30, **extra: Any) -> Any:
    """A chat request through the openai client: (parsed JSON content, the version served)."""
    raw = server.client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Reply with JSON for: ACME, total 12."}],
        temperature=0,
        max_tokens=max_tokens,
        **({"response_format": fmt} if fmt else {}),
        **({"extra_body": extra} if extra else {}),
    )
    r = raw.parse()
    return r.choices[0].message.content, raw.headers.get("x-corral-constraint")


def _typed(kind: str) -> dict[str, str]:
    return {**AUTH, "content-type": f"application/{kind}"}


def _named(name: str) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name}}


def test_admin_needs_the_token_and_a_loopback_client(server: Any) -> None:
    r = _admin(server, "GET", headers={})
    assert r.status_code == 401 and r.json()["error"]["code"] == "missing_token"
    assert r.headers["www-authenticate"].startswith("Bearer")
    r = _admin(server, "PUT", "/x/1", {"regex": "a"}, headers={"authorization": "Bearer not-the-token"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "invalid_token"
    assert _admin(server, "GET", "/x/1").status_code == 404  # the refused PUT added nothing
    # A client behind a local reverse proxy (uvicorn trusts X-Forwarded-For from 127.0.0.1) is
    # remote, token or not.
    r = _admin(server, "GET", headers={**AUTH, "x-forwarded-for": "203.0.113.9"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "admin_remote_refused"
    assert "203.0.113.9" in r.json()["error"]["message"]
    listing = _admin(server, "GET").json()["data"]
    assert {(d["id"], d["kind"], d["latest"], d["origin"]) for d in listing} >= {
        ("person@1", "json_schema", True, "schema-dir"),
        ("order@2", "regex", True, "schema-dir"),
    }
    metrics = server.metrics()
    for status in ("401", "403", "404", "200"):
        assert f'corral_requests_total{{endpoint="admin",status="{status}"}}' in metrics
    assert server.metric("corral_registry_versions") == len(_admin(server, "GET").json()["data"])


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--admin-token", "short"], {}, "must be at least 16 characters"),
        ([], {"CORRAL_ADMIN_TOKEN": "short"}, "must be at least 16 characters"),
        (["--registry-persist"], {}, "--registry-persist needs --schema-dir"),
        (
            ["--trusted-keys", "/nonexistent/k.pub"],
            {},
            "cannot read the public key file '/nonexistent/k.pub'",
        ),
    ],
)
def test_serve_refuses_bad_registry_options_before_loading(
    args: list[str], env: dict[str, str], message: str
) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "corral", "serve", "--model", "/nonexistent.gguf", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
    assert p.returncode == 2 and message in p.stderr, p.stderr


def test_add_pin_replace_delete_by_name_and_version(server: Any) -> None:
    r = _admin(server, "PUT", "/invoice/1", {"schema": INVOICE_1, "strict": True})
    assert r.status_code == 201, r.text
    assert r.json()["id"] == "invoice@1" and r.json()["latest"] is True
    content, served = _chat(server, _named("invoice"))
    jsonschema.validate(json.loads(content), INVOICE_1)
    assert served == "invoice@1"
    # Replace the latest with a new version; the old one stays pinned.
    assert _admin(server, "PUT", "/invoice/2", {"schema": INVOICE_2}).status_code == 201
    content, served = _chat(server, _named("invoice"))
    jsonschema.validate(json.loads(content), INVOICE_2)
    assert served == "invoice@2"
    content, served = _chat(server, _named("invoice@1"))
    jsonschema.validate(json.loads(content), INVOICE_1)
    assert served == "invoice@1"
    # Idempotent re-PUT; a conflicting one is refused and changes nothing.
    assert _admin(server, "PUT", "/invoice/2", {"schema": INVOICE_2}).status_code == 200
    r = _admin(server, "PUT", "/invoice/2", {"schema": INVOICE_1})
    assert r.status_code == 409 and r.json()["error"]["code"] == "version_conflict"
    got = _admin(server, "GET", "/invoice/2").json()
    assert got["source"] == {"schema": INVOICE_2, "strict": False} and got["latest"] is True
    assert [d["version"] for d in _admin(server, "GET", "/invoice").json()["data"]] == [1, 2]
    persisted = sorted(p.name for p in server.schemas.iterdir())
    assert "invoice@1.json" in persisted and "invoice@2.json" in persisted
    # Delete the latest: the name falls back to version 1; the deleted one is gone everywhere.
    r = _admin(server, "DELETE", "/invoice/2")
    assert r.status_code == 200 and r.json()["id"] == "invoice@2"
    assert not (server.schemas / "invoice@2.json").exists()
    assert _chat(server, _named("invoice"))[1] == "invoice@1"
    with pytest.raises(Exception) as e:
        _chat(server, _named("invoice@2"))
    assert getattr(e.value, "status_code", None) == 400 and "live versions: 1" in str(e.value)
    assert _admin(server, "DELETE", "/invoice/2").status_code == 404


def test_regexes_and_grammars_by_name(server: Any) -> None:
    r = server.client.completions.with_raw_response.create(
        model=MODEL,
        prompt="An order id:",
        max_tokens=12,
        temperature=0,
        extra_body={"corral_constraint": "order"},
    )
    assert (
        re.fullmatch(r"ORD-[0-9]{5}", r.parse().choices[0].text)
        and r.headers["x-corral-constraint"] == "order@2"
    )
    assert _admin(server, "PUT", "/yn/1", {"grammar": GBNF}).status_code == 201
    content, served = _chat(server, None, 5, corral_constraint="yn@1")
    assert content in ("yes", "no") and served == "yn@1"
    # The person schema from the flat file, named in the OpenAI shape.
    content, served = _chat(server, _named("person"))
    jsonschema.validate(json.loads(content), PERSON)
    assert served == "person@1"


@pytest.mark.parametrize(
    ("method", "path", "kw", "status", "code"),
    [
        ("PUT", "/bad/1", {"json": {"schema": {"type": "nonsense"}}}, 400, "invalid_schema"),
        ("PUT", "/bad/1", {"json": {"regex": "a("}}, 400, None),
        ("PUT", "/bad%20name/1", {"json": {"regex": "a"}}, 400, "invalid_name"),
        ("PUT", "/bad/03", {"json": {"regex": "a"}}, 400, "invalid_version"),
        ("PUT", "/bad/1", {"content": b"{not json", "headers": _typed("json")}, 400, "invalid_json"),
        ("PUT", "/bad/1", {"content": b"\x00", "headers": _typed("octet-stream")}, 400, "artifact_bad_magic"),
        ("PUT", "/bad/1", {"content": b"a", "headers": {**AUTH, "content-type": "text/plain"}}, 415,
         "unsupported_media_type"),
        ("PUT", "/bad/1", {"json": {"schema": {}, "regex": "a"}}, 400, "invalid_body"),
        ("GET", "/bad/1", {}, 404, "constraint_not_found"),
        ("DELETE", "/bad/x", {}, 400, "invalid_version"),
    ],
)  # fmt: skip
def test_bad_admin_requests(
    server: Any, method: str, path: str, kw: dict[str, Any], status: int, code: Any
) -> None:
    kw.setdefault("headers", AUTH)
    r = server.http.request(method, "/v1/corral/constraints" + path, **kw)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert code is None or err["code"] == code
    assert err["message"]
    if err["code"] == "invalid_schema":
        assert err["pointer"] == "#/type" and "nonsense" in err["message"]
    assert _admin(server, "GET", "/bad").status_code == 404  # nothing was added


def test_bad_named_requests(server: Any) -> None:
    for fmt, extra, code in [
        (_named("nope"), {}, "unknown_constraint"),
        (_named("order"), {}, "wrong_constraint_kind"),  # a regex is not a response_format schema
        (None, {"corral_constraint": "person@x"}, "invalid_version"),
        (_named("person"), {"corral_constraint": "person"}, "invalid_request"),  # both given
    ]:
        with pytest.raises(Exception) as e:
            _chat(server, fmt, **extra)
        assert getattr(e.value, "status_code", None) == 400 and e.value.body["code"] == code, e.value  # type: ignore[attr-defined]


def test_live_swap_under_load_loses_no_request(server: Any) -> None:
    """Requests naming "swap" (the latest) while PUTs add newer versions: every request succeeds
    and each output is valid for the version its response says served it."""
    schemas = {
        v: {
            "type": "object",
            "properties": {f"v{v}": {"type": "integer", "minimum": 0, "maximum": 9}},
            "required": [f"v{v}"],
            "additionalProperties": False,
        }
        for v in (1, 2, 3)
    }
    assert _admin(server, "PUT", "/swap/1", {"schema": schemas[1]}).status_code == 201

    def one(_: int) -> tuple[str, str]:
        return _chat(server, _named("swap"), 16)

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(one, i) for i in range(8)]
        for v in (2, 3):
            time.sleep(1.0)  # the first requests have resolved "swap" (to swap@1) and are decoding
            assert _admin(server, "PUT", f"/swap/{v}", {"schema": schemas[v]}).status_code == 201
        futures += [pool.submit(one, i) for i in range(8)]
        results = [f.result() for f in futures]
    served = [s for _, s in results]
    for content, ref in results:
        jsonschema.validate(json.loads(content), schemas[int(ref.split("@")[1])])
    assert served[0] == "swap@1" and served[-1] == "swap@3", served
    assert _chat(server, _named("swap@1"))[1] == "swap@1"  # still pinned after the swaps


def test_delete_does_not_break_a_request_using_the_version(server: Any) -> None:
    assert _admin(server, "PUT", "/gone/1", {"schema": INVOICE_1}).status_code == 201
    stream = server.client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Reply with JSON for the vendor ACME."}],
        temperature=0,
        max_tokens=30,
        response_format=_named("gone@1"),
        stream=True,
    )
    pieces = []
    for i, chunk in enumerate(stream):
        if i == 2:  # decoding has started: take the version away
            assert _admin(server, "DELETE", "/gone/1").status_code == 200
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
    jsonschema.validate(json.loads("".join(pieces)), INVOICE_1)
    assert _admin(server, "GET", "/gone/1").status_code == 404


def test_signed_artifact_upload(server: Any, smollm2: Any, keys: tuple[Path, Path]) -> None:
    trusted, other = keys
    for key, code in [(None, "artifact_unsigned"), (other, "artifact_wrong_key")]:
        r = _admin(
            server,
            "PUT",
            "/signed/1",
            content=_artifact(smollm2, PERSON, key),
            headers=_typed("octet-stream"),
        )
        assert r.status_code == 400 and r.json()["error"]["code"] == code, r.text
    data = _artifact(smollm2, PERSON, trusted)
    r = _admin(server, "PUT", "/signed/1", content=data, headers=_typed("octet-stream"))
    assert r.status_code == 201, r.text
    assert r.json()["format"] == "artifact" and r.json()["kind"] == "json_schema"
    assert (server.schemas / "signed@1.corral").read_bytes() == data
    raw = server.client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Reply with JSON for the name Ann."}],
        temperature=0,
        max_tokens=30,
        response_format=_named("signed"),
    )
    assert raw.headers["x-corral-constraint"] == "signed@1" and raw.headers["x-corral-cache"] == "hit"
    jsonschema.validate(json.loads(raw.parse().choices[0].message.content), PERSON)
