"""HTTP in and out of the decision service.

The check routes are the control plane's, path for path and shape for shape (spec,
"Authorization checks"): responses are not wrapped in ``data``; ``cached`` says whether
the answer came from this service's cache; POST checks add ``abac_evaluated`` and
``policies_checked``; a bulk check answers ``{user_id, results}``.
"""
from __future__ import annotations

import falcon

from shared.rbac import resolve_scope
from shared.http import dumps, read_json

from shared.checks import CHECK, CHECK_BULK, check_query

_TRUE_FALSE = {True: "true", False: "false"}


def check_text(permission: str, allowed: bool, cached: bool) -> str:
    """A GET check's answer, written by hand (the hot path): a valid permission holds only
    [A-Za-z0-9_*:-], nothing JSON would escape."""
    return f'{{"allowed":{_TRUE_FALSE[allowed]},"permission":"{permission}","cached":{_TRUE_FALSE[cached]}}}'


def post_check_text(lookup, values: dict) -> str:
    """A validated POST check's answer (``shared.checks.CHECK``), for the Falcon route and
    the hot path alike: RBAC and the application's policies over resource and context."""
    permission = values["permission"]
    decisions, cached = lookup.decide(
        values["user_id"], (permission,), scope=_scope(values), min_revision=values.get("min_revision"),
        abac=True, resource=values.get("resource"), context=values.get("context"))
    decision = decisions[permission]
    return (f'{{"allowed":{_TRUE_FALSE[decision.allowed]},"permission":"{permission}",'
            f'"cached":{_TRUE_FALSE[cached]},"abac_evaluated":{_TRUE_FALSE[decision.abac_evaluated]},'
            f'"policies_checked":{int(decision.policies_checked)}}}')


def bulk_text(lookup, values: dict) -> str:
    """A validated bulk check's answer (``shared.checks.CHECK_BULK``), by hand as for GET
    checks: permission names need no escaping, the user id may."""
    decisions, _ = lookup.decide(
        values["user_id"], values["permissions"], scope=_scope(values), min_revision=values.get("min_revision"),
        abac=True, resource=values.get("resource"), context=values.get("context"))
    results = ",".join([f'"{permission}":{_TRUE_FALSE[decision.allowed]}'
                        for permission, decision in decisions.items()])
    return f'{{"user_id":{dumps(values["user_id"])},"results":{{{results}}}}}'


class _CheckResource:
    def __init__(self, service):
        self._service = service

    def _lookup(self, req, app_id: str):
        """The application's lookup, once the caller's credential is accepted."""
        lookup = self._service.begin(app_id)
        lookup.authenticate(req.get_header("Authorization"))
        return lookup

    def _answer_post(self, req, resp, app_id: str, schema, text) -> None:
        """A POST check: the credential first, then the body (``schema``); the answer is
        ``text(lookup, values)``, JSON written by hand."""
        lookup = self._lookup(req, app_id)
        values = schema.validate(read_json(req))
        resp.content_type = falcon.MEDIA_JSON
        resp.text = text(lookup, values)


class Check(_CheckResource):
    """``GET|POST /api/v1/applications/{applicationId}/authz/check``."""

    def on_get(self, req, resp, applicationId):
        lookup = self._lookup(req, applicationId)
        values = check_query(req)
        permission = values["permission"]
        decisions, cached = lookup.decide(values["user_id"], (permission,), scope=values.get("scope"),
                                          min_revision=values.get("min_revision"), abac=False)
        resp.content_type = falcon.MEDIA_JSON
        resp.text = check_text(permission, decisions[permission].allowed, cached)

    def on_post(self, req, resp, applicationId):
        self._answer_post(req, resp, applicationId, CHECK, post_check_text)


class CheckBulk(_CheckResource):
    """``POST /api/v1/applications/{applicationId}/authz/check-bulk`` (1 to 50 permissions)."""

    def on_post(self, req, resp, applicationId):
        self._answer_post(req, resp, applicationId, CHECK_BULK, bulk_text)


def _scope(values) -> str | None:
    return resolve_scope(values.get("scope"), values.get("context"))


class Health:
    """``GET /healthz``: the process answers."""

    def on_get(self, req, resp):
        resp.media = {"status": "ok"}


class Ready:
    """``GET /readyz``: 200 only while the change stream is connected and alive (a frame
    within IAMGATE_DECISION_MAX_STALENESS), as ARCHITECTURE.md's operations rule says."""

    def __init__(self, follower):
        self._follower = follower

    def on_get(self, req, resp):
        ready = self._follower.healthy()
        resp.status = falcon.HTTP_200 if ready else falcon.HTTP_503
        resp.media = {"status": "ready" if ready else "unavailable",
                      "stream": "connected" if ready else "disconnected"}


class Metrics:
    """``GET /metrics``: Prometheus text exposition of this worker."""

    def __init__(self, metrics):
        self._metrics = metrics

    def on_get(self, req, resp):
        body, content_type = self._metrics.render()
        resp.data = body
        resp.content_type = content_type
