"""HTML resources of the console (``/console/...``).

Thin, as the JSON resources are: read the form, validate it with the same schema the
dashboard API validates its body with, call the same dashboard service, render a page.
A refused write renders its form again with the API's message, code and field paths,
at the API's status.  Every POST passes ``Console.check_write`` (CSRF token and Origin)
before anything is read or changed; a refused one renders ``refused.html`` (403).  A
page whose write is ``sensitive`` (``controlplane.dashboard.sudo``) asks for a recent
sign-in where it gates the write, so a refusal shows on the page, with a password form
(``Reauthenticate``) that returns to it.

Signed-out visitors of a signed-in page are sent to the sign-in page (303); pages are
documented in the OpenAPI document with an HTML answer and the ``console`` tag, but they
are not an API: ``controlplane/console/parity.py`` names the API operation each console
action stands for.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, dataclass_transform
from urllib.parse import urlencode

from markupsafe import escape

from controlplane.applications.service import ApplicationService
from controlplane.auth import CONSOLE, PUBLIC, SESSION_COOKIE, Access
from controlplane.console.assets import asset_doc, send_asset
from controlplane.console.permissions import console_principal, require
from controlplane.console.web import REAUTHENTICATED, SIGN_IN, Console, Viewer, failed, listing
from controlplane.dashboard import resources as api
from controlplane.dashboard import schemas
from controlplane.dashboard.access import DashboardAccess
from controlplane.dashboard.applications import OrganizationApplications
from controlplane.dashboard.errors import DashboardMfaRequired
from controlplane.dashboard.organizations import OrganizationService
from controlplane.dashboard.passkeys import DashboardPasskeys
from controlplane.dashboard.resources import clear_session_cookie, set_session_cookie
from controlplane.mfa.errors import MfaChallengeExpired
from controlplane.oidc import wire
from controlplane.oidc.resources.hosted import passkey_answer
from controlplane.openapi import op
from controlplane.pages import CsrfTokenInvalid, MalformedForm, read_form
from controlplane.passkeys.errors import PasskeysUnavailable
from controlplane.passkeys.service import WEBAUTHN
from controlplane.ratelimit import Unit
from controlplane.resource import Resource
from shared.config import Config
from shared.errors import DomainError, NotFound, PayloadTooLarge, PermissionMissing, RateLimited, ValidationFailed
from shared.http import client_ip, status_of

HTML = {"type": "string", "description": "an HTML page"}
APPLICATION_FIELDS = ("name", "description", "environment")
LIMIT_FIELDS = ("max_concurrent_sessions", "registration_rate_limit")
SWITCHES = ("oauth_hosted_login_enabled", "oauth_hosted_registration_enabled")
# The API's 403 DASHBOARD_MFA_REQUIRED as a page: it leads to the account's Security page.
MFA_REQUIRED_PAGE = "settings_mfa_required.html"
ENROL_PAGE = "/console/account/security?notice=mfa-required"


def page_doc(summary: str, *, api: dict | None = None, not_found: bool = False, errors: tuple = ()) -> dict:
    """The OpenAPI operation of a console page: HTML, for browsers, not an API.  A form
    post names the JSON API operation doing the same (``api``): it answers that
    operation's errors, as HTML, plus the refused CSRF check.  A page read with a query
    the API validates names its ``errors``."""
    errors = [*api["errors"], CsrfTokenInvalid, MalformedForm, PayloadTooLarge] if api else list(errors)
    statuses = {200, 303, *(status_of(error) for error in errors), *((404,) if not_found else ())}
    description = "Console page (HTML, not an API). " + (
        "A form post: needs the iamgate_csrf double-submit token (csrf_token field or X-CSRF-Token header) and "
        "an Origin equal to IAMGATE_PUBLIC_URL's, else 403 CSRF_TOKEN_INVALID as an HTML page." if api else
        "Signed-out visitors of a signed-in page are redirected (303) to /console/sign-in.")
    return op(summary, description=description, errors=errors, wrapped=False,
              also={status: (HTML, "an HTML page", "text/html") for status in sorted(statuses)})


def stands_for(v1: type, method: str, summary: str, *, page: str | None = None,
               read: type | None = None) -> tuple[dict, dict]:
    """``gates`` and ``docs`` of a screen whose form post stands for the V1 ``method`` of
    ``v1`` (its permission, its errors) and whose reading is the V1 GET of ``read``
    (``v1`` by default); ``page`` is the summary of the screen's own page, when it has one."""
    gates = {"GET": (read or v1).access["GET"], "POST": v1.access[method]}
    posted = {"POST": page_doc(summary, api=v1.docs[method])}
    return gates, ({"GET": page_doc(page, not_found=True), **posted} if page else posted)


def for_viewer(responder):
    """A responder of a signed-in page: ``responder(self, req, resp, viewer, **params)``
    runs for a signed-in viewer; a signed-out visitor is sent to sign in
    (``ConsoleResource.signed_in``)."""
    def respond(self, req, resp, **params):
        if viewer := self.signed_in(req, resp):
            responder(self, req, resp, viewer, **params)
    respond.__doc__ = responder.__doc__
    return respond


def form_post(responder):
    """A guarded form post: ``responder(self, req, resp, form, **params)`` runs once
    ``ConsoleResource.posted`` has accepted the form."""
    def on_post(self, req, resp, **params):
        if (form := self.posted(req, resp)) is not None:
            responder(self, req, resp, form, **params)
    on_post.__doc__ = responder.__doc__
    return on_post


