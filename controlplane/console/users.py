"""The console's users screens: an application's end users, searched and paged on the
server, bulk suspension and session revocation over every user a search matches (the
count shown first), and one user's page (status, sessions, suspend, reactivate, delete,
audit trail).

The same services as the JSON API, behind the same gate: ``dashboard.access`` gives the
signed-in account's role in the application (owners and admins write, members and
viewers read); the search is ``UserAdminService.search`` (``GET
/api/dashboard/applications/{id}/users``), suspension its ``suspend``/``unsuspend``,
sessions and deletion the self-service operations (``selfservice``), the audit trail the
audit log's filtered page.  Each user of a bulk action goes through the service on its
own, so each leaves the event and audit record the API's call would.
"""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from controlplane.abac import resources as abac_api
from controlplane.abac import schemas as abac_schemas
from controlplane.abac.service import AbacService
from controlplane.audit.service import APPLICATION, AuditLog
from controlplane.console.resources import ApplicationScreen, page_doc, redirect, viewer_post
from controlplane.console.web import failed
from controlplane.dashboard.sudo import opens_the_api
from controlplane.mfa import resources as mfa_api
from controlplane.passkeys.service import PasskeyService
from controlplane.roles import resources as roles_api
from controlplane.roles import schemas as roles_schemas
from controlplane.roles.service import RoleService
from controlplane.selfservice import resources as selfservice_api
from controlplane.selfservice.service import SelfService
from controlplane.users import resources as users_api
from controlplane.users import schemas
from controlplane.users.admin import UserAdminService
from controlplane.users.directory import UserDirectory
from shared.errors import DomainError, ValidationFailed
from shared.http import page_params, parse_json
from shared.ids import is_uuid

PER_PAGE = 25
BULK_ACTIONS = {"suspend": "Suspend", "revoke-sessions": "Revoke every session of"}
AUDIT_ROWS = 20


def users_url(app_id: str, query: dict | None = None) -> str:
    """The list's URL with its filters, so a view can be shared (empty ones left out)."""
    kept = {name: value for name, value in (query or {}).items() if value not in (None, "", 1)}
    return f"/console/applications/{app_id}/users" + (f"?{urlencode(kept)}" if kept else "")


@dataclass
class UserFinder:
    """One search of an application's users as the list and the bulk actions read it:
    ``q`` an id (that user) or a piece of an email or name, ``status`` one state."""

    admin: UserAdminService
    directory: UserDirectory

    @staticmethod
    def filters(params: dict) -> dict:
        """``q`` and ``status`` validated as the API validates ``search`` and ``status``."""
        q = (params.get("q") or "").strip()
        status = params.get("status") or ""
        errors = {}
        if len(q) > 255:
            errors["q"] = "must be at most 255 characters"
        if status and status not in schemas.USER_STATUSES:
            errors["status"] = f"must be one of {', '.join(schemas.USER_STATUSES)}"
        if errors:
            raise ValidationFailed(errors)
        return {"q": q, "status": status}

    def page(self, app_id: str, filters: dict, page: int, per_page: int) -> tuple[list[dict], int]:
        q, status = filters["q"], filters["status"] or None
        if is_uuid(q):  # an id names one user (or none): no text search
            user = self.directory.get(app_id, q.lower())
            statuses = (status,) if status else ("active", "suspended")
            found = [user] if user is not None and user.get("status", "active") in statuses else []
            return (found if page == 1 else []), len(found)
        return self.admin.search(app_id, search=q or None, status=status, page=page, per_page=per_page)

    def all_ids(self, app_id: str, filters: dict) -> list[str]:
        """Every matching user's id, read before anything changes (a suspension moves a
        user out of a status filter, which would shift the pages under a loop)."""
        ids, page = [], 1
        while True:
            users, total = self.page(app_id, filters, page, 100)
            ids.extend(user["_id"] for user in users)
            if not users or len(ids) >= total:
                return ids
            page += 1


