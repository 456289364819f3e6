"""The features beyond tools — resources, prompts, completion, tasks (and conformance fixtures).

`extension_features(settings)` builds them wired together; the registry appends them to the
core's own features. The tools/call path reaches tasks and fixtures through the helpers here.
"""

from __future__ import annotations

from collections.abc import Sequence

from memento.mcp.completion import CompletionFeature
from memento.mcp.features import Feature
from memento.mcp.fixtures import install
from memento.mcp.memory_resources import MemoryResources
from memento.mcp.prompts import PromptsFeature
from memento.mcp.resources import ResourcesFeature
from memento.mcp.task_fixtures import install as install_task_fixtures
from memento.mcp.tasks import TasksFeature
from memento.mcp.toolsets import selected_tools
from memento.mcp.vault_resources import VaultResources
from memento.settings import Settings


def extension_features(settings: Settings) -> list[Feature]:
    """Resources, prompts, completion and tasks; 004's and the vault's resources when their toolsets are served;
    the conformance fixtures only when enabled."""
    resources, prompts = ResourcesFeature(), PromptsFeature()
    if any(spec.name == "pin" for spec in selected_tools(settings.toolsets)):  # 004's resources with its tools
        MemoryResources(resources).install()
    if any(spec.name == "commit_memory" for spec in selected_tools(settings.toolsets)):  # 002's resources with its tools
        VaultResources(resources).install()
    tasks = TasksFeature()
    if settings.conformance_fixtures:
        install(resources, prompts)
        install_task_fixtures(tasks)  # the tasks-* scenarios' tools (2026-07-28)
    return [resources, prompts, CompletionFeature(prompts, resources), tasks]


def tasks_of(features: Sequence[object]) -> TasksFeature | None:
    """The tasks feature among `features`, for the tools/call hook."""
    return next((f for f in features if isinstance(f, TasksFeature)), None)
