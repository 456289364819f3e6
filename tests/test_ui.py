"""The dashboard's server side in process (memento.ui): login sessions and their idle expiry, the
cookie accepted by /api only with its CSRF header (and same-origin for writes), never by /mcp,
the static files, and the /api routes it added (details, pin, bulk, the topic/tier/pinned filters).
tests/test_dashboard.py drives the same in a real browser."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from memento.app import App, build_app
from memento.auth.principal import Principal
from memento.embeddings.hashing import HashEmbedder
from memento.settings import Settings
from memento.ui.gate import COOKIE
from memento.ui.sessions import SessionStore
from memento.web import create_http_app

OPERATOR = "operator-key-" + "o" * 20
READ_ONLY = "read-only-key-" + "r" * 20
AGENT_A = "agent-a-key-" + "a" * 20
pytestmark = pytest.mark.anyio
BASE = "http://127.0.0.1:8000"
SAME = {"Origin": BASE}
KEYS = [
    {"name": "ro", "key": READ_ONLY, "agent": "*", "access": "read-only"},
    {"name": "a", "key": AGENT_A, "agent": "agent-a", "access": "read-write"},
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_ends_after_its_idle_time_and_each_use_restarts_it() -> None:
    clock = Clock()
    store = SessionStore(60.0, clock=clock)
    cookie, session = store.open(Principal(subject="a", agent_id="agent-a"))
    clock.now += 50
    assert store.get(cookie) is session
    clock.now += 50  # 100 s after the login, 50 after the last use
    assert store.check(cookie, session.csrf) is session
    clock.now += 61
    assert store.get(cookie) is None
    assert len(store) == 0


def test_a_session_needs_its_own_csrf_token_and_ends_at_logout() -> None:
    store = SessionStore(60.0, clock=Clock())
    cookie, session = store.open(Principal(subject="a", agent_id=None))
    other_cookie, other = store.open(Principal(subject="b", agent_id=None))
    assert store.check(cookie, other.csrf) is None
    assert store.check(cookie, None) is None and store.check(None, session.csrf) is None
    assert cookie not in store._sessions  # only digests of the cookie values are kept
    store.close(cookie)
    assert store.get(cookie) is None and store.get(other_cookie) is other


def test_the_oldest_session_goes_when_the_store_is_full() -> None:
    store = SessionStore(60.0, clock=Clock(), max_sessions=2)
    first, _ = store.open(Principal(subject="1", agent_id=None))
    second, _ = store.open(Principal(subject="2", agent_id=None))
    store.get(first)  # used: now the most recent
    store.open(Principal(subject="3", agent_id=None))
    assert store.get(first) is not None and store.get(second) is None


def make_app(tmp_path: Path, **env: str) -> App:
    settings = Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'm.db'}", EMBEDDING_PROVIDER="hash", **env)  # type: ignore[arg-type]
    return build_app(settings, embedder=HashEmbedder(64))


@pytest.fixture
def keyed_app(tmp_path: Path) -> Iterator[App]:
    app = make_app(tmp_path, MEMENTO_ACCESS_KEY=OPERATOR, MEMENTO_KEYS=json.dumps(KEYS))
    yield app
    app.close()


@pytest.fixture
async def http(keyed_app: App) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_http_app(keyed_app))
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        yield client


async def log_in(http: httpx.AsyncClient, key: str) -> str:
    reply = await http.post("/ui/login", json={"key": key}, headers=SAME)
    assert reply.status_code == 200, reply.text
    cookie = reply.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    csrf: str = reply.json()["csrf"]
    return csrf


async def test_login_refuses_an_unknown_key_a_foreign_origin_and_a_body_without_a_key(http: httpx.AsyncClient) -> None:
    assert (await http.post("/ui/login", json={"key": "nope-" + "x" * 20}, headers=SAME)).status_code == 401
    assert (await http.post("/ui/login", json={"key": OPERATOR})).status_code == 403  # no Origin: not from the page
    assert (await http.post("/ui/login", json={"key": OPERATOR}, headers={"Origin": "http://evil.example"})).status_code == 403
    assert (await http.post("/ui/login", content=b"key=1", headers=SAME)).status_code == 400
    assert COOKIE not in http.cookies
    assert (await http.get("/ui/session")).status_code == 401


async def test_the_cookie_counts_on_api_only_with_its_csrf_header_and_never_on_mcp(http: httpx.AsyncClient) -> None:
    csrf = await log_in(http, OPERATOR)
    assert (await http.get("/ui/session")).json()["csrf"] == csrf
    assert (await http.get("/api/memories")).status_code == 401  # the cookie alone
    assert (await http.get("/api/memories", headers={"X-Memento-CSRF": "wrong"})).status_code == 401
    assert (await http.get("/api/memories", headers={"X-Memento-CSRF": csrf})).status_code == 200
    body = {"content": "The kettle is in the left cupboard"}
    write = await http.post("/api/memories", json=body, headers={"X-Memento-CSRF": csrf})  # no Origin
    assert write.status_code == 403
    write = await http.post("/api/memories", json=body, headers={"X-Memento-CSRF": csrf, "Origin": BASE, "Sec-Fetch-Site": "cross-site"})
    assert write.status_code == 403
    assert (await http.get("/api/memories", headers={"X-Memento-CSRF": csrf})).json()["total"] == 0  # nothing was written
    assert (await http.post("/api/memories", json=body, headers={"X-Memento-CSRF": csrf, **SAME})).status_code == 201
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    mcp = await http.post("/mcp", json=ping, headers={"X-Memento-CSRF": csrf, **SAME, "Accept": "application/json, text/event-stream"})
    assert mcp.status_code == 401
    assert (await http.post("/ui/logout", headers={"X-Memento-CSRF": csrf, **SAME})).status_code == 200
    assert (await http.get("/api/memories", headers={"X-Memento-CSRF": csrf})).status_code == 401


async def test_a_read_only_session_may_read_but_never_write(http: httpx.AsyncClient) -> None:
    csrf = await log_in(http, READ_ONLY)
    headers = {"X-Memento-CSRF": csrf, **SAME}
    assert (await http.get("/ui/session")).json()["readOnly"] is True
    assert (await http.get("/api/memories", headers=headers)).status_code == 200
    refused = await http.post("/api/memories", json={"content": "a forged write"}, headers=headers)
    assert refused.status_code == 403
    assert (await http.post("/api/memories/bulk", json={"ids": ["frag-0"], "action": "forget"}, headers=headers)).status_code == 403


async def test_an_agent_session_sees_its_agent_only_and_no_latency(http: httpx.AsyncClient) -> None:
    async with httpx.AsyncClient(transport=http._transport, base_url=BASE, headers={"Authorization": f"Bearer {OPERATOR}"}) as op:
        assert (await op.post("/api/memories", params={"agent_id": "agent-b"}, json={"content": "B's otter survey"})).status_code == 201
    csrf = await log_in(http, AGENT_A)
    headers = {"X-Memento-CSRF": csrf}
    assert (await http.get("/api/memories", headers=headers)).json()["total"] == 0
    assert (await http.get("/api/memories", params={"agent_id": "agent-b"}, headers=headers)).status_code == 403
    assert (await http.get("/ui/latency", headers=headers)).status_code == 403


async def test_details_pin_bulk_and_the_new_filters(http: httpx.AsyncClient) -> None:
    csrf = await log_in(http, OPERATOR)
    h = {"X-Memento-CSRF": csrf, **SAME}
    ids = []
    for text in ("Swifts sleep on the wing", "Rooks cache walnuts in autumn", "Wrens sing loudly for their size"):
        ids.append((await http.post("/api/memories", json={"content": text, "tags": ["birds"]}, headers=h)).json()["memory"]["id"])
    amended = await http.put(f"/api/memories/{ids[0]}", json={"content": "Swifts sleep while flying"}, headers=h)
    assert amended.status_code == 200
    details = (await http.get(f"/api/memories/{ids[0]}/details", headers=h)).json()
    assert details["memory"]["content"] == "Swifts sleep while flying" and details["memory"]["pinned"] is False
    assert "Swifts sleep on the wing" in [v["content"] for v in details["versions"]]
    assert details["memory"]["accessCount"] == 0  # looking at it is no access
    assert (await http.get("/api/memories/frag-0000000000000000/details", headers=h)).status_code == 404

    assert (await http.post(f"/api/memories/{ids[1]}/pin", headers=h)).json()["pinned"] is True
    pinned = (await http.get("/api/memories", params={"pinned": "true"}, headers=h)).json()
    assert [m["id"] for m in pinned["items"]] == [ids[1]]
    assert (await http.get("/api/memories", params={"pinned": "false"}, headers=h)).json()["total"] == 2
    tier = (await http.get(f"/api/memories/{ids[1]}/details", headers=h)).json()["memory"]["ttlTier"]
    assert (await http.get("/api/memories", params={"tier": tier}, headers=h)).json()["total"] >= 1
    topic = details["memory"]["topic"]
    assert ids[0] in [m["id"] for m in (await http.get("/api/memories", params={"topic": topic}, headers=h)).json()["items"]]
    breakdown = (await http.get("/api/analytics/breakdown", headers=h)).json()
    assert breakdown["pinned"] == {"true": 1, "false": 2} and sum(breakdown["tiers"].values()) == 3
    assert set(breakdown["memory_systems"]) == {"working", "episodic", "semantic", "procedural"}
    assert (await http.delete(f"/api/memories/{ids[1]}/pin", headers=h)).json()["pinned"] is False

    missing = await http.post("/api/memories/bulk", json={"ids": [ids[0], "frag-0000000000000000"], "action": "forget"}, headers=h)
    assert missing.status_code == 404
    assert (await http.get("/api/memories", headers=h)).json()["total"] == 3  # all or nothing
    forgot = (await http.post("/api/memories/bulk", json={"ids": ids[:2], "action": "forget"}, headers=h)).json()
    assert sorted(forgot["ids"]) == sorted(ids[:2]) and (await http.get("/api/memories", headers=h)).json()["total"] == 1
    partial = await http.post("/api/memories/bulk", json={"ids": [ids[0], ids[2]], "action": "restore"}, headers=h)
    assert partial.status_code == 404  # ids[2] was never forgotten: nothing is restored
    assert (await http.get("/api/memories", headers=h)).json()["total"] == 1
    back = (await http.post("/api/memories/bulk", json={"ids": ids[:2], "action": "restore"}, headers=h)).json()
    assert back["count"] == 2 and (await http.get("/api/memories", headers=h)).json()["total"] == 3
    assert (await http.post("/api/memories/bulk", json={"ids": [], "action": "pin"}, headers=h)).status_code == 422


async def test_static_files_carry_a_strict_policy_and_nothing_else_is_served(http: httpx.AsyncClient) -> None:
    page = await http.get("/ui/")
    assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
    assert (await http.get("/ui/static/app.js")).headers["content-type"].startswith("text/javascript")
    assert (await http.get("/ui/static/cytoscape.LICENSE.txt")).status_code == 200
    for name in ("../pages.py", "pages.py", "index.html", "nope.js"):
        assert (await http.get(f"/ui/static/{name}")).status_code == 404, name
    assert (await http.get("/ui", follow_redirects=False)).headers["location"] == "/ui/"


async def test_without_any_credential_the_dashboard_needs_no_login(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_http_app(app)), base_url=BASE) as http:
            who = (await http.get("/ui/session")).json()
            assert who["auth"] is False and who["admin"] is True and who["csrf"] is None
            assert (await http.post("/ui/login", json={"key": OPERATOR}, headers=SAME)).status_code == 400
            assert (await http.get("/api/memories")).status_code == 200  # as /api does with no credential
            assert (await http.get("/ui/latency")).json()["latencies"][0]["name"] == "recall"
    finally:
        app.close()


async def test_behind_a_proxy_the_public_origin_counts_and_the_cookie_is_secure(tmp_path: Path) -> None:
    public = "https://memory.example.com"
    app = make_app(
        tmp_path, MEMENTO_ACCESS_KEY=OPERATOR, MEMENTO_PUBLIC_URL=public + "/", ALLOWED_ORIGINS=f"{public},https://other.example.com"
    )
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_http_app(app)), base_url=BASE) as http:
            refused = await http.post("/ui/login", json={"key": OPERATOR}, headers={"Origin": "https://other.example.com"})
            assert refused.status_code == 403  # an allowed origin, but not this server's own
            reply = await http.post("/ui/login", json={"key": OPERATOR}, headers={"Origin": public})
            assert reply.status_code == 200 and "Secure" in reply.headers["set-cookie"]
            session = reply.headers["set-cookie"].split(";")[0]  # a Secure cookie: httpx keeps it off plain http
            headers = {"X-Memento-CSRF": reply.json()["csrf"], "Origin": public, "Cookie": session}
            assert (await http.post("/api/memories", json={"content": "Proxied writes work"}, headers=headers)).status_code == 201
    finally:
        app.close()


def test_a_bulk_unit_of_work_announces_its_changes_only_once_it_committed(tmp_path: Path) -> None:
    """Change events inside `held_events` wait for the block: a rollback (a refused item further
    down a bulk selection) sends none of them, a commit sends them all, after it."""
    from memento.models import CallContext, ForgetInput, RememberInput

    app = build_app(Settings(DATABASE_URL=f"sqlite:///{tmp_path / 'm.db'}", EMBEDDING_PROVIDER="hash"), embedder=HashEmbedder(64))
    try:
        service, ctx = app.service, CallContext()
        ids = [service.remember(RememberInput(content=f"note {i} about herons", topic="birds", type="fact"), ctx).id for i in range(2)]
        seen: list[str] = []
        service.add_listener(lambda event: seen.append(event.kind))
        with pytest.raises(RuntimeError), service.held_events(), app.store.atomic():
            service.forget(ForgetInput(id=ids[0]), ctx)
            assert seen == []  # held while the transaction is open
            raise RuntimeError("the next item is refused")
        assert seen == [] and {f.id for f in app.store.get_many(service._scope(None, ctx), ids)} == set(ids)
        with service.held_events(), app.store.atomic():
            service.forget(ForgetInput(id=ids[0]), ctx)
            service.forget(ForgetInput(id=ids[1]), ctx)
            assert seen == []
        assert len(seen) == 2 and app.store.get_many(service._scope(None, ctx), ids) == []
    finally:
        app.close()
