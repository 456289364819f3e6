"""End to end: the dashboard (/ui) in headless Chromium, against `memento serve` run as a process.

Debian's chromium driven by Playwright for Python (scripts/browser installs both, and axe-core).
Without them these tests skip, unless MEMENTO_REQUIRE_BROWSER=1 (CI) makes that a failure.

Every page is checked with axe-core (no serious or critical violation) and photographed at desktop
(1280x800) and phone (390x844) width: into a temporary folder, or into MEMENTO_DASHBOARD_SHOTS
(`MEMENTO_DASHBOARD_SHOTS=docs/img` refreshes the README's pictures).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp_helpers import TIMEOUT_S, HttpServer, server_env, start_http_server
from rest_helpers import KEY_A, KEY_A_READ, KEY_B, OPERATOR, client

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "browser"
CHROMIUM = "/usr/bin/chromium"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
WAIT_MS = 20_000
GRAVE = ("serious", "critical")


def _axe_source() -> str:
    found = sorted((ROOT / ".tools").glob("axe-core-*/node_modules/axe-core/axe.min.js"))
    assert found, "axe-core is not installed (scripts/browser --install-only)"
    return found[-1].read_text()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium under Playwright; skip (or fail, when required) unless scripts/browser installed it."""
    check = subprocess.run(["bash", str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    if check.returncode != 0:
        message = (check.stdout + check.stderr).strip() or f"scripts/browser --check exited {check.returncode}"
        if os.environ.get("MEMENTO_REQUIRE_BROWSER") == "1":
            pytest.fail(f"MEMENTO_REQUIRE_BROWSER=1 but the browser toolchain is missing: {message}")
        pytest.skip(f"browser toolchain not installed (scripts/browser --install-only): {message}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """A server with the operator key, agent keys for agent-a and agent-b and agent-a's read-only key."""
    folder = tmp_path_factory.mktemp("dashboard")
    keys = [
        {"name": "a", "key": KEY_A, "agent": "agent-a", "access": "read-write"},
        {"name": "b", "key": KEY_B, "agent": "agent-b", "access": "read-write"},
        {"name": "a-read", "key": KEY_A_READ, "agent": "agent-a", "access": "read-only"},
    ]
    env = {**server_env(folder / "store.db"), "MEMENTO_ACCESS_KEY": OPERATOR, "MEMENTO_KEYS": json.dumps(keys)}
    started = start_http_server(env, folder / "server.log")
    try:
        with client(started.url, OPERATOR) as http:
            for text, tags in (
                ("The deploy script needs the staging token from the vault", ["ops"]),
                ("User prefers TypeScript over JavaScript for new services", ["lang"]),
                ("Herons nest in the reeds by the north pond", ["birds"]),
            ):
                assert http.post("/memories", json={"content": text, "tags": tags}).status_code == 201
            relation = {"source": "Grey heron", "target": "North pond", "relation_type": "nests_at", "strength": 0.9}
            assert http.post("/relations", json=relation).status_code == 201
        with client(started.url, KEY_A) as http:
            assert http.post("/memories", json={"content": "Agent A keeps its kestrel notes here", "tags": ["a"]}).status_code == 201
        with client(started.url, KEY_B) as http:
            assert http.post("/memories", json={"content": "Agent B keeps its osprey notes here", "tags": ["b"]}).status_code == 201
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("MEMENTO_DASHBOARD_SHOTS")
    folder = (ROOT / chosen) if chosen and not Path(chosen).is_absolute() else Path(chosen) if chosen else tmp_path_factory.mktemp("shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def open_page(browser: Any, server: HttpServer) -> Any:
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors
    page.goto(server.url + "/ui/")
    return page


def log_in(page: Any, key: str) -> None:
    page.get_by_label("Access key").fill(key)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="Memories").wait_for()
    page.locator("#identity").wait_for()


def check_page(page: Any, shots: Path, name: str) -> None:
    """axe-core finds no serious or critical violation; a screenshot at desktop and at phone width."""
    page.evaluate(_axe_source())  # evaluated by the driver, so the page's own CSP stays in force
    found = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 3)}))"
    )
    grave = [v for v in found if v["impact"] in GRAVE]
    assert grave == [], f"{name}: {grave}"
    for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        page.evaluate("window.scrollTo(0, 0)")
        path = shots / f"dashboard-{name}-{label}.png"
        page.screenshot(path=str(path), full_page=False)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page.set_viewport_size(DESKTOP)


