"""MCP completion (`completion/complete`): argument suggestions for prompts and resource templates.

Prompt arguments complete through their `PromptArgument.complete`; template variables through
`TemplateResource.completers` (`{id}` fragment ids, `{topic}` topics, `{sessionId}` the caller's
own session). The `completions` capability exists from 2025-03-26 and is not announced to
older sessions (the method still answers, as 2024-11-05 defined it without a capability).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memento.mcp import versions
from memento.mcp.features import Handler, NotificationHandler, RequestContext, ServerHub
from memento.mcp.jsonrpc import INVALID_PARAMS, JsonRpcError
from memento.mcp.prompts import PromptsFeature
from memento.mcp.resources import ResourcesFeature

MAX_VALUES = 100  # the spec caps one completion response at 100 values


def _invalid(message: str) -> JsonRpcError:
    return JsonRpcError(INVALID_PARAMS, f"Invalid params: {message}")


class CompletionFeature:
    """Answers completion/complete from the prompts' and the templates' completers."""

    def __init__(self, prompts: PromptsFeature, resources: ResourcesFeature) -> None:
        self.prompts = prompts
        self.resources = resources

    def capabilities(self, version: str) -> dict[str, Any]:
        return {"completions": {}} if versions.at_least(version, "2025-03-26") else {}

    def handlers(self) -> Mapping[str, Handler]:
        return {"completion/complete": self._complete}

    def notification_handlers(self) -> Mapping[str, NotificationHandler]:
        return {}

    def attach(self, hub: ServerHub) -> None:
        pass

    async def _complete(self, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        ref, argument = params.get("ref"), params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise _invalid("ref and argument must be objects")
        name, value = argument.get("name"), argument.get("value", "")
        if not isinstance(name, str) or not isinstance(value, str):
            raise _invalid("argument.name and argument.value must be strings")
        context = params.get("context") or {}
        known = context.get("arguments") if isinstance(context, dict) else None
        known = {k: v for k, v in (known or {}).items() if isinstance(v, str)}
        if ref.get("type") == "ref/prompt":
            values = await self._prompt(ctx, ref, name, value, known)
        elif ref.get("type") == "ref/resource":
            values = await self._template(ctx, ref, name, value, known)
        else:
            raise _invalid("ref.type must be ref/prompt or ref/resource")
        return {"completion": {"values": values[:MAX_VALUES], "total": len(values), "hasMore": len(values) > MAX_VALUES}}

    async def _prompt(self, ctx: RequestContext, ref: dict[str, Any], name: str, value: str, known: dict[str, str]) -> list[str]:
        spec = self.prompts.prompts.get(str(ref.get("name")))
        if spec is None:
            raise _invalid(f"unknown prompt {ref.get('name')!r}")
        arg = spec.argument(name)
        if arg is None:
            raise _invalid(f"prompt {spec.name!r} has no argument {name!r}")
        return await arg.complete(ctx, value, known) if arg.complete else []

    async def _template(self, ctx: RequestContext, ref: dict[str, Any], name: str, value: str, known: dict[str, str]) -> list[str]:
        template = self.resources.template(str(ref.get("uri")))
        if template is None:
            raise _invalid(f"unknown resource template {ref.get('uri')!r}")
        if name not in template.variables:
            raise _invalid(f"template {template.uri_template!r} has no variable {name!r}")
        completer = template.completers.get(name)
        return await completer(ctx, value, known) if completer else []
