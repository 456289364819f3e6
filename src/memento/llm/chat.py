"""A chat-completions client for any OpenAI-compatible server: `POST {base_url}/chat/completions`.

llama.cpp's server, Ollama (`/v1`), vLLM, LM Studio and OpenAI itself speak it. One instance is
built at start-up and called from worker threads. Every failure (connection, timeout, HTTP
status, a body that is not the expected JSON) is `Unavailable` with a message naming the URL and
the model, never the API key.

The timeout bounds the whole call, connecting included: httpx's own timeouts bound each wait
(a server that sends a byte every second would never trip them), so each call runs on its own
small event loop under `anyio.fail_after`, which cancels whatever is in flight at the deadline.
"""

from __future__ import annotations

import json
import ssl
from functools import partial
from typing import Any

import anyio
import httpx

from memento.errors import Unavailable

MAX_RESPONSE_BYTES = 4 * 1024 * 1024  # a chat answer is text; more than this is not one
_MAX_DETAIL = 300


class ChatCompletions:
    """`complete(prompt, system, max_tokens) -> str` over an OpenAI-compatible HTTP endpoint."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str = "",
        api_key: str = "",
        timeout_s: float = 30.0,
        temperature: float | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.model = model
        self.timeout_s = float(timeout_s)
        self.temperature = temperature  # None: the server's default (some models accept no other)
        self._api_key = api_key
        url = httpx.URL(base_url.rstrip("/") + "/chat/completions")
        self._url = url
        # For messages: never show credentials that might sit in the URL's userinfo.
        self._shown_url = str(url.copy_with(username=None, password=None)) if url.userinfo else str(url)
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._transport = transport
        self._ssl: ssl.SSLContext | None = httpx.create_ssl_context() if url.scheme == "https" else None  # built once, not per call
        self.name = f"openai-chat:{model or '(server default)'}@{self._shown_url}"

    def __call__(self, prompt: str, system: str | None = None, max_tokens: int = 512) -> str:
        """The model's answer to `prompt` (with `system` as the system message), as text."""
        payload: dict[str, Any] = {"messages": self._messages(prompt, system), "max_tokens": int(max_tokens), "stream": False}
        if self.model:
            payload["model"] = self.model
        if self.temperature is not None:
            payload["temperature"] = self.temperature
        try:
            body = anyio.run(partial(self._post, payload))
        except TimeoutError:
            raise self._fail(f"no answer within {self.timeout_s:g}s") from None
        return self._answer(body)

    @staticmethod
    def _messages(prompt: str, system: str | None) -> list[dict[str, str]]:
        messages = [{"role": "system", "content": system}] if system else []
        return [*messages, {"role": "user", "content": prompt}]

    async def _post(self, payload: dict[str, Any]) -> bytes:
        """The response body of one request, within the deadline (TimeoutError past it)."""
        with anyio.fail_after(self.timeout_s):
            async with httpx.AsyncClient(
                headers=self._headers, timeout=httpx.Timeout(self.timeout_s), transport=self._transport, verify=self._ssl or True
            ) as client:
                try:
                    async with client.stream("POST", self._url, json=payload) as response:
                        body = await self._read(response)
                        if response.status_code != 200:
                            detail = _error_detail(body)
                            raise self._fail(f"HTTP {response.status_code}" + (f": {detail}" if detail else ""))
                        return body
                except httpx.TimeoutException:
                    raise self._fail(f"no answer within {self.timeout_s:g}s") from None
                except httpx.HTTPError as exc:
                    raise self._fail(f"{type(exc).__name__}: {exc}") from None

    async def _read(self, response: httpx.Response) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > MAX_RESPONSE_BYTES:
                raise self._fail(f"response larger than {MAX_RESPONSE_BYTES} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    def _answer(self, body: bytes) -> str:
        """choices[0].message.content of a chat-completions response."""
        try:
            parsed = json.loads(body)
        except ValueError:
            raise self._fail("response is not JSON") from None
        choices = parsed.get("choices") if isinstance(parsed, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._fail("malformed response: no 'choices'")
        message = choices[0].get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):  # some servers answer with content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
        if not isinstance(content, str):
            raise self._fail("malformed response: choices[0].message.content is not text")
        return content

    def _fail(self, message: str) -> Unavailable:
        text = f"language model request to {self._shown_url} (model {self.model or 'server default'}) failed: {message}"
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return Unavailable(text if len(text) <= _MAX_DETAIL else text[:_MAX_DETAIL] + "…")

    def __repr__(self) -> str:
        return f"ChatCompletions(model={self.model!r}, url={self._shown_url!r}, timeout_s={self.timeout_s:g})"


def _error_detail(body: bytes) -> str:
    """The error message of an OpenAI-style error body, else its text."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace").strip()
    if isinstance(parsed, dict):
        err = parsed.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])
        if isinstance(err, str):
            return err
        if isinstance(parsed.get("detail"), str):
            return str(parsed["detail"])
    return body.decode("utf-8", "replace").strip()
