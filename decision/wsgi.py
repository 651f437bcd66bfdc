"""Gunicorn entry point: ``gunicorn 'decision.wsgi:create()'``.

Gunicorn calls this in each worker after gevent has patched the standard library, so
every worker gets its own cache and its own change-stream greenlet. A configuration
that cannot work stops start-up with one line naming the variable.
"""
from __future__ import annotations

import logging
import sys

from shared.config import Config, ConfigError
from shared.logs import configure_from


def create():
    try:
        config = Config.from_env()
        from decision.app import credential

        _, single_application = credential(config)
    except ConfigError as exc:
        print(f"iamgate-decision: configuration error: {exc}", file=sys.stderr)
        sys.exit(2)
    configure_from(config)
    logging.getLogger("iamgate.decision").info("decision service starting", extra={
        "control_plane_url": config.control_plane_url,
        "serves": "the API key's application" if single_application else "every application",
    })
    from decision.app import create_app

    return create_app(config)
