"""What the language-model clients share: one JSON POST under a whole-call deadline with a bounded
body, and failures as `Unavailable` that never show the API key.

httpx's own timeouts bound each wait (a server that sends a byte every second would never trip
them), so each call runs on its own small event loop under `anyio.fail_after`, which cancels
whatever is in flight at the deadline.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
import httpx

from memento.errors import Unavailable

MAX_RESPONSE_BYTES = 4 * 1024 * 1024  # a model's answer is text; more than this is not one
MAX_DETAIL = 300


def failure(what: str, message: str, api_key: str) -> Unavailable:
    """`what` (the request, naming URL and model) failed with `message`: the key redacted, the text bounded."""
    text = f"{what} failed: {message}"
    if api_key:
        text = text.replace(api_key, "***")
    return Unavailable(text if len(text) <= MAX_DETAIL else text[:MAX_DETAIL] + "…")


class JsonPost:
    """POST a JSON payload to `url`; the response body, within `timeout_s` for the whole call.
    Every failure (connection, deadline, size, HTTP status) is `fail(message)`."""

    def __init__(
        self,
        url: httpx.URL,
        headers: dict[str, str],
        timeout_s: float,
        fail: Callable[[str], Unavailable],
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url
        self.headers = headers
        self.timeout_s = timeout_s
        self.fail = fail
        self.transport = transport
        self._ssl: ssl.SSLContext | None = httpx.create_ssl_context() if url.scheme == "https" else None  # built once, not per call

    def __call__(self, payload: dict[str, Any]) -> bytes:
        try:
            return anyio.run(partial(self._post, payload))
        except TimeoutError:
            raise self.fail(f"no answer within {self.timeout_s:g}s") from None

    async def _post(self, payload: dict[str, Any]) -> bytes:
        with anyio.fail_after(self.timeout_s):
            async with httpx.AsyncClient(
                headers=self.headers, timeout=httpx.Timeout(self.timeout_s), transport=self.transport, verify=self._ssl or True
            ) as client:
                try:
                    async with client.stream("POST", self.url, json=payload) as response:
                        body = await self._read(response)
                        if response.status_code != 200:
                            detail = error_detail(body)
                            raise self.fail(f"HTTP {response.status_code}" + (f": {detail}" if detail else ""))
                        return body
                except httpx.TimeoutException:
                    raise self.fail(f"no answer within {self.timeout_s:g}s") from None
                except httpx.HTTPError as exc:
                    raise self.fail(f"{type(exc).__name__}: {exc}") from None

    async def _read(self, response: httpx.Response) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > MAX_RESPONSE_BYTES:
                raise self.fail(f"response larger than {MAX_RESPONSE_BYTES} bytes")
            chunks.append(chunk)
        return b"".join(chunks)


def error_detail(body: bytes) -> str:
    """The error message of an OpenAI- or Google-style error body, else its text."""
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
