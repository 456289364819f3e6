"""A chat-completions client for any OpenAI-compatible server: `POST {base_url}/chat/completions`.

llama.cpp's server, Ollama (`/v1`), vLLM, LM Studio and OpenAI itself speak it. One instance is
built at start-up and called from worker threads. Every failure (connection, timeout, HTTP
status, a body that is not the expected JSON) is `Unavailable` with a message naming the URL and
the model, never the API key.

The timeout bounds the whole call, connecting included (`memento.llm.transport.JsonPost`).
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from memento.errors import Unavailable
from memento.llm.transport import MAX_RESPONSE_BYTES, JsonPost, failure

__all__ = ["MAX_RESPONSE_BYTES", "ChatCompletions"]


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
        self._post = JsonPost(url, self._headers, self.timeout_s, self._fail, transport)
        self.name = f"openai-chat:{model or '(server default)'}@{self._shown_url}"

    def __call__(self, prompt: str, system: str | None = None, max_tokens: int = 512) -> str:
        """The model's answer to `prompt` (with `system` as the system message), as text."""
        payload: dict[str, Any] = {"messages": self._messages(prompt, system), "max_tokens": int(max_tokens), "stream": False}
        if self.model:
            payload["model"] = self.model
        if self.temperature is not None:
            payload["temperature"] = self.temperature
        return self._answer(self._post(payload))

    @staticmethod
    def _messages(prompt: str, system: str | None) -> list[dict[str, str]]:
        messages = [{"role": "system", "content": system}] if system else []
        return [*messages, {"role": "user", "content": prompt}]

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
        return failure(f"language model request to {self._shown_url} (model {self.model or 'server default'})", message, self._api_key)

    def __repr__(self) -> str:
        return f"ChatCompletions(model={self.model!r}, url={self._shown_url!r}, timeout_s={self.timeout_s:g})"
