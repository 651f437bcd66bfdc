"""A single-page app signs in with oidc-client-ts (npm), an independent browser OIDC
library, in headless Chromium: its static page is served on another origin (a second
localhost port); it reads discovery, sends the user through the hosted login and
consent pages, exchanges the code at the token endpoint as a public client with PKCE,
and calls userinfo with the access token -- every cross-origin call through CORS.
Skipped, saying why, where Chromium or Node is missing."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("selenium", reason="real-browser test skipped: the selenium package is not installed")

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from tests.browser import console_errors  # noqa: E402
from tests.conftest import bearer  # noqa: E402
from tests.npm import node_package  # noqa: E402

SPA_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>SPA</title><script src="/oidc-client-ts.js"></script></head>
<body><pre id="result"></pre>
<script>
const settings = %(settings)s;
const manager = new oidc.UserManager({...settings, response_type: "code", scope: "openid profile email",
                                      loadUserInfo: false});
function show(value) {
  document.getElementById("result").textContent = JSON.stringify(value);
  document.title = "done";
}
(async () => {
  try {
    if (location.pathname === "/callback") {
      const user = await manager.signinRedirectCallback();
      const answer = await fetch(settings.authority + "/oidc/userinfo",
                                 {headers: {Authorization: "Bearer " + user.access_token}});
      show({status: answer.status, userinfo: await answer.json(), sub: user.profile.sub,
            refresh_token: Boolean(user.refresh_token)});
    } else {
      await manager.signinRedirect();
    }
  } catch (error) {
    show({error: String(error)});
  }
})();
</script></body></html>
"""


class SpaServer:
    """The app's static files on http://127.0.0.1:<its own port>: another origin."""

    def __init__(self, library: bytes):
        self.page = b""
        spa = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                path = self.path.split("?")[0]
                body, kind = ((library, "text/javascript") if path == "/oidc-client-ts.js"
                              else (spa.page, "text/html; charset=utf-8"))
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def config_overrides(live_url):
    return {"public_url": live_url}


@pytest.fixture
def spa_server():
    library = node_package("oidc-client-ts") / "dist" / "browser" / "oidc-client-ts.min.js"
    server = SpaServer(library.read_bytes())
    yield server
    server.close()


def test_oidc_client_ts_signs_in_and_calls_userinfo_across_origins(live_server, browser, spa_server, ctx,
                                                                   application, make_user, make_api_key, client):
    app_id = application["_id"]
    ctx.applications.update(app_id, {"oauth_hosted_login_enabled": True})
    key = make_api_key(application, permissions=["oidc:manage"])
    created = client.simulate_post(f"/api/v1/applications/{app_id}/oidc/clients", headers=bearer(key), json={
        "name": "Photo SPA", "token_endpoint_auth_method": "none", "allowed_origins": [spa_server.origin],
        "redirect_uris": [f"{spa_server.origin}/callback"]})
    assert created.status_code == 201, created.text
    spa = created.json["data"]
    spa_server.page = (SPA_PAGE % {"settings": json.dumps({
        "authority": live_server, "client_id": spa["client_id"], "redirect_uri": f"{spa_server.origin}/callback"})
    }).encode()
    user = make_user(application, email="grace@example.com", name="Grace Hopper")

    browser.get(spa_server.origin + "/")
    WebDriverWait(browser, 15).until(expected_conditions.url_contains("/oidc/authorize"))
    browser.find_element(By.ID, "email").send_keys(user["email"])
    browser.find_element(By.ID, "password").send_keys(user["password"])
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(browser, 10).until(expected_conditions.title_contains("Allow access"))
    browser.find_element(By.CSS_SELECTOR, "button[value=allow]").click()

    WebDriverWait(browser, 15).until(expected_conditions.title_is("done"))
    assert browser.current_url.startswith(spa_server.origin + "/callback")
    result = json.loads(browser.find_element(By.ID, "result").text)
    assert "error" not in result, result
    assert result["status"] == 200 and result["sub"] == user["id"]
    userinfo = result["userinfo"]
    assert (userinfo["sub"], userinfo["email"], userinfo["name"]) == (user["id"], "grace@example.com", "Grace Hopper")
    assert result["refresh_token"] is True
    assert [e for e in console_errors(browser) if "favicon" not in e] == []
