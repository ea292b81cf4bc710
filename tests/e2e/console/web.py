"""A small HTTP client for the console's e2e tests: cookies kept, forms posted with the CSRF
token of the last page fetched, as a browser would."""

from __future__ import annotations

import html
import http.cookiejar
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import NamedTuple

from headwater.console.app import Settings, make_app
from headwater.console.backend import ClientOptions, ClusterView
from headwater.console.server import RunningConsole

TOKEN = re.compile(r'name="csrf_token" value="([0-9a-f]{64})"')


class Page(NamedTuple):
    status: int
    text: str
    headers: Mapping[str, str]

    def has(self, fragment: str) -> bool:
        """``fragment`` is in the page's text once its HTML escapes are undone."""
        return fragment in html.unescape(self.text)

    def message(self) -> str:
        for kind in ("error", "message"):
            m = re.search(rf'<p class="{kind}" id="{kind}">(.*?)</p>', self.text, re.S)
            if m:
                return html.unescape(m.group(1))
        return ""


class WebClient:
    def __init__(self, base: str) -> None:
        self.base = base
        self.cookies = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies))
        self.token = ""

    def _open(self, request: urllib.request.Request) -> Page:
        try:
            with self.opener.open(request, timeout=60) as resp:
                page = Page(resp.status, resp.read().decode(), dict(resp.headers))
        except urllib.error.HTTPError as exc:
            page = Page(exc.code, exc.read().decode(), dict(exc.headers))
        found = TOKEN.search(page.text)
        if found:
            self.token = found.group(1)
        return page

    def get(self, path: str, **params: object) -> Page:
        query = "?" + urllib.parse.urlencode(params) if params else ""
        return self._open(urllib.request.Request(self.base + path + query))

    def post(self, path: str, form: Mapping[str, str], *, token: str | None = None) -> Page:
        if not self.token:
            self.get("/topics")  # a page with a form, so with the token
        data = {"csrf_token": self.token if token is None else token, **form}
        body = urllib.parse.urlencode(data).encode()
        return self._open(urllib.request.Request(self.base + path, data=body, method="POST"))


@contextmanager
def serve_console(bootstrap: str, *, read_only: bool = False) -> Iterator[RunningConsole]:
    """The console over ``bootstrap``, served on a free port of 127.0.0.1."""
    view = ClusterView(ClientOptions(bootstrap, request_timeout_ms=15000))
    try:
        with RunningConsole(make_app(view, Settings(read_only=read_only))) as running:
            yield running
    finally:
        view.close()
