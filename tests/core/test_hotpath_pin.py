"""controlplane/hotpath.py answers the plain GET check by repeating, at the WSGI level, what
the Falcon app's middleware and ``authz.resources.Check.on_get`` do. tests/core/test_hotpath.py
proves the two equal for the code as it is; this pin makes a change to either side fail
loudly, so whoever adds a middleware or edits a mirrored method is sent to the hot path.

The pin is the middleware classes in order (tracing off: traced, the hot path is not used)
and a digest of the source of ``Check.on_get``, its GET gate and every ``process_*`` method
of those middlewares.
"""
from __future__ import annotations

import hashlib
import inspect

import falcon

from controlplane.app import create_app
from controlplane.authz.resources import Check
from tests.conftest import make_config

MIDDLEWARE = [
    "shared.http.RequestIdMiddleware",
    "shared.http.RequestLogMiddleware",
    "shared.hotmetrics.MetricsMiddleware",
    "controlplane.app.RevisionMiddleware",
    "shared.http.JsonBodyMiddleware",
    "controlplane.ratelimit.PasswordWorkLimit",
    "controlplane.auth.AuthMiddleware",
    # Sets the audit context that records written during the request read; the check
    # writes none: the hot path has nothing of it to mirror.
    "controlplane.audit.context.AuditMiddleware",
    # Acts only on resources with a ``cors`` attribute (the OIDC endpoints), which the
    # check's is not: the hot path has nothing of it to mirror.
    "controlplane.oidc.cors.CorsMiddleware",
]
MIRRORED_DIGEST = "2adc14954ab2b0f8"

_HOOKS = ("process_request", "process_resource", "process_response")


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def mirrored(middleware: list, check: type) -> tuple[list[str], str]:
    """(the middleware classes, one digest of the mirrored sources)."""
    classes = [type(component) for component in middleware]
    digest = hashlib.sha256()
    for name, method in [("on_get", check.on_get)] + [
            (f"{_name(cls)}.{hook}", getattr(cls, hook)) for cls in classes for hook in _HOOKS if hasattr(cls, hook)]:
        digest.update(f"{name}\n{inspect.getsource(method)}".encode())
    digest.update(repr(check.access["GET"]).encode())
    return [_name(cls) for cls in classes], digest.hexdigest()[:16]


def pin_mismatch(middleware: list, check: type) -> str | None:
    """None when the app still is what controlplane/hotpath.py mirrors; else what to do."""
    names, digest = mirrored(middleware, check)
    if names == MIDDLEWARE and digest == MIRRORED_DIGEST:
        return None
    return ("controlplane/hotpath.py mirrors this: update it and tests/core/test_hotpath.py, then update the pin "
            f"in tests/core/test_hotpath_pin.py: MIDDLEWARE = {names!r}, MIRRORED_DIGEST = {digest!r}")


def _middleware() -> list:
    app = create_app(make_config(), start_background=False)
    return list(app._unprepared_middleware)


def test_the_hot_path_mirrors_the_app_as_pinned():
    mismatch = pin_mismatch(_middleware(), Check)
    assert mismatch is None, mismatch


def test_a_new_middleware_breaks_the_pin():
    class Extra:
        def process_request(self, req, resp):
            pass

    assert "controlplane/hotpath.py" in pin_mismatch(_middleware() + [Extra()], Check)
    assert "controlplane/hotpath.py" in pin_mismatch(_middleware()[:-1], Check)


def test_a_changed_check_breaks_the_pin():
    class Changed(Check):
        def on_get(self, req, resp, applicationId):
            resp.status = falcon.HTTP_204

    assert "controlplane/hotpath.py" in pin_mismatch(_middleware(), Changed)
