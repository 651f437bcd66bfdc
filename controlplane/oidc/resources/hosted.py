"""The hosted login's pages (/oidc/authorize/login, mfa, consent): form posts answered
in HTML, the next page or a redirect to the client (``controlplane.oidc.hosted``)."""
from __future__ import annotations

import functools
import json
from urllib.parse import urlencode

import falcon

from controlplane.auth import PUBLIC
from controlplane.console.assets import asset_doc, send_asset
from controlplane.lockout import AccountLocked
from controlplane.mfa.errors import MfaChallengeExpired, MfaCodeInvalid, MfaLocked
from controlplane.oidc import wire
from controlplane.oidc.assets import PASSKEY_SCRIPT
from controlplane.oidc.errors import AccessDenied, AuthorizationRequestExpired, OAuthError
from controlplane.oidc.hosted import OFFER, PENDING_TTL, Step, session_cookie_name
from controlplane.oidc.resources.common import HTML
from controlplane.oidc.upstream import BINDING_COOKIE, CONNECTIONS_PATH, LINK, LINK_PATH, can_answer
from controlplane.openapi import op
from controlplane.pages import CSRF_COOKIE, CsrfTokenInvalid, MalformedForm, image_url, read_form
from controlplane.passkeys.errors import (
    AuthenticatorNotAllowed,
    ChallengeInvalid,
    CredentialUnknown,
    OriginMismatch,
    PasskeyAlreadyRegistered,
    PasskeysDisabled,
    PasswordSignInDisabled,
    RpIdMismatch,
    SignCountInvalid,
    UserVerificationRequired,
    VerificationFailed,
)
from controlplane.passwords import PasswordTooWeak
from controlplane.resource import Resource
from controlplane.users.errors import (
    AccountSuspended,
    EmailAlreadyRegistered,
    InvalidCredentials,
    LoginsLimited,
    RegistrationsLimited,
    ResetRequestsLimited,
    UserLimitReached,
)
from controlplane.users.schemas import EMAIL_ONLY, REGISTER
from shared.errors import DomainError, NotFound, PayloadTooLarge, ValidationFailed
from shared.http import client_ip, no_store, status_of

_PAGES = ("login", "mfa", "consent", "forgot", "register", OFFER, LINK)
# The link page posts under /oidc/connections, where the connection's binding cookie goes.
_ACTIONS = {**{page: f"/oidc/authorize/{page.replace('_', '-')}" for page in _PAGES}, LINK: LINK_PATH}
_TEMPLATES = {page: f"oidc_{page}.html" for page in _PAGES}
_ERROR_TITLES = {
    400: "This sign-in link is not valid",
    401: "Sign-in is not available here",
    403: "This form has expired",
    410: "This sign-in has expired",
    413: "This form is too large",
    429: "Too many attempts",
}


def error_page(pages, resp, exc: DomainError, *, app: dict | None, title: str | None = None,
               description: str | None = None) -> None:
    """``oidc_error.html`` with the error's status: the hosted flow's answer when there
    is nowhere safe (or nothing left) to redirect to.  ``description`` replaces the
    error's message where that is written for developers, not for the person."""
    status = status_of(type(exc))
    error = exc.error if isinstance(exc, OAuthError) else exc.code
    pages.render(resp, "oidc_error.html", app=app, status=status,
                 error_title=title or _ERROR_TITLES.get(status, "Sign-in failed"),
                 error_description=description or exc.message, error=error)


def form_post_errors(responder):
    """Answer an authorization error of a ``form_post`` request (one that carries the
    client's redirect URI) as the form_post page; ``oauth_error_handler`` answers the
    query mode's 302 and every other error."""
    @functools.wraps(responder)
    def answer(resource, req, resp, *args, **kwargs):
        try:
            return responder(resource, req, resp, *args, **kwargs)
        except OAuthError as exc:
            if exc.redirect_uri is None or exc.response_mode != "form_post":
                raise
            no_store(resp)
            wire.answer_client(resp, resource.pages, exc.redirect_uri, exc.authorization_response(), "form_post")
    return answer


