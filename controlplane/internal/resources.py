"""The internal API decision services read (the control plane <-> decision service
contract): grants, policies, API key digests and the change stream.

Access INTERNAL: the internal service token, or an API key of the application holding
``decision:sync`` (a tenant's sidecar: the narrowest permission that lets a decision
service work); the all-applications stream takes only the token.  ``authz:check`` alone
no longer opens these routes: it lets a key ask yes/no questions, not read every user's
assignments and attributes and the other keys' permission lists.  API keys go through
the per-credential throttle here as on V1 routes; streams are capped per key and
re-check their key at least every heartbeat.
Every JSON answer carries ``seq``, the change-log head read before its data.
"""
from __future__ import annotations

import falcon

from controlplane.auth import INTERNAL, PUBLIC, Authenticator, bearer_token, is_api_key
from controlplane.internal.service import DECISION_PERMISSION, DecisionData, StreamAccess, TooManyStreams
from controlplane.openapi import op
from controlplane.resource import Resource
from shared.errors import ApplicationNotFound, PermissionMissing, RateLimited, Unauthorized, ValidationFailed
from shared.ids import is_uuid
from shared.invalidation import MAX_PATCHED_POLICIES
from shared.rbac import matches

_ERRORS = [PermissionMissing, ApplicationNotFound, RateLimited]
_SEQ = {"type": "integer", "description": "change-log head read before the data"}


def require_decision_credential(req, _resp, _resource, _params):
    """An API key reads grants, policies, key digests and changes only with ``decision:sync``."""
    principal = req.context.principal
    if principal.kind == "api_key" and not any(matches(p, DECISION_PERMISSION) for p in principal.permissions):
        raise PermissionMissing(DECISION_PERMISSION)


def since_param(req) -> int | None:
    """``?since=SEQ``, else the SSE ``Last-Event-ID`` a reconnecting EventSource sends."""
    raw = req.get_param("since")
    if raw is None or raw == "":
        raw = req.get_header("Last-Event-ID")
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValidationFailed({"since": "must be a non-negative integer"})
    return value


class Grants(Resource):
    access = {"GET": INTERNAL}
    docs = {"GET": op(wrapped=False, response={
        "type": "object", "properties": {"seq": _SEQ, "grants": {
            "type": "object", "description": "shared.rbac.Grants.to_json(): user_id, status "
            "(active|suspended|deleted|unknown), assignments [{role_id, role_name, permissions, scope, "
            "expires_at}], attributes, seq; token_stamp (milliseconds), which the user's access tokens must "
            "carry as tnb, once a password reset or a hand-over took the account back"}}}, errors=_ERRORS)}

    def __init__(self, decision_data: DecisionData):
        self.decision_data = decision_data

    @falcon.before(require_decision_credential)
    def on_get(self, req, resp, applicationId, userId):
        """A user's grants for a decision service"""
        grants = self.decision_data.grants(applicationId, userId)
        resp.media = {"seq": grants.seq, "grants": grants.to_json()}
        resp.cache_control = ["no-store"]


class Policies(Resource):
    access = {"GET": INTERNAL}
    docs = {"GET": op(wrapped=False, query={
        "ids": ({"type": "string"}, f"only these policies (comma-separated ids, at most {MAX_PATCHED_POLICIES}): "
                "those of them that are active; what a decision service patches into its cached set after "
                "a change frame's policy_ids")},
        response={"type": "object", "properties": {"seq": _SEQ, "policies": {"type": "array", "items": {
            "type": "object", "description": "shared.abac.Policy.to_json()"}}}},
        errors=[ValidationFailed, *_ERRORS])}

    def __init__(self, decision_data: DecisionData):
        self.decision_data = decision_data

    @falcon.before(require_decision_credential)
    def on_get(self, req, resp, applicationId):
        """The application's active ABAC policies"""
        seq, policies = self.decision_data.policies(applicationId, policy_ids_param(req))
        resp.media = {"seq": seq, "policies": [p.to_json() for p in policies]}
        resp.cache_control = ["no-store"]


