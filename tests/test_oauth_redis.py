"""OAuth state in Redis: the store contract on both stores, replicas sharing one Redis, outages.

The contract tests run on `MemoryOAuthStore` and on `RedisOAuthStore`, each through two handles
(`a`, `b`): the same object for memory, two stores with their own connections for Redis — two
replicas. The HTTP tests drive two in-process apps sharing one redis-server the way a load
balancer would, switching replica between steps of the OAuth flow; then Redis is stopped (503,
access keys still work) and started again (OAuth works again, no restart).
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from redis_harness import RedisServer, redis_server  # noqa: F401  (fixture)
from test_oauth import (
    BASE,
    INIT,
    OPERATOR_KEY,
    REDIRECT,
    RESOURCE,
    FakeClock,
    auth_params,
    authorize,
    bearer,
    exchange,
    make_settings,
    pkce,
    register,
    request_id,
)

from memento.app import App, build_app
from memento.auth.oauth import Endpoints, OAuthError, build_server, oauth_server
from memento.auth.oauth_redis import PREFIX, RedisOAuthStore
from memento.auth.oauth_store import (
    AuthorizationCode,
    Client,
    Grant,
    MemoryOAuthStore,
    OAuthStore,
    OAuthStoreUnavailable,
    PendingAuthorization,
    Token,
)
from memento.embeddings.hashing import HashEmbedder
from memento.settings import Settings
from memento.storage.redis import connect
from memento.web import create_http_app

pytestmark = pytest.mark.anyio
T = TypeVar("T")
NOW = 1_800_000_000.0
NAMED_KEY = "named-key-agent-z-0123456789"


def redis_env(server: RedisServer) -> dict[str, str]:
    return {"REDIS_ENABLED": "true", "REDIS_HOST": "127.0.0.1", "REDIS_PORT": str(server.port)}


def redis_settings(tmp_path: Path, server: RedisServer, **env: str) -> Settings:
    return make_settings(tmp_path, **redis_env(server), **env)


# ---------------------------------------------------------------- the store contract, both stores


@pytest.fixture(params=["memory", "redis"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[OAuthStore, OAuthStore]]:
    if request.param == "memory":
        memory = MemoryOAuthStore()
        yield memory, memory
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    settings = redis_settings(tmp_path, server)
    a, b = (RedisOAuthStore(connect(settings), clock=lambda: NOW) for _ in range(2))
    yield a, b
    a.client.close()
    b.client.close()


def grant(family: str = "fam-1", client_id: str = "mcp_c1") -> Grant:
    return Grant(
        family=family, client_id=client_id, agent_id="agent-a", read_only=False, scopes=("memory:read", "memory:write"), resource=RESOURCE
    )


def pending(pid: str = "req-1") -> PendingAuthorization:
    return PendingAuthorization(
        id=pid,
        client_id="mcp_c1",
        redirect_uri=REDIRECT,
        state="st",
        code_challenge="c" * 43,
        resource=RESOURCE,
        scopes=("memory:read",),
        expires_at=NOW + 600,
    )


def code() -> AuthorizationCode:
    return AuthorizationCode(grant=grant(), redirect_uri=REDIRECT, code_challenge="c" * 43, expires_at=NOW + 60)


def race(n: int, fn: Callable[[int], T]) -> list[T]:
    """`fn(i)` for i in range(n), in n threads released together."""
    barrier = threading.Barrier(n)
    results: list[T] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        barrier.wait(10)
        value = fn(i)
        with lock:
            results.append(value)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert len(results) == n
    return results


def test_clients_round_trip_and_are_counted(stores: tuple[OAuthStore, OAuthStore]) -> None:
    a, b = stores
    confidential = Client(
        "mcp_c1",
        (REDIRECT, "https://app.example.com/cb"),
        "client_secret_basic",
        b"\x01" * 32,
        "Client One",
        1_700_000_000,
        {"client_name": "Client One", "contacts": ["ops@example.com"]},
    )
    public = Client("mcp_c2", (REDIRECT,), "none", None, "mcp_c2", 1_700_000_001)
    a.add_client(confidential)
    a.add_client(public)
    assert b.get_client("mcp_c1") == confidential
    assert b.get_client("mcp_c1").metadata == confidential.metadata  # type: ignore[union-attr]
    assert b.get_client("mcp_c2") == public and public.public
    assert b.get_client("nobody") is None
    assert b.count_clients() == 2


def test_a_pending_consent_counts_failures_and_is_taken_once(stores: tuple[OAuthStore, OAuthStore]) -> None:
    a, b = stores
    a.put_pending(pending())
    assert b.get_pending("req-1") == pending()
    assert [b.count_failure("req-1"), a.count_failure("req-1")] == [1, 2]
    assert a.get_pending("req-1") == replace(pending(), failures=2)
    assert b.count_failure("unknown") == 0 and a.get_pending("unknown") is None
    taken = b.take_pending("req-1")
    assert taken is not None and taken.failures == 2
    assert a.take_pending("req-1") is None and a.get_pending("req-1") is None
    assert a.count_failure("req-1") == 0  # a taken request does not come back


def test_a_code_is_marked_used_by_its_first_use(stores: tuple[OAuthStore, OAuthStore]) -> None:
    a, b = stores
    a.put_code(b"\x02" * 32, code())
    first = b.use_code(b"\x02" * 32)
    assert first == code() and not first.used
    again = a.use_code(b"\x02" * 32)
    assert again is not None and again.used and again.grant == grant()
    assert a.use_code(b"\x03" * 32) is None


def test_tokens_rotate_once_and_die_with_their_family(stores: tuple[OAuthStore, OAuthStore]) -> None:
    a, b = stores
    access, refresh = Token("access", grant(), NOW + 3600), Token("refresh", grant(), NOW + 86400)
    other = Token("access", grant("fam-2"), NOW + 3600)
    a.put_token(b"a" * 32, access)
    a.put_token(b"r" * 32, refresh)
    a.put_token(b"o" * 32, other)
    assert b.get_token(b"a" * 32) == access and b.get_token(b"r" * 32) == refresh
    assert b.use_refresh(b"a" * 32) is None  # an access token cannot be rotated...
    assert a.get_token(b"a" * 32) == access  # ...nor is it marked
    first = b.use_refresh(b"r" * 32)
    assert first == refresh and not first.used
    replay = a.use_refresh(b"r" * 32)
    assert replay is not None and replay.used
    assert a.get_token(b"r" * 32).used  # type: ignore[union-attr]
    assert b.use_refresh(b"x" * 32) is None
    assert b.revoke_family("fam-1") == 2
    assert a.get_token(b"a" * 32) is None and a.get_token(b"r" * 32) is None
    assert a.get_token(b"o" * 32) == other
    assert a.revoke_family("fam-1") == 0


def test_single_use_holds_under_racing_replicas(stores: tuple[OAuthStore, OAuthStore]) -> None:
    a, b = stores
    a.put_code(b"c" * 32, code())
    a.put_token(b"r" * 32, Token("refresh", grant(), NOW + 86400))
    a.put_pending(pending())
    pick = (a, b)
    race(8, lambda i: pick[i % 2].get_token(b"w" * 32))  # connections open first: the race is not staggered
    codes = race(8, lambda i: pick[i % 2].use_code(b"c" * 32))
    assert sorted(c.used for c in codes if c is not None) == [False] + [True] * 7
    refreshes = race(8, lambda i: pick[i % 2].use_refresh(b"r" * 32))
    assert sorted(t.used for t in refreshes if t is not None) == [False] + [True] * 7
    taken = race(8, lambda i: pick[i % 2].take_pending("req-1"))
    assert [p for p in taken if p is not None] == [pending()]


# ---------------------------------------------------------------- Redis specifics


@pytest.fixture
def redis_store(redis_server: RedisServer, tmp_path: Path) -> Iterator[RedisOAuthStore]:
    store = RedisOAuthStore(connect(redis_settings(tmp_path, redis_server)), clock=lambda: NOW, client_ttl_s=86400)
    yield store
    store.client.close()


def test_every_key_expires_with_what_it_holds(redis_store: RedisOAuthStore) -> None:
    r = redis_store.client
    redis_store.add_client(Client("mcp_c1", (REDIRECT,), "none", None, "c1", 1))
    redis_store.put_pending(pending())
    redis_store.put_code(b"c" * 32, code())
    redis_store.put_token(b"r" * 32, Token("refresh", grant(), NOW + 86400))
    redis_store.put_token(b"a" * 32, Token("access", grant(), NOW + 3600))  # shorter: the family keeps the longer TTL
    assert {k.removeprefix(PREFIX).split(":")[0] for k in r.scan_iter(PREFIX + "*")} == {
        "client",
        "clients",
        "unused",
        "pending",
        "code",
        "token",
        "family",
    }

    def ttl_s(key: str) -> float:
        return float(r.pttl(PREFIX + key)) / 1000

    assert ttl_s("clients") == -0.001  # no TTL on the index of clients: count_clients trims it
    assert ttl_s("unused") == -0.001  # nor on that of unused ones: registering trims it
    assert 86390 < ttl_s("client:mcp_c1") <= 86400  # MEMENTO_OAUTH_UNUSED_CLIENT_TTL until used
    assert 590 < ttl_s("pending:req-1") <= 600
    assert 50 < ttl_s("code:" + (b"c" * 32).hex()) <= 60  # digests as hex
    assert 86390 < ttl_s("token:" + (b"r" * 32).hex()) <= 86400
    assert 3590 < ttl_s("token:" + (b"a" * 32).hex()) <= 3600
    assert 86390 < ttl_s("family:fam-1") <= 86400  # as long as its longest-lived token


def test_a_used_client_registration_stays(redis_store: RedisOAuthStore) -> None:
    r = redis_store.client
    redis_store.add_client(Client("mcp_c1", (REDIRECT,), "none", None, "c1", 1))
    r.pexpire(PREFIX + "client:mcp_c1", 1000)
    assert redis_store.get_client("mcp_c1") is not None
    assert r.pttl(PREFIX + "client:mcp_c1") <= 1000  # unused: looking it up keeps its deadline
    assert redis_store.mark_client_used("mcp_c1")
    assert redis_store.get_client("mcp_c1") is not None
    assert r.pttl(PREFIX + "client:mcp_c1") > 86000 * 1000


def test_a_revoked_grant_takes_no_new_tokens(redis_store: RedisOAuthStore) -> None:
    """A replica still issuing from a grant another replica just revoked stores nothing."""
    redis_store.put_token(b"r" * 32, Token("refresh", grant(), NOW + 86400))
    assert redis_store.revoke_family("fam-1") == 1
    redis_store.put_token(b"n" * 32, Token("access", grant(), NOW + 3600))
    assert redis_store.get_token(b"n" * 32) is None
    redis_store.put_token(b"m" * 32, Token("access", grant("fam-2"), NOW + 3600))
    assert redis_store.get_token(b"m" * 32) is not None


def test_redis_errors_raise_unavailable_until_it_is_back(redis_store: RedisOAuthStore, redis_server: RedisServer) -> None:
    redis_server.stop()
    calls: list[Callable[[], object]] = [
        lambda: redis_store.get_client("c"),
        redis_store.count_clients,
        lambda: redis_store.get_pending("p"),
        lambda: redis_store.take_pending("p"),
        lambda: redis_store.count_failure("p"),
        lambda: redis_store.use_code(b"c"),
        lambda: redis_store.get_token(b"t"),
        lambda: redis_store.use_refresh(b"t"),
        lambda: redis_store.revoke_family("f"),
        lambda: redis_store.put_code(b"c" * 32, code()),
    ]
    for call in calls:
        with pytest.raises(OAuthStoreUnavailable):
            call()
    redis_server.start()
    redis_store.put_code(b"c" * 32, code())
    assert redis_store.use_code(b"c" * 32) == code()


def test_the_server_uses_redis_when_enabled(tmp_path: Path, redis_server: RedisServer) -> None:
    assert isinstance(build_server(make_settings(tmp_path, MEMENTO_ACCESS_KEY=OPERATOR_KEY)).store, MemoryOAuthStore)
    server = build_server(redis_settings(tmp_path, redis_server, MEMENTO_ACCESS_KEY=OPERATOR_KEY))
    assert isinstance(server.store, RedisOAuthStore)
    server.clock = FakeClock()
    assert server.store.clock() == FakeClock().now  # TTLs follow the server's clock
    server.store.client.close()


# ---------------------------------------------------------------- two replicas over HTTP


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def apps(tmp_path: Path, redis_server: RedisServer) -> Iterator[tuple[App, App]]:
    keys = json.dumps([{"name": "agent-z", "key": NAMED_KEY, "agent": "agent-z", "access": "read-write"}])
    built: list[App] = []
    try:
        for name in ("a", "b"):
            folder = tmp_path / name
            folder.mkdir()
            settings = redis_settings(folder, redis_server, MEMENTO_ACCESS_KEY=OPERATOR_KEY, MEMENTO_KEYS=keys)
            built.append(build_app(settings, embedder=HashEmbedder(64)))
        yield built[0], built[1]
    finally:
        for app in built:
            app.close()


@pytest.fixture
async def replicas(apps: tuple[App, App]) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    a, b = (httpx.AsyncClient(transport=httpx.ASGITransport(app=create_http_app(app)), base_url=BASE) for app in apps)
    async with a, b:
        yield a, b


async def mcp_status(http: httpx.AsyncClient, token: str) -> int:
    return (await http.post("/mcp", json=INIT, headers=bearer(token))).status_code


async def consent_across(first: httpx.AsyncClient, second: httpx.AsyncClient, client: dict[str, Any]) -> tuple[str, str]:
    """The consent page from `first`, the operator's approval posted to `second`: (code, verifier)."""
    verifier, challenge = pkce()
    page = await first.get("/authorize", params=auth_params(client["client_id"], challenge))
    assert page.status_code == 200, page.text
    form = {
        "request_id": request_id(page.text),
        "access_key": OPERATOR_KEY,
        "agent": "agent-a",
        "access": "read-write",
        "decision": "approve",
    }
    reply = await second.post("/authorize", data=form)
    assert reply.status_code == 302, reply.text
    location = httpx.URL(reply.headers["location"])
    assert location.params["state"] == "st-1"
    return location.params["code"], verifier


