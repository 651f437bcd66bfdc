"""Console screens of an application's access rules: roles and their permissions, ABAC
policies, and the check playground (``/console/applications/{applicationId}/...``).

Thin, as the JSON resources of ``controlplane.roles`` and ``controlplane.abac`` are: a
form is turned into the API's body, validated by the API's own schema
(``roles.schemas``, ``abac.schemas.clean_policy``, ``abac.schemas.clean_evaluate``), and
given to the same service, so a console write leaves the API's change-log event.  The
account's organization role gates it through ``dashboard.access``: every member reads
(and may use the playground, a dry run that stores nothing), owners and admins write.

Two things only the console has:

- a permission field is checked as it is typed: htmx asks ``/permission-check`` for a
  fragment naming each line ``shared.checks.Permission`` refuses (the API's own check);
- a refused policy condition is shown at the JSON paths the API names
  (``condition.all[2].op``), each with the line of the textarea where that node starts.
"""
from __future__ import annotations

import json
import re

from controlplane.abac import resources as abac_api
from controlplane.abac import schemas as abac_schemas
from controlplane.abac.service import AbacService, serialize_policy
from controlplane.console.resources import (
    ApplicationScreen,
    Deletion,
    PageAction,
    for_viewer,
    form_values,
    page_doc,
    stands_for,
    viewer_post,
)
from controlplane.console.web import failed, page_links
from controlplane.dashboard.sudo import opens_the_api
from controlplane.roles import resources as roles_api
from controlplane.roles import schemas as roles_schemas
from controlplane.roles.service import RoleService, serialize_role
from shared.checks import Permission
from shared.errors import DomainError, ValidationFailed
from shared.http import page_params, paginated, parse_json
from shared.validation import Invalid

_SPACE = re.compile(r"\s*")
_EMPTY_JSON = ("", "null")


