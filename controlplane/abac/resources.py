"""HTTP resources of ABAC policies (V1/abac/policies), the dry run (V1/abac/evaluate) and
user attributes (V1/users/{userId}/attributes).  Reads need policies:read, writes
policies:manage (docs/authorization.md, "Permission gates"), for end-user tokens and API keys
alike.  Every write answers ``X-Iamgate-Revision``; one that changed nothing answers the
current head, which its data is at least as fresh as."""
from __future__ import annotations

from controlplane import events as change_log
from controlplane.abac import schemas
from controlplane.abac.errors import (
    AttributeKeyConflict,
    AttributeLimitReached,
    AttributeNotFound,
    ConditionInvalid,
    ConditionTooLarge,
    PermissionPolicyLimitReached,
    PolicyLimitReached,
    PolicyNameTaken,
    PolicyNotFound,
)
from controlplane.abac.service import AbacService, serialize_policy
from controlplane.auth import permission
from controlplane.openapi import op
from controlplane.resource import ServiceResource
from controlplane.users.errors import UserNotFound
from shared.checks import Permission
from shared.errors import Conflict, PermissionMissing, ValidationFailed
from shared.http import PAGE_QUERY, page_params, paginated, read_json, respond

READ = permission("policies:read")
MANAGE = permission("policies:manage")

_BODY_ERRORS = [ValidationFailed, ConditionInvalid, ConditionTooLarge, PermissionMissing]
# A write counted against the caps; CONFLICT: another write of the application's policies held on.
_CAP_ERRORS = [PermissionPolicyLimitReached, Conflict]
_USER_ERRORS = [PermissionMissing, UserNotFound]


def _answer_revision(resp, abac: AbacService) -> None:
    if change_log.current_revision() is None:
        resp.set_header("X-Iamgate-Revision", str(abac.head()))


class PolicyCollection(ServiceResource[AbacService]):
    access = {"GET": READ, "POST": MANAGE}
    docs = {
        "GET": op(query={
            "is_active": ({"type": "boolean"}, "only active (true) or inactive (false) policies"),
            "permission": (Permission().schema(), "only policies a check of this permission evaluates "
                                               "(one of their patterns covers it)"),
            **PAGE_QUERY,
        }, response=schemas.POLICY_PAGE, wrapped=False, errors=[ValidationFailed, PermissionMissing]),
        "POST": op(body=schemas.CREATE_POLICY, ok=201, response=schemas.POLICY,
                   errors=[*_BODY_ERRORS, PolicyNameTaken, PolicyLimitReached, *_CAP_ERRORS]),
    }

    def on_get(self, req, resp, applicationId):
        """List ABAC policies"""
        page, per_page = page_params(req)
        is_active = schemas.is_active_param(req.get_param("is_active"))
        checked = schemas.permission_param(req.get_param("permission"))
        docs, total = self.service.list_policies(applicationId, is_active=is_active, permission=checked,
                                              page=page, per_page=per_page)
        resp.media = paginated([serialize_policy(d) for d in docs], total, page, per_page)

    def on_post(self, req, resp, applicationId):
        """Create an ABAC policy"""
        values = schemas.clean_policy(schemas.CREATE_POLICY, read_json(req), self.service.limits, partial=False)
        respond(resp, serialize_policy(self.service.create_policy(applicationId, values)), status=201)


class PolicyItem(ServiceResource[AbacService]):
    access = {"GET": READ, "PUT": MANAGE, "DELETE": MANAGE}
    docs = {
        "GET": op(response=schemas.POLICY, errors=[PermissionMissing, PolicyNotFound]),
        "PUT": op(body=schemas.UPDATE_POLICY, response=schemas.POLICY,
                  errors=[*_BODY_ERRORS, PolicyNotFound, PolicyNameTaken, *_CAP_ERRORS]),
        "DELETE": op(ok=204, errors=[PermissionMissing, PolicyNotFound]),
    }

    def on_get(self, req, resp, applicationId, policyId):
        """Get an ABAC policy"""
        respond(resp, serialize_policy(self.service.get_policy(applicationId, policyId)))

    def on_put(self, req, resp, applicationId, policyId):
        """Update an ABAC policy

        Any subset of the fields; omitted fields are unchanged."""
        values = schemas.clean_policy(schemas.UPDATE_POLICY, read_json(req), self.service.limits, partial=True)
        respond(resp, serialize_policy(self.service.update_policy(applicationId, policyId, values)))
        _answer_revision(resp, self.service)

    def on_delete(self, req, resp, applicationId, policyId):
        """Delete an ABAC policy"""
        self.service.delete_policy(applicationId, policyId)
        resp.status = 204


class Evaluate(ServiceResource[AbacService]):
    access = {"POST": READ}
    docs = {
        "POST": op(body=schemas.EVALUATE, response=schemas.EVALUATION, errors=_BODY_ERRORS),
    }

    def on_post(self, req, resp, applicationId):
        """Dry-run a check with its reasons

        The POST check's answer from fresh data, plus an optional inline policy evaluated as if active, with
        RBAC's answer, each covering policy and the value of every condition node. Stores nothing."""
        respond(resp, self.service.evaluate(applicationId, schemas.clean_evaluate(read_json(req), self.service.limits)))


class UserAttributes(ServiceResource[AbacService]):
    access = {"GET": READ}
    docs = {"GET": op(response=schemas.ATTRIBUTES, errors=_USER_ERRORS)}

    def on_get(self, req, resp, applicationId, userId):
        """A user's ABAC attributes"""
        respond(resp, self.service.attributes(applicationId, userId))


class UserAttribute(ServiceResource[AbacService]):
    access = {"PUT": MANAGE, "DELETE": MANAGE}
    docs = {
        "PUT": op(body=schemas.SET_ATTRIBUTE, response=schemas.ATTRIBUTE,
                  path={"key": schemas.ATTRIBUTE_KEY_SCHEMA},
                  errors=[ValidationFailed, *_USER_ERRORS, AttributeLimitReached, AttributeKeyConflict]),
        "DELETE": op(ok=204, path={"key": schemas.ATTRIBUTE_KEY_SCHEMA},
                     errors=[ValidationFailed, *_USER_ERRORS, AttributeNotFound]),
    }

    def on_put(self, req, resp, applicationId, userId, key):
        """Set a user's ABAC attribute

        {key} matches ^[a-zA-Z0-9_.-]{1,64}$; at most 50 keys per user."""
        key = schemas.attribute_key(key)
        value = schemas.attribute_value(read_json(req))
        respond(resp, self.service.set_attribute(applicationId, userId, key, value))
        _answer_revision(resp, self.service)

    def on_delete(self, req, resp, applicationId, userId, key):
        """Delete a user's ABAC attribute"""
        self.service.delete_attribute(applicationId, userId, schemas.attribute_key(key))
        resp.status = 204
