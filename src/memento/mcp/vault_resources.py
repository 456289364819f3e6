"""Seed 002's resources (§3.1), served beside the others when the `vault` toolset is: the caller's
keyed memories of one session (`memory://session/{session_id}`), the vault (`memory://vault`,
paginated with `?offset=&limit=`) and one vault memory (`memory://vault/{key}`), as JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import anyio.to_thread

from memento.errors import MementoError, NotFound
from memento.mcp.features import RequestContext
from memento.mcp.jsonrpc import INVALID_PARAMS, JsonRpcError
from memento.mcp.namespace import service_context
from memento.mcp.resources import (
    JSON_MIME,
    VAULT_URI,
    ResourcesFeature,
    StaticResource,
    TemplateResource,
    session_memory_uri,
    vault_key_uri,
)
from memento.vault_models import KeyedMemory

DEFAULT_LIMIT = 50
T = TypeVar("T")


def _contents(uri: str, payload: KeyedMemory | list[KeyedMemory]) -> list[dict[str, Any]]:
    value = [m.dump() for m in payload] if isinstance(payload, list) else payload.dump()
    return [{"uri": uri, "mimeType": JSON_MIME, "text": json.dumps(value, ensure_ascii=False)}]


def _number(variables: dict[str, str], name: str, default: int) -> int:
    raw = variables.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isdigit():
        raise JsonRpcError(INVALID_PARAMS, f"Invalid params: {name} must be a non-negative integer")
    return int(raw)


class VaultResources:
    """The readers of 002's resources over a ResourcesFeature (its app, after attach)."""

    def __init__(self, feature: ResourcesFeature) -> None:
        self.feature = feature

    def install(self) -> None:
        self.feature.add_static(
            StaticResource(
                VAULT_URI,
                "vault",
                "Vault memories",
                "Your keyed vault memories as a JSON array, by key (?offset=&limit=, default limit 50).",
                JSON_MIME,
                self._read_vault,
                query=True,
            )
        )
        self.feature.add_template(
            TemplateResource(
                "memory://vault/{key}", "vault-memory", "Vault memory", "One vault memory by key, as JSON.", JSON_MIME, self._read_key
            )
        )
        self.feature.add_template(
            TemplateResource(
                "memory://session/{session_id}",
                "session-memories",
                "Session memories",
                "Your keyed memories of a session (commit_memory scope=session) as a JSON array.",
                JSON_MIME,
                self._read_session,
            )
        )

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await anyio.to_thread.run_sync(partial(fn, *args))
        except NotFound:
            raise
        except MementoError as exc:
            raise JsonRpcError(INVALID_PARAMS, f"Invalid params: {exc.message}") from None

    async def _read_vault(self, ctx: RequestContext, v: dict[str, str]) -> list[dict[str, Any]]:
        offset, limit = _number(v, "offset", 0), _number(v, "limit", DEFAULT_LIMIT)
        vault = self.feature.app.service.vault
        memories = await self._call(vault.vault, offset, limit, service_context(ctx.session))
        uri = VAULT_URI if not v else f"{VAULT_URI}?offset={offset}&limit={limit}"
        return _contents(uri, memories)

    async def _read_key(self, ctx: RequestContext, v: dict[str, str]) -> list[dict[str, Any]]:
        memory = await self._call(self.feature.app.service.vault.get, v["key"], service_context(ctx.session))
        return _contents(vault_key_uri(v["key"]), memory)

    async def _read_session(self, ctx: RequestContext, v: dict[str, str]) -> list[dict[str, Any]]:
        memories = await self._call(self.feature.app.service.vault.session, v["session_id"], service_context(ctx.session))
        return _contents(session_memory_uri(v["session_id"]), memories)
