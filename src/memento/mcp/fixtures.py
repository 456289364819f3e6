"""Fixtures of the `@modelcontextprotocol/conformance` server suite (0.1.16, 0.2.0-alpha.12).

The suite's server scenarios call tools, read resources and get prompts with fixed names and
check their exact shapes. They exist only when MEMENTO_CONFORMANCE_FIXTURES=1: `install` adds
the resources and prompts to their features, and the core lists and calls `FIXTURE_TOOLS`
beside the memory tools. Never registered by default.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from memento.mcp import mrtr, versions
from memento.mcp.client_features import can_elicit_form, can_sample
from memento.mcp.features import RequestContext
from memento.mcp.jsonrpc import INVALID_PARAMS, JsonRpcError
from memento.mcp.prompts import PromptArgument, PromptsFeature, PromptSpec, user_text
from memento.mcp.resources import ResourcesFeature, StaticResource, TemplateResource

# A 1x1 red PNG and a minimal WAV, as the suite's reference server uses.
PNG_BASE64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV_BASE64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
STEP_DELAY_S = 0.05
RECONNECTION_PAUSE_S = 0.1

ToolCall = Callable[[RequestContext, dict[str, Any]], Awaitable[dict[str, Any]]]
NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class FixtureTool:
    """A conformance tool: its listing and a call returning a complete CallToolResult."""

    name: str
    description: str
    call: ToolCall
    input_schema: dict[str, Any] = field(default_factory=lambda: dict(NO_ARGS))
    stateless_only: bool = False  # a 2026-07-28 tool (multi round-trip requests): not listed before it

    def definition(self, version: str) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema}


def text_result(text: str, *, error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": error}


def _string_args(*names: str, descriptions: dict[str, str]) -> dict[str, Any]:
    return {"type": "object", "properties": {n: {"type": "string", "description": descriptions[n]} for n in names}, "required": list(names)}


# ------------------------------------------------------------------ tools


async def _simple_text(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    return text_result("This is a simple text response for testing.")


async def _mcp_param_header(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    return text_result(f"region: {args.get('region')}")


MCP_PARAM_HEADER_SCHEMA: dict[str, Any] = {  # SEP-2243: a parameter mirrored into Mcp-Param-Region (2026-07-28 HTTP)
    "type": "object",
    "properties": {"region": {"type": "string", "description": "Any region name", "x-mcp-header": "Region"}},
    "required": ["region"],
}


async def _image(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "image", "data": PNG_BASE64, "mimeType": "image/png"}], "isError": False}


async def _audio(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "audio", "data": WAV_BASE64, "mimeType": "audio/wav"}], "isError": False}


async def _embedded(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    resource = {"uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."}
    return {"content": [{"type": "resource", "resource": resource}], "isError": False}


async def _mixed(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    resource = {
        "uri": "test://mixed-content-resource",
        "mimeType": "application/json",
        "text": json.dumps({"test": "data", "value": 123}, separators=(",", ":")),
    }
    return {
        "content": [
            {"type": "text", "text": "Multiple content types test:"},
            {"type": "image", "data": PNG_BASE64, "mimeType": "image/png"},
            {"type": "resource", "resource": resource},
        ],
        "isError": False,
    }


async def _logging(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    for i, message in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
        if i:
            await anyio.sleep(STEP_DELAY_S)
        await ctx.log("info", message, logger="conformance-test-server")
    return text_result("Tool with logging executed successfully")


async def _progress(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    for i, done in enumerate((0, 50, 100)):
        if i:
            await anyio.sleep(STEP_DELAY_S)
        await ctx.progress(done, 100, f"Completed step {done} of 100")
    return text_result(str(ctx.meta.get("progressToken", "no progress token")))


async def _error(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    return text_result("This tool intentionally returns an error for testing", error=True)


async def _reconnection(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    # SEP-1699: close the POST's SSE stream mid-call (after its priming event), then finish; the
    # result waits in the event store until the client reconnects with GET + Last-Event-ID.
    # Where there is no resumable stream (stdio, older sessions) this is a plain call.
    await ctx.close_stream()
    await anyio.sleep(RECONNECTION_PAUSE_S)
    return text_result(
        "Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure."
    )


async def _sampling(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    if not can_sample(ctx.session):
        return text_result("Sampling not supported: the client did not declare the sampling capability", error=True)
    params = {"messages": [{"role": "user", "content": {"type": "text", "text": str(args.get("prompt", ""))}}], "maxTokens": 100}
    try:
        answer = await ctx.request("sampling/createMessage", params)
    except (JsonRpcError, TimeoutError) as exc:
        return text_result(f"Sampling error: {exc}", error=True)
    content = answer.get("content")
    text = content.get("text", "") if isinstance(content, dict) else ""
    return text_result(f"LLM response: {text or 'No response'}")


async def _elicit(ctx: RequestContext, message: str, schema: dict[str, Any], label: str) -> dict[str, Any]:
    if not can_elicit_form(ctx.session):
        return text_result("Elicitation not supported: the client did not declare the elicitation capability", error=True)
    params: dict[str, Any] = {"message": message, "requestedSchema": schema}
    if versions.at_least(ctx.version, "2025-11-25"):
        params["mode"] = "form"
    try:
        answer = await ctx.request("elicitation/create", params)
    except (JsonRpcError, TimeoutError) as exc:
        return text_result(f"Elicitation error: {exc}", error=True)
    content = json.dumps(answer.get("content") or {}, separators=(",", ":"))
    return text_result(f"{label}: action={answer.get('action')}, content={content}")


async def _elicitation(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    return await _elicit(ctx, str(args.get("message", "")), schema, "User response")


async def _elicitation_defaults(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
        "required": [],
    }
    return await _elicit(ctx, "Please review and update the form fields with defaults", schema, "Elicitation completed")


async def _elicitation_enums(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    options = ["option1", "option2", "option3"]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "description": "Select one option", "enum": options},
            "titledSingle": {
                "type": "string",
                "description": "Select one option with titles",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"},
                ],
            },
            "legacyEnum": {
                "type": "string",
                "description": "Select one option (legacy)",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "description": "Select multiple options",
                "minItems": 1,
                "maxItems": 3,
                "items": {"type": "string", "enum": options},
            },
            "titledMulti": {
                "type": "array",
                "description": "Select multiple options with titles",
                "minItems": 1,
                "maxItems": 3,
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]
                },
            },
        },
        "required": [],
    }
    return await _elicit(ctx, "Please select options from the enum fields", schema, "Elicitation completed")


JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {"$anchor": "addressDef", "type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


async def _json_schema_tool(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    return text_result(f"JSON Schema 2020-12 tool called with: {json.dumps(args, separators=(',', ':'))}")


# ------------------------------------------------------------------ 2026-07-28 rounds (mrtr.py)

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def _exchange() -> mrtr.Exchange:
    exchange = mrtr.current()
    if exchange is None:
        raise JsonRpcError(INVALID_PARAMS, "Invalid params: this fixture answers input_required, defined from MCP 2026-07-28")
    return exchange


def _text_of(response: dict[str, Any] | None, field_name: str) -> str | None:
    content = mrtr.accepted(response)
    value = None if content is None else content.get(field_name)
    return value if isinstance(value, str) else None


async def _ir_elicitation(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    exchange = _exchange()
    name = _text_of(exchange.response("user_name"), "name")
    if name is None:  # first round, or a retry without the answer asked for: ask (again)
        return exchange.ask({"user_name": mrtr.elicitation("What is your name?", NAME_SCHEMA)})
    return text_result(f"Hello, {name}!")


async def _ir_sampling(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    exchange = _exchange()
    text = mrtr.sampled_text(exchange.response("capital_question"))
    if text is None:
        return exchange.ask({"capital_question": mrtr.sampling("What is the capital of France?", max_tokens=100)})
    return text_result(f"LLM response: {text}")


def _root_uris(response: dict[str, Any] | None) -> list[str] | None:
    found = None if response is None else response.get("roots")
    if not isinstance(found, list):
        return None
    return [str(r.get("uri")) for r in found if isinstance(r, dict)]


async def _ir_list_roots(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    exchange = _exchange()
    uris = _root_uris(exchange.response("client_roots"))
    if uris is None:
        return exchange.ask({"client_roots": mrtr.roots()})
    return text_result(f"Client roots: {', '.join(uris) or '(none)'}")


async def _ir_request_state(ctx: RequestContext, args: dict[str, Any], tool: str) -> dict[str, Any]:
    exchange = _exchange()
    confirm = exchange.response("confirm")
    if confirm is None or exchange.state is None or exchange.state.get("tool") != tool:
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
        return exchange.ask({"confirm": mrtr.elicitation("Please confirm", schema)}, {"tool": tool, "round": 1})
    return text_result(f"state-ok: the requestState was verified (action={confirm.get('action')})")


async def _ir_state(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    return await _ir_request_state(ctx, args, "test_input_required_result_request_state")


async def _ir_tampered(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    return await _ir_request_state(ctx, args, "test_input_required_result_tampered_state")


async def _ir_multiple(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    exchange = _exchange()
    asked = {
        "user_name": mrtr.elicitation("What is your name?", NAME_SCHEMA),
        "greeting": mrtr.sampling("Generate a greeting", max_tokens=50),
        "client_roots": mrtr.roots(),
    }
    name = _text_of(exchange.response("user_name"), "name")
    greeting = mrtr.sampled_text(exchange.response("greeting"))
    uris = _root_uris(exchange.response("client_roots"))
    answered = {"user_name": name is not None, "greeting": greeting is not None, "client_roots": uris is not None}
    if exchange.state is None or not all(answered.values()):  # ask for what is still missing
        return exchange.ask({k: v for k, v in asked.items() if exchange.state is None or not answered[k]}, {"round": 1})
    return text_result(f"{greeting} {name}; roots: {', '.join(uris or [])}")


async def _ir_multi_round(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    exchange = _exchange()
    state = exchange.state or {}
    step1 = mrtr.elicitation("Step 1: What is your name?", NAME_SCHEMA)
    if state.get("step") == 2:
        color = _text_of(exchange.response("step2"), "color")
        if color is not None:
            return text_result(f"Hello, {state.get('name')}! Your favorite color is {color}.")
    name = _text_of(exchange.response("step1"), "name") if state.get("step") == 1 else state.get("name")
    if not isinstance(name, str):
        return exchange.ask({"step1": step1}, {"step": 1})
    schema = {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}
    return exchange.ask({"step2": mrtr.elicitation("Step 2: What is your favorite color?", schema)}, {"step": 2, "name": name})


async def _ir_capabilities(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    exchange = _exchange()
    wanted = {
        "user_name": mrtr.elicitation("What is your name?", NAME_SCHEMA),
        "capital_question": mrtr.sampling("What is the capital of France?", max_tokens=100),
    }
    if any(key in exchange.responses for key in wanted):
        return text_result(f"Received input for: {', '.join(sorted(k for k in wanted if k in exchange.responses))}")
    offered = {key: request for key, request in wanted.items() if exchange.supports(request["method"])}
    if not offered:
        raise mrtr.missing_capability("elicitation", "sampling")
    return exchange.ask(offered)


async def _missing_capability(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    """Needs the client's model: -32021 when its `_meta` does not declare sampling."""
    exchange = _exchange()
    if not exchange.supports("sampling/createMessage"):
        raise mrtr.missing_capability("sampling")
    text = mrtr.sampled_text(exchange.response("completion"))
    if text is None:
        return exchange.ask({"completion": mrtr.sampling("Say hello.", max_tokens=20)})
    return text_result(f"LLM response: {text}")


