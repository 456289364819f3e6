"""Access keys: the operator key (MEMENTO_ACCESS_KEY) and named keys bound to an agent namespace.

Named keys come from MEMENTO_KEYS (JSON) and/or MEMENTO_KEYS_FILE (the same JSON in a file):

    [{"name": "agent-a", "key": "...", "agent": "agent-a", "access": "read-write"},
     {"name": "dashboard", "key": "...", "agent": "*", "access": "read-only"}]

`agent` is the namespace the key works in (an agent sees its own fragments and the shared
`default` pool, 000 §3.6); `*` makes an admin key (any namespace, maintenance scope). `access`
is `read-write` or `read-only` (search, recall and context only, 002 §7). The operator key is
an admin, read-write key named `operator`.

Everything is validated at start-up (`load_keys`). Keys are kept only as SHA-256 digests and
a presented token is compared with every digest in constant time (`hmac.compare_digest`, no
early exit), so neither the keys nor which one matched leak through timing.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import MementoError
from ..models import MAINTENANCE_AGENTS
from .principal import ANONYMOUS, Principal
from .registry import per_app

if TYPE_CHECKING:
    from ..app import App
    from ..settings import Settings

MIN_KEY_CHARS = 16
MAX_KEY_CHARS = 4096
OPERATOR = "operator"
ADMIN = "*"
ACCESS_LEVELS = ("read-write", "read-only")
_FIELDS = frozenset({"name", "key", "agent", "access"})
_NAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")
_AGENT = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")  # models.AgentId
_TOKEN = re.compile(r"^[\x21-\x7e]+$")  # printable ASCII, no spaces: what a Bearer header can carry


class AuthConfigError(MementoError):
    """The credential configuration is invalid or unsafe; the server refuses to start."""

    code = "invalid_configuration"


@dataclass(frozen=True)
class AccessKey:
    """One configured key, kept as a digest."""

    name: str
    digest: bytes
    agent_id: str | None  # None: admin
    read_only: bool

    def principal(self) -> Principal:
        return Principal(subject=self.name, agent_id=self.agent_id, read_only=self.read_only)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def _check_key(where: str, key: object) -> str:
    if not isinstance(key, str):
        raise AuthConfigError(f"{where}: key must be a string")
    if len(key) < MIN_KEY_CHARS:
        raise AuthConfigError(f"{where}: key must be at least {MIN_KEY_CHARS} characters")
    if len(key) > MAX_KEY_CHARS:
        raise AuthConfigError(f"{where}: key must be at most {MAX_KEY_CHARS} characters")
    if not _TOKEN.match(key):
        raise AuthConfigError(f"{where}: key must be printable ASCII without spaces")
    return key


def _check_agent(where: str, agent: object) -> str | None:
    if agent == ADMIN:
        return None
    if not isinstance(agent, str) or not _AGENT.match(agent):
        raise AuthConfigError(f"{where}: agent must be an agent id (letters, digits, _.:@-) or '*' for admin")
    if agent in MAINTENANCE_AGENTS:
        raise AuthConfigError(f"{where}: agent {agent!r} is reserved; use '*' for an admin key")
    return agent


def parse_keys(text: str, source: str) -> list[AccessKey]:
    """Named keys from their JSON text; `source` names where it came from in errors."""
    try:
        entries = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AuthConfigError(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(entries, list):
        raise AuthConfigError(f"{source}: must be a JSON list of key objects")
    found: list[AccessKey] = []
    for index, entry in enumerate(entries):
        where = f"{source}[{index}]"
        if not isinstance(entry, dict):
            raise AuthConfigError(f"{where}: must be an object with name, key, agent and access")
        unknown = sorted(set(entry) - _FIELDS)
        if unknown:
            raise AuthConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
        missing = sorted(_FIELDS - set(entry))
        if missing:
            raise AuthConfigError(f"{where}: missing field(s) {', '.join(missing)}")
        name = entry["name"]
        if not isinstance(name, str) or not _NAME.match(name):
            raise AuthConfigError(f"{where}: name must be 1-128 of letters, digits, _.:@-")
        where = f"{source}[{index}] ({name})"
        key = _check_key(where, entry["key"])
        agent = _check_agent(where, entry["agent"])
        access = entry["access"]
        if access not in ACCESS_LEVELS:
            raise AuthConfigError(f"{where}: access must be 'read-write' or 'read-only'")
        found.append(AccessKey(name, _digest(key), agent, access == "read-only"))
    return found


def load_keys(settings: Settings) -> list[AccessKey]:
    """Every configured key, validated; [] when none is configured."""
    keys: list[AccessKey] = []
    if settings.access_key:
        operator = _check_key("MEMENTO_ACCESS_KEY", settings.access_key)
        keys.append(AccessKey(OPERATOR, _digest(operator), None, False))
    if settings.keys.strip():
        keys += parse_keys(settings.keys, "MEMENTO_KEYS")
    if settings.keys_file is not None:
        path = Path(settings.keys_file).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise AuthConfigError(f"MEMENTO_KEYS_FILE: cannot read {path}: {exc.strerror}") from None
        keys += parse_keys(text, f"MEMENTO_KEYS_FILE {path}")
    names: set[str] = set()
    digests: set[bytes] = set()
    for entry in keys:
        if entry.name in names:
            raise AuthConfigError(
                f"key name {entry.name!r} is used twice" + (" ('operator' is MEMENTO_ACCESS_KEY's)" if entry.name == OPERATOR else "")
            )
        if entry.digest in digests:
            raise AuthConfigError(f"key {entry.name!r} reuses another key's secret; keys must be unique")
        names.add(entry.name)
        digests.add(entry.digest)
    return keys


class KeyVerifier:
    """A `TokenVerifier` for access keys."""

    def __init__(self, keys: list[AccessKey]) -> None:
        self.keys = tuple(keys)

    def verify(self, token: str, *, resource: str | None = None) -> Principal | None:
        digest = _digest(token)
        match: AccessKey | None = None
        for key in self.keys:  # every digest is compared: the time does not depend on the match
            if hmac.compare_digest(key.digest, digest):
                match = key
        return match.principal() if match is not None else None


def key_verifier(app: App) -> KeyVerifier | None:
    """The app's key verifier (built and validated once), or None when no key is configured."""
    verifier = per_app(app, "access_keys", lambda: KeyVerifier(load_keys(app.settings)))
    return verifier if verifier.keys else None


def stdio_principal(settings: Settings) -> Principal:
    """Who the stdio transport runs as: the operator, or MEMENTO_STDIO_AGENT's namespace; in
    MEMENTO_WORKSPACE's workspace when one is named (auth.principal.workspace_namespace)."""
    agent = settings.stdio_agent.strip()
    agent_id = _check_agent("MEMENTO_STDIO_AGENT", agent) if agent else None
    found = ANONYMOUS if agent_id is None else Principal(subject="stdio", agent_id=agent_id, kind="stdio")
    if not settings.workspace.strip():
        return found
    try:
        return found.in_workspace(settings.workspace)
    except MementoError as exc:
        raise AuthConfigError(f"MEMENTO_WORKSPACE: {exc}") from None


def describe(principal: Principal) -> str:
    """A log-friendly description (never the secret)."""
    scope = "admin" if principal.agent_id is None else f"agent {principal.agent_id}"
    access = "read-only" if principal.read_only else "read-write"
    return f"{principal.kind} {principal.subject} ({scope}, {access})"