def render_step(resource, req, resp, step, app: dict, csrf: str, *, error: str | None = None,
                status: int = 200, **page_context) -> None:
    """Answer a hosted-flow ``Step``: set the new browser-session cookie (ending the one
    it replaces), then render the step's page or redirect to the client with the code."""
    if step.session_token is not None:
        name = session_cookie_name(app["_id"])
        resource.hosted.end_browser_session(req.cookies.get(name))
        resp.set_cookie(name, step.session_token, path="/oidc", max_age=step.session_ttl,
                        secure=resource.cookie_secure, http_only=True, same_site="Lax")
    if step.redirect is not None:
        return wire.answer_client(resp, resource.pages, step.request.redirect_uri, step.redirect,
                                  step.request.response_mode)
    if step.upstream is not None:
        # Only the callback reads the binding; Lax lets the provider's redirect back carry it.
        resp.set_cookie(BINDING_COOKIE, step.connection_binding, path=CONNECTIONS_PATH, max_age=PENDING_TTL,
                        secure=resource.cookie_secure, http_only=True, same_site="Lax")
        resp.status = falcon.HTTP_302
        resp.location = step.upstream
        return None
    request = step.request
    # The application id rides in the action's query so that a post whose request has
    # expired still gets a page in the application's colours (branding only).
    action = f"{_ACTIONS[step.page]}?{urlencode({'application': app['_id']})}"
    context = {"action": action, "csrf_token": csrf, "request_handle": step.handle,
               "client_name": request.client.get("name") or request.client_id, **page_context}
    # The post may answer with a redirect to the client, and browsers hold it to form-action.
    targets = [request.redirect_uri]
    if step.page == "login":
        context["can_register"] = bool(app.get("oauth_hosted_registration_enabled"))
    if step.page == "consent":
        context.update(client_logo_url=image_url(request.client.get("logo_url")), scopes=list(request.scopes),
                       signed_in_as=step.signed_in_as)
    else:
        context["error"] = error
    if step.page == "login":
        active = resource.upstream.buttons(app["_id"])
        # A request that demands a fresh sign-in has no button of a connection that cannot
        # prove one; an email of its domains still goes to it (and so login_required).
        connections = [connection for connection in active if can_answer(connection, request)]
        context.setdefault("login_hint", request.login_hint)
        context.update(connections=connections,
                       email_routing=any(connection.email_domains for connection in active))
        # A button, or an email of a claimed domain, answers a redirect to the provider.
        targets += [connection.endpoints.authorization_endpoint for connection in connections]
    if step.page in ("login", "mfa", OFFER, LINK):
        context.update(passkey=step.passkey, passkey_script=PASSKEY_SCRIPT.url)
    if step.page == "mfa":
        context["offers_code"] = step.offers_code
    if step.page == LINK:
        context["link"] = step.link
    resource.pages.render(resp, _TEMPLATES[step.page], app=app, status=status, form_action=targets,
                          script_self=step.passkey is not None, **context)


def passkey_answer(form: dict) -> dict:
    """The ``challenge_id`` and ``credential`` (the JSON of ``PublicKeyCredential.toJSON()``)
    that the pages' passkey script posts; ValidationFailed when they are not there."""
    try:
        credential = json.loads(form.get("credential", ""))
    except (ValueError, RecursionError):  # not JSON, or nested too deep to read
        credential = None
    challenge_id = form.get("challenge_id", "")
    if not isinstance(credential, dict) or not challenge_id:
        raise ValidationFailed({"credential": "missing or malformed"}, "The passkey's answer is missing or malformed.")
    return {"challenge_id": challenge_id, "credential": credential}


class HostedFlowResource(Resource):
    """A resource of the hosted browser flow, holding what ``render_step`` and
    ``error_page`` read off it: the flow's services, the page renderer and the cookies'
    Secure flag; and the proxies whose X-Forwarded-For it believes."""

    def __init__(self, hosted, upstream, pages, *, cookie_secure: bool, trusted_proxies=()):
        self.hosted = hosted
        self.upstream = upstream
        self.pages = pages
        self.cookie_secure = cookie_secure
        self.trusted_proxies = trusted_proxies


