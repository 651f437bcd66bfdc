"""Console screens of an application's and an account's settings: branding with a live
preview of the hosted sign-in page, API keys, and the account's two-step verification
(with the organization's ``require_mfa`` switch).

As the other console resources: each form is validated with the schema the dashboard
API validates its body with and goes through the same service and ``dashboard.access``
gate (docs/console.md).

The branding preview is the hosted sign-in page itself (``oidc_login.html`` through
``Pages.render``), rendered with the application's branding merged with the unsaved
values of the query string, validated by the API's branding schema and merged as the
update would merge them (``applications.service.branding_changes``); nothing is saved.
It is the only page the control plane lets be framed, and only by its own pages
(``frame-ancestors 'self'``), and its form posts nowhere (``form-action 'none'``). It
needs a signed-in member of the application: otherwise it would show anyone's chosen
logo and CSS on the control plane's origin.
"""
from __future__ import annotations

from urllib.parse import urlencode

from controlplane.apikeys.errors import ApiKeyNotFound
from controlplane.apikeys.service import V1_PERMISSIONS, ApiKeyService
from controlplane.applications.contrast import AA_NORMAL_TEXT, WHITE, contrast_ratio, readable_on_white
from controlplane.applications.service import ApplicationService, branding_changes
from controlplane.auth import SESSION_COOKIE
from controlplane.console.resources import (
    MFA_REQUIRED_PAGE,
    ApplicationScreen,
    ConsoleResource,
    Organization,
    PageAction,
    for_viewer,
    form_values,
    page_doc,
    redirect,
    viewer_post,
)
from controlplane.console.web import failed, listing
from controlplane.dashboard import resources as api
from controlplane.dashboard import schemas
from controlplane.dashboard.errors import DashboardMfaRequired
from controlplane.dashboard.mfa import DashboardMfa
from controlplane.dashboard.organizations import OrganizationService
from controlplane.dashboard.passkeys import DashboardPasskeys
from controlplane.oidc.resources.hosted import passkey_answer
from controlplane.pages import DEFAULT_COLOR, Pages
from controlplane.passkeys.errors import PasskeysUnavailable
from shared.errors import DomainError, ValidationFailed

BRAND_FIELDS = ("brand_name", "brand_logo_url", "brand_color", "brand_background")
OPTION_FIELDS = ("secondary_color", "font_family", "button_border_radius", "favicon_url", "custom_css")
DARK_FIELDS = {"enabled": "dark_mode_enabled", "background": "dark_background", "color": "dark_color"}
PREVIEW_CLIENT = "Your application"
PASSKEY_NOTICES = ("passkey-added", "passkey-deleted", "mfa-required")


def branding_values(form: dict) -> dict:
    """The branding form (or the preview's query) as the API's branding body: the
    fields sent, an empty one as null (back to the default), the options nested under
    ``branding_options`` as the API takes them."""
    values = {name: _field(form[name], name) for name in BRAND_FIELDS if name in form}
    options = {name: _field(form[name], name) for name in OPTION_FIELDS if name in form}
    if any(name in form for name in DARK_FIELDS.values()):  # the whole form: an unticked box is not sent
        options["dark_mode"] = {key: _field(form.get(name, ""), name) for key, name in DARK_FIELDS.items()}
        options["dark_mode"]["enabled"] = form.get(DARK_FIELDS["enabled"]) == "on"
    if options:
        values["branding_options"] = options
    return values


def _field(raw, name: str):
    """A field's value as the API would get it: empty is null, text trimmed but the CSS;
    a query parameter given twice (a list) goes to the schema as is, to be refused."""
    if not isinstance(raw, str):
        return raw
    return (raw if name == "custom_css" else raw.strip()) or None


def contrast_warning(app: dict) -> dict | None:
    """The hosted pages' rule (``Pages.branding``, ``applications.contrast``): links and
    the outlined button write the secondary colour, else the brand colour, on the white
    card only when it reaches WCAG AA (4.5:1); otherwise they fall back to near-black.
    The warning says so, with the ratio, before the owner saves."""
    options = app.get("branding_options") or {}
    color = options.get("secondary_color") or app.get("brand_color") or DEFAULT_COLOR
    if readable_on_white(color) == color:
        return None
    return {"color": color, "ratio": round(contrast_ratio(color, WHITE), 2), "needed": AA_NORMAL_TEXT}


def preview_url(app_id: str, values: dict) -> str:
    fields = (*BRAND_FIELDS, *OPTION_FIELDS, *DARK_FIELDS.values())
    query = urlencode({name: value for name, value in values.items() if name in fields})
    return f"/console/applications/{app_id}/branding/preview" + (f"?{query}" if query else "")


# ---------------------------------------------------------------- branding


