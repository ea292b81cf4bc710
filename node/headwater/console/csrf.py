"""Cross-site request forgery protection: a signed double-submit token (no I/O).

Each browser gets a random token in an ``HttpOnly``, ``SameSite=Strict`` cookie; every form
carries :func:`form_token` of it, an HMAC under the console's secret, so another site can
neither read the token nor make one that matches a cookie it planted.  A change is
accepted only when the form's token is the HMAC of the request's cookie (and, when the
browser sends an ``Origin``, that origin is the console's own).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

COOKIE = "hw_csrf"
FIELD = "csrf_token"


def new_secret() -> bytes:
    return secrets.token_bytes(32)


def new_cookie() -> str:
    return secrets.token_urlsafe(32)


def form_token(secret: bytes, cookie: str) -> str:
    return hmac.new(secret, cookie.encode(), hashlib.sha256).hexdigest()


def check(
    secret: bytes, cookie: str | None, token: str | None, origin: str | None, own_origin: str
) -> str:
    """``""`` when the request may change something, else why not (for the error page)."""
    if origin is not None and origin != own_origin:
        return f"the form was sent from another site ({origin[:100]})"
    if not cookie:
        return "the form's session cookie is missing; reload the page and try again"
    if not token:
        return "the form has no CSRF token; reload the page and try again"
    if not hmac.compare_digest(form_token(secret, cookie), token):
        return "the form's CSRF token does not match; reload the page and try again"
    return ""