class HostedPage(HostedFlowResource):
    """A post of a hosted-login page: CSRF-checked, form-encoded, naming its pending
    authorization request by the opaque handle of the ``request`` field."""

    access = {"POST": PUBLIC}
    accepted_media_types = (wire.FORM,)
    stage = ""  # the pending request's stage the page posts at
    page = ""  # the page it shows again: its stage's, unless it says otherwise

    @form_post_errors
    def on_post(self, req, resp):
        no_store(resp)
        try:
            form = read_form(req)
            self.pages.check_csrf(req, form.get("csrf_token"))
            binding = req.cookies[CSRF_COOKIE]
            declined = frozenset(req.cookies.get(DECLINED_COOKIE, "").split())
            pending = self.hosted.resume(form.get("request"), binding, self.stage,
                                         ip=client_ip(req, self.trusted_proxies), declined=declined)
        except OAuthError as exc:
            if exc.redirect_uri is not None:
                raise
            return error_page(self.pages, resp, exc, app=self._branding(req))
        except (CsrfTokenInvalid, AuthorizationRequestExpired, MalformedForm, PayloadTooLarge) as exc:
            return error_page(self.pages, resp, exc, app=self._branding(req))
        self.step(req, resp, form, pending, binding)

    def device_info(self, req) -> dict:
        return {"ip": client_ip(req, self.trusted_proxies), "user_agent": (req.user_agent or "")[:512] or None}

    def _branding(self, req) -> dict | None:
        return self.hosted.branding_app(app_id=req.get_param("application"))

    def step(self, req, resp, form, pending, binding):
        raise NotImplementedError

    def again(self, req, resp, pending, binding, exc: DomainError | None = None, **page_context) -> None:
        """This page once more: with why the post failed and its status, or 400 for a
        post that is not one of the page's answers."""
        render_step(self, req, resp, self.hosted.page_again(pending, self.page or self.stage), pending.app,
                    binding, error=exc.message if exc else None, status=status_of(type(exc)) if exc else 400,
                    **page_context)

    def cancel(self, req, resp, pending, binding) -> None:
        """The page's Cancel: ``access_denied`` back to the client (a 302 with state)."""
        render_step(self, req, resp, self.hosted.cancel(pending, self.stage), pending.app, binding)


PAGE_ERRORS = [CsrfTokenInvalid, MalformedForm, AuthorizationRequestExpired]
# The browser's "Not now" to the passkey offer, per application and user (a digest of
# both, space-separated, the last few): a passkey belongs to a device, so the offer is
# the browser's to remember, and a new device is offered one again.
DECLINED_COOKIE = "iamgate_passkey_declined"
DECLINED_KEPT = 8
DECLINED_TTL = 365 * 24 * 3600
# A passkey the page's ceremony did not accept: the page again, with the error's words.
_PASSKEY_REFUSALS = (ValidationFailed, ChallengeInvalid, OriginMismatch, RpIdMismatch, VerificationFailed,
                     CredentialUnknown, UserVerificationRequired, SignCountInvalid, PasskeysDisabled)
# The hosted pages answer every outcome as HTML: the next page, or the page again with the
# error, or the error page.
def page_answers(*statuses) -> dict:
    return {status: (HTML, "an HTML page", "text/html") for status in (200, 400, 403, 410, 413, *statuses)}