class Branding(ApplicationScreen):
    docs = {"GET": page_doc("An application's branding with a live preview of its hosted sign-in page",
                            not_found=True),
            "POST": page_doc("Save the application's branding", api=api.Branding.docs["PUT"])}

    applications: ApplicationService

    @for_viewer
    def on_get(self, req, resp, viewer, applicationId):
        self.show(req, resp, viewer, applicationId, form=dict(req.params))

    def show(self, req, resp, viewer, applicationId, *, form: dict, **context):
        """The page, or with ``?fragment=preview`` (htmx, as the form changes) only the
        preview and its contrast warning for the form's unsaved values."""
        if (found := self.application(req, resp, viewer, applicationId)) is None:
            return
        app, role = found
        shown = app
        try:
            shown = {**app, **branding_changes(app, schemas.BRANDING.validate(branding_values(form), partial=True))}
        except ValidationFailed as error:  # the preview keeps the saved branding; the fields say why
            context = {**failed(error), **context}
        template = "settings_branding_preview.html" if form.get("fragment") == "preview" else "settings_branding.html"
        self.console.render(req, resp, template, viewer=viewer, app=app, role=role, shown=shown,
                            warning=contrast_warning(shown), form=form, preview=preview_url(applicationId, form),
                            **{"saved": False, "status": 200, **context})

    def change(self, form, applicationId):
        self.applications.update_branding(applicationId, schemas.BRANDING.validate(branding_values(form), partial=True))
        return {"form": {}, "saved": True}


class BrandingPreview(ApplicationScreen):
    """The hosted sign-in page with the unsaved branding of the query string."""

    docs = {"GET": page_doc("The hosted sign-in page with unsaved branding (?brand_color=...), to be framed "
                            "by the branding page; saves nothing", not_found=True)}

    pages: Pages

    @for_viewer
    def on_get(self, req, resp, viewer, applicationId):
        try:
            app, _role = self.dashboard_access.application(viewer.account["_id"], applicationId)
            values = schemas.BRANDING.validate(branding_values(dict(req.params)), partial=True)
        except DomainError as error:
            self.pages.render(resp, "oidc_error.html", app=None, status=failed(error)["status"], framed=True,
                              error_title="No preview", error_description=error.message, error=error.code)
            return
        self.pages.render(resp, "oidc_login.html", app={**app, **branding_changes(app, values)}, framed=True,
                          action=req.path, csrf_token="", request_handle="", client_name=PREVIEW_CLIENT,
                          can_register=bool(app.get("oauth_hosted_registration_enabled")), error=None,
                          login_hint=None)


# ---------------------------------------------------------------- API keys


class ApiKeys(ApplicationScreen):
    sensitive = ("POST",)  # a key outlives the session
    docs = {"GET": page_doc("An application's API keys (without secrets), and a form to create one",
                            not_found=True),
            "POST": page_doc("Create an API key; its secret is shown on this answer only",
                             api=api.ApiKeys.docs["POST"])}

    api_keys: ApiKeyService

    template = "settings_api_keys.html"
    defaults = {"permissions": V1_PERMISSIONS, "created": None}

    def contents(self, req, applicationId):
        keys, paging = listing(req, self.api_keys.list(applicationId))
        return {"keys": keys, **paging, "revoked": req.get_param("notice") == "revoked"}

    @viewer_post
    def on_post(self, req, resp, viewer, form, applicationId):
        chosen = [permission for permission in V1_PERMISSIONS if form.get(f"permission:{permission}") == "on"]
        try:
            app, _role = self.writer(viewer, applicationId)
            values = schemas.API_KEY_CREATE.validate({"name": form.get("name", ""), "permissions": chosen})
            key, secret = self.api_keys.create(app, values, created_by=viewer.account["_id"])
        except DomainError as error:
            self.show(req, resp, viewer, applicationId, **failed(error), form={**form, "chosen": chosen})
            return
        self.show(req, resp, viewer, applicationId, status=201, created={"key": key, "secret": secret})


class RevokeApiKey(PageAction):
    docs = {"POST": page_doc("Revoke an API key with confirmed=yes; without it, the page asking to confirm",
                             api=api.ApiKey.docs["DELETE"])}

    api_keys: ApiKeyService

    @viewer_post
    def on_post(self, req, resp, viewer, form, applicationId, keyId):
        """Without ``confirmed=yes`` (a plain form: no script to ask first), a page asks
        to confirm; htmx asks with ``hx-confirm`` and sends it."""
        try:
            app, _role = self.writer(viewer, applicationId)
            if form.get("confirmed") != "yes":
                key = next((key for key in self.api_keys.list(applicationId) if key["_id"] == keyId), None)
                if key is None:
                    raise ApiKeyNotFound(keyId)
                self.console.render(req, resp, "settings_api_key_revoke.html", viewer=viewer, app=app, key=key)
                return
            self.api_keys.revoke(applicationId, keyId)
        except DomainError as error:
            self.page.show(req, resp, viewer, applicationId, **failed(error))
            return
        redirect(resp, f"/console/applications/{applicationId}/api-keys?notice=revoked")


# ---------------------------------------------------------------- two-step verification


