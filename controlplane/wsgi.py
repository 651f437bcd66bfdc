"""Gunicorn entry point: ``gunicorn -c python:controlplane.gunicorn_conf 'controlplane.wsgi:create()'``.

The config module validates the settings in gunicorn's master; the check here covers
``create()`` called any other way.
"""
from __future__ import annotations

import logging
import sys

from shared.config import Config, ConfigError
from shared.logs import configure_from


def create(store=None):
    """The app for one gunicorn worker.  ``store`` is for start-up tests (a store that
    refuses its first attempts, standing in for a MongoDB that starts late)."""
    try:
        config = Config.from_env()
        config.check_embedded_store()
    except ConfigError as exc:
        print(f"iamgate: configuration error: {exc}", file=sys.stderr)
        sys.exit(2)
    configure_from(config)
    log = logging.getLogger("iamgate.controlplane")
    if config.secret_key_generated:
        log.warning("IAMGATE_SECRET_KEY is not set: generated a random one; secrets stored now "
                    "cannot be decrypted after a restart. Set it in production.")
    if config.is_memory_store:
        log.warning("IAMGATE_MONGODB_URI is memory://: data lives in this process only and nothing persists.")
    if config.webhook_allow_private_targets:
        log.warning("IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS is true: webhooks may target http:// URLs and "
                    "loopback or private addresses. For development only.")
    from controlplane.app import create_app

    return create_app(config, store=store)
