"""The credential checkers of an app, built once per app.

The HTTP face asks `token_verifiers(app)` for the verifiers to try in order; each credential
module (access keys, OAuth) adds itself here with one line. `per_app` keeps one instance of a
face-level object (e.g. the OAuth server with its token store) per App without module globals
leaking between apps.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .principal import TokenVerifier

if TYPE_CHECKING:
    from ..app import App

T = TypeVar("T")
_instances: dict[int, dict[str, Any]] = {}  # id(app) -> objects; dropped when the app is collected


def per_app(app: App, name: str, build: Callable[[], T]) -> T:
    """The `name` object of `app`, built by `build` on first use."""
    key = id(app)
    slot = _instances.get(key)
    if slot is None:
        slot = _instances[key] = {}
        weakref.finalize(app, _instances.pop, key, None)
    if name not in slot:
        slot[name] = build()
    value: T = slot[name]
    return value


def token_verifiers(app: App) -> list[TokenVerifier]:
    """Verifiers to try, in order, for a bearer token."""
    found: list[TokenVerifier] = []
    from .keys import key_verifier  # access keys (MEMENTO_ACCESS_KEY, MEMENTO_KEYS)

    if (keys := key_verifier(app)) is not None:
        found.append(keys)
    from .oauth import oauth_verifier  # OAuth access tokens (when an operator key can approve clients)

    if (tokens := oauth_verifier(app)) is not None:
        found.append(tokens)
    return found