class Users(ApplicationScreen):
    docs = {"GET": page_doc("An application's users: search by id, email or name (?q=, ?status=, ?page=)",
                            not_found=True)}

    finder: UserFinder

    def on_get(self, req, resp, applicationId):
        if viewed := self.viewed(req, resp, applicationId):
            self.show(req, resp, *viewed, dict(req.params), notice=req.get_param("notice"))

    def show(self, req, resp, viewer, app, role, params, **context):
        raw = {"q": params.get("q", ""), "status": params.get("status", "")}
        users, total, page, last_page = [], 0, 1, 1
        try:
            filters = self.finder.filters(params)
            page, _ = page_params(req)
            users, total = self.finder.page(app["_id"], filters, page, PER_PAGE)
            last_page = max(1, -(-total // PER_PAGE))
        except DomainError as error:
            context = {**failed(error), **context}
        self.console.render(req, resp, "users_list.html", viewer=viewer, app=app, role=role, users=users,
                            total=total, page=page, last_page=last_page, filters=raw,
                            url=lambda **changes: users_url(app["_id"], {**raw, "page": page, **changes}),
                            statuses=schemas.USER_STATUSES, actions=BULK_ACTIONS,
                            **{"status": 200, "notice": None, **context})


class BulkUsers(ApplicationScreen):
    docs = {"POST": page_doc(
        "Suspend (action=suspend) or revoke the sessions of (action=revoke-sessions) every user the search "
        "matches: without confirm=yes it shows how many that is; with it, acts on each through the API's service",
        api={"errors": (*users_api.SuspendUser.docs["POST"]["errors"], ValidationFailed)})}

    finder: UserFinder
    admin: UserAdminService
    selfservice: SelfService

    @viewer_post
    def on_post(self, req, resp, viewer, form, applicationId):
        if (found := self.application(req, resp, viewer, applicationId)) is None:
            return
        app, role = found
        try:
            self.writer(viewer, applicationId)
            action = form.get("action")
            if action not in BULK_ACTIONS:
                raise ValidationFailed({"action": f"must be one of {', '.join(BULK_ACTIONS)}"})
            filters = self.finder.filters(form)
            ids = self.finder.all_ids(applicationId, filters)
        except DomainError as error:
            self.console.render(req, resp, "users_bulk.html", viewer=viewer, app=app, role=role, filters=form,
                                count=0, done=None, action="", actions=BULK_ACTIONS, changed=False,
                                back=users_url(applicationId), **failed(error))
            return
        back = users_url(applicationId, filters)
        done = None
        # Act only on the count the person confirmed: if users joined or left the search
        # since, the confirmation is asked again with the new count.
        if form.get("confirm") == "yes" and form.get("count") == str(len(ids)):
            done = sum(self.act(applicationId, action, user_id) for user_id in ids)
        self.console.render(req, resp, "users_bulk.html", viewer=viewer, app=app, role=role, filters=filters,
                            action=action, actions=BULK_ACTIONS, count=len(ids), done=done, back=back,
                            changed=form.get("confirm") == "yes" and done is None)

    def act(self, app_id: str, action: str, user_id: str) -> int:
        """Act on one user as the API's operation would; 1 when it was done."""
        try:
            if action == "suspend":
                self.admin.suspend(app_id, user_id)
            else:
                self.selfservice.revoke_all_sessions(app_id, user_id)
        except DomainError:  # deleted meanwhile: nothing to do for this one
            return 0
        return 1


USER_ACTIONS = ("suspend", "reactivate", "revoke-session", "revoke-sessions", "reset-mfa", "assign-role",
                "remove-role", "set-attribute", "delete-attribute", "delete")
ROLE_CHOICES = 100  # the roles offered to assign: the first page of the API's largest


@dataclass(frozen=True)
class UserAreas:
    """The services of the other areas a user's page reads and acts through."""

    second_factors: PasskeyService  # TOTP (through MfaService) and passkeys, as the dashboard API's MFA routes
    roles: RoleService
    abac: AbacService
    audit: AuditLog


# The user page's actions that are V1 operations, gated by their V1 routes' permissions;
# the others are dashboard operations (suspend, sessions, MFA, delete), gated by the role.
ACTION_GATES = {
    "assign-role": roles_api.UserRoleCollection.access["POST"],
    "remove-role": roles_api.UserRoleItem.access["DELETE"],
    "set-attribute": abac_api.UserAttribute.access["PUT"],
    "delete-attribute": abac_api.UserAttribute.access["DELETE"],
}


class User(ApplicationScreen):
    docs = {"GET": page_doc("One user: status, sessions, MFA, roles, attributes, audit trail; ?permission= (and "
                            "?scope=) explains that permission's decision with its trace", not_found=True),
            "POST": page_doc(
                "Act on the user: action=suspend, reactivate, revoke-session (session_id), revoke-sessions, "
                "reset-mfa, assign-role (role_id, scope, expires_at), remove-role (role_id, scope), "
                "set-attribute (key, value), delete-attribute (key), delete (confirm_email must repeat the address)",
                api={"errors": (*users_api.SuspendUser.docs["POST"]["errors"],
                                *selfservice_api.SessionItem.docs["DELETE"]["errors"],
                                *mfa_api.AdminMfa.docs["DELETE"]["errors"],
                                *roles_api.UserRoleCollection.docs["POST"]["errors"],
                                *roles_api.UserRoleItem.docs["DELETE"]["errors"],
                                *abac_api.UserAttribute.docs["PUT"]["errors"],
                                *abac_api.UserAttribute.docs["DELETE"]["errors"], ValidationFailed)})}

    admin: UserAdminService
    directory: UserDirectory
    selfservice: SelfService
    areas: UserAreas

    def on_get(self, req, resp, applicationId, userId):
        if (viewed := self.viewed(req, resp, applicationId)) is None:
            return
        context = {"notice": req.get_param("notice")}
        asked = {"permission": req.get_param("permission") or "", "scope": req.get_param("scope") or ""}
        if asked["permission"]:
            context["asked"] = asked
            try:
                context["explained"] = self.explain(applicationId, userId, asked)
            except DomainError as error:
                context.update(failed(error))
        self.show(req, resp, *viewed, userId, **context)

    def explain(self, app_id: str, user_id: str, asked: dict) -> dict:
        """``POST V1/abac/evaluate``'s dry run of one permission for the user: the answer,
        which rule gave it, RBAC's answer and each covering policy with its trace."""
        body = {"user_id": user_id, "permission": asked["permission"], "scope": asked["scope"] or None}
        return self.areas.abac.evaluate(app_id, abac_schemas.clean_evaluate(body, self.areas.abac.limits))

    def show(self, req, resp, viewer, app, role, user_id, **context):
        user = self.directory.get(app["_id"], user_id.lower()) if is_uuid(user_id) else None
        if user is None or user.get("status") == "deleted":
            self.console.render(req, resp, "not_found.html", status=404, viewer=viewer)
            return
        app_id, user_id = app["_id"], user["_id"]
        sessions = self.selfservice.sessions(app_id, user_id) if user.get("status") == "active" else []
        roles, _total = self.areas.roles.list(app_id, search=None, page=1, per_page=ROLE_CHOICES)
        self.console.render(req, resp, "users_detail.html", viewer=viewer, app=app, role=role, user=user,
                            sessions=sessions, trail=self.trail(app_id, user_id),
                            mfa=self.areas.second_factors.mfa_status(app, user_id),
                            assignments=self.areas.roles.user_roles(app_id, user_id), roles=roles,
                            attributes=self.areas.abac.attributes(app_id, user_id),
                            **{"status": 200, "notice": None, "asked": {}, "explained": None, **context})

    def trail(self, app_id: str, user_id: str) -> list[dict]:
        """The newest records the user did or that were done to the user (the audit
        log's actor_id and target_id filters, merged)."""
        records = {}
        for name in ("target_id", "actor_id"):
            for record in self.areas.audit.page(APPLICATION, app_id, {name: user_id}, None, AUDIT_ROWS)[0]:
                records[record["id"]] = record
        return sorted(records.values(), key=lambda record: record["at"], reverse=True)[:AUDIT_ROWS]

    @viewer_post
    def on_post(self, req, resp, viewer, form, applicationId, userId):
        if (found := self.application(req, resp, viewer, applicationId)) is None:
            return
        action = form.get("action")
        try:
            self.writer(viewer, applicationId, ACTION_GATES.get(action), form=form)
            notice = self.act(found[0], userId, action, form)
        except DomainError as error:
            self.show(req, resp, viewer, *found, userId, **failed(error), form=form)
            return
        if action == "delete":
            redirect(resp, users_url(applicationId, {"q": "", "notice": "deleted"}))
            return
        redirect(resp, f"/console/applications/{applicationId}/users/{userId}?{urlencode({'notice': notice})}")

    def sensitive_form(self, form, applicationId):
        """Assigning a role that opens the V1 API (``dashboard.sudo.opens_the_api``)."""
        return form.get("action") == "assign-role" and opens_the_api(
            self.areas.roles.resolve(applicationId, form.get("role_id") or "")["permissions"])

    def act(self, app: dict, user_id: str, action: str | None, form: dict) -> str:
        """Do one action through the API's service; the notice the page then shows."""
        app_id = app["_id"]
        if action == "suspend":
            self.admin.suspend(app_id, user_id)
            return "suspended"
        if action == "reactivate":
            self.admin.unsuspend(app_id, user_id)
            return "reactivated"
        if action == "revoke-session":
            self.selfservice.revoke_session(app_id, user_id, form.get("session_id") or "")
            return "session-revoked"
        if action == "revoke-sessions":
            self.selfservice.revoke_all_sessions(app_id, user_id)
            return "sessions-revoked"
        if action == "reset-mfa":
            self.areas.second_factors.reset_mfa(app, user_id)
            return "mfa-reset"
        if action == "assign-role":
            self.areas.roles.assign(app_id, user_id, roles_schemas.ASSIGN_ROLE.validate(assignment(form)))
            return "role-assigned"
        if action == "remove-role":
            self.areas.roles.unassign(app_id, user_id, form.get("role_id") or "", form.get("scope") or None)
            return "role-removed"
        if action == "set-attribute":
            key = abac_schemas.attribute_key(form.get("key") or "")
            value = abac_schemas.attribute_value({"value": attribute_value(form.get("value", ""))})
            self.areas.abac.set_attribute(app_id, user_id, key, value)
            return "attribute-set"
        if action == "delete-attribute":
            self.areas.abac.delete_attribute(app_id, user_id, abac_schemas.attribute_key(form.get("key") or ""))
            return "attribute-deleted"
        if action == "delete":
            user = self.directory.get(app_id, user_id.lower()) if is_uuid(user_id) else None
            if user is not None and form.get("confirm_email", "").strip().lower() != user["email"].lower():
                reason = "Type the user's email address exactly to delete the user."
                raise ValidationFailed({"confirm_email": reason}, message=reason)
            self.selfservice.delete_account(app_id, user_id)
            return "deleted"
        raise ValidationFailed({"action": f"must be one of {', '.join(USER_ACTIONS)}"})


def assignment(form: dict) -> dict:
    """The assign form as the API's body: an empty scope or expiry is none, and the
    expiry (a ``datetime-local`` field, minutes, no zone) is read as UTC."""
    expires = (form.get("expires_at") or "").strip()
    if len(expires) == 16 and expires[10] == "T":
        expires += ":00+00:00"
    return {"role_id": form.get("role_id") or "", "scope": (form.get("scope") or "").strip() or None,
            "expires_at": expires or None}


def attribute_value(raw: str):
    """The value field: JSON when it reads as JSON (``42``, ``true``, ``["a", "b"]``,
    ``"text"``), otherwise the text as typed (``gold``): read as the API reads a body
    (``parse_json``: no NaN, no lone surrogate), and text that nests too deep to read is
    text too (the attribute's own rules then judge it)."""
    try:
        return parse_json(raw)
    except (ValueError, RecursionError):
        return raw