class HostedLogin(HostedPage):
    stage = "login"
    password_work = ("POST",)  # a bcrypt check: the per-IP password budget (IAMGATE_RATE_LIMIT_IP)
    docs = {"POST": op(
        "Hosted login page: sign in (form post)",
        description="HTML. Form fields email, password, csrf_token, request (the page's handle). The API login's "
                    "rate limit, password guard and lockout apply, and its reading of the email (case-insensitive). "
                    "Answers the MFA page, the consent page or a 302 to the client with the code; wrong "
                    "credentials show the login page again (401, 429 when locked or throttled, 403 suspended), as "
                    "does an email the API login refuses as malformed (400). decision=forgot answers the "
                    "reset-request page; decision=cancel a 302 redirect_uri?error=access_denied&state=...; "
                    "decision=register the sign-up page (when the application has "
                    "oauth_hosted_registration_enabled). decision=passkey with challenge_id and credential "
                    "(PublicKeyCredential.toJSON()) signs in with a passkey alone (application setting passkeys: "
                    "passwordless); a refused passkey shows the page again with its PASSKEY_* message (400).",
        errors=[*PAGE_ERRORS, InvalidCredentials, AccountLocked, LoginsLimited, AccountSuspended,
                PasswordSignInDisabled, *_PASSKEY_REFUSALS],
        also=page_answers(401, 429),
    )}

    def step(self, req, resp, form, pending, binding):
        decision = form.get("decision")
        if decision == "cancel":
            return self.cancel(req, resp, pending, binding)
        if decision == "forgot":
            return render_step(self, req, resp, Step(pending.request, page="forgot", handle=pending.handle),
                               pending.app, binding, email=form.get("email", "").strip(), sent=False)
        if decision == "register":
            if not pending.app.get("oauth_hosted_registration_enabled"):
                return self.again(req, resp, pending, binding)
            return render_step(self, req, resp, Step(pending.request, page="register", handle=pending.handle),
                               pending.app, binding, email=form.get("email", "").strip(), name="")
        email = form.get("email", "").strip()
        upstream = self.upstream.from_login_page(pending, connection_id=form.get("connection"), email=email)
        if upstream is not None:
            return render_step(self, req, resp, upstream, pending.app, binding)
        device_info = self.device_info(req)
        if decision == "passkey":
            try:
                step = self.hosted.passkey_sign_in(pending, **passkey_answer(form), device_info=device_info)
            except (*_PASSKEY_REFUSALS, LoginsLimited, AccountSuspended) as exc:
                # No autofill request on the page that says why: a browser that answers
                # one by itself would be refused again in a loop.
                return self.again(req, resp, pending, binding, exc, passkey_autofill=False)
            return render_step(self, req, resp, step, pending.app, binding)
        if not form.get("password"):
            # The password is optional on the page while an email could go to a connection.
            return self.again(req, resp, pending, binding, ValidationFailed({"password": "required"},
                                                                            "Enter your password."), login_hint=email)
        try:
            # The address as POST V1/users/login reads it (its schema's Email field):
            # stored emails are normalized, so "Ada@Example.com" is the same account, and
            # the lockout counts the account's failures whatever case they were typed in.
            # One the API refuses as malformed has no account, so no login is tried.
            email = EMAIL_ONLY.validate({"email": email})["email"]
        except ValidationFailed:
            return self.again(req, resp, pending, binding, ValidationFailed({"email": "invalid"},
                                                                            "Enter a valid email address."),
                              login_hint=email)
        try:
            step = self.hosted.sign_in(pending, email=email, password=form.get("password", ""),
                                       device_info=device_info)
        except (InvalidCredentials, AccountLocked, LoginsLimited, AccountSuspended, PasswordSignInDisabled) as exc:
            return self.again(req, resp, pending, binding, exc)
        render_step(self, req, resp, step, pending.app, binding)


class HostedMfa(HostedPage):
    stage = "mfa"
    docs = {"POST": op(
        "Hosted login page: the MFA code (form post)",
        description="HTML. Form fields code (TOTP or backup code), csrf_token, request; or decision=passkey with "
                    "challenge_id and credential (a passkey as the second factor). A wrong code shows the page "
                    "again (401), a refused passkey with its PASSKEY_* message (400); an expired or locked challenge "
                    "shows the error page. decision=cancel answers "
                    "302 redirect_uri?error=access_denied&state=....",
        errors=[*PAGE_ERRORS, MfaCodeInvalid, MfaChallengeExpired, MfaLocked, AccountSuspended, LoginsLimited,
                *_PASSKEY_REFUSALS],
        also=page_answers(401, 429),
    )}

    def step(self, req, resp, form, pending, binding):
        if form.get("decision") == "cancel":
            return self.cancel(req, resp, pending, binding)
        try:
            if form.get("decision") == "passkey":
                step = self.hosted.verify_mfa_passkey(pending, **passkey_answer(form),
                                                      device_info=self.device_info(req))
            else:
                step = self.hosted.verify_mfa(pending, code=form.get("code", "").strip())
        except (MfaCodeInvalid, *_PASSKEY_REFUSALS, LoginsLimited) as exc:
            return self.again(req, resp, pending, binding, exc)
        except (MfaChallengeExpired, MfaLocked, AccountSuspended) as exc:
            return error_page(self.pages, resp, exc, app=pending.app)
        render_step(self, req, resp, step, pending.app, binding)


