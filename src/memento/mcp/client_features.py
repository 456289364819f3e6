"""Requests the server makes of the client: elicitation (confirm a forget) and sampling.

Both are used only when the client declared the capability (in `initialize`, or at 2026-07-28
in the request's `_meta`); without it the server behaves exactly as before (no confirmation, no
sampling). Sampling is lent to the tools of the `protocol` toolset as `CallContext.complete`
(`lent_model`), the model their drafts use when the operator configured none (docs/llm.md).

At 2026-07-28 the server sends no request of its own: both become rounds of the client's
request (mrtr.py). The confirmation is an `input_required` answer carrying the form; the retry
carrying the user's answer proceeds or declines as the answer of a server-initiated request
would. A model's completion cannot arrive in the middle of a call, so a draft that asks for one
abandons the call (`mrtr.InputNeeded`, nothing kept) with the sampling request; the retry runs
the call again and the draft gets that completion (answers so far travel in the sealed state).
The background evaluator has no session to borrow a model through at 2026-07-28, so
`lend_to_evaluator` lends nothing there.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from pydantic import ValidationError

from memento.errors import MementoError, Unavailable
from memento.lifecycle.sampling import LentModel
from memento.mcp import mrtr, versions
from memento.mcp.context import CallContext, Session
from memento.mcp.features import RequestContext, SessionView
from memento.mcp.jsonrpc import JsonRpcError
from memento.mcp.namespace import principal, service_context
from memento.models import Complete, ForgetInput

if TYPE_CHECKING:
    from memento.app import App

CONFIRM_TIMEOUT_S = 120.0
SAMPLE_TIMEOUT_S = 60.0
CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Delete", "description": "Yes, delete these memories.", "default": False}},
    "required": ["confirm"],
}
CONFIRM_KEY = "confirm_forget"  # the id of the confirmation among a round's inputRequests
MODEL_KEY = "draft_model"  # the id of a draft's sampling request


def can_elicit_form(session: SessionView) -> bool:
    """Form-mode elicitation: `elicitation: {}` (any version) or `elicitation: {form: {}}` (2025-11-25)."""
    cap = session.client_capabilities.get("elicitation")
    if not isinstance(cap, dict):
        return False
    return not cap or "form" in cap


def can_sample(session: SessionView) -> bool:
    return isinstance(session.client_capabilities.get("sampling"), dict)


async def confirm_forget(ctx: RequestContext, app: App, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """Ask the user before a `forget` that would delete memories; None means go ahead.

    Asked only when the client can show a form, `force` is not set (an explicit force is the
    caller's confirmation) and the call would really delete at least one fragment (a call the
    service refuses anyway, or that deletes nothing, is not worth a question). Otherwise, and
    when the user accepts, returns None; a decline or cancel returns the tool result to send.
    """
    if not can_elicit_form(ctx.session) or arguments.get("force") is True:
        return None
    try:
        inp = ForgetInput.model_validate(arguments)
        preview = await anyio.to_thread.run_sync(partial(app.service.views.preview_forget, inp, service_context(ctx.session)))
    except (ValidationError, MementoError):
        return None  # the tool call itself reports the problem
    ids = preview.ids
    if not ids or preview.protected:
        return None
    what = f"fragment {ids[0]}" if len(ids) == 1 else f"{len(ids)} fragments of topic {inp.topic!r}"
    message = f"Memento is about to delete {what} permanently. Delete?"
    exchange = mrtr.current()
    if exchange is not None:  # 2026-07-28: a round of this request, not a request of ours
        return _confirm_in_rounds(ctx, exchange, ids, message)
    params: dict[str, Any] = {"message": message, "requestedSchema": CONFIRM_SCHEMA}
    if versions.at_least(ctx.version, "2025-11-25"):
        params["mode"] = "form"
    try:
        answer = await ctx.request("elicitation/create", params, timeout_s=CONFIRM_TIMEOUT_S)
    except (JsonRpcError, TimeoutError):
        return versions.tool_error(ctx.version, "cancelled", "deletion was not confirmed (no answer from the client); nothing deleted")
    content = answer.get("content")
    if answer.get("action") == "accept" and isinstance(content, dict) and content.get("confirm") is True:
        return None
    return versions.tool_error(ctx.version, "cancelled", "the user did not confirm the deletion; nothing deleted")


def _confirm_in_rounds(ctx: RequestContext, exchange: mrtr.Exchange, ids: list[str], message: str) -> dict[str, Any] | None:
    """The confirmation as rounds: ask (input_required, the fragments' digest sealed in the
    state) unless this retry answers the question asked about these very fragments."""
    about = hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()
    answer = exchange.response(CONFIRM_KEY)
    if answer is not None and exchange.state is not None and exchange.state.get("forget") == about:
        content = mrtr.accepted(answer)
        if content is not None and content.get("confirm") is True:
            return None
        return versions.tool_error(ctx.version, "cancelled", "the user did not confirm the deletion; nothing deleted")
    # First round, an answer without our state, or what the call would delete has changed: ask.
    return exchange.ask({CONFIRM_KEY: mrtr.elicitation(message, CONFIRM_SCHEMA)}, {"forget": about})


async def sample(
    ctx: RequestContext, prompt: str, *, max_tokens: int = 512, system: str | None = None, timeout_s: float = SAMPLE_TIMEOUT_S
) -> str:
    """The client's LLM completion of `prompt` (sampling/createMessage), as text.

    Raises Unavailable when the client did not declare sampling or answered with an error.
    """
    if not can_sample(ctx.session):
        raise Unavailable("the client does not offer sampling")
    params: dict[str, Any] = {"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}], "maxTokens": max_tokens}
    if system:
        params["systemPrompt"] = system
    try:
        answer = await ctx.request("sampling/createMessage", params, timeout_s=timeout_s)
    except (JsonRpcError, TimeoutError) as exc:
        raise Unavailable(f"sampling failed: {exc}") from None
    content = answer.get("content")
    blocks = content if isinstance(content, list) else [content]
    return "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")


def lent_model(ctx: RequestContext) -> Complete | None:
    """The client's model for one tool call, when it declared sampling: a blocking
    complete(prompt, system, max_tokens) for the tool's worker thread, which sends
    sampling/createMessage through the event loop (`sample`). None without the capability."""
    if not can_sample(ctx.session):
        return None
    exchange = mrtr.current()
    if exchange is not None:
        return _model_in_rounds(exchange)

    def complete(prompt: str, system: str | None, max_tokens: int) -> str:
        try:
            return anyio.from_thread.run(partial(sample, ctx, prompt, max_tokens=max_tokens, system=system))
        except RuntimeError:  # not on a worker thread of the server's loop (the call has ended)
            raise Unavailable("sampling is only possible during the tool call") from None

    return complete


def _asked(prompt: str, system: str | None, max_tokens: int) -> str:
    return hashlib.sha256(json.dumps([prompt, system, max_tokens]).encode()).hexdigest()


def _model_in_rounds(exchange: mrtr.Exchange) -> Complete:
    """The client's model at 2026-07-28: completions it gave in earlier rounds of this request
    (sealed in the state, the last one in `inputResponses`), by the digest of what was asked;
    anything else abandons the call with a sampling request (`mrtr.InputNeeded`)."""
    state = exchange.state or {}
    earlier = state.get("answers")
    answers: dict[str, str] = {k: v for k, v in earlier.items() if isinstance(v, str)} if isinstance(earlier, dict) else {}
    asked = state.get("asked")
    response = exchange.response(MODEL_KEY)
    if isinstance(asked, str) and response is not None:
        text = mrtr.sampled_text(response)
        if text is not None:
            answers[asked] = text

    def complete(prompt: str, system: str | None, max_tokens: int) -> str:
        digest = _asked(prompt, system, max_tokens)
        if digest in answers:
            return answers[digest]
        if digest == asked and response is not None:  # answered, but with no text to use
            raise Unavailable("the client's model answered without text")
        request = mrtr.sampling(prompt, max_tokens=max_tokens, system=system)
        raise mrtr.InputNeeded(exchange.ask({MODEL_KEY: request}, {"asked": digest, "answers": answers}))

    return complete


def lend_to_evaluator(app: App, session: Session, reachable: Callable[[Session], bool]) -> bool:
    """Register `session`'s model with the evaluator (`app.sampling`) when its client declared
    sampling; called on the session's event loop, at its first call. The evaluator's worker
    thread sends sampling/createMessage on the session's standalone channel (stdout; on
    Streamable HTTP the GET stream, hence `reachable`) through this loop. False when not lent."""
    if not can_sample(session) or session.id in app.sampling or versions.is_stateless(session.protocol_version):
        return False  # at 2026-07-28 there is no session whose client the evaluator could ask
    token = anyio.lowlevel.current_token()
    timeout_s = app.settings.evaluator_timeout_s

    def complete(prompt: str, system: str | None, max_tokens: int) -> str:
        async def ask() -> str:
            ctx = CallContext(session, "memento-evaluator", session.protocol_version or versions.LATEST, {})
            return await sample(ctx, prompt, max_tokens=max_tokens, system=system, timeout_s=timeout_s)

        try:
            return anyio.from_thread.run(ask, token=token)
        except RuntimeError:  # the session's event loop has ended
            raise Unavailable("the client's session has ended") from None

    return app.sampling.add(session.id, LentModel(principal(session).agent_id, complete, lambda: reachable(session)))
