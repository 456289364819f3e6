"""`memento ui`: the dashboard's address (docs/dashboard.md). When a Memento server already answers
there, it prints the URL (and opens a browser unless --no-open); when nothing does, it serves the
HTTP face itself (as `memento serve --transport http`) and opens the browser once it answers."""

from __future__ import annotations

import argparse
import json
import threading
import urllib.error
import urllib.request
import webbrowser
from typing import Any

from ..settings import Settings

COMMANDS = ("ui",)
PROBE_TIMEOUT_S = 2.0
READY_WAIT_S = 30.0


def register(sub: Any) -> None:
    ui = sub.add_parser("ui", help="open the web dashboard (serving it here when no server runs yet)")
    ui.add_argument("--host", default=None, help="the server's address (default: MEMENTO_HOST or 127.0.0.1)")
    ui.add_argument("--port", type=int, default=None, help="the server's port (default: PORT or 56332)")
    ui.add_argument("--no-open", action="store_true", help="print the URL only; do not open a browser")


def dashboard_url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else "[::1]" if host == "::" else f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/ui/"


def answers(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a Memento server answers at `url`'s /health."""
    health = url.removesuffix("ui/") + "health"
    try:
        with urllib.request.urlopen(health, timeout=timeout_s) as response:
            return bool(json.loads(response.read() or b"{}").get("status"))
    except (OSError, ValueError, urllib.error.URLError):
        return False


def _open_when_ready(url: str, stop: threading.Event) -> None:
    for _ in range(int(READY_WAIT_S / 0.25)):
        if stop.wait(0.25):
            return
        if answers(url, 0.5):
            webbrowser.open(url)
            return


def run(args: argparse.Namespace, settings: Settings) -> int:
    host = args.host or settings.host
    port = args.port if args.port is not None else settings.port
    url = dashboard_url(host, port)
    if answers(url):
        print(url)
        if not args.no_open:
            webbrowser.open(url)
        return 0
    from ..app import build_app, log_startup, start_scheduler, start_warm_up
    from ..ops import heap
    from ..web import serve_http

    print(f"{url} (serving it here; Ctrl-C stops)")
    stop = threading.Event()
    if not args.no_open:
        threading.Thread(target=_open_when_ready, args=(url, stop), name="open-dashboard", daemon=True).start()
    app = build_app(settings)
    start_warm_up(app, then=heap.settle)
    log_startup(app, "http")
    start_scheduler(app)
    try:
        serve_http(app, host, port)
    finally:
        stop.set()
    return 0