def viewer_post(responder):
    """A signed-in viewer's guarded form post: ``responder(self, req, resp, viewer, form,
    **params)`` runs once ``ConsoleResource.signed_in_post`` has the viewer and the form."""
    def on_post(self, req, resp, **params):
        if posted := self.signed_in_post(req, resp):
            responder(self, req, resp, *posted, **params)
    on_post.__doc__ = responder.__doc__
    return on_post


def redirect(resp, location: str) -> None:
    """303 to a console page, with the link as a page too (the documented HTML answer)."""
    resp.status = 303
    resp.location = location
    resp.cache_control = ["no-store"]
    resp.content_type = "text/html; charset=utf-8"
    resp.text = f'<!doctype html><title>See other</title><a href="{escape(location)}">Continue</a>\n'


@dataclass_transform(eq_default=False)
@dataclass(eq=False)
class ConsoleResource(Resource):
    """A console page: the auth middleware sets the signed-in account as the principal
    when there is one (``CONSOLE``) and the page sends a signed-out visitor to sign in
    itself; form posts only.

    Each page is a dataclass of the services it uses: the fields a class declares follow
    its base's (``console``, then ``dashboard_access`` on an application's screens).  A
    page is equal only to itself."""

    every_method = CONSOLE
    accepted_media_types = (wire.FORM,)

    console: Console

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        dataclass(eq=False)(cls)

    def signed_in(self, req, resp) -> Viewer | None:
        """The viewer, or None after sending a signed-out visitor to the sign-in page.
        htmx follows a 303 itself and would swap the sign-in page into a fragment, so
        its requests get ``HX-Redirect``, which makes it load the page whole."""
        viewer = self.console.viewer(req)
        if viewer is None:
            if req.get_header("HX-Request"):
                resp.status = 200
                resp.cache_control = ["no-store"]
                resp.content_type = "text/html; charset=utf-8"
                resp.text = ""
                resp.set_header("HX-Redirect", SIGN_IN)
            else:
                redirect(resp, SIGN_IN)
        return viewer

    def posted(self, req, resp) -> dict | None:
        """The form of a guarded post, or None after rendering the refusal."""
        form = read_form(req)
        try:
            self.console.check_write(req, form)
        except CsrfTokenInvalid as error:
            self.console.render_error(req, resp, error, "refused.html")
            return None
        return form

    def signed_in_post(self, req, resp) -> tuple | None:
        """``(viewer, form)`` of a signed-in viewer's guarded post, or None after sending a
        signed-out visitor to sign in or rendering the refusal."""
        viewer = self.signed_in(req, resp)
        if viewer is None or (form := self.posted(req, resp)) is None:
            return None
        return viewer, form

    def submit(self, req, resp, schema, act, template: str, again=None) -> None:
        """A signed-out page's guarded form post: the fields the dashboard API's ``schema``
        knows, validated, go to ``act(values)``, which answers; a refusal (the schema's or
        the service's) renders ``template`` with the error and ``again(form)``."""
        form = self.posted(req, resp)
        if form is None:
            return
        try:
            act(schema.validate(form_values(form, schema)))
        except DomainError as error:
            self.console.render_error(req, resp, error, template, **(again(form) if again else {}))

    def submit_signed_in(self, req, resp, schema, act, refused) -> None:
        """A signed-in page's guarded form post: ``act(viewer, values)`` with the fields
        ``schema`` validates, which answers; a refusal goes to ``refused(viewer, form, error)``."""
        if (posted := self.signed_in_post(req, resp)) is None:
            return
        viewer, form = posted
        try:
            if req.method in self.sensitive:
                self.console.require_recent(viewer)
            act(viewer, schema.validate(form_values(form, schema)))
        except DomainError as error:
            refused(viewer, form, error)

    def account_page_again(self, req, resp):
        """``refused`` of the account page's forms: that page with the error."""
        return lambda viewer, _form, error: self.console.render_error(req, resp, error, "account.html", viewer=viewer,
                                                                      changed=False, resent=False)