def test_login_search_open_amend_pin_forget_undo_and_erase(browser: Any, server: HttpServer, shots: Path) -> None:
    page = open_page(browser, server)
    page.get_by_role("heading", name="Log in").wait_for()
    check_page(page, shots, "login")
    page.get_by_label("Access key").fill("not-a-key-" + "x" * 20)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("alert").filter(has_text="not known").wait_for()
    log_in(page, OPERATOR)
    cookie = next(c for c in page.context.cookies() if c["name"] == "memento_ui")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    page.get_by_text("3 memories").wait_for()
    check_page(page, shots, "memories")

    page.get_by_role("link", name="Search").click()
    page.get_by_label("Query").fill("heron nests")
    page.get_by_role("button", name="Search").click()
    hit = page.locator("article.hit").first
    hit.wait_for()
    assert "Herons nest" in hit.inner_text() and "Why:" in hit.inner_text()
    check_page(page, shots, "search")

    hit.get_by_role("link").click()
    page.locator("#content").filter(has_text="Herons nest in the reeds").wait_for()
    memory_id = page.url.rsplit("/", 1)[-1]
    check_page(page, shots, "memory")

    page.get_by_label("Content").fill("Herons nest in the reeds by the south pond")
    page.get_by_role("button", name="Save amendment").click()
    page.locator("#content").filter(has_text="south pond").wait_for()
    assert "north pond" in page.locator("#versions").inner_text()  # the old text, kept as a version

    page.get_by_role("button", name="Pin", exact=True).click()
    page.get_by_role("button", name="Unpin").wait_for()
    with client(server.url, OPERATOR) as http:
        assert http.get("/memories", params={"pinned": "true"}).json()["items"][0]["id"] == memory_id

    page.get_by_role("button", name="Forget", exact=True).click()
    page.get_by_text("Forgotten.").wait_for()
    with client(server.url, OPERATOR) as http:
        assert http.get(f"/memories/{memory_id}").status_code == 404
    page.get_by_role("button", name="Undo").click()
    page.get_by_role("button", name="Forget", exact=True).wait_for()
    with client(server.url, OPERATOR) as http:
        assert http.get(f"/memories/{memory_id}").status_code == 200

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Erase for good").click()
    receipt = json.loads(page.locator("#receipt").inner_text())
    assert memory_id in json.dumps(receipt)
    with client(server.url, OPERATOR) as http:
        assert http.get(f"/memories/{memory_id}").status_code == 404
        assert http.post("/erasures/verify", json={"receipt": receipt}).json()["verified"] is True
    assert page.errors == []


