"""Hosted pages the email links open: ``/pages/{applicationId}/verify-email`` and
``/pages/{applicationId}/reset-password`` (``?token=...``).

A GET never consumes a token (mail scanners prefetch links): the page shows the
application's branding and a button or form that POSTs the token to the V1 API from
the browser.  The token is read from the address bar by the script (never echoed into
the HTML), then removed from it; the page is sent with a nonce-based
Content-Security-Policy, ``Referrer-Policy: no-referrer`` and ``Cache-Control: no-store``.
"""
from __future__ import annotations

import html
import secrets

import falcon

from controlplane.applications.service import branding
from controlplane.auth import PUBLIC
from controlplane.openapi import op
from controlplane.resource import Resource

_LAYOUT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>{title} - {brand}</title>
<style nonce="{nonce}">
body{{font-family:system-ui,sans-serif;background:{background};margin:0;display:flex;justify-content:center}}
main{{background:#fff;max-width:26rem;width:100%;margin:4rem 1rem;padding:2rem;border-radius:8px;
box-shadow:0 1px 4px rgba(0,0,0,.15)}}
h1{{font-size:1.3rem}} label{{display:block;margin:.8rem 0 .2rem}} input{{width:100%;padding:.5rem;box-sizing:border-box}}
button{{margin-top:1.2rem;padding:.6rem 1.2rem;border:0;border-radius:4px;background:{color};color:#fff;cursor:pointer}}
#result{{margin-top:1rem}} .error{{color:#b00020}}
</style></head>
<body><main>
{logo}<h1>{title}</h1>
{content}
<p id="result" role="status"></p>
</main>
<script nonce="{nonce}">
(function () {{
  var params = new URLSearchParams(window.location.search);
  var token = params.get("token") || "";
  history.replaceState(null, "", window.location.pathname);
  var result = document.getElementById("result");
  function show(text, failed) {{ result.textContent = text; result.className = failed ? "error" : ""; }}
  if (!token) {{ show("This link is incomplete: it carries no token.", true); }}
  window.iamgatePost = function (path, body, done) {{
    fetch({api} + path, {{method: "POST", headers: {{"Content-Type": "application/json"}},
                         body: JSON.stringify(body), credentials: "omit"}})
      .then(function (r) {{ return r.json().then(function (j) {{ return [r.ok, j]; }}); }})
      .then(function (p) {{
        if (p[0]) {{ show(p[1].data.message, false); done(); }}
        else {{ show(p[1].error.message, true); }}
      }})
      .catch(function () {{ show("The request failed. Check your connection and try again.", true); }});
  }};
  {script}
}})();
</script>
</body></html>
"""

_VERIFY_CONTENT = "<p>Confirm the email address of your {brand} account.</p>\n<button id=\"go\">Confirm my email</button>"
_VERIFY_SCRIPT = """
  var button = document.getElementById("go");
  button.disabled = !token;
  button.addEventListener("click", function () {
    button.disabled = true;
    iamgatePost("/users/email/verify", {token: token}, function () { button.hidden = true; });
  });
"""

_RESET_CONTENT = """<form id="reset">
<label for="email">Email</label><input id="email" type="email" autocomplete="username" required>
<label for="password">New password</label>
<input id="password" type="password" autocomplete="new-password" minlength="8" maxlength="128" required>
<label for="confirmation">Repeat the new password</label>
<input id="confirmation" type="password" autocomplete="new-password" required>
<button type="submit">Set the new password</button>
</form>"""
_RESET_SCRIPT = """
  var form = document.getElementById("reset");
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var password = document.getElementById("password").value;
    if (password !== document.getElementById("confirmation").value) {
      show("The two passwords differ.", true); return;
    }
    iamgatePost("/users/password/reset",
                {token: token, email: document.getElementById("email").value, password: password},
                function () { form.hidden = true; });
  });
"""


def _render(app: dict, title: str, content: str, script: str) -> tuple[str, str]:
    brand = branding(app)
    nonce = secrets.token_urlsafe(16)
    escaped_brand = html.escape(brand["name"])
    logo = (f'<img src="{html.escape(brand["logo_url"])}" alt="{escaped_brand}" height="40">'
            if brand["logo_url"] else "")
    api = f"/api/v1/applications/{app['_id']}"
    page = _LAYOUT.format(
        title=html.escape(title), brand=escaped_brand, nonce=nonce, logo=logo,
        color=html.escape(brand["color"] or "#2f5bea"), background=html.escape(brand["background"] or "#f4f5f7"),
        content=content.format(brand=escaped_brand), script=script, api=f'"{api}"',
    )
    policy = (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; img-src https: http: data:; "
              "connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'")
    return page, policy


class _Page(Resource):
    access = {"GET": PUBLIC}
    title = content = script = ""

    def on_get(self, req, resp, applicationId):
        page, policy = _render(req.context.application, self.title, self.content, self.script)
        resp.content_type = falcon.MEDIA_HTML
        resp.text = page
        resp.cache_control = ["no-store"]
        resp.set_headers({"Content-Security-Policy": policy, "Referrer-Policy": "no-referrer",
                          "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY"})


class VerifyEmailPage(_Page):
    title, content, script = "Confirm your email address", _VERIFY_CONTENT, _VERIFY_SCRIPT
    docs = {"GET": op(
        "Hosted page of the verification link (?token=...)",
        description="HTML. A button POSTs the token to V1/users/email/verify; opening the link alone changes nothing.",
        query={"token": ({"type": "string"}, "the emailed verification token (read by the page's script)")},
    )}


class ResetPasswordPage(_Page):
    title, content, script = "Choose a new password", _RESET_CONTENT, _RESET_SCRIPT
    docs = {"GET": op(
        "Hosted page of the password reset link (?token=...)",
        description="HTML form that POSTs token, email and the new password to V1/users/password/reset.",
        query={"token": ({"type": "string"}, "the emailed reset token (read by the page's script)")},
    )}
