"""Hosted HTML pages: Jinja2 templates in ``controlplane/templates/``, branded per
application, sent with a locked-down policy, and the CSRF defence of the forms they post.

Every page (the email links' verify-email and reset-password, the OIDC hosted login,
MFA, consent, logged-out and error pages) is rendered by ``Pages.render``:

- autoescaping is on for every template, so application names, client names and error
  messages stay text;
- a fresh nonce per response is the only way a ``<style>`` or ``<script>`` runs
  (``Content-Security-Policy`` with ``default-src 'none'``, CSP Level 3 section 6);
- ``frame-ancestors 'none'`` and ``X-Frame-Options: DENY`` refuse framing (clickjacking
  of the login and consent buttons; only the console's preview of unsaved branding,
  which posts nothing anywhere, may be framed by the control plane's own pages),
  ``Referrer-Policy: no-referrer`` keeps query
  strings (tokens, authorization requests) out of Referer headers, and
  ``Cache-Control: no-store`` keeps pages holding a CSRF token out of caches.

CSRF: a signed double-submit cookie (OWASP CSRF Prevention Cheat Sheet, "Signed
Double-Submit Cookie").  ``csrf_token`` sets the cookie ``iamgate_csrf`` to
``<random>.<HMAC(key, random)>`` and returns the same value for a hidden form field;
``check_csrf`` accepts a post only when the field equals the cookie and the cookie
carries our signature.  A cross-site form can make the browser send the cookie but
cannot read it to fill the field.  The state lives in the browser, not in process
memory or in MongoDB, so any replica checks any post and nothing needs reclaiming.  The
signature means only values minted here pass: a cookie planted by a sibling subdomain
must still be one we issued.  The cookie is HttpOnly (scripts never need it),
SameSite=Lax (a cross-site POST does not carry it at all), Secure under https, and
lives for the browser session.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import jinja2
from markupsafe import Markup

from controlplane.applications.contrast import readable_on_white, text_color_on
from controlplane.applications.schemas import sanitize_css
from controlplane.applications.service import DEFAULT_BRANDING_OPTIONS
from controlplane.applications.service import branding as app_branding
from controlplane.oidc.schemas import is_private_use
from shared.errors import BadRequest, Forbidden
from shared.http import read_body

TEMPLATES_DIR = str(Path(__file__).with_name("templates"))
CSRF_COOKIE = "iamgate_csrf"
MAX_FORM_BYTES = 16 * 1024  # the largest hosted form is an email and a password
MAX_FORM_FIELDS = 32

DEFAULT_COLOR = "#2f5bea"
DEFAULT_BACKGROUND = "#f4f5f7"

# Values written into the <style> block are re-checked here although the branding
# schema already validated them: autoescaping does not apply inside CSS, so this is
# what keeps a stored value from closing the block.
_HEX_COLOR = re.compile(r"^#(?:[0-9a-fA-F]{3,4}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})$")
_FONT_FAMILY = re.compile(r"^[A-Za-z0-9 ,'\"_-]{1,200}$")
_CSS_LENGTH = re.compile(r"^(?:0|\d{1,3}(?:\.\d{1,2})?(?:px|rem|em|%))$")


class CsrfTokenInvalid(Forbidden, code="CSRF_TOKEN_INVALID",
                       message="This form has expired or was not sent from this site. Reload the page and try again."):
    """A hosted form was posted without the CSRF token of its page, or with one that
    does not match the browser's ``iamgate_csrf`` cookie."""


class MalformedForm(BadRequest, message="The form body is malformed."):
    """An ``application/x-www-form-urlencoded`` body that cannot be parsed, repeats a
    field, or has too many fields."""


