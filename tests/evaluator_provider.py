"""A language-model server for the evaluator's tests, run as its own process: it speaks the
OpenAI-compatible chat API (`POST /v1/chat/completions`) and Gemini's generateContent
(`POST /v1beta/models/{model}:generateContent`) and answers deterministically.

    python tests/evaluator_provider.py MODE   # prints the port it listens on, then serves

MODE: `ok` (a judgement as JSON: fixed scores, and the listed memories whose numbers differ from
the memory's as contradictions), `invalid` (text that is not JSON), `garbage` (an HTTP 200 body
that is not JSON), `500` (an error status), `hang` (holds every request without answering).
`GET /calls` returns {"calls": n, "holding": n, "prompts": [...]} (what it was asked).
"""

from __future__ import annotations

import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SCORES = {"informational": 0.9, "specificity": 0.8, "actionability": 0.7}
LOCK = threading.Lock()
STATE: dict[str, Any] = {"calls": 0, "holding": 0, "prompts": []}
RELEASE = threading.Event()  # never set: a hanging request is held until the client gives up


def judgement(prompt: str) -> dict[str, Any]:
    """Contradicted: the listed memories whose numbers differ from the memory's."""
    memory, _, listed = prompt.partition("\n\nSimilar memories:\n")
    mine = set(re.findall(r"\d+", memory.split("\n", 1)[-1]))
    contradicts = []
    for line in listed.splitlines():
        found = re.match(r"\[([^\]]+)\] (.*)", line)
        if found and mine and set(re.findall(r"\d+", found.group(2))) - mine:
            contradicts.append(found.group(1))
    return {**SCORES, "contradicts": contradicts}


class Handler(BaseHTTPRequestHandler):
    mode = "ok"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        with LOCK:
            self._send(200, json.dumps(STATE).encode())

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        gemini = ":generateContent" in self.path
        prompt = body["contents"][0]["parts"][0]["text"] if gemini else body["messages"][-1]["content"]
        with LOCK:
            STATE["calls"] += 1
            STATE["prompts"].append(prompt)
        if self.mode == "hang":
            with LOCK:
                STATE["holding"] += 1
            RELEASE.wait(600)
            return
        if self.mode == "500":
            self._send(500, json.dumps({"error": {"message": "the model is overloaded"}}).encode())
            return
        if self.mode == "garbage":
            self._send(200, b"<html>surprise</html>")
            return
        text = "I think this memory is quite useful." if self.mode == "invalid" else json.dumps(judgement(prompt))
        answer: dict[str, Any]
        if gemini:
            answer = {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}}]}
        else:
            answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}
        self._send(200, json.dumps(answer).encode())

    def _send(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def main() -> None:
    Handler.mode = sys.argv[1]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
