"""Run the conformance suite's authorization-server checks against Memento, playing the operator.

`conformance authorization` checks the metadata endpoint, then prints an authorization URL and
waits for a browser to bring the code back to its callback server. This helper registers a
client (RFC 7591) with the callback as redirect URI, runs the suite, and, when the URL appears,
opens Memento's consent page, approves it with the operator key and follows the redirect to
the suite's callback, as a person in a browser would.

Usage: conformance_auth.py NODE CONFORMANCE_JS BASE_URL OPERATOR_KEY OUT_DIR LOG [suite args...]
Exit status: the suite's.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

TIMEOUT_S = 300


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _register(base: str, redirect_uri: str) -> str:
    body = json.dumps({"client_name": "conformance suite", "redirect_uris": [redirect_uri], "token_endpoint_auth_method": "none"}).encode()
    request = urllib.request.Request(base + "/register", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return str(json.load(reply)["client_id"])


def _approve(url: str, operator_key: str) -> str:
    """Open the consent page at `url`, approve it; the redirect location (the suite's callback)."""
    with urllib.request.urlopen(url, timeout=10) as reply:
        page = reply.read().decode("utf-8")
    found = re.search(r'name=request_id value="([^"]+)"', page)
    if not found:
        raise RuntimeError("no consent form in the authorization page:\n" + page[:2000])
    form = urllib.parse.urlencode(
        {"request_id": found.group(1), "access_key": operator_key, "agent": "conformance", "access": "read-write", "decision": "approve"}
    ).encode()
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        opener.open(urllib.request.Request(url.split("?")[0], data=form), timeout=10)
    except urllib.error.HTTPError as exc:
        if exc.code == 302:
            return str(exc.headers["Location"])
        raise RuntimeError(f"consent answered {exc.code}: {exc.read()[:2000]!r}") from None
    raise RuntimeError("consent did not redirect")


def _deliver(callback: str) -> None:
    """GET the suite's callback; it prints the URL before its listener is up, so retry a while."""
    deadline = time.monotonic() + 15
    while True:
        try:
            with urllib.request.urlopen(callback, timeout=10) as reply:
                reply.read()
            return
        except urllib.error.URLError as exc:
            if isinstance(exc, urllib.error.HTTPError) or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def main(argv: list[str]) -> int:
    node, conformance_js, base, operator_key, out_dir, log_path, *extra = argv
    port = _free_port()
    client_id = _register(base, f"http://127.0.0.1:{port}/callback")
    command = [
        node,
        conformance_js,
        "authorization",
        "--url",
        base,
        "--client-id",
        client_id,
        "--resource",
        base + "/mcp",
        "--port",
        str(port),
        "-o",
        out_dir,
        *extra,
    ]
    with open(log_path, "w", encoding="utf-8") as log:
        log.write("$ " + " ".join(command) + "\n")
        log.flush()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        timer = threading.Timer(TIMEOUT_S, process.kill)
        timer.start()
        try:
            assert process.stdout is not None
            for line in process.stdout:
                log.write(line)
                log.flush()
                url = line.strip()
                if url.startswith(base + "/authorize?"):
                    try:
                        callback = _approve(url, operator_key)
                        _deliver(callback)
                        log.write(f"[conformance_auth] approved the consent page; delivered {callback.split('?')[0]}\n")
                    except Exception as exc:  # noqa: BLE001 - the suite then times out and reports the failure
                        log.write(f"[conformance_auth] could not complete the consent: {exc}\n")
            return process.wait()
        finally:
            timer.cancel()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
