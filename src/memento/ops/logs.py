"""Structured logs: JSON lines on stderr and, with LOG_DIR, in size-rotated files.

Every record passes a redaction filter before any handler writes it: PII and secrets (the same
detectors `remember` applies to content, memento/redaction.py: API keys and tokens, private
keys, passwords and labelled secrets in English and Korean, e-mail addresses, phone numbers,
card numbers, IBANs, resident registration numbers), bearer tokens, credentials in query strings and JSON, JWTs,
the configured secrets by value (MEMENTO_ACCESS_KEY, OPENAI_API_KEY, database passwords),
and pydantic's `input_value=` echoes. Memory content is kept out at the source: no log call
passes content or tool arguments (tool calls are logged as name + outcome).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import traceback
from collections.abc import Iterable
from datetime import UTC, datetime
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote, urlsplit

from memento.redaction import redact_pii
from memento.settings import Settings

LOG_FILE = "memento.log"
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_BACKUPS = 5
REDACTED = "[REDACTED]"
MIN_SECRET_LEN = 4  # shorter configured "secrets" would redact ordinary words

_TOKEN_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # Authorization headers, wherever they are printed.
    (re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{6,}"), r"\1\2" + REDACTED),
    # key=value in query strings, form bodies, DSNs and plain text.
    (
        re.compile(
            r"(?i)\b(access[_-]?key|accesskey|access[_-]?token|refresh[_-]?token|id[_-]?token|api[_-]?key|apikey"
            r"|client[_-]?secret|secret|token|code|code[_-]?verifier|password|passwd|pwd|authorization)"
            r"(=)([^&\s\"',;]+)"
        ),
        r"\1\2" + REDACTED,
    ),
    # "key": "value" in JSON.
    (
        re.compile(
            r"(?i)(\"(?:access[_-]?key|accessKey|access_token|refresh_token|id_token|api[_-]?key|client_secret"
            r"|secret|token|code_verifier|password|authorization)\"\s*:\s*\")([^\"]*)(\")"
        ),
        r"\1" + REDACTED + r"\3",
    ),
    # user:password@ in URLs (DSNs).
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^:/@\s]+:)([^@\s]+)(@)"), r"\1" + REDACTED + r"\3"),
    # JSON Web Tokens.
    (re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"), REDACTED),
    # pydantic validation errors quote the rejected input.
    (re.compile(r"input_value=.*?(?=, input_type=|\]$|$)", re.MULTILINE), "input_value=" + REDACTED),
]

_secrets: set[str] = set()
_secrets_lock = threading.Lock()
_secret_pattern: re.Pattern[str] | None = None


def add_secret(value: str | None) -> None:
    """Redact this exact value from every log record from now on (configured credentials,
    issued tokens)."""
    global _secret_pattern
    if not value or len(value) < MIN_SECRET_LEN:
        return
    with _secrets_lock:
        if value in _secrets:
            return
        _secrets.add(value)
        ordered = sorted(_secrets, key=len, reverse=True)
        _secret_pattern = re.compile("|".join(re.escape(s) for s in ordered))


def redact(text: str) -> str:
    """Everything a log line must not contain, masked."""
    pattern = _secret_pattern
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    for regex, replacement in _TOKEN_PATTERNS:
        text = regex.sub(replacement, text)
    return redact_pii(text)


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    return redact(str(value))


class RedactionFilter(logging.Filter):
    """Rewrites the record in place: message, arguments, exception and stack text."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "_memento_redacted", False):
            return True
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is logged as its template
            message = str(record.msg)
        record.msg = redact(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        record._memento_redacted = True
        return True


_STANDARD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "_memento_redacted",
    "taskName",
    "color_message",
}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, pid, the record's extras, exc."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": redact(record.getMessage()),
            "pid": record.process,
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD_ATTRS and not key.startswith("_"):
                entry[key] = _redact_value(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exc"] = redact(record.exc_text)
        if record.stack_info:
            entry["stack"] = redact(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """The classic one-line format, redacted as a whole."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%Y-%m-%d %H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def _configured_secrets(settings: Settings) -> Iterable[str]:
    for value in (settings.access_key, settings.openai_api_key, settings.postgres_password, settings.redis_password):
        if value.strip():
            yield value.strip()
    for url in (settings.database_url, settings.database_migration_url):
        if url and "://" in url:
            password = urlsplit(url).password
            if password:
                yield unquote(password)
                yield password


def _mark(handler: logging.Handler) -> logging.Handler:
    handler._memento_ops = True  # type: ignore[attr-defined]
    handler.addFilter(RedactionFilter())
    return handler


def text_wanted(log_format: str, stream: IO[str]) -> bool:
    """Whether stderr gets text lines: MEMENTO_LOG_FORMAT=text, or auto on a terminal."""
    if log_format == "auto":
        return stream.isatty()
    return log_format == "text"


def configure_logging(settings: Settings, *, stream: IO[str] | None = None) -> list[logging.Handler]:
    """Install Memento's handlers on the root logger (again: replaces the previous ones).

    stderr (or `stream`) gets text lines when it is a terminal and JSON lines otherwise
    (MEMENTO_LOG_FORMAT=text or json chooses); with LOG_DIR, JSON lines also go to
    LOG_DIR/memento.log, rotated by size (LOG_MAX_BYTES × LOG_BACKUP_COUNT). uvicorn's own
    access log is silenced: the request-metrics middleware logs each request with its route
    template instead of the raw path (a query string may carry `accessKey`); so are its start-up
    and shutdown notes (Memento logs its own, after the port is bound), not its warnings.
    """
    for secret in _configured_secrets(settings):
        add_secret(secret)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_memento_ops", False)]:
        root.removeHandler(old)
        old.close()
    target = stream if stream is not None else sys.stderr
    console = logging.StreamHandler(target)
    console.setFormatter(TextFormatter() if text_wanted(settings.log_format, target) else JsonFormatter())
    handlers: list[logging.Handler] = [_mark(console)]
    log_dir = settings.log_dir
    if log_dir:
        log_dir = Path(log_dir).expanduser()
        log_dir.mkdir(parents=True, exist_ok=True)
        rotating = RotatingFileHandler(
            log_dir / LOG_FILE, maxBytes=settings.log_max_bytes, backupCount=settings.log_backup_count, encoding="utf-8"
        )
        rotating.setFormatter(JsonFormatter())
        handlers.append(_mark(rotating))
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(settings.log_level.upper())
    access = logging.getLogger("uvicorn.access")
    access.handlers = []
    access.propagate = False
    logging.getLogger("uvicorn.error").setLevel(logging.NOTSET if root.level <= logging.DEBUG else logging.WARNING)
    return handlers
