"""The one place where features join the server.

Each feature module (resources, prompts, completion, tasks, ...) adds itself to
`default_features`; every transport builds its `McpServer` with this list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memento.mcp.features import Feature
    from memento.settings import Settings


def default_features(settings: Settings) -> list[Feature]:
    """The features every transport serves, in registration order."""
    from memento.mcp.extensions import extension_features

    features: list[Feature] = []
    # Feature owners: append your feature here, e.g.
    #   from memento.mcp.resources import ResourcesFeature
    #   features.append(ResourcesFeature(settings))
    features += extension_features(settings)  # resources, prompts, completion, tasks (+ fixtures)
    from memento.mcp.subscriptions import SubscriptionsFeature

    features.append(SubscriptionsFeature())  # subscriptions/listen (2026-07-28)
    return features