def permission_lines(text: str) -> list[str]:
    """A permissions textarea as the API's list: one pattern a line, blank lines skipped."""
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def permission_problems(text: str) -> list[dict]:
    """``{"line", "value", "reason"}`` for each line ``Permission`` (the API's field) refuses."""
    problems = []
    for number, line in enumerate((text or "").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            Permission().clean(line.strip())
        except Invalid as exc:
            problems.append({"line": number, "value": line.strip(), "reason": str(exc)})
    return problems


def parse_json_field(name: str, text: str):
    """A JSON textarea's value (empty: None); a parse error is a ValidationFailed naming
    ``name`` with the line and column."""
    if (text or "").strip() in _EMPTY_JSON:
        return None
    try:
        return parse_json(text)
    except json.JSONDecodeError as exc:
        raise ValidationFailed({name: f"is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"},
                               message=f"{name} is not JSON: {exc.msg} (line {exc.lineno}).") from None
    except (ValueError, RecursionError) as exc:  # NaN, a lone surrogate; nesting too deep to read
        reason = "it nests too deep" if isinstance(exc, RecursionError) else str(exc)
        raise ValidationFailed({name: f"is not JSON: {reason}"}, message=f"{name} is not JSON: {reason}.") from None


def json_path_lines(text: str, root: str) -> dict[str, int]:
    """The line (1-based) where each value of the JSON ``text`` starts, by the JSON path
    the API names it with (``condition.all[2].op``).  Empty for text that is not JSON."""
    lines: dict[str, int] = {}
    decoder = json.JSONDecoder()

    def skip(i: int) -> int:
        return _SPACE.match(text, i).end()

    def value(i: int, path: str) -> int:
        i = skip(i)
        lines[path] = text.count("\n", 0, i) + 1
        opener = text[i:i + 1]
        if opener not in ("{", "["):
            return decoder.raw_decode(text, i)[1]
        closer, index, i = ("}" if opener == "{" else "]"), 0, skip(i + 1)
        while text[i] != closer:
            if opener == "{":
                key, i = json.decoder.scanstring(text, i + 1)
                i = value(skip(i) + 1, f"{path}.{key}")
            else:
                i = value(i, f"{path}[{index}]")
                index += 1
            i = skip(i)
            if text[i] == ",":
                i = skip(i + 1)
        return i + 1

    try:
        value(0, root)
    except (ValueError, IndexError, RecursionError):  # not JSON, or nested deeper than this walk goes
        return {}
    return lines


_LAST_STEP = re.compile(r"(\.[^.\[]*|\[\d+\])$")  # ``.key`` or ``[index]`` at the end of a JSON path


def line_of(path: str, lines: dict[str, int]) -> int | None:
    """The line of ``path``, or of its nearest ancestor the text has (a missing key)."""
    while path not in lines:
        parent = _LAST_STEP.sub("", path)
        if parent == path:
            return None
        path = parent
    return lines[path]


def json_error(error: DomainError, field: str, text: str) -> dict:
    """``failed(error)`` plus, for the JSON ``field``, each problem the API names under it
    (``details.fields``, or ``details.path`` for a condition too large) with its line."""
    answer = failed(error)
    fields = dict(answer["error"]["fields"])
    details = error.details
    if isinstance(details.get("fields"), dict):
        fields.update(details["fields"])
    elif isinstance(details.get("path"), str):
        fields.setdefault(details["path"], error.message)
    lines = json_path_lines(text, field)
    parse_line = re.search(r"\(line (\d+), column", fields.get(field, ""))
    answer["error"]["fields"] = fields
    answer["error"]["json"] = [
        {"path": path, "reason": reason,
         "line": int(parse_line.group(1)) if path == field and parse_line else line_of(path, lines)}
        for path, reason in fields.items() if path == field or path.startswith((f"{field}.", f"{field}["))]
    return answer


def condition_error(error: DomainError, form: dict) -> dict:
    """A refused policy: the error, its fields under the condition editor's lines."""
    return json_error(error, "condition", form.get("condition", ""))


class AccessRulesPage(ApplicationScreen):
    """A screen of an application's access rules."""

    def show_list(self, req, resp, viewer, applicationId, *, fetch, serialize, filters=None, unfiltered=None,
                  status=200, **context):
        """``template``, a page of a list (?page=, ?per_page= and the screen's own ``filters``); a bad
        parameter is shown as the page's error (400) over the first page, ``unfiltered``."""
        found = self.application(req, resp, viewer, applicationId)
        if found is None:
            return
        app, role = found
        try:
            page, per_page = page_params(req)
            chosen = filters(req) if filters else {}
        except ValidationFailed as error:
            context, (page, per_page) = {**context, "error": failed(error)["error"]}, (1, 15)
            chosen, status = unfiltered or {}, 400
        docs, total = fetch(page=page, per_page=per_page, **chosen)
        result = paginated([serialize(doc) for doc in docs], total, page, per_page)
        self.console.render(req, resp, self.template, status=status, viewer=viewer, app=app, role=role,
                            result=result, pages=page_links(req, result), **chosen, **context)


# ---------------------------------------------------------------- roles


class Roles(AccessRulesPage):
    gates, docs = stands_for(roles_api.RoleCollection, "POST", "Create a role",
                             page="An application's roles, a page at a time (?page=, ?per_page=, ?search=), and a "
                                  "form to create one")

    roles: RoleService

    template = "rules_roles.html"

    def show(self, req, resp, viewer, applicationId, **context):
        search = (req.get_param("search") or "").strip()[:roles_schemas.SEARCH_MAX] or None
        self.show_list(req, resp, viewer, applicationId,
                       fetch=lambda **paging: self.roles.list(applicationId, search=search, **paging),
                       serialize=lambda doc: serialize_role(doc, permissions="names", updated_at=False),
                       search=search or "", **context)

    def sensitive_form(self, form, applicationId):
        return opens_the_api(permission_lines(form.get("permissions", "")))

    def change(self, form, applicationId):
        body = {**form_values(form, roles_schemas.CREATE_ROLE),
                "permissions": permission_lines(form.get("permissions", ""))}
        body["description"] = body.get("description") or None
        created = self.roles.create(applicationId, roles_schemas.CREATE_ROLE.validate(body))
        return f"/console/applications/{applicationId}/roles/{created['_id']}"


class PermissionCheck(AccessRulesPage):
    """The fragment htmx swaps under a permissions textarea as it is typed."""

    docs = {"GET": page_doc("Check a permissions field as it is typed (?permissions=, one a line): an HTML "
                            "fragment naming each line that is not resource:action", not_found=True)}

    def on_get(self, req, resp, applicationId):
        if self.viewed(req, resp, applicationId):
            text = req.get_param("permissions") or ""
            self.console.render(req, resp, "rules_permission_check.html", problems=permission_problems(text),
                                count=len(permission_lines(text)))


class Role(AccessRulesPage):
    gates, docs = stands_for(roles_api.RoleItem, "PUT", "Change a role's display name, description and permissions",
                             page="A role: its permissions and how many users hold it")

    roles: RoleService

    template = "rules_role.html"
    defaults = {"saved": False}

    def contents(self, req, applicationId, roleId):
        return {"detail": self.roles.detail(applicationId, self.roles.resolve(applicationId, roleId))}

    def sensitive_form(self, form, applicationId):
        return opens_the_api(permission_lines(form.get("permissions", "")))

    def change(self, form, applicationId, roleId):
        values = roles_schemas.UPDATE_ROLE.validate({
            "display_name": form.get("display_name", ""), "description": form.get("description") or None,
            "permissions": permission_lines(form.get("permissions", ""))}, partial=True)
        self.roles.update(applicationId, roleId, values)
        return {"saved": True}


ROLE_DELETION = Deletion(roles_api.RoleItem,
                         "Delete a role nobody holds (the role page shows how many users hold it first)", "role",
                         "roles", lambda roles, app_id, role_id: roles.resolve(app_id, role_id)["name"])


# ---------------------------------------------------------------- policies


def policy_body(form: dict) -> dict:
    """The policy form as the API's body; a condition that is not JSON is refused here,
    at the field, with its line."""
    return {
        "name": form.get("name", ""),
        "description": form.get("description") or None,
        "effect": form.get("effect", ""),
        "permissions": permission_lines(form.get("permissions", "")),
        "condition": parse_json_field("condition", form.get("condition", "")),
        "is_active": form.get("is_active") == "on",
    }


def policy_form(policy: dict) -> dict:
    """A stored policy as the editor's fields."""
    condition = policy.get("condition")
    return {"name": policy["name"], "description": policy.get("description") or "", "effect": policy["effect"],
            "permissions": "\n".join(policy["permissions"]), "is_active": "on" if policy["is_active"] else "",
            "condition": "" if condition is None else json.dumps(condition, indent=2)}


class PolicyEditor(AccessRulesPage):
    """A screen writing a policy from the editor: a refusal names the condition's lines."""

    abac: AbacService

    def refused(self, error, form):
        return condition_error(error, form)


class Policies(PolicyEditor):
    gates, docs = stands_for(abac_api.PolicyCollection, "POST", "Create an ABAC policy",
                             page="An application's ABAC policies, a page at a time (?page=, ?per_page=, "
                                  "?is_active=), and the editor to create one")

    template = "rules_policies.html"

    def show(self, req, resp, viewer, applicationId, **context):
        context.setdefault("form", {"effect": "allow", "is_active": "on"})
        self.show_list(req, resp, viewer, applicationId,
                       fetch=lambda **paging: self.abac.list_policies(applicationId, permission=None, **paging),
                       serialize=serialize_policy, unfiltered={"is_active": None},
                       filters=lambda req: {"is_active": abac_schemas.is_active_param(req.get_param("is_active"))},
                       **context)

    def change(self, form, applicationId):
        values = abac_schemas.clean_policy(abac_schemas.CREATE_POLICY, policy_body(form), self.abac.limits,
                                           partial=False)
        created = self.abac.create_policy(applicationId, values)
        return f"/console/applications/{applicationId}/policies/{created['_id']}"


class Policy(PolicyEditor):
    gates, docs = stands_for(abac_api.PolicyItem, "PUT", "Update an ABAC policy (every field of the editor)",
                             page="An ABAC policy in the editor")

    template = "rules_policy.html"
    defaults = {"saved": None}

    def contents(self, req, applicationId, policyId):
        policy = serialize_policy(self.abac.get_policy(applicationId, policyId))
        return {"policy": policy, "form": policy_form(policy)}

    def change(self, form, applicationId, policyId):
        values = abac_schemas.clean_policy(abac_schemas.UPDATE_POLICY, policy_body(form), self.abac.limits,
                                           partial=True)
        self.abac.update_policy(applicationId, policyId, values)
        return {"saved": "Policy saved."}


class PolicyActivation(PageAction):
    gates, docs = stands_for(abac_api.PolicyItem, "PUT",
                             "Activate (is_active=true) or deactivate (is_active=false) an ABAC policy")

    abac: AbacService

    def change(self, form, applicationId, policyId):
        values = abac_schemas.clean_policy(abac_schemas.UPDATE_POLICY, {"is_active": form.get("is_active") == "true"},
                                           self.abac.limits, partial=True)
        updated = self.abac.update_policy(applicationId, policyId, values)
        return {"saved": "Policy activated." if updated["is_active"] else "Policy deactivated."}


# ---------------------------------------------------------------- the check playground


class Playground(AccessRulesPage):
    """A dry run: reading, so every member may use it; a POST only to keep the context
    out of URLs and logs, so it carries the CSRF token like every console post."""
    gates = {"GET": abac_api.Evaluate.access["POST"], "POST": abac_api.Evaluate.access["POST"]}

    docs = {"GET": page_doc("The check playground: user, permission, resource and context", not_found=True),
            "POST": page_doc("Dry-run a check and show why it was allowed or denied",
                             api=abac_api.Evaluate.docs["POST"])}

    abac: AbacService

    @for_viewer
    def on_get(self, req, resp, viewer, applicationId):
        self.show(req, resp, viewer, applicationId, form={"user_id": req.get_param("user_id") or ""})

    template = "rules_playground.html"
    defaults = {"evaluation": None}

    @viewer_post
    def on_post(self, req, resp, viewer, form, applicationId):
        if self.application(req, resp, viewer, applicationId) is None:
            return
        try:
            body = {"user_id": form.get("user_id", ""), "permission": form.get("permission", "")}
            if (form.get("scope") or "").strip():
                body["scope"] = form["scope"]
            for name in ("resource", "context"):
                parsed = parse_json_field(name, form.get(name, ""))
                if parsed is not None:
                    body[name] = parsed
            evaluation = self.abac.evaluate(applicationId, abac_schemas.clean_evaluate(body, self.abac.limits))
        except DomainError as error:
            self.show(req, resp, viewer, applicationId, **failed(error), form=form)
            return
        self.show(req, resp, viewer, applicationId, form=form, evaluation=evaluation)