class ApplicationScreen(ConsoleResource):
    """A screen of one application: the account must belong to its organization (a 404
    page otherwise) and its organization's second-factor rule must be met (the
    MFA-required page).  Its principal holds the V1 permissions of its role
    (``console.permissions``): a screen standing for V1 operations names their gates in
    ``gates`` (console method -> the V1 resource's ``Access``; ``stands_for`` derives
    them and ``docs`` from the V1 resource), and a read or write
    lacking the permission is refused as the API refuses it.  A write without a V1 gate
    (a dashboard operation) needs an owner or admin (``dashboard.access``)."""

    gates: ClassVar[dict] = {}

    dashboard_access: DashboardAccess

    def __init_subclass__(cls, **kwargs):
        # A screen with a ``template`` answers GET with its page, one with a ``change``
        # answers POST with it; set before the base derives ``access`` from the responders.
        if cls.template and not hasattr(cls, "on_get"):
            cls.on_get = cls.show_to_viewer
        if cls.change is not ApplicationScreen.change and not hasattr(cls, "on_post"):
            cls.on_post = cls.post_change
        super().__init_subclass__(**kwargs)

    def gate(self, method: str) -> Access | None:
        """The V1 gate of this screen's ``method``; None for a dashboard operation."""
        return self.gates.get(method)

    def application(self, req, resp, viewer, applicationId) -> tuple | None:
        """``(app, role)`` the viewer may read, or None after rendering the refusal."""
        try:
            app, role = self.dashboard_access.application(viewer.account["_id"], applicationId)
        except DashboardMfaRequired as error:
            self.console.render_error(req, resp, error, MFA_REQUIRED_PAGE, viewer=viewer)
            return None
        except DomainError:
            self.not_found(req, resp, viewer)
            return None
        try:
            require(console_principal(viewer.account["_id"], app["_id"], role), self.gate("GET"))
        except PermissionMissing as error:
            self.console.render_error(req, resp, error, "forbidden.html", viewer=viewer, app=app, role=role)
            return None
        return app, role

    def viewed(self, req, resp, applicationId) -> tuple | None:
        """``(viewer, app, role)`` for a signed-in viewer who may read the application, or
        None after sending a signed-out visitor to sign in or rendering the refusal."""
        viewer = self.signed_in(req, resp)
        if viewer is None or (found := self.application(req, resp, viewer, applicationId)) is None:
            return None
        return viewer, *found

    def item(self, req, resp, viewer, applicationId, lookup) -> tuple | None:
        """``(app, role, lookup())``: the application as ``application`` finds it and one
        of its documents, or None after rendering the refusal (404 when lookup raises)."""
        if (found := self.application(req, resp, viewer, applicationId)) is None:
            return None
        try:
            return (*found, lookup())
        except DomainError:
            self.not_found(req, resp, viewer)
            return None

    @for_viewer
    def show_to_viewer(self, req, resp, viewer, applicationId, **ids) -> None:
        """The GET of a screen with a ``template``: its ``show`` for a signed-in viewer."""
        self.show(req, resp, viewer, applicationId, *ids.values())

    # The page of a screen whose ``show`` is this base's: its template, and the value of
    # each name it shows that a write's answer may set (``saved``, a secret shown once...).
    template = ""
    defaults: ClassVar[dict] = {}

    def contents(self, req, applicationId, *ids) -> dict:
        """What ``template`` shows besides the application and the viewer's role: the
        documents the path names (DomainError when one is not there), read with the
        request's query where the page has one."""
        return {}

    def show(self, req, resp, viewer, applicationId, *ids, status=200, **context) -> None:
        """The screen's page: ``template`` with ``defaults``, ``contents`` and ``context``
        (a write's answer, the form again) over them; the 404 page when a document the
        path names is not there.  Contents refused by the query (a list's bad ``?page=``)
        bring their own status and error."""
        found = self.item(req, resp, viewer, applicationId, lambda: self.contents(req, applicationId, *ids))
        if found is not None:
            app, role, contents = found
            self.console.render(req, resp, self.template, viewer=viewer, app=app, role=role,
                                **{"status": status, **self.defaults, **contents, **context})

    # The write of a screen (its form post): ``change`` makes it, ``answer_page`` shows
    # its answer, ``refused`` its refusal, with the form as sent when ``keep_form``.
    keep_form = True

    def change(self, form: dict, applicationId: str, *ids: str) -> dict | str:
        """The write, behind the write gate: what the page shows again (``saved=True``, a
        secret shown once...) or the address to go to (303)."""
        raise NotImplementedError

    def answer_page(self) -> ApplicationScreen:
        return self

    def sensitive_form(self, form: dict, applicationId: str) -> bool:
        """Whether this post is sensitive by what it carries (``dashboard.sudo``), where
        the screen's writes are not all sensitive (``sensitive`` names the ones that are)."""
        return False

    def refused(self, error: DomainError, form: dict) -> dict:
        """The page's context for a refused write: the error at its fields."""
        return failed(error)

    def post_change(self, req, resp, applicationId, **ids) -> None:
        """The POST of a screen with a ``change``."""
        path_ids = tuple(ids.values())
        self.write_form(req, resp, applicationId, *path_ids,
                        change=lambda form: self.change(form, applicationId, *path_ids))

    def write_form(self, req, resp, applicationId, *ids, change) -> None:
        """A guarded form post of this screen: ``change(form)`` (``change``'s contract)
        runs behind the write gate; ``answer_page()`` shows its answer, or its refusal
        (``refused``) and, with ``keep_form``, the form as sent."""
        if (posted := self.signed_in_post(req, resp)) is None:
            return
        viewer, form = posted
        page = self.answer_page()
        try:
            self.writer(viewer, applicationId, form=form)
            answer = change(form)
        except DomainError as error:
            kept = {"form": form} if self.keep_form else {}
            page.show(req, resp, viewer, applicationId, *ids, **self.refused(error, form), **kept,
                      here=page_path(req.path, self.action_segments))
            return
        if isinstance(answer, str):
            redirect(resp, answer)
        else:
            page.show(req, resp, viewer, applicationId, *ids, **answer)

    def writer(self, viewer, applicationId, gate: Access | None = None, *, form: dict | None = None) -> tuple:
        """``(app, role)`` for a write behind ``gate`` (this screen's POST gate by
        default): 403 FORBIDDEN with the permission missing (the V1 gate's refusal) or,
        for a dashboard operation, for a member or viewer; DASHBOARD_EMAIL_UNVERIFIED
        before the address is confirmed; DASHBOARD_REAUTH_REQUIRED for a ``sensitive``
        write, or a ``form`` that ``sensitive_form`` finds sensitive, without a recent
        sign-in."""
        gate = gate or self.gate("POST")
        account_id = viewer.account["_id"]
        if gate is None or gate.kind != "permission":
            found = self.dashboard_access.application(account_id, applicationId, write=True)
        else:
            found = self.dashboard_access.application(account_id, applicationId)
            require(console_principal(account_id, found[0]["_id"], found[1]), gate)
            self.dashboard_access.require_verified(account_id)
        if "POST" in self.sensitive or (form is not None and self.sensitive_form(form, applicationId)):
            self.console.require_recent(viewer)
        return found

    def not_found(self, req, resp, viewer) -> None:
        self.console.render(req, resp, "not_found.html", status=404, viewer=viewer)

    # The path segments after the page's that name this screen's write (``PageAction``).
    action_segments: ClassVar[int] = 0


