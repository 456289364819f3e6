"""gzip / deflate response compression that never touches event streams.

Chosen by the request's Accept-Encoding (q-values honoured; gzip preferred on a tie).
Skipped for `text/event-stream` (SSE must reach the client event by event), for bodies that
already carry a Content-Encoding, for small single-chunk bodies, and for HEAD. A streamed
body (several chunks) is compressed chunk by chunk with a sync flush, so nothing waits for
the end of the response.
"""

from __future__ import annotations

import zlib
from typing import Any

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MINIMUM_SIZE = 500
LEVEL = 6
NEVER_COMPRESS = ("text/event-stream", "application/gzip", "application/zip", "image/", "audio/", "video/")


def choose_encoding(accept_encoding: str) -> str | None:
    """'gzip', 'deflate' or None for an Accept-Encoding header value."""
    weights: dict[str, float] = {}
    for part in accept_encoding.split(","):
        name, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if name:
            weights[name.lower()] = q
    star = weights.get("*", 0.0)
    best: tuple[float, str] | None = None
    for encoding in ("gzip", "deflate"):
        q = weights.get(encoding, star)
        if q > 0 and (best is None or q > best[0]):
            best = (q, encoding)
    return best[1] if best else None


def _compressor(encoding: str) -> Any:
    # gzip: a gzip wrapper (wbits 16+15); deflate in HTTP means the zlib format (RFC 9110 §8.4.1.2).
    return zlib.compressobj(LEVEL, zlib.DEFLATED, 31 if encoding == "gzip" else 15)


class CompressionMiddleware:
    def __init__(self, app: ASGIApp, minimum_size: int = MINIMUM_SIZE) -> None:
        self.app = app
        self.minimum_size = minimum_size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") == "HEAD":
            await self.app(scope, receive, send)
            return
        encoding = choose_encoding(Headers(scope=scope).get("accept-encoding", ""))
        if encoding is None:
            await self.app(scope, receive, send)
            return
        await _Responder(self.app, encoding, self.minimum_size)(scope, receive, send)


class _Responder:
    def __init__(self, app: ASGIApp, encoding: str, minimum_size: int) -> None:
        self.app = app
        self.encoding = encoding
        self.minimum_size = minimum_size
        self.start: Message | None = None
        self.mode: str | None = None  # "identity" | "compress", decided at the first body chunk
        self.compressor: Any = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.send = send
        await self.app(scope, receive, self.wrapped)

    async def wrapped(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            headers = Headers(raw=message.get("headers", []))
            content_type = headers.get("content-type", "").lower()
            if headers.get("content-encoding") or any(content_type.startswith(t) for t in NEVER_COMPRESS):
                self.mode = "identity"
                await self.send(message)
                return
            self.start = message  # held until we know the body
            return
        if kind != "http.response.body" or self.mode == "identity":
            await self.send(message)
            return
        body: bytes = message.get("body", b"")
        more = bool(message.get("more_body", False))
        if self.mode is None:
            assert self.start is not None
            headers = MutableHeaders(raw=self.start["headers"])
            if not more and len(body) < self.minimum_size:
                self.mode = "identity"
                await self.send(self.start)
                await self.send(message)
                return
            self.mode = "compress"
            self.compressor = _compressor(self.encoding)
            headers["Content-Encoding"] = self.encoding
            headers.add_vary_header("Accept-Encoding")
            if not more:
                compressed = self.compressor.compress(body) + self.compressor.flush()
                headers["Content-Length"] = str(len(compressed))
                await self.send(self.start)
                await self.send({"type": "http.response.body", "body": compressed, "more_body": False})
                return
            if "content-length" in headers:
                del headers["Content-Length"]
            await self.send(self.start)
        chunk = self.compressor.compress(body)
        chunk += self.compressor.flush(zlib.Z_SYNC_FLUSH) if more else self.compressor.flush()
        await self.send({"type": "http.response.body", "body": chunk, "more_body": more})
