"""What every console page shares: rendering with the console's headers, the signed-in
account, and the guard of every write.

Rendering: Jinja2 templates in ``controlplane/console/templates/`` with autoescaping,
sent by ``controlplane.pages.send_page`` (no framing, no sniffing, ``no-store``) under
the console's own policy: scripts only from the control plane's origin (``script-src
'self'``: the vendored htmx and ``console.js``, never an inline script), styles only
from there or a ``<style>`` carrying the response's nonce, forms only to the control
plane, ``connect-src 'self'`` for htmx's requests.

Writes: every console POST must carry the hosted pages' signed double-submit CSRF token
(``Pages.check_csrf``; the hidden ``csrf_token`` field, or the ``X-CSRF-Token`` header
htmx adds from ``hx-headers``) and an ``Origin`` header equal to the control plane's
public origin (``IAMGATE_PUBLIC_URL``).  The session cookie is SameSite=Lax, so a
cross-site POST does not carry it anyway; the token and the origin hold even for a
sibling subdomain, which counts as same-site.
"""
from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import jinja2

from controlplane.auth import holds
from controlplane.console.assets import Assets
from controlplane.console.permissions import permissions_of
from controlplane.dashboard.access import WRITE_ROLES
from controlplane.dashboard.accounts import AccountService
from controlplane.dashboard.errors import DashboardReauthRequired
from controlplane.dashboard.sudo import DashboardSudo
from controlplane.pages import TEMPLATES_DIR as HOSTED_TEMPLATES_DIR
from controlplane.pages import CsrfTokenInvalid, Pages, send_page
from controlplane.passkeys.errors import PasskeysUnavailable
from shared.config import browser_origin
from shared.errors import DomainError, ValidationFailed
from shared.http import DEFAULT_PER_PAGE, page_params, paginated, status_of

TEMPLATES_DIR = Path(__file__).with_name("templates")
CSRF_HEADER = "X-CSRF-Token"
SIGN_IN = "/console/sign-in"
# The notice of a page the password form of a refused sensitive action returned to.
REAUTHENTICATED = "reauthenticated"
# Not the hosted pages' no-referrer: under it a browser sends ``Origin: null`` with a
# form post (Fetch, "serialize a request origin"), and the write guard needs the real
# origin.  strict-origin still keeps paths and query strings (the mailed links' tokens)
# out of every Referer.
REFERRER_POLICY = "strict-origin"


def policy(nonce: str) -> str:
    return "; ".join([
        "default-src 'none'",
        "script-src 'self'",
        f"style-src 'self' 'nonce-{nonce}'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "frame-src 'self'",  # the branding screen's preview of the hosted sign-in page
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ])


def origin_of(url: str) -> str:
    """The origin a browser sends in ``Origin`` for pages under ``url`` (the public URL):
    scheme://host[:port], the default port left out (``browser_origin``), so a public URL
    written with ``:443`` still matches what browsers send with every console form."""
    parts = urlsplit(url)
    return browser_origin(url, of_url=True) or f"{parts.scheme}://{parts.netloc}".lower()


@dataclass(frozen=True)
class Viewer:
    """The signed-in dashboard account of a console request."""

    account: dict
    expires_at: datetime  # when the session ends (shown on every page)
    authenticated_at: datetime | None = None  # when its holder last proved who they are (dashboard.sudo)


def can_write(role: str | None) -> bool:
    """Owners and admins act with every permission of their organization's applications;
    members and viewers only read (``dashboard.access``)."""
    return role in WRITE_ROLES


def may(role: str | None, permission: str) -> bool:
    """Whether the console's principal of ``role`` holds the V1 ``permission``
    (``console.permissions``): what a template shows is what the gate lets through."""
    return holds(permissions_of(role), permission)


def page_links(req, result: dict) -> dict:
    """The pager's previous and next links, the query string kept."""
    def link(page: int) -> str:
        return "?" + urlencode({**{k: v for k, v in req.params.items() if k != "page"}, "page": page})
    return {"previous": link(result["current_page"] - 1) if result["current_page"] > 1 else None,
            "next": link(result["current_page"] + 1) if result["current_page"] < result["last_page"] else None}


def listing(req, items: list, serialize=None) -> tuple[list, dict]:
    """One page of a list a service answers whole, as its API route pages it
    (``shared.http.respond_list``: ``?page=``, ``?per_page=``, default 15): the page's
    items, and the page's context (``result``, the API's envelope; ``pages``, the pager's
    links).  A bad parameter shows the first page with the API's error at 400."""
    try:
        page, per_page = page_params(req)
        refused = {}
    except ValidationFailed as error:
        (page, per_page), refused = (1, DEFAULT_PER_PAGE), failed(error)
    start = (page - 1) * per_page
    shown = [serialize(item) if serialize else item for item in items[start:start + per_page]]
    result = paginated(shown, len(items), page, per_page)
    return shown, {"result": result, "pages": page_links(req, result), **refused}