def page_path(path: str, action_segments: int) -> str:
    """The page of a write posted to ``path``: ``path`` without the ``action_segments``
    last segments naming the write."""
    return path.rsplit("/", action_segments)[0] if action_segments else path


class PageAction(ApplicationScreen):
    """A form post made on another screen's page (``page``): deleting what it shows,
    rotating a secret, a test.  Its answer is that page, and a refusal shows it without
    the form (the page's fields are its own).  Its path is the page's and
    ``action_segments`` more (``.../rotate-secret``: one)."""

    page: ApplicationScreen

    keep_form = False
    action_segments = 1

    def answer_page(self) -> ApplicationScreen:
        return self.page


@dataclass(frozen=True)
class Deletion:
    """What deleting the document of an item screen takes (``DeleteItem``): the V1 item
    resource it stands for (its GET gates reading, its DELETE the write), the summary of
    the console's operation, the noun its form names, the list the answer goes back to
    (its path under the application's) and the document's name, read through the service."""

    v1: type
    summary: str
    noun: str
    listed: str
    name: Callable[[Any, str, str], str]


class DeleteItem(PageAction):
    """``POST .../delete`` of the document an item screen (``page``) shows, through the
    service its V1 DELETE calls (``delete(applicationId, itemId)``): the form must repeat
    the document's name."""

    service: Any
    deletion: Deletion

    def __post_init__(self):
        errors = (*self.deletion.v1.docs["DELETE"]["errors"], ValidationFailed)
        self.docs = {"POST": page_doc(self.deletion.summary, api={"errors": errors})}

    def gate(self, method: str) -> Access | None:
        return self.deletion.v1.access["DELETE" if method == "POST" else method]

    def change(self, form: dict, applicationId: str, *ids: str) -> str:
        (item_id,) = ids
        confirm_name(form, self.deletion.name(self.service, applicationId, item_id), self.deletion.noun)
        self.service.delete(applicationId, item_id)
        return f"/console/applications/{applicationId}/{self.deletion.listed}"


# ---------------------------------------------------------------- assets


class AssetNotFound(NotFound, message="No console file has this name (an old content hash?)."):
    """A console asset URL whose hashed name is not one this control plane serves."""


class ConsoleAsset(Resource):
    access = {"GET": PUBLIC}
    docs = {"GET": asset_doc("A console static file (CSS, script) under its content-hash name", AssetNotFound,
                             "text/css", "text/javascript")}

    def __init__(self, console: Console):
        self.assets = console.assets

    def on_get(self, req, resp, filename):
        asset = self.assets.get(filename)
        if asset is None:
            raise AssetNotFound(details={"filename": filename})
        send_asset(req, resp, asset)


# ---------------------------------------------------------------- accounts


class Home(ConsoleResource):
    docs = {"GET": page_doc("Console start: the applications, or the sign-in page")}

    def on_get(self, req, resp):
        redirect(resp, "/console/applications" if self.console.viewer(req) else SIGN_IN)


