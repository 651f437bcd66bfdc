"""The control plane's plain cached check, answered without Falcon's request and response
objects (docs/performance.md, "Control-plane request cost").

``GET /api/v1/applications/{applicationId}/authz/check?user_id=...&permission=...`` (spec,
"Authorization checks") is what a tenant's service sends on every request it authorizes.
Through Falcon, its routing, request and response objects and seven middlewares make the
cached check cost 30% more instructions. ``HotCheck`` answers the plain form at the WSGI level, as
``decision.hotpath.HotCheck`` does for the decision service, and with the very calls the
Falcon route makes, in the same order, so there is one implementation of every rule:

1. the request id (``shared.request_ids.resolve_request_id``) and the revision header's reset;
2. the application named by the path (``Authenticator.application``: 404), the bearer
   credential (``controlplane.auth.required_token``: 401), then
   ``AuthMiddleware.admit``: the API key or end-user token (401; an API key's
   ``last_used_at`` written at most once a minute), the route's permission gate (the
   ``Check`` resource's own ``access``: 403) and the general throttle's count (429);
3. ``AuthzService.check``, written as ``shared.http.dumps`` writes its dict;
4. a domain error as the envelope Falcon's handler renders (``domain_error_answer``), a
   store that does not answer as ``controlplane.store.unavailable`` makes it (as
   ``controlplane.app.store_unreachable`` does), anything else 500 (``unexpected_error_answer``);
5. the request-log line (``shared.logs.RequestLog``) and the metrics (``MetricsMiddleware.record``).

"Plain" is ``shared.checks.plain_get_check``, the decision service's rule: exactly
``user_id`` and ``permission``, non-empty, nothing percent-encoded, values the route's
schema takes as they are. Anything else (another method or path, a trailing slash,
``scope`` or ``min_revision``, an extra or encoded parameter, an invalid permission)
returns None before anything is looked up or counted, and Falcon answers it.

tests/core/test_hotpath_pin.py pins the middleware list and the methods mirrored here: a
change to either fails there, pointing back to this module.
"""
from __future__ import annotations

import time

from controlplane import events
from controlplane.auth import AuthMiddleware, required_token
from controlplane.store import UNREACHABLE, unavailable
from shared.checks import check_text, plain_get_check
from shared.errors import DomainError
from shared.http import MEDIA_JSON, domain_error_answer, unexpected_error_answer
from shared.httpserver import status_line
from shared.request_ids import resolve_request_id


class HotCheck:
    """``hot_check(environ, start_response)``: the answer's body for the plain check, else
    None (nothing was done: Falcon answers)."""

    def __init__(self, *, route: str, access, auth: AuthMiddleware, authz, metrics, log_request):
        self._route = route            # the Falcon route's URI template (metrics and log)
        self._access = access          # the route's GET gate (``Check.access["GET"]``)
        self._auth = auth
        self._authz = authz            # the authz area's AuthzService (given by app.py: no area imports here)
        self._metrics = metrics        # the app's MetricsMiddleware
        self._log_request = log_request

    def __call__(self, environ: dict, start_response) -> list[bytes] | None:
        if environ["REQUEST_METHOD"] != "GET":
            return None
        plain = plain_get_check(environ)
        if plain is None:
            return None
        app_id, user_id, permission = plain
        started = time.perf_counter()
        request_id = resolve_request_id(environ.get("HTTP_X_REQUEST_ID"))
        events.reset_revision()
        headers = [("x-request-id", request_id), ("content-type", MEDIA_JSON)]
        try:
            self._auth.authenticator.application(app_id)
            token = required_token(environ.get("HTTP_AUTHORIZATION"))
            self._auth.admit(token, app_id, self._access, {"applicationId": app_id})
            answer = self._authz.check(app_id, {"user_id": user_id, "permission": permission})
            status, text = 200, check_text(answer["permission"], answer["allowed"], answer["cached"])
        except (DomainError, UNREACHABLE) as error:
            if not isinstance(error, DomainError):
                error = unavailable(error)
            status, text, extra = domain_error_answer(error, request_id)
            headers += [(name.lower(), value) for name, value in extra.items()]
        except Exception:
            status, text = unexpected_error_answer(request_id)
        revision = events.current_revision()
        if revision is not None:
            headers.append(("x-iamgate-revision", str(revision)))
        body = text.encode()
        headers.append(("content-length", str(len(body))))
        # Falcon's ``req.remote_addr`` when the server gave no REMOTE_ADDR: the same line both ways.
        self._log_request(request_id, "GET", self._route, status, started, environ.get("REMOTE_ADDR", "127.0.0.1"),
                          environ.get("HTTP_X_FORWARDED_FOR"), app_id)
        self._metrics.record("GET", self._route, status, started)
        start_response(status_line(status), headers)
        return [body]
