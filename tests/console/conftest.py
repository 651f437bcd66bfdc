"""A browser-like falcon.testing client for the console: it keeps the cookies the pages
set (the CSRF cookie, the session), reads each page's CSRF token from its form, and
posts forms from the control plane's origin, as Chromium would.

- ``console()``: a new visitor (``console(remote_addr=...)`` for its own rate budgets);
  ``visitor.sign_in(account)`` signs a ``DashboardAccount`` in through the console form.
"""
from __future__ import annotations

import itertools
import re
from urllib.parse import urlencode

import pytest

from controlplane.auth import SESSION_COOKIE
from controlplane.pages import CSRF_COOKIE

ORIGIN = "http://127.0.0.1:8000"  # make_config's IAMGATE_PUBLIC_URL
FORM = "application/x-www-form-urlencoded"
_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')
_visitors = itertools.count(1)


class Visitor:
    def __init__(self, client, remote_addr: str):
        self.client = client
        self.remote_addr = remote_addr
        self.cookies: dict[str, str] = {}
        self.token: str | None = None

    def _keep(self, response):
        for name, cookie in response.cookies.items():
            if cookie.value:
                self.cookies[name] = cookie.value
            else:
                self.cookies.pop(name, None)
        match = _TOKEN.search(response.text or "")
        if match:
            self.token = match.group(1)
        return response

    def get(self, path: str, **kwargs):
        kwargs.setdefault("remote_addr", self.remote_addr)
        return self._keep(self.client.simulate_get(path, cookies=dict(self.cookies), **kwargs))

    def post(self, path: str, form: dict | None = None, *, token: bool = True, origin: str | None = ORIGIN,
             headers: dict | None = None, **kwargs):
        """A form post with the page's CSRF token (``token=False`` leaves it out) from
        ``origin`` (None: no Origin header)."""
        if self.token is None and token:
            self.get("/console/sign-in")
        body = dict(form or {})
        if token:
            body["csrf_token"] = self.token
        sent = {"Content-Type": FORM, **(headers or {})}
        if origin is not None:
            sent["Origin"] = origin
        kwargs.setdefault("remote_addr", self.remote_addr)
        return self._keep(self.client.simulate_post(path, body=urlencode(body), headers=sent,
                                                    cookies=dict(self.cookies), **kwargs))

    def sign_in(self, account) -> None:
        self.get("/console/sign-in")
        response = self.post("/console/sign-in", {"email": account.email, "password": account.password})
        assert response.status_code == 303, response.text
        assert SESSION_COOKIE in self.cookies and CSRF_COOKIE in self.cookies


def kept_out_of_htmx_history(page_text: str, marker: str) -> bool:
    """Whether the element holding ``marker`` (a secret shown once) sits in a card marked
    ``hx-history="false"``: htmx then keeps no snapshot of the page in the tab's
    sessionStorage, where the secret would outlive the page (docs/console.md)."""
    card = page_text.rfind('class="card secret"', 0, page_text.index(marker))
    return card >= 0 and 'hx-history="false"' in page_text[card:page_text.index(">", card)]


@pytest.fixture
def console(client):
    def make(remote_addr: str | None = None) -> Visitor:
        return Visitor(client, remote_addr or f"10.200.{next(_visitors) % 256}.9")
    return make


@pytest.fixture
def owner(console, dashboard_account, make_dashboard_app):
    """(a visitor signed in as the owner of an application "Shop", its id); modules that
    need another owner define their own."""
    app = make_dashboard_app(dashboard_account, name="Shop")
    visitor = console()
    visitor.sign_in(dashboard_account)
    return visitor, app["id"]


@pytest.fixture
def reader(console, dashboard_account, make_dashboard_account, ctx):
    """``reader(role)``: a new member of ``dashboard_account``'s organization with ``role``
    (a viewer unless said), signed in to the console."""
    def make(role="viewer"):
        account = make_dashboard_account()
        ctx.dashboard.organizations.add_member(dashboard_account.id, dashboard_account.organization_id,
                                               account.email, role, ip="10.0.0.1")
        visitor = console()
        visitor.sign_in(account)
        return visitor
    return make
