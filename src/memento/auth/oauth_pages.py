"""The HTML the operator sees: the consent form of `/authorize` and its error pages.

Self-contained pages (no scripts, no external assets); every value is escaped.
"""

from __future__ import annotations

from html import escape
from urllib.parse import urlsplit

from .oauth_protocol import WRITE
from .oauth_store import Client, PendingAuthorization

_STYLE = """
body{font-family:system-ui,-apple-system,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem}dl{display:grid;grid-template-columns:auto 1fr;gap:.3rem 1rem}dt{font-weight:600}
dd{margin:0;word-break:break-all}label{display:block;margin:.8rem 0 .3rem;font-weight:600}
input[type=text],input[type=password]{width:100%;padding:.5rem;font-size:1rem;box-sizing:border-box}
fieldset{border:1px solid #ccc;margin-top:1rem}fieldset label{font-weight:400;display:inline;margin-right:1rem}
.error{background:#fde8e8;border:1px solid #e0a0a0;padding:.6rem;border-radius:4px}
.note{color:#555;font-size:.9rem}button{margin-top:1.2rem;margin-right:.5rem;padding:.5rem 1.2rem;font-size:1rem}
"""

SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "Pragma": "no-cache",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


def _page(title: str, body: str) -> str:
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width,initial-scale=1">'
        f"<title>{escape(title)} - Memento</title><style>{_STYLE}</style></head>"
        f"<body><h1>{escape(title)}</h1>{body}</body></html>"
    )


def error_page(title: str, message: str) -> str:
    return _page(title, f"<p class=error>{escape(message)}</p>")


def no_operator_page() -> str:
    return _page(
        "OAuth needs an operator",
        "<p class=error>This Memento server has no operator access key (MEMENTO_ACCESS_KEY), so "
        "nobody can approve an application's access. Set MEMENTO_ACCESS_KEY and restart the server "
        "to authorise MCP clients with OAuth.</p>",
    )


def consent_page(pending: PendingAuthorization, client: Client, *, agent: str, read_only: bool, error: str | None = None) -> str:
    """The form the operator approves a client with: operator key, namespace, access level."""
    can_write = WRITE in pending.scopes
    redirect = urlsplit(pending.redirect_uri)
    where = f"{redirect.scheme}://{redirect.netloc}{redirect.path}"
    rw_checked = "" if read_only or not can_write else " checked"
    ro_checked = " checked" if read_only or not can_write else ""
    rw_disabled = "" if can_write else " disabled"
    body = [
        f"<p><strong>{escape(client.client_name)}</strong> asks for access to this Memento server's memory.</p>",
        "<dl>",
        f"<dt>Client id</dt><dd>{escape(client.client_id)}</dd>",
        f"<dt>Returns to</dt><dd>{escape(where)}</dd>",
        f"<dt>Requested</dt><dd>{escape(' '.join(pending.scopes))}</dd>",
        f"<dt>Resource</dt><dd>{escape(pending.resource)}</dd>",
        "</dl>",
    ]
    if error:
        body.append(f"<p class=error>{escape(error)}</p>")
    body += [
        '<form method=post action="/authorize" autocomplete=off>',
        f'<input type=hidden name=request_id value="{escape(pending.id)}">',
        "<label for=access_key>Operator access key</label>",
        "<input type=password id=access_key name=access_key required autofocus>",
        "<label for=agent>Agent namespace</label>",
        f'<input type=text id=agent name=agent value="{escape(agent)}" required maxlength=128 pattern="[A-Za-z0-9_.:@\\-]+">',
        '<p class=note>The client sees and writes only this namespace (and reads the shared "default" pool).</p>',
        "<fieldset><legend>Access</legend>",
        f"<input type=radio id=rw name=access value=read-write{rw_checked}{rw_disabled}><label for=rw>read-write</label>",
        f"<input type=radio id=ro name=access value=read-only{ro_checked}><label for=ro>read-only (search, recall, context)</label>",
        "</fieldset>",
        "<button type=submit name=decision value=approve>Approve</button>",
        "<button type=submit name=decision value=deny formnovalidate>Deny</button>",
        "</form>",
        "<p class=note>Only approve a client you started yourself.</p>",
    ]
    return _page("Authorise an MCP client", "".join(body))