async def _streaming_elicitation(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    """Progress on the request's stream, then the question as input_required: never a request of ours."""
    exchange = _exchange()
    await ctx.progress(0, 1, "about to ask")
    name = _text_of(exchange.response("user_name"), "name")
    if name is None:
        return exchange.ask({"user_name": mrtr.elicitation("What is your name?", NAME_SCHEMA)})
    await ctx.progress(1, 1, "answered")
    return text_result(f"Hello, {name}!")


async def _logging_tool(ctx: RequestContext, args: dict[str, Any]) -> dict[str, Any]:
    """Logs at three levels; at 2026-07-28 only what the request's `_meta` logLevel lets through is sent."""
    for level in ("debug", "info", "warning"):
        await ctx.log(level, f"{level} message from test_logging_tool", logger="conformance-test-server")
    return text_result("Logging tool executed")


def fixture_tools_at(tools: tuple[FixtureTool, ...], version: str) -> tuple[FixtureTool, ...]:
    """The fixture tools a client of `version` sees listed."""
    return tuple(t for t in tools if versions.is_stateless(version) or not t.stateless_only)


FIXTURE_TOOLS: tuple[FixtureTool, ...] = (
    FixtureTool("test_simple_text", "Tests simple text content response", _simple_text),
    FixtureTool(
        "test_mcp_param_header", "Tests x-mcp-header: region is mirrored into Mcp-Param-Region", _mcp_param_header, MCP_PARAM_HEADER_SCHEMA
    ),
    FixtureTool("test_image_content", "Tests image content response", _image),
    FixtureTool("test_audio_content", "Tests audio content response", _audio),
    FixtureTool("test_embedded_resource", "Tests embedded resource content response", _embedded),
    FixtureTool("test_multiple_content_types", "Tests response with multiple content types (text, image, resource)", _mixed),
    FixtureTool("test_tool_with_logging", "Tests tool that emits log messages during execution", _logging),
    FixtureTool("test_tool_with_progress", "Tests tool that reports progress notifications", _progress),
    FixtureTool("test_error_handling", "Tests error response handling", _error),
    FixtureTool("test_reconnection", "Tests SSE stream disconnection and client reconnection (SEP-1699)", _reconnection),
    FixtureTool(
        "test_sampling",
        "Tests server-initiated sampling (LLM completion request)",
        _sampling,
        _string_args("prompt", descriptions={"prompt": "The prompt to send to the LLM"}),
    ),
    FixtureTool(
        "test_elicitation",
        "Tests server-initiated elicitation (user input request)",
        _elicitation,
        _string_args("message", descriptions={"message": "The message to show the user"}),
    ),
    FixtureTool("test_elicitation_sep1034_defaults", "Tests elicitation with default values per SEP-1034", _elicitation_defaults),
    FixtureTool("test_elicitation_sep1330_enums", "Tests elicitation with enum schema improvements per SEP-1330", _elicitation_enums),
    FixtureTool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", _json_schema_tool, JSON_SCHEMA_2020_12),
    FixtureTool(
        "test_input_required_result_elicitation",
        "Asks the user's name through an input_required round (SEP-2322)",
        _ir_elicitation,
        stateless_only=True,
    ),
    FixtureTool(
        "test_input_required_result_sampling", "Asks the client's model through an input_required round", _ir_sampling, stateless_only=True
    ),
    FixtureTool(
        "test_input_required_result_list_roots",
        "Asks the client's roots through an input_required round",
        _ir_list_roots,
        stateless_only=True,
    ),
    FixtureTool(
        "test_input_required_result_request_state", "An input_required round with a sealed requestState", _ir_state, stateless_only=True
    ),
    FixtureTool(
        "test_input_required_result_multiple_inputs",
        "One input_required round asking elicitation, sampling and roots at once",
        _ir_multiple,
        stateless_only=True,
    ),
    FixtureTool(
        "test_input_required_result_multi_round", "Two input_required rounds before the result", _ir_multi_round, stateless_only=True
    ),
    FixtureTool(
        "test_input_required_result_tampered_state",
        "An input_required round whose requestState is integrity-protected (HMAC)",
        _ir_tampered,
        stateless_only=True,
    ),
    FixtureTool(
        "test_input_required_result_capabilities",
        "Asks only what the client's declared capabilities allow",
        _ir_capabilities,
        stateless_only=True,
    ),
    FixtureTool(
        "test_streaming_elicitation",
        "Streams progress, then asks through input_required (never a server-to-client request)",
        _streaming_elicitation,
        stateless_only=True,
    ),
    FixtureTool("test_logging_tool", "Emits log messages at debug, info and warning", _logging_tool, stateless_only=True),
    FixtureTool(
        "test_missing_capability", "Needs the client's sampling capability (-32021 without it)", _missing_capability, stateless_only=True
    ),
)
FIXTURE_TOOLS_BY_NAME = {tool.name: tool for tool in FIXTURE_TOOLS}


# ------------------------------------------------------------------ resources


def _static(uri: str, mime: str, **content: str) -> Callable[[RequestContext, dict[str, str]], Awaitable[list[dict[str, Any]]]]:
    async def read(ctx: RequestContext, variables: dict[str, str]) -> list[dict[str, Any]]:
        return [{"uri": uri, "mimeType": mime, **content}]

    return read


async def _template_data(ctx: RequestContext, variables: dict[str, str]) -> list[dict[str, Any]]:
    rid = variables["id"]
    text = json.dumps({"id": rid, "templateTest": True, "data": f"Data for ID: {rid}"}, separators=(",", ":"))
    return [{"uri": f"test://template/{rid}/data", "mimeType": "application/json", "text": text}]


FIXTURE_RESOURCES: tuple[StaticResource, ...] = (
    StaticResource(
        "test://static-text",
        "static-text",
        "Static Text Resource",
        "A static text resource for testing",
        "text/plain",
        _static("test://static-text", "text/plain", text="This is the content of the static text resource."),
    ),
    StaticResource(
        "test://static-binary",
        "static-binary",
        "Static Binary Resource",
        "A static binary resource (image) for testing",
        "image/png",
        _static("test://static-binary", "image/png", blob=PNG_BASE64),
    ),
    StaticResource(
        "test://watched-resource",
        "watched-resource",
        "Watched Resource",
        "A resource to subscribe to",
        "text/plain",
        _static("test://watched-resource", "text/plain", text="Watched resource content"),
    ),
)
FIXTURE_TEMPLATES: tuple[TemplateResource, ...] = (
    TemplateResource(
        "test://template/{id}/data",
        "template",
        "Resource Template",
        "A resource template with parameter substitution",
        "application/json",
        _template_data,
    ),
)


# ------------------------------------------------------------------ prompts


async def _simple_prompt(ctx: RequestContext, args: dict[str, str]) -> dict[str, Any]:
    return {"messages": [user_text("This is a simple prompt for testing.")]}


async def _args_prompt(ctx: RequestContext, args: dict[str, str]) -> dict[str, Any]:
    return {"messages": [user_text(f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'")]}


async def _embedded_prompt(ctx: RequestContext, args: dict[str, str]) -> dict[str, Any]:
    resource = {"uri": args["resourceUri"], "mimeType": "text/plain", "text": "Embedded resource content for testing."}
    return {
        "messages": [
            {"role": "user", "content": {"type": "resource", "resource": resource}},
            user_text("Please process the embedded resource above."),
        ]
    }


async def _image_prompt(ctx: RequestContext, args: dict[str, str]) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": {"type": "image", "data": PNG_BASE64, "mimeType": "image/png"}},
            user_text("Please analyze the image above."),
        ]
    }


async def _complete_arg(ctx: RequestContext, prefix: str, known: dict[str, str]) -> list[str]:
    return [v for v in ("paris", "park", "party") if v.startswith(prefix)]


async def _ir_prompt(ctx: RequestContext, args: dict[str, str]) -> dict[str, Any]:
    exchange = _exchange()
    context = _text_of(exchange.response("user_context"), "context")
    if context is None:
        schema = {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]}
        return exchange.ask({"user_context": mrtr.elicitation("What context should the prompt use?", schema)})
    return {"messages": [user_text(f"Use this context: {context}")]}


FIXTURE_PROMPTS: tuple[PromptSpec, ...] = (
    PromptSpec("test_simple_prompt", "Simple Test Prompt", "A simple prompt without arguments", _simple_prompt),
    PromptSpec(
        "test_prompt_with_arguments",
        "Prompt With Arguments",
        "A prompt with required arguments",
        _args_prompt,
        (
            PromptArgument("arg1", "First test argument", required=True, complete=_complete_arg),
            PromptArgument("arg2", "Second test argument", required=True, complete=_complete_arg),
        ),
    ),
    PromptSpec(
        "test_prompt_with_embedded_resource",
        "Prompt With Embedded Resource",
        "A prompt that includes an embedded resource",
        _embedded_prompt,
        (PromptArgument("resourceUri", "URI of the resource to embed", required=True),),
    ),
    PromptSpec("test_prompt_with_image", "Prompt With Image", "A prompt that includes image content", _image_prompt),
    PromptSpec(
        "test_input_required_result_prompt",
        "Prompt Asking For Input",
        "A prompt that asks the user for context first (input_required, MCP 2026-07-28)",
        _ir_prompt,
    ),
)


def install(resources: ResourcesFeature, prompts: PromptsFeature) -> None:
    """Add the fixture resources, templates and prompts to their features."""
    for resource in FIXTURE_RESOURCES:
        resources.add_static(resource)
    for template in FIXTURE_TEMPLATES:
        resources.add_template(template)
    for prompt in FIXTURE_PROMPTS:
        prompts.add(prompt)