async def test_each_step_of_the_flow_may_land_on_another_replica(replicas: tuple[httpx.AsyncClient, httpx.AsyncClient]) -> None:
    a, b = replicas
    client = await register(a)
    code, verifier = await consent_across(b, a, client)
    reply = await exchange(b, client, code, verifier)
    assert reply.status_code == 200, reply.text
    access = reply.json()["access_token"]
    assert await mcp_status(a, access) == 200 and await mcp_status(b, access) == 200
    assert (await exchange(a, client, code, verifier)).json()["error"] == "invalid_grant"  # the code is spent everywhere
    assert await mcp_status(a, access) == 401 and await mcp_status(b, access) == 401  # and its reuse revoked the grant


async def test_a_refresh_token_replayed_on_another_replica_revokes_the_grant_on_both(
    replicas: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    a, b = replicas
    client = await register(a)
    code, verifier = await authorize(a, client)
    first = (await exchange(a, client, code, verifier)).json()
    refresh = {"grant_type": "refresh_token", "client_id": client["client_id"], "resource": RESOURCE}
    rotated = await b.post("/token", data={**refresh, "refresh_token": first["refresh_token"]})
    assert rotated.status_code == 200, rotated.text
    second = rotated.json()
    assert await mcp_status(a, second["access_token"]) == 200
    replay = await a.post("/token", data={**refresh, "refresh_token": first["refresh_token"]})
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    for replica in (a, b):
        assert await mcp_status(replica, second["access_token"]) == 401
        assert await mcp_status(replica, first["access_token"]) == 401
    after = await b.post("/token", data={**refresh, "refresh_token": second["refresh_token"]})
    assert after.json()["error"] == "invalid_grant"


async def test_a_code_raced_on_both_replicas_is_redeemed_once(
    apps: tuple[App, App], replicas: tuple[httpx.AsyncClient, httpx.AsyncClient]
) -> None:
    a, _ = replicas
    client = await register(a)
    code, verifier = await authorize(a, client)
    servers = [oauth_server(app) for app in apps]
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT,
        "code_verifier": verifier,
        "client_id": client["client_id"],
        "resource": RESOURCE,
    }

    def redeem(i: int) -> dict[str, Any] | str:
        try:
            return servers[i % 2].token(form, None, Endpoints(BASE))
        except OAuthError as exc:
            return exc.error

    race(8, lambda i: servers[i % 2].store.get_client("warm-up"))  # connections open first
    results = race(8, redeem)
    issued = [r for r in results if isinstance(r, dict)]
    assert len(issued) == 1 and sorted(r for r in results if isinstance(r, str)) == ["invalid_grant"] * 7
    # The replays revoked the grant; a token stored after the revocation was dropped.
    for server in servers:
        assert server.verify(issued[0]["access_token"], resource=RESOURCE) is None


