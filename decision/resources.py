"""HTTP in and out of the decision service.

The check routes are the control plane's, path for path and shape for shape (spec,
"Authorization checks"): responses are not wrapped in ``data``; ``cached`` says whether
the answer came from this service's cache; POST checks add ``abac_evaluated`` and
``policies_checked``; a bulk check answers ``{user_id, results}``.
"""
from __future__ import annotations

import falcon

from decision.hotpath import health_document, readiness_document
from decision.service import Lookup
from shared.checks import CHECK, CHECK_BULK, check_query
from shared.http import MetricsEndpoint, read_json


class _CheckResource:
    def __init__(self, service):
        self._service = service

    def _lookup(self, req, app_id: str):
        """The application's lookup, once the caller's credential is accepted."""
        lookup = self._service.begin(app_id, req.context.request_id)
        lookup.authenticate(req.get_header("Authorization"))
        return lookup

    def _answer_post(self, req, resp, app_id: str, schema, text) -> None:
        """A POST check: the credential first, then the body (``schema``); the answer is
        ``text(lookup, values)``: ``Lookup.abac_check_text`` or ``Lookup.bulk_text``."""
        lookup = self._lookup(req, app_id)
        values = schema.validate(read_json(req))
        resp.content_type = falcon.MEDIA_JSON
        resp.text = text(lookup, values)


class Check(_CheckResource):
    """``GET|POST /api/v1/applications/{applicationId}/authz/check``."""

    def on_get(self, req, resp, applicationId):
        lookup = self._lookup(req, applicationId)
        values = check_query(req)
        resp.content_type = falcon.MEDIA_JSON
        resp.text = lookup.check_text(values["user_id"], values["permission"], scope=values.get("scope"),
                                      min_revision=values.get("min_revision"))

    def on_post(self, req, resp, applicationId):
        self._answer_post(req, resp, applicationId, CHECK, Lookup.abac_check_text)


class CheckBulk(_CheckResource):
    """``POST /api/v1/applications/{applicationId}/authz/check-bulk`` (1 to 50 permissions)."""

    def on_post(self, req, resp, applicationId):
        self._answer_post(req, resp, applicationId, CHECK_BULK, Lookup.bulk_text)


class Health:
    """``GET /healthz``: the process answers."""

    def on_get(self, req, resp):
        resp.media = health_document()


class Ready:
    """``GET /readyz``: 200 only while the change stream is connected and alive (a frame
    within IAMGATE_DECISION_MAX_STALENESS): docs/decision-service.md, "The stream, staleness and
    failing closed"."""

    def __init__(self, follower):
        self._follower = follower

    def on_get(self, req, resp):
        ready = self._follower.healthy()
        resp.status = falcon.HTTP_200 if ready else falcon.HTTP_503
        resp.media = readiness_document(ready)


class Metrics(MetricsEndpoint):
    """``GET /metrics``: Prometheus text exposition of this worker (``shared.http.MetricsEndpoint``)."""