def _remember_over_mcp(url: str, text: str) -> None:
    """A write through the official MCP client (Streamable HTTP, the operator key)."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def write() -> None:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {OPERATOR}"}, timeout=TIMEOUT_S) as http:
            async with Client(streamable_http_client(url, http_client=http), read_timeout_seconds=TIMEOUT_S) as mcp:
                result = await mcp.call_tool("remember", {"content": text, "topic": "birds", "type": "fact"})
                assert not result.is_error, result

    failure: list[BaseException] = []

    def run() -> None:
        try:
            anyio.run(write)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test thread
            failure.append(exc)

    thread = threading.Thread(target=run)  # its own event loop, away from Playwright's
    thread.start()
    thread.join(TIMEOUT_S)
    assert not thread.is_alive() and failure == [], failure


def test_a_write_over_mcp_arrives_in_the_live_feed(browser: Any, server: HttpServer, shots: Path) -> None:
    page = open_page(browser, server)
    log_in(page, OPERATOR)
    page.get_by_role("link", name="Live").click()
    page.locator("#stream-state").filter(has_text="connected").wait_for()
    _remember_over_mcp(server.mcp, "A grey wagtail by the weir at dawn")
    event = page.locator("#feed li").filter(has_text="grey wagtail")
    event.wait_for()
    assert "memory_created" in event.inner_text()
    assert page.url.endswith("#/live")  # no reload: the same page got it
    check_page(page, shots, "live")


def test_a_consolidation_dry_run_shows_its_result(browser: Any, server: HttpServer, shots: Path) -> None:
    page = open_page(browser, server)
    log_in(page, OPERATOR)
    page.get_by_role("link", name="Operations").click()
    assert page.get_by_label("Dry run (report only, change nothing)").is_checked()
    before = client(server.url, OPERATOR).get("/memories").json()["total"]
    page.get_by_role("button", name="Start consolidation").click()
    page.locator("#consolidation-result").filter(has_text="Dry run finished").wait_for()
    assert "nothing changed" in page.locator("#consolidation-result").inner_text()
    assert client(server.url, OPERATOR).get("/memories").json()["total"] == before
    check_page(page, shots, "operations")
    page.get_by_role("link", name="Analytics").click()
    page.get_by_role("heading", name="Consolidation history").wait_for()
    assert "recall" in page.get_by_role("table").filter(has_text="Mean (ms)").inner_text()  # latency from the metrics
    check_page(page, shots, "analytics")


def test_the_graph_and_the_agent_state_pages(browser: Any, server: HttpServer, shots: Path) -> None:
    page = open_page(browser, server)
    log_in(page, OPERATOR)
    page.get_by_role("link", name="Graph").click()
    page.locator("tr.relation").filter(has_text="nests_at").wait_for()
    page.locator("#graph canvas").first.wait_for()  # drawn by the vendored cytoscape.js
    check_page(page, shots, "graph")
    page.get_by_role("link", name="Agent state").click()
    page.get_by_role("heading", name="Skip list (0)").wait_for()
    check_page(page, shots, "agent-state")
    assert page.errors == []


def test_a_read_only_key_sees_no_write_controls_and_a_forged_write_is_refused(browser: Any, server: HttpServer) -> None:
    with client(server.url, KEY_A) as http:
        memory_id = http.get("/memories").json()["items"][0]["id"]
    page = open_page(browser, server)
    log_in(page, KEY_A_READ)
    assert "read-only" in page.locator("#identity").inner_text()
    assert page.get_by_role("button", name="Forget selected").count() == 0
    page.goto(f"{server.url}/ui/#/memory/{memory_id}")
    page.locator("#content").wait_for()
    for name in ("Pin", "Forget", "Erase for good", "Save amendment"):
        assert page.get_by_role("button", name=name, exact=True).count() == 0, name
    forged = page.evaluate(
        """async (id) => {
            const session = await (await fetch('/ui/session')).json();
            const r = await fetch('/api/memories/' + id + '?mode=hard',
                {method: 'DELETE', headers: {'X-Memento-CSRF': session.csrf}});
            return r.status;
        }""",
        memory_id,
    )
    assert forged == 403
    with client(server.url, KEY_A) as http:
        assert http.get(f"/memories/{memory_id}").status_code == 200


def test_an_agent_key_sees_only_its_agent(browser: Any, server: HttpServer) -> None:
    page = open_page(browser, server)
    log_in(page, KEY_A)
    page.get_by_text("Agent A keeps its kestrel notes here").wait_for()
    listing = page.locator("main").inner_text()
    assert "osprey" not in listing
    assert page.get_by_label("Agent", exact=True).count() == 0  # no agent selector for an agent's key
    status = page.evaluate(
        """async () => {
            const session = await (await fetch('/ui/session')).json();
            return (await fetch('/api/memories?agent_id=agent-b', {headers: {'X-Memento-CSRF': session.csrf}})).status;
        }"""
    )
    assert status == 403


def test_the_cookie_is_no_credential_without_its_csrf_header_nor_on_mcp(browser: Any, server: HttpServer) -> None:
    page = open_page(browser, server)
    log_in(page, OPERATOR)
    statuses = page.evaluate(
        """async () => {
            const api = (await fetch('/api/memories')).status;
            const mcp = (await fetch('/mcp', {method: 'POST', headers: {'Content-Type': 'application/json',
                'Accept': 'application/json, text/event-stream'}, body: JSON.stringify({jsonrpc: '2.0', id: 1, method: 'ping'})})).status;
            return [api, mcp];
        }"""
    )
    assert statuses == [401, 401]
    page.get_by_role("button", name="Log out").click()
    page.get_by_role("heading", name="Log in").wait_for()
    assert page.evaluate("async () => (await fetch('/ui/session')).status") == 401


def test_the_keyboard_alone_logs_in_and_reaches_every_page(browser: Any, server: HttpServer) -> None:
    page = open_page(browser, server)
    page.get_by_role("heading", name="Log in").wait_for()
    assert page.evaluate("document.activeElement.name") == "key"  # the login page starts in its one field
    page.keyboard.type(OPERATOR)
    page.keyboard.press("Enter")
    page.get_by_role("heading", name="Memories").wait_for()
    page.reload()  # the session cookie keeps it logged in; focus starts at the top of the document
    page.get_by_role("heading", name="Memories").wait_for()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Tab")
    order = []
    for _ in range(5):
        order.append(page.evaluate("document.activeElement.textContent"))
        page.keyboard.press("Tab")
    assert order == ["Memories", "Search", "Live", "Operations", "Analytics"]  # then Graph, Agent state
    page.get_by_role("link", name="Analytics").focus()
    page.keyboard.press("Enter")
    page.get_by_role("heading", name="Analytics").wait_for()
    assert page.evaluate("document.activeElement.id") == "main"  # focus moves to the new page's content


def test_bulk_pin_and_forget_with_undo_from_the_memories_page(browser: Any, server: HttpServer) -> None:
    with client(server.url, KEY_B) as http:
        made = [
            http.post("/memories", json={"content": f"Osprey sighting number {n} at the estuary"}).json()["memory"]["id"] for n in (1, 2)
        ]
    page = open_page(browser, server)
    log_in(page, KEY_B)
    for n in (1, 2):
        page.get_by_label(f"Select Osprey sighting number {n}").check()
    page.get_by_role("button", name="Pin selected", exact=True).click()
    page.get_by_role("status").filter(has_text="pin: 2 changed").wait_for()
    with client(server.url, KEY_B) as http:
        assert {m["id"] for m in http.get("/memories", params={"pinned": "true"}).json()["items"]} >= set(made)
    for n in (1, 2):
        page.get_by_label(f"Select Osprey sighting number {n}").check()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Forget selected").click()
    page.get_by_role("button", name="Undo forget of 2").wait_for()
    with client(server.url, KEY_B) as http:
        assert all(http.get(f"/memories/{i}").status_code == 404 for i in made)
    page.get_by_role("button", name="Undo forget of 2").click()
    page.get_by_text("Osprey sighting number 2").wait_for()
    with client(server.url, KEY_B) as http:
        assert all(http.get(f"/memories/{i}").status_code == 200 for i in made)


def test_export_downloads_and_import_reports_what_it_restored(browser: Any, server: HttpServer, tmp_path: Path) -> None:
    page = open_page(browser, server)
    log_in(page, KEY_A)
    page.get_by_role("link", name="Operations").click()
    with page.expect_download() as download:
        page.get_by_role("button", name="Export", exact=True).click()
    saved = tmp_path / "export.jsonl"
    download.value.save_as(saved)
    lines = [json.loads(line) for line in saved.read_text().splitlines()]
    assert lines[0]["agents"] == ["agent-a"] and lines[-1]["kind"] == "end"
    page.get_by_label("NDJSON export file").set_input_files(str(saved))
    page.get_by_role("button", name="Import", exact=True).click()
    result = page.locator("#import-result")
    result.wait_for()
    fragments = sum(1 for line in lines if line.get("kind") == "fragment")
    assert f"{fragments} fragment" in result.inner_text() and "restored 0," in result.inner_text()  # all stored already


def test_memento_ui_prints_the_address_of_a_running_server(server: HttpServer) -> None:
    """`memento ui --no-open` (no browser needed): the URL of the dashboard of the server that answers."""
    from mcp_helpers import SERVE

    port = server.url.rsplit(":", 1)[-1]
    done = subprocess.run(
        [SERVE[0], "-m", "memento", "ui", "--no-open", "--port", port],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env={**os.environ, **server.env},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{server.url}/ui/"
