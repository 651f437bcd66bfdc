"""The decision service's Falcon app (the check endpoints arrive with the roles issue)."""
from __future__ import annotations

import falcon

from shared.config import Config
from shared.http import RequestIdMiddleware, install_error_handlers, json_handlers


class Health:
    def on_get(self, req, resp):
        resp.media = {"status": "ok"}


def create_app(config: Config | None = None):
    config = config or Config.from_env()
    app = falcon.App(middleware=[RequestIdMiddleware()])
    app.resp_options.media_handlers.update(json_handlers())
    install_error_handlers(app)
    app.add_route("/healthz", Health())
    return app
