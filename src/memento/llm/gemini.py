"""Google Gemini's generateContent REST API: `POST {base_url}/models/{model}:generateContent`.

The evaluator's Gemini provider (000 §7 names Gemini Flash; GEMINI_API_KEY as 000 §10). Like
`ChatCompletions` it is a `memento.models.Complete`: every failure (connection, timeout, HTTP
status, a body that is not the expected JSON) is `Unavailable` naming the URL and the model,
never the key (sent in the `x-goog-api-key` header, not the URL), and the timeout bounds the
whole call (`anyio.fail_after` on the call's own small event loop).
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from memento.errors import Unavailable
from memento.llm.transport import JsonPost, failure


class GeminiGenerate:
    """`complete(prompt, system, max_tokens) -> str` over the Gemini API."""

    def __init__(
        self, base_url: str, *, model: str, api_key: str, timeout_s: float = 30.0, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.model = model
        self.timeout_s = float(timeout_s)
        self._api_key = api_key
        self._url = httpx.URL(f"{base_url.rstrip('/')}/models/{model}:generateContent")
        self._headers = {"Content-Type": "application/json", "Accept": "application/json", "x-goog-api-key": api_key}
        self._post = JsonPost(self._url, self._headers, self.timeout_s, self._fail, transport)
        self.name = f"gemini:{model}"

    def __call__(self, prompt: str, system: str | None = None, max_tokens: int = 512) -> str:
        """The model's answer to `prompt`, as text."""
        payload: dict[str, Any] = {
            "contents": [{"role": "user", "parts": [{"text": prompt}]}],
            "generationConfig": {"maxOutputTokens": int(max_tokens), "responseMimeType": "application/json"},
        }
        if system:
            payload["systemInstruction"] = {"parts": [{"text": system}]}
        return self._answer(self._post(payload))

    def _answer(self, body: bytes) -> str:
        """The text parts of candidates[0].content."""
        try:
            parsed = json.loads(body)
        except ValueError:
            raise self._fail("response is not JSON") from None
        candidates = parsed.get("candidates") if isinstance(parsed, dict) else None
        if not isinstance(candidates, list) or not candidates or not isinstance(candidates[0], dict):
            raise self._fail("malformed response: no 'candidates'")
        content = candidates[0].get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        if not isinstance(parts, list):
            raise self._fail("malformed response: candidates[0].content has no parts")
        texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if not texts:
            raise self._fail("malformed response: no text part")
        return "".join(texts)

    def _fail(self, message: str) -> Unavailable:
        return failure(f"Gemini request to {self._url} (model {self.model})", message, self._api_key)

    def __repr__(self) -> str:
        return f"GeminiGenerate(model={self.model!r}, url={str(self._url)!r}, timeout_s={self.timeout_s:g})"