class Security(ConsoleResource):
    """``/console/account/security``: the account's second factors, the authenticator
    app (TOTP) and passkeys.  Each TOTP step answers this page again: the setup's
    secret, its confirmation's backup codes (shown this once), new backup codes, or the
    factor turned off.  Adding a passkey (passkeys.js posts the browser's credential)
    and deleting one go back to the page (303) with a notice.  An account that has not
    confirmed its address is told to confirm it first instead of being offered a factor."""

    password_work = ("POST",)
    docs = {"GET": page_doc("The account's two-step verification and passkeys"),
            "POST": page_doc("Set up (step=setup), confirm (step=confirm), regenerate backup codes "
                             "(step=backup-codes) or turn off (step=disable) two-step verification; add "
                             "(step=passkey-add) or delete (step=passkey-delete) a passkey",
                             api={"errors": (*api.AccountTotpSetup.docs["POST"]["errors"],
                                             *api.AccountTotpConfirm.docs["POST"]["errors"],
                                             *api.AccountBackupCodes.docs["POST"]["errors"],
                                             *api.AccountTotp.docs["DELETE"]["errors"],
                                             *api.AccountPasskeyRegistration.docs["POST"]["errors"],
                                             *api.AccountPasskey.docs["DELETE"]["errors"])})}

    mfa: DashboardMfa
    passkeys: DashboardPasskeys

    @for_viewer
    def on_get(self, req, resp, viewer):
        notice = req.get_param("notice")
        self.show(req, resp, viewer, disabled=notice == "disabled",
                  notice=notice if notice in PASSKEY_NOTICES else None)

    def show(self, req, resp, viewer, *, status=200, **context):
        account = viewer.account
        # An unconfirmed account enrols nothing (403 DASHBOARD_EMAIL_UNVERIFIED): the page
        # says why instead of offering it.
        confirm_first = not account.get("email_verified")
        try:
            passkey = None if confirm_first else self.passkeys.registration_options(account)
        except PasskeysUnavailable:
            passkey = None
        self.console.render(req, resp, "settings_security.html", status=status, viewer=viewer,
                            mfa=self.mfa.status(account["_id"]), passkeys=self.passkeys.list(account["_id"]),
                            passkey=passkey, confirm_first=confirm_first,
                            **{"setup": None, "backup_codes": None, "disabled": False, "step": None, "notice": None,
                               "chosen": None, **context})

    @viewer_post
    def on_post(self, req, resp, viewer, form):
        account, step = viewer.account, form.get("step")
        setup = {name: form.get(name, "") for name in ("method_id", "secret", "provisioning_uri")}
        try:
            if step == "setup":
                values = schemas.MFA_SETUP.validate(form_values(form, schemas.MFA_SETUP))
                self.show(req, resp, viewer, setup=self.mfa.setup(account, label=values["label"]))
            elif step == "confirm":
                values = schemas.MFA_CONFIRM.validate(form_values(form, schemas.MFA_CONFIRM))
                codes = self.mfa.confirm(account, **values, session=req.cookies.get(SESSION_COOKIE))
                self.show(req, resp, viewer, status=201, backup_codes=codes)
            elif step == "backup-codes":
                values = schemas.MFA_PASSWORD.validate(form_values(form, schemas.MFA_PASSWORD))
                self.show(req, resp, viewer, backup_codes=self.mfa.regenerate_backup_codes(account, **values))
            elif step == "disable":
                sent = {name: value for name, value in form_values(form, schemas.MFA_DISABLE).items() if value}
                self.mfa.disable(account, **schemas.MFA_DISABLE.validate(sent))
                redirect(resp, "/console/account/security?notice=disabled")
            elif step == "passkey-add":
                values = schemas.PASSKEY_REGISTRATION.validate(
                    {**passkey_answer(form), "name": form.get("name", "").strip() or None,
                     "password": form.get("password", "")})
                self.passkeys.register(account, **values, session=req.cookies.get(SESSION_COOKIE))
                redirect(resp, "/console/account/security?notice=passkey-added")
            elif step == "passkey-delete":
                values = schemas.MFA_PASSWORD.validate(form_values(form, schemas.MFA_PASSWORD))
                self.passkeys.delete(account, form.get("passkey_id", ""), **values)
                redirect(resp, "/console/account/security?notice=passkey-deleted")
            else:
                raise ValidationFailed({"step": "one of setup, confirm, backup-codes, disable, passkey-add, "
                                                "passkey-delete"})
        except DomainError as error:
            self.show(req, resp, viewer, **failed(error), step=step, setup=setup if step == "confirm" else None,
                      chosen=form.get("passkey_id"))


class OrganizationSecurity(ConsoleResource):
    docs = {"POST": page_doc("Require (or stop requiring) a second factor of every member (owners)",
                             api=api.Organization.docs["PATCH"])}

    organizations: OrganizationService
    organization_page: Organization

    @viewer_post
    def on_post(self, req, resp, viewer, form, organizationId):
        try:
            values = schemas.ORGANIZATION_UPDATE.validate({"require_mfa": form.get("require_mfa") == "on"},
                                                          partial=True)
            self.organizations.update_organization(viewer.account["_id"], organizationId, values)
        except DashboardMfaRequired as error:
            self.console.render_error(req, resp, error, MFA_REQUIRED_PAGE, viewer=viewer)
            return
        except DomainError as error:
            self.organization_page.show(req, resp, viewer, organizationId, **failed(error))
            return
        redirect(resp, f"/console/organizations/{organizationId}")
