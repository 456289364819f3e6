"""The language model client (memento.llm) against a small chat-completions server the test runs on
127.0.0.1: the request it sends, the answer it reads, and every failure as Unavailable (HTTP
errors, bad bodies, a refused connection, a server that answers too slowly or never), within
the timeout."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from memento.app import build_app
from memento.embeddings import HashEmbedder
from memento.errors import Unavailable
from memento.llm import ChatCompletions, build_llm
from memento.settings import Settings

API_KEY = "sk-test-" + "k" * 24


def completion(text: Any) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}


class FakeProvider:
    """A chat-completions endpoint: `reply(body)` gives (status, bytes) or streams via `slow`."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.reply: Callable[[dict[str, Any]], tuple[int, bytes]] = lambda body: (200, json.dumps(completion("hello")).encode())
        self.hang = False  # accept, then answer nothing until released
        self.drip = False  # answer headers, then a byte at a time, forever (until released)
        self.released = threading.Event()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                provider.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                if self.path != "/v1/chat/completions":
                    self.send_error(404)
                    return
                if provider.hang:
                    provider.released.wait(30)
                    return
                if provider.drip:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "100000")
                    self.end_headers()
                    while not provider.released.wait(0.02):  # pacing of the slow server, not a test sleep
                        try:
                            self.wfile.write(b" ")
                            self.wfile.flush()
                        except OSError:
                            return
                    return
                status, payload = provider.reply(body)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    running = FakeProvider()
    running.thread.start()
    yield running
    running.close()


def test_sends_the_chat_request_and_returns_the_answer(provider: FakeProvider) -> None:
    provider.reply = lambda body: (200, json.dumps(completion("42")).encode())
    model = ChatCompletions(provider.url, model="llama-3.1-8b", api_key=API_KEY, temperature=0.0)
    assert model("What is six times seven?", "Answer with a number.", 16) == "42"
    ((headers, body),) = provider.requests
    assert headers["authorization"] == f"Bearer {API_KEY}" and headers["content-type"] == "application/json"
    assert body == {
        "model": "llama-3.1-8b",
        "messages": [{"role": "system", "content": "Answer with a number."}, {"role": "user", "content": "What is six times seven?"}],
        "max_tokens": 16,
        "stream": False,
        "temperature": 0.0,
    }


def test_without_model_key_or_system_nothing_of_them_is_sent(provider: FakeProvider) -> None:
    assert ChatCompletions(provider.url + "/")("hi", None, 8) == "hello"
    ((headers, body),) = provider.requests
    assert "authorization" not in headers
    assert body == {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "stream": False}


def test_content_given_as_parts_is_joined(provider: FakeProvider) -> None:
    parts = [{"type": "text", "text": "forty"}, {"type": "image_url"}, {"type": "text", "text": "-two"}]
    provider.reply = lambda body: (200, json.dumps(completion(parts)).encode())
    assert ChatCompletions(provider.url)("n?", None, 8) == "forty-two"


@pytest.mark.parametrize(
    ("status", "payload", "expected"),
    [
        (500, json.dumps({"error": {"message": "model crashed"}}).encode(), "HTTP 500: model crashed"),
        (401, b"no such key " + API_KEY.encode(), "HTTP 401: no such key ***"),
        (200, b"<html>not json</html>", "response is not JSON"),
        (200, json.dumps({"choices": []}).encode(), "malformed response: no 'choices'"),
        (200, json.dumps(completion(None)).encode(), "is not text"),
        (200, json.dumps([1, 2]).encode(), "malformed response"),
    ],
)
def test_every_bad_answer_is_unavailable_with_a_clear_message(provider: FakeProvider, status: int, payload: bytes, expected: str) -> None:
    provider.reply = lambda body: (status, payload)
    with pytest.raises(Unavailable) as caught:
        ChatCompletions(provider.url, model="m", api_key=API_KEY)("hi", None, 8)
    assert expected in caught.value.message and provider.url in caught.value.message
    assert API_KEY not in caught.value.message


def test_a_refused_connection_is_unavailable(provider: FakeProvider) -> None:
    url = provider.url
    provider.close()  # nothing listens on the port any more
    with pytest.raises(Unavailable, match="language model request to .* failed: ConnectError"):
        ChatCompletions(url, timeout_s=5)("hi", None, 8)


@pytest.mark.parametrize("behaviour", ["hang", "drip"])
def test_a_server_that_does_not_finish_answering_is_cut_at_the_timeout(provider: FakeProvider, behaviour: str) -> None:
    setattr(provider, behaviour, True)
    with pytest.raises(Unavailable, match=r"no answer within 0.3s"):
        ChatCompletions(provider.url, timeout_s=0.3)("hi", None, 8)


def test_build_llm_follows_the_settings(tmp_path: Path, provider: FakeProvider) -> None:
    assert build_llm(Settings(MEMENTO_LLM_URL="")) is None
    built = build_llm(Settings(MEMENTO_LLM_URL=provider.url + "/", MEMENTO_LLM_MODEL="qwen", MEMENTO_LLM_TIMEOUT_S=7))
    assert isinstance(built, ChatCompletions) and (built.model, built.timeout_s) == ("qwen", 7.0)
    assert built("hi", None, 4) == "hello"
    for bad in ("ftp://host/v1", "localhost:8080", "http://host/v1?x=1"):
        with pytest.raises(ValidationError, match="MEMENTO_LLM_URL"):
            Settings(MEMENTO_LLM_URL=bad)


def test_the_app_lends_the_configured_model_to_the_protocol_face(tmp_path: Path, provider: FakeProvider) -> None:
    plain = build_app(Settings(DATABASE_URL=f"sqlite:///{tmp_path}/a.db"), embedder=HashEmbedder(64))
    try:
        assert plain.service.protocol.llm is None
    finally:
        plain.close()
    settings = Settings(DATABASE_URL=f"sqlite:///{tmp_path}/b.db", MEMENTO_LLM_URL=provider.url)
    configured = build_app(settings, embedder=HashEmbedder(64))
    try:
        llm = configured.service.protocol.llm
        assert isinstance(llm, ChatCompletions) and llm("ping", None, 4) == "hello"
    finally:
        configured.close()