class _SignInPage(ConsoleResource):
    """A page of the sign-in: its forms post the API's sign-in steps."""

    config: Config
    passkeys: DashboardPasskeys
    dashboard_access: DashboardAccess

    def sign_in_unit(self, req) -> Unit:
        """This request's unit of the client IP's sign-in budget (``AccountService.sign_in_unit``),
        which its sign-in attempt draws."""
        return self.console.accounts.sign_in_unit(client_ip(req, self.config.trusted_proxies))

    def page_unit(self, req) -> Unit:
        """This request's unit of the client IP's sign-in page budget
        (``AccountService.page_unit``), which a page shown without a sign-in paying for it
        draws for its passkey challenge: the GET, and every page shown again after a refusal."""
        return self.console.accounts.page_unit(client_ip(req, self.config.trusted_proxies))

    def sign_in_page(self, req, resp, unit: Unit, *, passkey_autofill=True, **context) -> None:
        """The sign-in page, its passkey challenge paid with ``unit`` (``passkey_alone``)."""
        context.setdefault("notice", None)
        self.console.render(req, resp, "sign_in.html", passkey=self.passkey_alone(unit),
                            passkey_autofill=passkey_autofill, **context)

    def passkey_alone(self, unit: Unit) -> dict | None:
        """The options of the page's "Sign in with a passkey": a stored challenge each
        time the page is shown, so it takes ``unit`` first
        (``AccountService.passkey_options``), a unit of the client IP's sign-in page
        budget (``page_unit``); once that budget is spent the page shows no passkey
        button rather than minting more, and still takes a password.

        Not the sign-in budget, which the sign-in attempts draw: any web page can make a
        browser GET this page, and a post refused and shown again draws its attempt's
        unit already, so no challenge is stored without a unit drawn for it and no page
        showing ever refuses a password."""
        try:
            return self.console.accounts.passkey_options(None, unit=unit)
        except (PasskeysUnavailable, RateLimited):
            return None

    def code_page(self, req, resp, challenge_token: str, methods, unit: Unit, **context) -> None:
        """The second step's page, its passkey challenge paid with ``unit`` (``passkey_second_step``)."""
        self.console.render(req, resp, "sign_in_code.html", challenge_token=challenge_token, methods=methods,
                            passkey=self.passkey_second_step(challenge_token, methods, unit), **context)

    def passkey_second_step(self, challenge_token: str, methods, unit: Unit) -> dict | None:
        """The options of the code page's "Use a passkey" for ``challenge_token``, or None
        when there is none to offer: the challenge takes no passkey, the server cannot
        verify passkeys, or ``unit``'s budget is spent.  As on the sign-in page
        (``passkey_alone``), each showing stores a challenge, so it takes ``unit``: the
        sign-in budget's unit of the password or passkey that leads to the page (drawn
        already, so no third party can take away the passkey of an account whose only
        second factor it is), or, for the page shown again after a refused code or
        passkey, a unit of the page budget (``page_unit``; an empty code is not even an
        MFA attempt, so nothing else bounds how often it comes back)."""
        if WEBAUTHN not in methods:
            return None
        try:
            return self.console.accounts.passkey_options(challenge_token, unit=unit)
        except (PasskeysUnavailable, MfaChallengeExpired, RateLimited):
            return None

    def signed_in_to(self, req, resp, sign_in, unit: Unit) -> None:
        """The session cookie and the console, or the second step's page (its passkey
        challenge paid with ``unit``, the sign-in's).  A member of an organization that
        requires a second factor, who has none, is sent to enrol (the Security page)
        before anything else."""
        if sign_in.challenge is not None:  # two-step verification: the second step, no session yet
            self.code_page(req, resp, sign_in.challenge["challenge_token"], sign_in.challenge["mfa_methods"], unit)
            return
        set_session_cookie(resp, sign_in.session, self.config)
        must_enrol = self.dashboard_access.must_enrol(sign_in.account["_id"])
        redirect(resp, ENROL_PAGE if must_enrol else "/console/applications")


class SignIn(_SignInPage):
    password_work = ("POST",)
    docs = {"GET": page_doc("Console sign-in page"), "POST": page_doc("Sign in", api=api.Login.docs["POST"])}

    def on_get(self, req, resp):
        self.sign_in_page(req, resp, self.page_unit(req), notice=req.get_param("notice"))

    @form_post
    def on_post(self, req, resp, form):
        unit = self.sign_in_unit(req)  # the attempt's, and the code page's it leads to
        try:
            values = schemas.LOGIN.validate(form_values(form, schemas.LOGIN))
            sign_in = self.console.accounts.login(values["email"], values["password"], unit=unit,
                                                  previous_session=req.cookies.get(SESSION_COOKIE))
        except DomainError as error:
            self.sign_in_page(req, resp, self.page_unit(req), **failed(error), form={"email": form.get("email", "")})
            return
        self.signed_in_to(req, resp, sign_in, unit)


class SignInCode(_SignInPage):
    """The second step of a sign-in with two-step verification on (``LoginMfa`` of the API)."""

    docs = {"POST": page_doc("Answer the sign-in's two-step verification with a code",
                             api=api.LoginMfa.docs["POST"])}

    @form_post
    def on_post(self, req, resp, form):
        unit = self.page_unit(req)  # a code draws none; the page shown again with a passkey does
        try:
            values = schemas.LOGIN_MFA.validate(form_values(form, schemas.LOGIN_MFA))
            sign_in = self.console.accounts.login_second_factor(values["challenge_token"], values["code"],
                                                                previous_session=req.cookies.get(SESSION_COOKIE))
        except DomainError as error:
            token = form.get("challenge_token", "")
            self.code_page(req, resp, token, self.passkeys.challenge_methods(token), unit, **failed(error))
            return
        self.signed_in_to(req, resp, sign_in, unit)


class SignInPasskey(_SignInPage):
    """A passkey's answer, alone (the sign-in page) or as the second step (the code
    page, whose form carries the challenge_token): ``LoginPasskey`` of the API."""

    docs = {"POST": page_doc("Sign in with a passkey, alone or as the second step",
                             api=api.LoginPasskey.docs["POST"])}

    @form_post
    def on_post(self, req, resp, form):
        challenge_token = form.get("challenge_token") or None
        unit = self.sign_in_unit(req)  # the attempt's
        try:
            answer = passkey_answer(form)
            sign_in = self.console.accounts.login_with_passkey(
                answer["challenge_id"], answer["credential"], unit=unit,
                previous_session=req.cookies.get(SESSION_COOKIE))
        except DomainError as error:
            again = self.page_unit(req)  # the page shown again: its own challenge, on the page budget
            if challenge_token is None:
                self.sign_in_page(req, resp, again, passkey_autofill=False, **failed(error))
            else:
                self.code_page(req, resp, challenge_token, self.passkeys.challenge_methods(challenge_token), again,
                               **failed(error))
            return
        self.signed_in_to(req, resp, sign_in, unit)