async def test_redis_down_is_503_for_oauth_while_access_keys_work_then_oauth_recovers(
    redis_server: RedisServer, replicas: tuple[httpx.AsyncClient, httpx.AsyncClient]
) -> None:
    a, b = replicas
    client = await register(a)
    code, verifier = await authorize(a, client)
    access = (await exchange(a, client, code, verifier)).json()["access_token"]
    redis_server.stop()

    down = await a.post("/mcp", json=INIT, headers=bearer(access))
    assert down.status_code == 503 and "www-authenticate" not in down.headers  # not a misleading 401
    assert await mcp_status(b, OPERATOR_KEY) == 200
    assert await mcp_status(a, NAMED_KEY) == 200
    assert await mcp_status(b, "not-a-key-0123456789") == 401  # a wrong key is still refused
    for reply in (
        await a.post("/register", json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}),
        await b.post(
            "/token",
            data={
                "grant_type": "authorization_code",
                "code": code,
                "code_verifier": verifier,
                "client_id": client["client_id"],
                "redirect_uri": REDIRECT,
            },
        ),
        await a.post("/revoke", data={"token": access, "client_id": client["client_id"]}),
    ):
        assert reply.status_code == 503 and reply.json()["error"] == "temporarily_unavailable", reply.text
        assert reply.headers["retry-after"] and reply.headers["cache-control"] == "no-store"
    page = await b.get("/authorize", params=auth_params(client["client_id"], pkce()[1]))
    assert page.status_code == 503 and "Temporarily unavailable" in page.text and "location" not in page.headers
    consent = await a.post("/authorize", data={"request_id": "r", "access_key": OPERATOR_KEY, "agent": "x"})
    assert consent.status_code == 503
    assert (await a.get("/.well-known/oauth-authorization-server")).status_code == 200  # no storage needed

    redis_server.start()  # an empty Redis: what was issued is gone, the flow works again at once
    assert await mcp_status(a, access) == 401
    client = await register(b)
    code, verifier = await consent_across(a, b, client)
    again = await exchange(a, client, code, verifier)
    assert again.status_code == 200, again.text
    assert await mcp_status(b, again.json()["access_token"]) == 200