def policy_ids_param(req) -> list[str] | None:
    """``?ids=ID,ID,...``: None when absent (every active policy)."""
    raw = req.get_param("ids")
    if raw is None:
        return None
    ids = list(dict.fromkeys(raw.split(",")))
    if not all(is_uuid(policy_id) for policy_id in ids) or len(ids) > MAX_PATCHED_POLICIES:
        raise ValidationFailed({"ids": f"must be at most {MAX_PATCHED_POLICIES} comma-separated policy ids"})
    return ids


class ApiKeys(Resource):
    access = {"GET": INTERNAL}
    docs = {"GET": op(wrapped=False, response={
        "type": "object", "properties": {"seq": _SEQ, "keys": {"type": "array", "items": {
            "type": "object", "properties": {"id": {"type": "string"}, "key_digest": {
                "type": "string", "description": "SHA-256 hex of the key"},
                "permissions": {"type": "array", "items": {"type": "string"}}}}}}}, errors=_ERRORS)}

    def __init__(self, decision_data: DecisionData):
        self.decision_data = decision_data

    @falcon.before(require_decision_credential)
    def on_get(self, req, resp, applicationId):
        """Digests of the application's active API keys"""
        seq, keys = self.decision_data.api_key_digests(applicationId)
        resp.media = {"seq": seq, "keys": keys}
        resp.cache_control = ["no-store"]


_STREAM_DOC = ("Server-sent events: hello {seq, epoch} (the head and the id of the change log, which "
               "changes only when the log starts over), then change frames after since (replayed, then "
               "live), reset when since cannot be replayed, heartbeat when idle.")


class _Stream(Resource):
    def __init__(self, feed, stream_access: StreamAccess):
        self.feed = feed
        self.stream_access = stream_access

    def _open(self, req, resp, app_id):
        since = since_param(req)
        guard = self.stream_access.open(bearer_token(req), req.context.principal, app_id)
        resp.content_type = "text/event-stream"
        resp.cache_control = ["no-cache"]
        resp.set_header("X-Accel-Buffering", "no")  # proxies must pass frames on at once
        resp.stream = self.feed.frames(app_id, since, guard)


class ApplicationChanges(_Stream):
    access = {"GET": INTERNAL}
    docs = {"GET": op("Change stream of one application", description=_STREAM_DOC, query={
        "since": ({"type": "integer", "minimum": 0}, "resume after this seq (or Last-Event-ID)")},
        errors=[ValidationFailed, TooManyStreams, *_ERRORS])}

    @falcon.before(require_decision_credential)
    def on_get(self, req, resp, applicationId):
        self._open(req, resp, applicationId)


class AllChanges(_Stream):
    access = {"GET": INTERNAL}
    docs = {"GET": op("Change stream of every application (internal service token only)",
                      description=_STREAM_DOC, query={
                          "since": ({"type": "integer", "minimum": 0}, "resume after this seq (or Last-Event-ID)")},
                      errors=[ValidationFailed])}

    def on_get(self, req, resp):
        self._open(req, resp, None)


class WhoAmI(Resource):
    """Which credential is this?  Lets a tenant's decision service, given only its API
    key, learn the application it serves (and its own permissions)."""

    access = {"GET": PUBLIC}
    docs = {"GET": op(wrapped=False, response={
        "type": "object", "properties": {
            "kind": {"type": "string", "enum": ["internal", "api_key"]},
            "application_id": {"type": ["string", "null"]},
            "key_id": {"type": ["string", "null"]},
            "permissions": {"type": "array", "items": {"type": "string"}}}},
        errors=[Unauthorized])}

    def __init__(self, authenticator: Authenticator):
        self.authenticator = authenticator

    def on_get(self, req, resp):
        """Describe the presented internal token or API key"""
        token = bearer_token(req)
        if token is None:
            raise Unauthorized("A bearer credential is required.")
        if self.authenticator.is_internal_token(token):
            resp.media = {"kind": "internal", "application_id": None, "key_id": None, "permissions": []}
        elif is_api_key(token):
            key = self.authenticator.api_key(token, None)
            resp.media = {"kind": "api_key", "application_id": key.app_id, "key_id": key.key_id,
                          "permissions": list(key.permissions)}
        else:
            raise Unauthorized("The internal service token or an API key is required.")
        resp.cache_control = ["no-store"]