class SignUp(ConsoleResource):
    password_work = ("POST",)
    docs = {"GET": page_doc("Console sign-up page"),
            "POST": page_doc("Create a dashboard account", api=api.Register.docs["POST"])}

    config: Config

    def on_get(self, req, resp):
        self.console.render(req, resp, "sign_up.html")

    def on_post(self, req, resp):
        def register(values):
            account = self.console.accounts.register(values, ip=client_ip(req, self.config.trusted_proxies))
            self.console.render(req, resp, "check_email.html", status=201, email=account["email"])
        self.submit(req, resp, schemas.REGISTER, register, "sign_up.html",
                    lambda form: {"form": {"email": form.get("email", ""), "name": form.get("name", "")}})


class VerifyEmail(ConsoleResource):
    docs = {"GET": page_doc("Page of the mailed verification link (?token=...); opening it changes nothing"),
            "POST": page_doc("Confirm the address with the link's token", api=api.VerifyEmail.docs["POST"])}

    def on_get(self, req, resp):
        self.console.render(req, resp, "verify_email.html", token=req.get_param("token") or "", done=False)

    def on_post(self, req, resp):
        def verify(values):
            self.console.accounts.verify_email(values["token"])
            self.console.render(req, resp, "verify_email.html", token="", done=True)
        self.submit(req, resp, schemas.VERIFY_EMAIL, verify, "verify_email.html",
                    lambda _form: {"token": "", "done": False})


class ForgotPassword(ConsoleResource):
    docs = {"GET": page_doc("Forgot-password page"),
            "POST": page_doc("Mail a password reset link", api=api.ForgotPassword.docs["POST"])}

    def on_get(self, req, resp):
        self.console.render(req, resp, "forgot_password.html", sent=False)

    def on_post(self, req, resp):
        def mail_link(values):
            self.console.accounts.forgot_password(values["email"])
            self.console.render(req, resp, "forgot_password.html", sent=True)
        self.submit(req, resp, schemas.FORGOT_PASSWORD, mail_link, "forgot_password.html",
                    lambda form: {"sent": False, "form": {"email": form.get("email", "")}})


class ResetPassword(ConsoleResource):
    password_work = ("POST",)
    docs = {"GET": page_doc("Page of the mailed reset link (?token=...)"),
            "POST": page_doc("Set a new password with the link's token", api=api.ResetPassword.docs["POST"])}

    def on_get(self, req, resp):
        self.console.render(req, resp, "reset_password.html", token=req.get_param("token") or "")

    def on_post(self, req, resp):
        def reset(values):
            self.console.accounts.reset_password(values["token"], values["password"])
            redirect(resp, SIGN_IN + "?" + urlencode({"notice": "password-reset"}))
        self.submit(req, resp, schemas.RESET_PASSWORD, reset, "reset_password.html",
                    lambda form: {"token": form.get("token", "")})


class EmailLink(Resource):
    """The links mailed to dashboard accounts (``/dashboard/verify-email?token=...``,
    ``/dashboard/reset-password?token=...``) open the console's page of the same name."""

    access = {"GET": PUBLIC}

    def __init__(self, page: str):
        self.page = page
        self.docs = {"GET": op(f"Mailed dashboard link: redirects (303) to /console/{page} with its token",
                               ok=303, wrapped=False, store=False, also={303: (HTML, "an HTML page", "text/html")})}

    def on_get(self, req, resp):
        query = urlencode({"token": req.get_param("token") or ""})
        redirect(resp, f"/console/{self.page}?{query}")


class SignOut(ConsoleResource):
    docs = {"POST": page_doc("Sign out", api=api.Logout.docs["POST"])}

    config: Config

    @form_post
    def on_post(self, req, resp, _form):
        self.console.accounts.logout(req.cookies.get(SESSION_COOKIE))
        clear_session_cookie(resp, self.config)
        redirect(resp, SIGN_IN + "?" + urlencode({"notice": "signed-out"}))


class ResendVerification(ConsoleResource):
    docs = {"POST": page_doc("Mail the signed-in account a new verification link",
                             api=api.ResendVerification.docs["POST"])}

    @viewer_post
    def on_post(self, req, resp, viewer, _form):
        try:
            self.console.accounts.resend_verification(viewer.account["_id"])
        except DomainError as error:
            self.console.render_error(req, resp, error, "account.html", viewer=viewer, changed=False, resent=False)
            return
        self.console.render(req, resp, "account.html", status=202, viewer=viewer, changed=False, resent=True)


class AccountName(ConsoleResource):
    docs = {"POST": page_doc("Rename the signed-in account", api=api.Me.docs["PUT"])}

    def on_post(self, req, resp):
        def rename(viewer, values):
            self.console.accounts.update_account(viewer.account["_id"], values)
            redirect(resp, "/console/account")
        self.submit_signed_in(req, resp, schemas.ACCOUNT_UPDATE, rename, self.account_page_again(req, resp))


class Account(ConsoleResource):
    password_work = ("POST",)
    docs = {"GET": page_doc("The signed-in account: session expiry, change password"),
            "POST": page_doc("Change the password", api=api.Password.docs["POST"])}

    config: Config

    @for_viewer
    def on_get(self, req, resp, viewer):
        self.console.render(req, resp, "account.html", viewer=viewer, resent=False,
                            changed=req.get_param("notice") == "password-changed")

    def on_post(self, req, resp):
        def change(viewer, values):
            raw = self.console.accounts.change_password(viewer.account["_id"], values["current_password"],
                                                        values["new_password"])
            set_session_cookie(resp, raw, self.config)
            redirect(resp, "/console/account?" + urlencode({"notice": "password-changed"}))  # shows the new session
        self.submit_signed_in(req, resp, schemas.PASSWORD_CHANGE, change, self.account_page_again(req, resp))