class HostedConsent(HostedPage):
    stage = "consent"
    docs = {"POST": op(
        "Hosted consent page: Allow or Deny (form post)",
        description="HTML form fields decision (allow or deny), csrf_token, request. Allow records the consent "
                    "(consent.granted) and answers 302 redirect_uri?code=...&state=...; Deny answers 302 "
                    "redirect_uri?error=access_denied&state=...; decision=switch (\"Not you?\") ends the browser "
                    "session and answers the login page of the same request.",
        errors=[*PAGE_ERRORS, AccessDenied], also=page_answers(),
    )}

    def step(self, req, resp, form, pending, binding):
        decision = form.get("decision")
        if decision == "switch":
            cookie = session_cookie_name(pending.app["_id"])
            step = self.hosted.switch_user(pending, req.cookies.get(cookie))
            resp.unset_cookie(cookie, path="/oidc")
            return render_step(self, req, resp, step, pending.app, binding)
        if decision not in ("allow", "deny"):
            return self.again(req, resp, pending, binding)
        render_step(self, req, resp, self.hosted.decide(pending, allow=decision == "allow"), pending.app, binding)


class HostedForgotPassword(HostedPage):
    """"Forgot password?" of the login page: ask for the reset email, then back to the
    same sign-in.  The request stays at its login step throughout."""

    stage = "login"
    page = "forgot"
    docs = {"POST": op(
        "Hosted login page: ask for a password reset email (form post)",
        description="HTML. Form fields email, csrf_token, request; decision=back returns to the login page. "
                    "The API's forgot-password flow and limit (3 per 15 minutes per email, 429): the same answer "
                    "whether or not the email has an account. The emailed link opens the hosted reset page.",
        errors=[*PAGE_ERRORS, ValidationFailed, ResetRequestsLimited], also=page_answers(429),
    )}

    def step(self, req, resp, form, pending, binding):
        if form.get("decision") == "back":
            return render_step(self, req, resp, self.hosted.page_again(pending, "login"), pending.app, binding)
        email = form.get("email", "").strip()
        try:
            email = EMAIL_ONLY.validate({"email": email})["email"]
            self.hosted.forgot_password(pending, email)
        except (ValidationFailed, ResetRequestsLimited) as exc:
            message = "Enter a valid email address." if isinstance(exc, ValidationFailed) else exc.message
            return render_step(self, req, resp, Step(pending.request, page="forgot", handle=pending.handle),
                               pending.app, binding, error=message, status=status_of(type(exc)), email=email,
                               sent=False)
        render_step(self, req, resp, Step(pending.request, page="forgot", handle=pending.handle), pending.app,
                    binding, email=email, sent=True)


class HostedRegister(HostedPage):
    """"Create account" of the login page, when the application has
    ``oauth_hosted_registration_enabled``: the API's registration, then the same
    sign-in continues (consent, then the code)."""

    stage = "login"
    page = "register"
    password_work = ("POST",)  # bcrypt twice: the new hash and the sign-in's check
    docs = {"POST": op(
        "Hosted login page: create an account (form post)",
        description="HTML. Form fields name, email, password, csrf_token, request; decision=back returns to the "
                    "login page. Only when the application has oauth_hosted_registration_enabled (otherwise the "
                    "login page again, 400). The rules of POST V1/users/register apply (per-IP throttle, password "
                    "strength, unique email, user limit, verification email, user.created); a refusal shows the "
                    "page again with its status. Then the sign-in continues: the consent page or the 302 with "
                    "the code.",
        errors=[*PAGE_ERRORS, ValidationFailed, EmailAlreadyRegistered, PasswordTooWeak, UserLimitReached,
                RegistrationsLimited],
        also=page_answers(409, 422, 429),
    )}

    def step(self, req, resp, form, pending, binding):
        if form.get("decision") == "back" or not pending.app.get("oauth_hosted_registration_enabled"):
            status = 200 if pending.app.get("oauth_hosted_registration_enabled") else 400
            return render_step(self, req, resp, Step(pending.request, page="login", handle=pending.handle),
                               pending.app, binding, status=status)
        entered = {"name": form.get("name", "").strip(), "email": form.get("email", "").strip()}
        device_info = self.device_info(req)
        try:
            values = REGISTER.validate({**entered, "password": form.get("password", "")})
            step = self.hosted.register(pending, email=values["email"], password=values["password"],
                                        name=values["name"], device_info=device_info)
        except ValidationFailed as exc:
            problems = "; ".join(f"{field}: {why}" for field, why in (exc.details or {}).get("fields", {}).items())
            return self._again(req, resp, pending, binding, f"Check the form ({problems}).", 400, entered)
        except PasswordTooWeak as exc:
            reasons = "; ".join(exc.details.get("reasons", ()))
            return self._again(req, resp, pending, binding, f"The password {reasons}.", 422, entered)
        except (EmailAlreadyRegistered, UserLimitReached, RegistrationsLimited,
                InvalidCredentials, AccountLocked, LoginsLimited, AccountSuspended) as exc:
            return self._again(req, resp, pending, binding, exc.message, status_of(type(exc)), entered)
        render_step(self, req, resp, step, pending.app, binding)

    def _again(self, req, resp, pending, binding, message, status, entered):
        render_step(self, req, resp, Step(pending.request, page="register", handle=pending.handle), pending.app,
                    binding, error=message, status=status, **entered)


