"""The playground page (``corral serve`` → ``/playground``) in a real headless Chromium.

The browser loads the page from a real server, submits constraints through the form and waits
for the streamed output; the test then checks the rendered text validates against the
constraint, and that the token colouring (sampled vs forced by jump-ahead) is exactly what the
server's own API reports for the same request. A screenshot goes to ``ci-artifacts/``.

Needs Debian's ``chromium`` and ``chromium-driver`` and the ``selenium`` package (``.ci/run``
installs them; CI sets ``CORRAL_REQUIRE_BROWSER=1`` so a missing browser fails there instead of
skipping).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from server_helpers import Server, httpx, serve_bundled, start_server

from corral import models
from corral.server.playground import FILES

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "ci-artifacts"
BACKEND = "llama.cpp" if importlib.util.find_spec("llama_cpp") else "transformers"
STATIC = ROOT / "src" / "corral" / "server" / "playground" / "static"


def _browser_missing() -> str | None:
    if importlib.util.find_spec("selenium") is None:
        return "selenium is not installed (pip install -e '.[test]')"
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        return "chromium / chromedriver not found (apt-get install chromium chromium-driver)"
    return None


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve_bundled(tmp_path_factory, "playground", "--backend", BACKEND)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    missing = _browser_missing()
    if missing:
        if os.environ.get("CORRAL_REQUIRE_BROWSER"):
            pytest.fail(missing)
        pytest.skip(missing)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")  # type: ignore[assignment]
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1100"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
    driver.set_script_timeout(30)
    yield driver
    driver.quit()


# ------------------------------------------------------------------ the page as files


def test_page_is_served_from_the_package_without_external_resources(server: Server) -> None:
    r = server.http.get("/playground")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    for name, media in FILES.items():
        got = server.http.get("/playground" if name == "index.html" else f"/playground/{name}")
        assert got.status_code == 200 and got.headers["content-type"] == media
        assert got.content == (STATIC / name).read_bytes()
        # No CDN, no fonts, nothing fetched from elsewhere: only this server's own paths.
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", got.text), name
    assert server.http.get("/playground/../app.py").status_code == 404
    assert server.http.get("/playground/secret.txt").status_code == 404


def test_no_playground_flag(tmp_path: Path) -> None:
    try:
        models.smollm2_gguf_path()
    except models.ModelNotFoundError as e:  # pragma: no cover
        pytest.skip(str(e))
    srv = start_server(tmp_path, "--backend", BACKEND, "--no-playground")
    try:
        assert srv.http.get("/playground").status_code == 404
        assert srv.http.get("/health").status_code == 200
    finally:
        srv.stop()


# ------------------------------------------------------------------ in the browser


def _run(driver: Any, server: Server, example: str, edit: Any = None) -> dict[str, Any]:
    """Load the page, pick ``example`` (then ``edit(driver)``), submit, and wait for the end;
    the page's state (``window.corralPlayground``) and its rendered tokens."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    driver.get(server.url + "/playground")
    wait = WebDriverWait(driver, 60)
    wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-state") == "ready")
    Select(driver.find_element(By.ID, "example")).select_by_value(example)
    if edit is not None:
        edit(driver)
    driver.find_element(By.ID, "run").click()
    WebDriverWait(driver, 240).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-state") in ("done", "error")
    )
    # As JSON text: the driver's own object conversion does not keep key order (a schema's
    # property order is the output's order).
    state: dict[str, Any] = json.loads(driver.execute_script("return JSON.stringify(corralPlayground);"))
    state["spans"] = driver.execute_script(
        "return Array.from(document.querySelectorAll('#output .tok')).map("
        "e => [e.textContent, e.classList.contains('forced') ? 'forced' : 'sampled']);"
    )
    state["output"] = driver.execute_script("return document.getElementById('output').textContent;")
    state["validation_class"] = driver.find_element(By.ID, "validation").get_attribute("class")
    state["status"] = driver.find_element(By.ID, "status").text
    return state


def _api_trace(server: Server, request: dict[str, Any]) -> dict[str, Any]:
    """The same request the page sent, not streamed: the API's own account of each token."""
    body = {**request["body"], "stream": False}
    r = httpx.post(server.url + request["path"], json=body, timeout=240)
    assert r.status_code == 200, r.text
    choice: dict[str, Any] = r.json()["choices"][0]
    return choice


def _text_of(choice: dict[str, Any]) -> str:
    return str(choice["message"]["content"] if "message" in choice else choice["text"])


def test_json_schema_in_the_browser(server: Server, browser: Any) -> None:
    state = _run(browser, server, "invoice (JSON Schema)")
    ARTIFACTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "playground-json-schema.png"))
    assert state["error"] is None, state["error"]
    schema = json.loads(browser.find_element("id", "constraint").get_attribute("value"))
    text = state["text"]
    assert state["output"] == text  # what is drawn is what was generated
    jsonschema.validate(json.loads(text), schema)  # the rendered output validates
    assert state["validation"] == {"valid": True, "error": None}
    assert state["validation_class"] == "valid"

    choice = _api_trace(server, state["request"])
    assert _text_of(choice) == text  # greedy: the page's stream and the API agree
    api = choice["corral"]["trace"]
    # The colouring is the API's: token by token, sampled vs forced.
    assert [s[0] for s in state["spans"]] == [t["token"] for t in api]
    assert [s[1] for s in state["spans"]] == ["forced" if t["forced"] else "sampled" for t in api]
    stats = choice["corral"]["stats"]
    forced = sum(1 for s in state["spans"] if s[1] == "forced")
    assert forced == stats["forced"] > 0 and len(state["spans"]) - forced == stats["sampled"] > 0
    assert stats == state["stats"]
    # Each sampled step shows its allowed count and the removed choices the API reports.
    rows = browser.execute_script(
        "return Array.from(document.querySelectorAll('#steps tbody tr')).map("
        "r => Array.from(r.cells).map(c => c.textContent));"
    )
    assert len(rows) == len(api)
    for row, t in zip(rows, api, strict=True):
        assert row[2] == ("forced" if t["forced"] else "sampled")
        assert row[3] == ("" if t["allowed"] is None else str(t["allowed"]))
        for r in t["removed"]:
            assert json.dumps(r["token"], ensure_ascii=False) in row[6]  # as JSON.stringify writes it


def test_regex_in_the_browser(server: Server, browser: Any) -> None:
    state = _run(browser, server, "order id (regex)")
    browser.save_screenshot(str(ARTIFACTS / "playground-regex.png")) if ARTIFACTS.is_dir() else None
    assert state["error"] is None, state["error"]
    assert re.fullmatch(r"ORD-[0-9]{5}", state["text"]), state["text"]
    assert state["request"]["path"] == "/v1/completions" and state["request"]["body"]["regex"]
    choice = _api_trace(server, state["request"])
    assert [s[1] for s in state["spans"]] == [
        "forced" if t["forced"] else "sampled" for t in choice["corral"]["trace"]
    ]
    assert state["validation_class"] == "valid"


def test_a_refused_schema_shows_the_servers_error(server: Server, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    def paste(driver: Any) -> None:
        box = driver.find_element(By.ID, "constraint")
        box.clear()
        box.send_keys('{"type": "nonsense"}')

    state = _run(browser, server, "invoice (JSON Schema)", paste)
    assert "unknown type 'nonsense'" in (state["error"] or ""), state
    assert "unknown type 'nonsense'" in state["status"] and state["spans"] == []
