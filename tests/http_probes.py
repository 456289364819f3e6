"""Raw-socket probes for the HTTP limits tests: uploads that stream, requests that stall."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from pathlib import Path

CHUNK = 64 * 1024


def rss_peak_kib(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM for {pid}")


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=30)


def head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class Upload:
    """One upload of up to `total` bytes in CHUNK pieces, chunked or with a Content-Length, on
    its own socket; a reader thread catches the server's answer while the body still flows."""

    def __init__(
        self,
        url: str,
        path: str,
        total: int,
        *,
        chunked: bool,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.sock = connect(url)
        self.path, self.total, self.chunked = path, total, chunked
        self.content_type = content_type
        self.headers = headers or {}
        self.answer = b""
        self.sent = 0
        self.answered = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._writer = threading.Thread(target=self._write, daemon=True)

    def start(self) -> Upload:
        self._reader.start()
        self._writer.start()
        return self

    def _read(self) -> None:
        with contextlib.suppress(OSError):
            while b"\r\n\r\n" not in self.answer:
                data = self.sock.recv(65536)
                if not data:
                    break
                self.answer += data
        self.answered.set()

    def _write(self) -> None:
        framing = {"Transfer-Encoding": "chunked"} if self.chunked else {"Content-Length": str(self.total)}
        headers = {"Content-Type": self.content_type, "Accept": "application/json, text/event-stream", **self.headers, **framing}
        piece = b"x" * CHUNK
        with contextlib.suppress(OSError):
            self.sock.sendall(head("POST", self.path, headers))
            while self.sent < self.total and not self.answered.is_set():
                self.sock.sendall(b"%x\r\n%s\r\n" % (CHUNK, piece) if self.chunked else piece)
                self.sent += CHUNK

    def status(self, timeout_s: float) -> int:
        """The answer's status code (0: the connection closed without one)."""
        assert self.answered.wait(timeout_s), f"no answer to the upload to {self.path}"
        self._writer.join(timeout_s)
        self.sock.close()
        if not self.answer:
            return 0
        return int(self.answer.split(b" ", 2)[1])


def closed_within(sock: socket.socket, deadline_s: float) -> bytes | None:
    """What the server sent before closing `sock`, or None when still open at the deadline."""
    received = b""
    end = time.monotonic() + deadline_s
    sock.setblocking(False)
    while time.monotonic() < end:
        ready, _, _ = select.select([sock], [], [], 0.2)
        if not ready:
            continue
        try:
            data = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return received
        except BlockingIOError:
            continue
        if not data:
            return received
        received += data
    return None
