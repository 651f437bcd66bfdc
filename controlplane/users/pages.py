"""Hosted pages the email links open: ``/pages/{applicationId}/verify-email`` and
``/pages/{applicationId}/reset-password`` (``?token=...``).

A GET never consumes a token (mail scanners prefetch links): the page shows the
application's branding and a button or form that POSTs the token to the V1 API from
the browser.  The token is read from the address bar by the script (never echoed into
the HTML), then removed from it.  The templates are ``verify_email.html`` and
``reset_password.html``; ``controlplane.pages.Pages`` renders them with the hosted-page
headers (nonce-based CSP, ``Referrer-Policy: no-referrer``, ``Cache-Control: no-store``),
and allows the script to ``fetch`` its own origin only.
"""
from __future__ import annotations

from controlplane.auth import PUBLIC
from controlplane.openapi import op
from controlplane.pages import Pages
from controlplane.resource import Resource


class _Page(Resource):
    access = {"GET": PUBLIC}
    template = ""

    def __init__(self, pages: Pages):
        self.pages = pages

    def on_get(self, req, resp, applicationId):
        app = req.context.application
        self.pages.render(resp, self.template, app=app, connect_src=["'self'"],
                          api=f"/api/v1/applications/{app['_id']}")


def _docs(summary: str, description: str, token: str) -> dict:
    """The OpenAPI operation of a page that reads a ``token`` from its address."""
    return {"GET": op(summary, description=description, query={
        "token": ({"type": "string"}, f"the emailed {token} token (read by the page's script)")})}


class VerifyEmailPage(_Page):
    template = "verify_email.html"
    docs = _docs("Hosted page of the verification link (?token=...)",
                 "HTML. A button POSTs the token to V1/users/email/verify; opening the link alone changes nothing.",
                 "verification")


class ResetPasswordPage(_Page):
    template = "reset_password.html"
    docs = _docs("Hosted page of the password reset link (?token=...)",
                 "HTML form that POSTs token, email and the new password to V1/users/password/reset.", "reset")