class HostedAssetNotFound(NotFound, message="No hosted-page file has this name (an old content hash?)."):
    """A hosted-page asset URL whose hashed name is not the one this control plane serves."""


class HostedAsset(Resource):
    """The hosted pages' script file under its content-hash name (``controlplane.oidc.assets``)."""

    access = {"GET": PUBLIC}
    docs = {"GET": asset_doc("The hosted pages' passkey script under its content-hash name", HostedAssetNotFound,
                             "text/javascript")}

    def on_get(self, req, resp, filename):
        asset = PASSKEY_SCRIPT.asset
        if filename != asset.name:
            raise HostedAssetNotFound(details={"filename": filename})
        send_asset(req, resp, asset)


class HostedPasskeyOffer(HostedPage):
    """After a password sign-in, to a user without a passkey when the application uses
    them: "Add a passkey" (the API's registration, ``PasskeyService.register``) or
    "Not now" (remembered by this browser for this user); then the sign-in goes on."""

    stage = OFFER
    docs = {"POST": op(
        "Hosted login page: the offer to add a passkey (form post)",
        description="HTML. decision=add with challenge_id and credential (PublicKeyCredential.toJSON() of "
                    "navigator.credentials.create()) registers the passkey; decision=skip declines, remembered by "
                    "the cookie iamgate_passkey_declined for this application and user; decision=later goes on "
                    "without remembering (the offer shown when no passkey can be added now). Then the consent page or "
                    "the 302 with the code. A refused registration shows the offer again with its PASSKEY_* message.",
        errors=[*PAGE_ERRORS, *_PASSKEY_REFUSALS, AuthenticatorNotAllowed, PasskeyAlreadyRegistered],
        also=page_answers(409),
    )}

    def step(self, req, resp, form, pending, binding):
        decision = form.get("decision")
        if decision in ("skip", "later"):  # "later": the offer had no passkey to add (its page budget spent)
            if decision == "skip":
                kept = [key for key in pending.declined if key != self.hosted.decline_key(pending)]
                value = " ".join([*kept[-(DECLINED_KEPT - 1):], self.hosted.decline_key(pending)])
                resp.set_cookie(DECLINED_COOKIE, value, path="/oidc", max_age=DECLINED_TTL, secure=self.cookie_secure,
                                http_only=True, same_site="Lax")
            return render_step(self, req, resp, self.hosted.passkey_offer(pending, answer=None), pending.app, binding)
        if decision != "passkey":
            return self.again(req, resp, pending, binding)
        try:
            step = self.hosted.passkey_offer(pending, answer=passkey_answer(form))
        except (*_PASSKEY_REFUSALS, AuthenticatorNotAllowed, PasskeyAlreadyRegistered) as exc:
            return self.again(req, resp, pending, binding, exc)
        render_step(self, req, resp, step, pending.app, binding)