class Reauthenticate(ConsoleResource):
    """The password form a refused sensitive action shows (``DASHBOARD_REAUTH_REQUIRED``):
    the API's re-authentication, then back (303) to the page it was shown on, ``next``,
    to repeat the action.  ``next`` must be a console path: nothing else is followed."""

    password_work = ("POST",)
    docs = {"POST": page_doc("Confirm the password for sensitive actions, then return to the page",
                             api=api.Reauthenticate.docs["POST"])}

    @viewer_post
    def on_post(self, req, resp, viewer, form):
        self.prove(req, resp, viewer, form, lambda session: self.console.sudo.reauthenticate(
            viewer.account, schemas.REAUTHENTICATE.validate(form_values(form, schemas.REAUTHENTICATE))["password"],
            session))

    def prove(self, req, resp, viewer, form, proof: Callable[[str | None], None]) -> None:
        """Run ``proof`` (given the session cookie), then back to ``next``; a refusal shows
        the forms again, with the passkey's when the account has one."""
        back = console_path(form.get("next"))
        try:
            proof(req.cookies.get(SESSION_COOKIE))
        except DomainError as error:
            self.console.render_error(req, resp, error, "reauthenticate.html", viewer=viewer, here=back,
                                      reauth_passkey=self.console.reauth_passkey(viewer))
            return
        redirect(resp, back + "?" + urlencode({"notice": REAUTHENTICATED}))


class ReauthenticatePasskey(Reauthenticate):
    """The password form's "Use a passkey" (passkeys.js posts the browser's answer): the
    API's re-authentication with a passkey, then back to ``next`` as with the password."""

    password_work = ()
    docs = {"POST": page_doc("Confirm it is you with a passkey for sensitive actions, then return to the page",
                             api=api.ReauthenticatePasskey.docs["POST"])}

    @viewer_post
    def on_post(self, req, resp, viewer, form):
        self.prove(req, resp, viewer, form, lambda session: self.console.sudo.reauthenticate_with_passkey(
            viewer.account, **passkey_answer(form), session=session))


def console_path(path: str | None) -> str:
    """``path`` when it is a path of the console's own (the page a form was shown on),
    else the console's start: a form field names where to go, so nothing but a path
    under /console/ on this origin is followed (no scheme, no host, no ``//``, no
    backslash a browser would read as a slash, no query)."""
    if not path or not path.startswith("/console/") or "\\" in path or "//" in path \
            or any(char in path for char in "?#") or not (path.isascii() and path.isprintable()):
        return "/console/applications"
    return path


# ---------------------------------------------------------------- organizations


class Organizations(ConsoleResource):
    docs = {"GET": page_doc("Organizations of the account, and a form to create one"),
            "POST": page_doc("Create an organization", api=api.Organizations.docs["POST"])}

    organizations: OrganizationService

    @for_viewer
    def on_get(self, req, resp, viewer):
        self.show(req, resp, viewer)

    def show(self, req, resp, viewer, **context):
        orgs, paging = listing(req, self.organizations.organizations(viewer.account["_id"]))
        self.console.render(req, resp, "organizations.html", viewer=viewer, organizations=orgs,
                            **{"status": 200, **paging, **context})

    def on_post(self, req, resp):
        def create(viewer, values):
            org, _role = self.organizations.create_organization(viewer.account["_id"], values["name"])
            redirect(resp, f"/console/organizations/{org['_id']}")
        self.submit_signed_in(req, resp, schemas.ORGANIZATION, create,
                              lambda viewer, form, error: self.show(req, resp, viewer, **failed(error), form=form))


class Organization(ConsoleResource):
    sensitive = ("POST",)  # adding a member (api.Members)
    docs = {"GET": page_doc("An organization's members with their roles", not_found=True),
            "POST": page_doc("Add a member (a verified dashboard account)",
                             api=api.Members.docs["POST"])}

    organizations: OrganizationService
    config: Config

    def show(self, req, resp, viewer, organizationId, **context):
        caller = viewer.account["_id"]
        orgs = dict((org["_id"], (org, role)) for org, role in self.organizations.organizations(caller))
        if organizationId not in orgs:
            self.console.render(req, resp, "not_found.html", status=404, viewer=viewer)
            return
        org, role = orgs[organizationId]
        try:
            members = self.organizations.members(caller, organizationId)
        except DashboardMfaRequired as error:
            self.console.render_error(req, resp, error, MFA_REQUIRED_PAGE, viewer=viewer)
            return
        template = "_members.html" if req.get_header("HX-Request") and context.get("fragment") else "organization.html"
        context.pop("fragment", None)
        members, paging = listing(req, members)
        self.console.render(req, resp, template, viewer=viewer, organization=org, role=role, members=members,
                            **{"status": 200, **paging, **context})

    @for_viewer
    def on_get(self, req, resp, viewer, organizationId):
        self.show(req, resp, viewer, organizationId)

    def on_post(self, req, resp, organizationId):
        def add(viewer, values):
            self.organizations.add_member(viewer.account["_id"], organizationId, values["email"], values["role"],
                                          ip=client_ip(req, self.config.trusted_proxies))
            redirect(resp, f"/console/organizations/{organizationId}")
        self.submit_signed_in(req, resp, schemas.MEMBER_ADD, add, lambda viewer, form, error: self.show(
            req, resp, viewer, organizationId, **failed(error), form=form))


