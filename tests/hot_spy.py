"""``Spy``: wraps an app's ``hot_check`` (the control plane's and the decision service's
WSGI-level hot paths) and records, per call, whether the hot path answered."""
from __future__ import annotations


class Spy:
    """Wraps ``app.hot_check`` and records, per call, whether the hot path answered."""

    def __init__(self, app):
        assert app.hot_check is not None
        self.inner = app.hot_check
        self.answers: list[bool] = []
        app.hot_check = self

    def __call__(self, environ, start_response):
        answer = self.inner(environ, start_response)
        self.answers.append(answer is not None)
        return answer