def form_error(error: DomainError) -> dict:
    """What a form shows for a refused write: the API's message and code, and the
    message of each field path the API names (``details.fields``)."""
    fields = error.details.get("fields") if isinstance(error, ValidationFailed) else None
    field = error.details.get("field")
    if not fields and isinstance(field, str):
        reasons = error.details.get("reasons")  # the password rules that failed, in words
        fields = {field: "; ".join(reasons) if reasons else error.message}
    return {"code": error.code, "message": error.message, "fields": dict(fields or {})}


def failed(error: DomainError) -> dict:
    """The ``status`` and ``error`` a page renders a refused write with."""
    return {"status": status_of(type(error)), "error": form_error(error)}


class Console:
    """Built once by ``controlplane.console.routes``; every console resource gets it."""

    def __init__(self, *, pages: Pages, accounts: AccountService, sudo: DashboardSudo, public_url: str,
                 assets: Assets | None = None):
        self.pages = pages
        self.accounts = accounts
        self.sudo = sudo
        self.public_url = public_url
        self.origin = origin_of(public_url)
        self.assets = assets or Assets()
        self._env = jinja2.Environment(
            # The hosted pages' templates under "hosted/": the start of a page both share.
            loader=jinja2.ChoiceLoader([jinja2.FileSystemLoader(str(TEMPLATES_DIR)), jinja2.PrefixLoader(
                {"hosted": jinja2.FileSystemLoader(HOSTED_TEMPLATES_DIR)})]),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )

    def render(self, req, resp, template: str, *, status: int = 200, viewer: Viewer | None = None,
               **context) -> None:
        nonce = secrets.token_urlsafe(18)
        context.setdefault("error", None)
        context.setdefault("form", {})
        # The page a refused sensitive action's password form returns to (``Reauthenticate``).
        context.setdefault("here", req.path)
        context.setdefault("reauthenticated", req.get_param("notice") == REAUTHENTICATED)
        if "reauth_passkey" not in context:  # the password form's "Use a passkey" (``_reauthenticate.html``)
            asks = (context["error"] or {}).get("code") == DashboardReauthRequired.code
            context["reauth_passkey"] = self.reauth_passkey(viewer) if asks and viewer else None
        html = self._env.get_template(template).render(
            **context, viewer=viewer, nonce=nonce, assets=self.assets.urls, can_write=can_write, may=may,
            csrf_token=self.pages.csrf_token(req, resp), partial=bool(req.get_header("HX-Request")))
        send_page(resp, html, policy(nonce), status=status, referrer_policy=REFERRER_POLICY)

    def reauth_passkey(self, viewer: Viewer) -> dict | None:
        """{challenge_id, options} of a re-authentication with one of the viewer's
        passkeys (``DashboardSudo.passkey_options``), or None: no passkey, or passkeys are
        unavailable on this server."""
        if self.sudo.passkeys.count(viewer.account["_id"]) == 0:
            return None
        try:
            return self.sudo.passkey_options(viewer.account)
        except PasskeysUnavailable:
            return None

    def render_error(self, req, resp, error: DomainError, template: str, **context) -> None:
        self.render(req, resp, template, **failed(error), **context)

    def viewer(self, req) -> Viewer | None:
        """The signed-in account (the auth middleware's principal on console routes), or
        None: no cookie, an expired or revoked session."""
        principal = getattr(req.context, "principal", None)
        if principal is None or principal.kind != "account":
            return None
        return Viewer(self.accounts.account(principal.account_id), principal.session_expires_at,
                      principal.authenticated_at)

    def require_recent(self, viewer: Viewer) -> None:
        """403 DASHBOARD_REAUTH_REQUIRED unless the viewer's session proved its holder
        recently (``DashboardSudo.require``): the gate of a ``sensitive`` page's write."""
        self.sudo.require(viewer.authenticated_at)

    def check_write(self, req, form: dict) -> None:
        """``CsrfTokenInvalid`` unless the request comes from a console page: its Origin
        is the control plane's and it carries the CSRF token of the browser's cookie."""
        if (req.get_header("Origin") or "").lower() != self.origin:
            raise CsrfTokenInvalid(details={"origin": req.get_header("Origin")})
        self.pages.check_csrf(req, form.get("csrf_token") or req.get_header(CSRF_HEADER))