class Member(ConsoleResource):
    sensitive = ("POST",)  # a role change (api.Member's PUT); removing a member or leaving is not
    docs = {"POST": page_doc("Change a member's role (action=role) or remove the member (action=remove)",
                             api={"errors": (*api.Member.docs["PUT"]["errors"], *api.Member.docs["DELETE"]["errors"])})}

    organizations: OrganizationService
    organization_page: Organization  # renders the page or the members fragment after a change

    @viewer_post
    def on_post(self, req, resp, viewer, form, organizationId, accountId):
        caller = viewer.account["_id"]
        try:
            if form.get("action") == "remove":
                self.organizations.remove_member(caller, organizationId, accountId)
                if accountId == caller:  # left the organization: its page is no longer theirs
                    redirect(resp, "/console/organizations")
                    return
            else:
                self.console.require_recent(viewer)
                values = schemas.MEMBER_UPDATE.validate({"role": form.get("role")})
                self.organizations.change_member_role(caller, organizationId, accountId, values["role"])
        except DomainError as error:
            self.organization_page.show(req, resp, viewer, organizationId, **failed(error), fragment=True,
                                        here=page_path(req.path, 2))
            return
        if req.get_header("HX-Request"):
            self.organization_page.show(req, resp, viewer, organizationId, fragment=True)
        else:
            redirect(resp, f"/console/organizations/{organizationId}")


# ---------------------------------------------------------------- applications


class Applications(ConsoleResource):
    docs = {"GET": page_doc("Applications of an organization (?organization_id=), and a form to create one"),
            "POST": page_doc("Create an application", api=api.Applications.docs["POST"])}

    organizations: OrganizationService
    dashboard_applications: OrganizationApplications

    @for_viewer
    def on_get(self, req, resp, viewer):
        self.show(req, resp, viewer, req.get_param("organization_id"))

    def show(self, req, resp, viewer, organization_id, **context):
        caller = viewer.account["_id"]
        orgs = self.organizations.organizations(caller)
        current = next((pair for pair in orgs if pair[0]["_id"] == organization_id), orgs[0] if orgs else None)
        try:
            apps = self.dashboard_applications.for_account(caller, current[0]["_id"]) if current else []
        except DashboardMfaRequired as error:
            self.console.render_error(req, resp, error, MFA_REQUIRED_PAGE, viewer=viewer)
            return
        apps, paging = listing(req, apps)
        self.console.render(req, resp, "applications.html", viewer=viewer, organizations=orgs, current=current,
                            applications=apps, **{"status": 200, **paging, **context})

    def on_post(self, req, resp):
        def create(viewer, values):
            app, _role = self.dashboard_applications.create_application(viewer.account["_id"], values)
            redirect(resp, f"/console/applications/{app['_id']}")
        self.submit_signed_in(req, resp, schemas.APPLICATION_CREATE, create, lambda viewer, form, error: self.show(
            req, resp, viewer, form.get("organization_id"), **failed(error), form=form))


class Application(ApplicationScreen):
    docs = {"GET": page_doc("An application's settings", not_found=True),
            "POST": page_doc("Update the application's settings", api=api.Application.docs["PUT"])}

    applications: ApplicationService

    template = "application.html"
    defaults = {"saved": False}
    keep_form = False

    def change(self, form, applicationId):
        self.applications.update(applicationId,
                                 schemas.APPLICATION_UPDATE.validate(settings_values(form), partial=True))
        return {"saved": True}


class DeleteApplication(PageAction):
    sensitive = ("POST",)
    docs = {"POST": page_doc("Delete the application; the form must repeat its name",
                             api={"errors": (*api.Application.docs["DELETE"]["errors"], ValidationFailed)})}

    dashboard_applications: OrganizationApplications
    applications: ApplicationService

    def change(self, form, applicationId):
        app = self.applications.get(applicationId)
        confirm_name(form, app["name"], "application")
        self.dashboard_applications.delete_application(applicationId)
        return f"/console/applications?{urlencode({'organization_id': app['organization_id']})}"


# ---------------------------------------------------------------- form values


def confirm_name(form: dict, name: str, what: str) -> None:
    """A delete form must repeat the name of what it deletes."""
    if form.get("confirm_name") != name:
        reason = f"Type the {what}'s name exactly to delete it."
        raise ValidationFailed({"confirm_name": reason}, message=reason)


def form_values(form: dict, schema) -> dict:
    """The form's fields the schema knows (a form also carries csrf_token and buttons)."""
    return {name: value for name, value in form.items() if name in schema.fields}


def settings_values(form: dict) -> dict:
    """The settings form as the API's update body: text fields as given, the limits as
    integers when they are numbers (otherwise as typed, for the schema to refuse with
    its own message), an empty limit as null where the API allows it, and each switch
    as its checkbox (an unchecked box is not sent)."""
    values = {name: form[name] for name in APPLICATION_FIELDS if name in form}
    for name in LIMIT_FIELDS:
        raw = form.get(name, "").strip()
        if raw == "":
            if name == "registration_rate_limit":
                values[name] = None
            continue
        values[name] = int(raw) if raw.lstrip("-").isdigit() else raw
    for name in SWITCHES:
        values[name] = form.get(name) == "on"
    return values

