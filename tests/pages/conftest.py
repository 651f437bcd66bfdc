"""A minimal Falcon app around ``controlplane.pages``: a hosted form (GET renders it with
a CSRF token, POST reads the form and checks the token), with the control plane's
error envelope and body-type middleware, so the tests drive pages the way the OIDC
hosted login does, over falcon.testing."""
from __future__ import annotations

import falcon
import falcon.testing
import pytest

from controlplane.pages import Pages, read_form
from shared.http import JsonBodyMiddleware, RequestIdMiddleware, install_error_handlers
from tests.conftest import TEST_SECRET


class HostedForm:
    accepted_media_types = ("application/x-www-form-urlencoded",)

    def __init__(self, pages: Pages):
        self.pages = pages

    def on_get(self, req, resp):
        token = self.pages.csrf_token(req, resp)
        self.pages.render(resp, "oidc_login.html", app=None, action="/form", csrf_token=token,
                          request_handle="handle-1")

    def on_post(self, req, resp):
        form = read_form(req)
        self.pages.check_csrf(req, form.get("csrf_token"))
        resp.media = form


def form_app(pages: Pages) -> falcon.App:
    app = falcon.App(middleware=[RequestIdMiddleware(), JsonBodyMiddleware()])
    install_error_handlers(app)
    app.add_route("/form", HostedForm(pages))
    return app


@pytest.fixture
def pages():
    return Pages(secret_key=TEST_SECRET, cookie_secure=False)


@pytest.fixture
def form_client(pages):
    return falcon.testing.TestClient(form_app(pages))


FORM = "application/x-www-form-urlencoded"


def post_form(client, body, cookies=None, content_type=FORM):
    headers = {"Content-Type": content_type}
    if cookies:
        headers["Cookie"] = "; ".join(f"{name}={value}" for name, value in cookies.items())
    return client.simulate_post("/form", body=body, headers=headers)
