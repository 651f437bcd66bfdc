"""Gunicorn entry point: ``gunicorn 'decision.wsgi:create()'``."""
from __future__ import annotations

import sys

from shared.config import Config, ConfigError
from shared.logs import configure


def create():
    try:
        config = Config.from_env()
    except ConfigError as exc:
        print(f"iamgate-decision: configuration error: {exc}", file=sys.stderr)
        sys.exit(2)
    configure(config.log_level)
    from decision.app import create_app

    return create_app(config)
