"""How both services run under gunicorn: the settings of their gunicorn config modules.

``gunicorn -c python:controlplane.gunicorn_conf 'controlplane.wsgi:create()'`` (and the
same with ``decision``) is the one way to start them: ``make run``, the image and the
Helm chart all use it.  The config module is imported by gunicorn's *master* before it
forks, so a bad setting stops the master with exit code 2 and one line naming the
variable (docs/configuration.md) instead of a worker that fails to boot and is
restarted forever.  Settings given on gunicorn's command line win over these.

Nothing here imports the applications: the master must not import ``ssl``, ``requests``
or ``threading`` users before the gevent workers patch them.
"""
from __future__ import annotations

import logging
import os
import sys

from gunicorn.glogging import Logger

from shared.config import Config, ConfigError

CONTROL_PLANE = "controlplane"
DECISION = "decision"
# The decision service's own worker: gevent, with requests parsed by httptools
# (decision/server.py).
DECISION_WORKER_CLASS = "decision.server.DecisionWorker"

log = logging.getLogger("iamgate.serving")


def load_config(service: str) -> Config:
    """The validated configuration, or exit 2 with one line on stderr."""
    prefix = "iamgate" if service == CONTROL_PLANE else "iamgate-decision"
    try:
        config = Config.from_env()
        if service == DECISION:
            config.check_decision_credential()
    except ConfigError as exc:
        print(f"{prefix}: configuration error: {exc}", file=sys.stderr, flush=True)
        sys.exit(2)
    return config


class JsonLinesLogger(Logger):
    """gunicorn's logger with the access log kept off: each service logs its requests
    itself (the control plane) or not at all (the decision service's hot path), and a
    ``logconfig_dict`` would otherwise switch gunicorn's access log on."""

    def _compute_access_log_enabled(self):
        return False


def logconfig_dict(level: str) -> dict:
    """gunicorn's own loggers write JSON lines like the services (``shared.logs``)."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "shared.logs.JsonFormatter"}},
        "handlers": {"stderr": handler},
        "root": {"level": level, "handlers": ["stderr"]},
        "loggers": {
            "gunicorn.error": {"level": level, "handlers": ["stderr"], "propagate": False, "qualname": "gunicorn.error"},
            "gunicorn.access": {"level": "WARNING", "handlers": ["stderr"], "propagate": False,
                                "qualname": "gunicorn.access"},
        },
    }


def settings(service: str) -> dict:
    """The module-level names of a gunicorn config module for ``service``."""
    config = load_config(service)
    if service == CONTROL_PLANE:
        host, port, workers, worker_class = config.host, config.port, config.workers, "gevent"
        if config.is_memory_store:
            workers = 1
    else:
        host, port, workers = config.decision_host, config.decision_port, config.decision_workers
        worker_class = DECISION_WORKER_CLASS

    def on_starting(server):
        if service == CONTROL_PLANE and config.is_memory_store:
            # memory:// lives inside one process: a second worker would be a second,
            # separate database (one email registered twice, tokens unknown to half the
            # requests).  Whatever IAMGATE_WORKERS or --workers say, run one.
            asked = max(server.num_workers, config.workers)
            server.num_workers = 1
            server.cfg.set("workers", 1)
            server.log.warning("IAMGATE_MONGODB_URI is memory://: running 1 worker%s; the embedded store lives "
                               "inside one process and nothing persists", f" (not {asked})" if asked > 1 else "")

    values = {
        "bind": [f"{host}:{port}"],
        "workers": workers,
        "worker_class": worker_class,
        "worker_connections": 1000,
        "timeout": 60,
        "graceful_timeout": 20,
        "keepalive": 75,
        # gunicorn >= 25.1 opens a control socket under $HOME by default: nothing here
        # uses it, and a read-only root filesystem (the chart) would log errors for it.
        "control_socket_disable": True,
        "loglevel": config.log_level.lower(),
        "logconfig_dict": logconfig_dict(config.log_level),
        "logger_class": "shared.serving.JsonLinesLogger",
        "on_starting": on_starting,
    }
    # Worker heartbeat files on tmpfs: never a disk write, and writable under a
    # read-only root filesystem (also in containers, where /dev/shm is a tmpfs).
    if os.path.isdir("/dev/shm"):
        values["worker_tmp_dir"] = "/dev/shm"
    return values