class Pages:
    """Renders hosted pages and guards the forms they post.  Built once in
    ``controlplane.services.build_services``."""

    def __init__(self, *, secret_key: str, cookie_secure: bool, templates_dir: str | None = None):
        self._cookie_secure = cookie_secure
        self._csrf_key = hmac.new(secret_key.encode("utf-8"), b"iamgate hosted pages csrf cookie",
                                  hashlib.sha256).digest()
        self._env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(templates_dir or TEMPLATES_DIR),
            autoescape=True,
            undefined=jinja2.StrictUndefined,  # a missing context variable is a bug, not an empty string
            trim_blocks=True,
            lstrip_blocks=True,
        )

    # ------------------------------------------------------------ rendering

    def render(self, resp, template: str, *, app: dict | None, status: int = 200,
               form_action: Iterable[str] = (), connect_src: Iterable[str] = (), framed: bool = False,
               script_self: bool = False, **context) -> None:
        """Render ``template`` with ``context`` plus ``branding`` (of ``app``; neutral
        when None) and ``nonce``, and write it to ``resp`` with the hosted-page headers.

        ``form_action``: absolute http(s) URLs a form of the page may reach besides the
        page's own origin, reduced to their origins.  Browsers apply ``form-action`` to
        the redirects that follow a submission too, so a consent form whose POST answers
        ``302 redirect_uri?code=...`` must list the client's redirect URI here.
        ``connect_src``: CSP sources the page's script may ``fetch`` (none by default).
        ``framed``: the page may be framed by the control plane's own pages
        (``frame-ancestors 'self'``) and its forms post nowhere (``form-action 'none'``):
        only the console's branding preview; every other page may be framed by none.
        ``script_self``: the page loads one of our own script files, so ``script-src``
        allows ``'self'`` besides the nonce.
        """
        nonce = secrets.token_urlsafe(18)
        page = self._env.get_template(template).render(
            **context, branding=self.branding(app), nonce=nonce)
        send_page(resp, page, _policy(nonce, form_action, connect_src, framed, script_self), status=status,
                  frame_options="SAMEORIGIN" if framed else "DENY")

    @staticmethod
    def branding(app: dict | None) -> dict:
        """The template's ``branding``: the application's short branding object
        (``applications.service.branding``) with defaults for the colours, plus its
        ``branding_options``; the values that go into CSS are checked again and the
        custom CSS sanitized again (a no-op on what the branding update stored).
        ``button_text`` and ``text_on_white`` keep text readable on any brand colour
        (``applications.contrast``)."""
        if app is None:
            short = {"name": None, "logo_url": None, "color": None, "background": None}
            options = DEFAULT_BRANDING_OPTIONS
        else:
            short = app_branding(app)
            options = {**DEFAULT_BRANDING_OPTIONS, **(app.get("branding_options") or {})}
        dark = options.get("dark_mode") or {}
        font = options.get("font_family")
        radius = options.get("button_border_radius")
        css = options.get("custom_css")
        color = _color(short["color"]) or DEFAULT_COLOR
        secondary = _color(options.get("secondary_color"))
        return {
            "name": short["name"],
            "logo_url": image_url(short["logo_url"]),
            "color": color,
            # WCAG AA for any brand colour: black or white on the filled button, and the
            # outlined button's (and links') text only in a colour readable on white.
            "button_text": text_color_on(color),
            "text_on_white": readable_on_white(secondary or color),
            "background": _color(short["background"]) or DEFAULT_BACKGROUND,
            "secondary_color": secondary,
            "font_family": Markup(font) if font and _FONT_FAMILY.match(font) else None,
            "favicon_url": image_url(options.get("favicon_url")),
            "button_border_radius": radius if radius and _CSS_LENGTH.match(radius) else None,
            "custom_css": _custom_css(css),
            "dark_mode": {
                "enabled": bool(dark.get("enabled")),
                "background": _color(dark.get("background")),
                "color": _color(dark.get("color")),
            },
        }

    # ------------------------------------------------------------ CSRF

    def csrf_token(self, req, resp) -> str:
        """The CSRF token for a form of this page: the browser's valid ``iamgate_csrf``
        cookie when it has one (several tabs keep working), else a new one, set on
        ``resp``.  Put it in a hidden field named ``csrf_token``."""
        current = req.cookies.get(CSRF_COOKIE)
        if current and self._signed(current):
            return current
        raw = secrets.token_urlsafe(32)
        token = f"{raw}.{self._sign(raw)}"
        resp.set_cookie(CSRF_COOKIE, token, path="/", secure=self._cookie_secure, http_only=True,
                        same_site="Lax")
        return token

    def check_csrf(self, req, submitted: str | None) -> None:
        """Raise ``CsrfTokenInvalid`` unless ``submitted`` (the form's ``csrf_token``)
        equals the request's ``iamgate_csrf`` cookie and that cookie is signed by us."""
        cookie = req.cookies.get(CSRF_COOKIE)
        if not cookie or not submitted or not self._signed(cookie):
            raise CsrfTokenInvalid()
        if not hmac.compare_digest(cookie.encode("utf-8"), submitted.encode("utf-8")):
            raise CsrfTokenInvalid()

    def _sign(self, raw: str) -> str:
        mac = hmac.new(self._csrf_key, raw.encode("utf-8"), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")

    def _signed(self, token: str) -> bool:
        raw, _, mac = token.partition(".")
        return bool(raw and mac) and hmac.compare_digest(mac.encode("utf-8"), self._sign(raw).encode("utf-8"))


def _custom_css(css: str | None) -> Markup | None:
    """The application's custom CSS for the page's ``<style>`` element, sanitized again.
    HTML ends that element at the first ``</style``, which only a ``<`` can begin: the
    sanitizer keeps none, and should it ever let one through, the stylesheet is left
    out whole rather than trusted (a page without the tenant's CSS still works)."""
    css = sanitize_css(css) if css else None
    return Markup(css) if css and "<" not in css else None


def send_page(resp, page: str, policy: str, *, status: int = 200, referrer_policy: str = "no-referrer",
              frame_options: str = "DENY") -> None:
    """Write an HTML page with the headers every page of the control plane carries:
    its ``policy`` (the Content-Security-Policy), no framing, no MIME sniffing, no
    Referer (or only the origin, with ``referrer_policy="strict-origin"``), and
    ``no-store`` (a page may hold a CSRF token or account data)."""
    resp.status = status
    resp.content_type = "text/html; charset=utf-8"
    resp.text = page
    resp.cache_control = ["no-store"]
    resp.set_headers({
        "Content-Security-Policy": policy,
        "X-Frame-Options": frame_options,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": referrer_policy,
    })


def read_form(req) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body (HTML 5.2 section 4.10.21.7) as one
    string per field.  Over ``MAX_FORM_BYTES`` is 413; bytes that are not UTF-8, a
    repeated field or more than ``MAX_FORM_FIELDS`` fields are 400.  Empty fields are
    kept as ``""`` (an empty password is a wrong password, not a missing field)."""
    cached = getattr(req.context, "form_body", None)
    if cached is not None:
        return cached
    raw = read_body(req, MAX_FORM_BYTES)
    try:
        pairs = parse_qsl(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=bool(raw),
                          encoding="utf-8", errors="strict", max_num_fields=MAX_FORM_FIELDS)
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedForm(details={"body": str(exc)}) from None
    form: dict[str, str] = {}
    for name, value in pairs:
        if name in form:
            raise MalformedForm(f"The form sends {name} more than once.", details={"field": name})
        form[name] = value
    req.context.form_body = form
    return form


def image_url(value) -> str | None:
    """``value`` when the page's ``img-src`` lets it load (https), else None: the API
    refuses http images, and one stored before it did is left out rather than shown
    broken."""
    return value if isinstance(value, str) and value.startswith("https://") else None


def _color(value) -> str | None:
    return value if isinstance(value, str) and _HEX_COLOR.match(value) else None


SELF = "'self' "


def _policy(nonce: str, form_action: Iterable[str], connect_src: Iterable[str], framed: bool = False,
            script_self: bool = False) -> str:
    # A framed page is a preview: its forms must not post anywhere.
    targets = "'none'" if framed else " ".join(dict.fromkeys(["'self'", *(csp_origin(url) for url in form_action)]))
    directives = [
        "default-src 'none'",
        f"style-src 'nonce-{nonce}'",
        f"script-src {SELF if script_self else ''}'nonce-{nonce}'",
        "img-src https: data:",
        f"form-action {targets}",
        "frame-ancestors 'self'" if framed else "frame-ancestors 'none'",
        "base-uri 'none'",
    ]
    connect = list(connect_src)
    if connect:
        if any(not re.fullmatch(r"'self'|https?://[A-Za-z0-9.:\[\]-]+", source) for source in connect):
            raise ValueError(f"not a CSP source this module writes: {connect!r}")
        directives.insert(4, f"connect-src {' '.join(connect)}")
    return "; ".join(directives)


def csp_origin(url: str) -> str:
    """The origin of an absolute http(s) URL as a CSP source, or a native app's
    private-use scheme (RFC 8252 7.1) as a scheme source (``com.example.app:``); anything
    else (which could smuggle ``;`` or a keyword into the policy, or a host name a CSP
    host source cannot spell, such as one with ``_``) is a ValueError: what a page posts
    or redirects to is checked with this where it is configured
    (``connections.discovery``), so a page never meets one."""
    parts = urlsplit(url)
    if is_private_use(url):
        return f"{parts.scheme}:"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"form_action needs absolute http(s) URLs, got {url!r}")
    host = parts.hostname
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    if not re.fullmatch(r"[A-Za-z0-9.\[\]:-]+", host):
        raise ValueError(f"form_action host is not a plain host name: {url!r}")
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host.lower()}{port}"
