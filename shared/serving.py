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
import shutil
import sys
import tempfile

from gunicorn.glogging import Logger

from shared.config import MULTIPROCESS_DIR_VARIABLE, Config, ConfigError
from shared.httpserver import KEEPALIVE_SECONDS, freeze_start_up

CONTROL_PLANE = "controlplane"
DECISION = "decision"
# Each service's gunicorn worker: gevent, with requests parsed by httptools
# (shared/httpserver.py; not gunicorn's own parser: benchmarks/NOTES.md).
CONTROL_PLANE_WORKER_CLASS = "shared.httpworker.ControlPlaneWorker"
DECISION_WORKER_CLASS = "shared.httpworker.DecisionWorker"

log = logging.getLogger("iamgate.serving")


def _prefix(service: str) -> str:
    return "iamgate" if service == CONTROL_PLANE else "iamgate-decision"


def load_config(service: str) -> Config:
    """The validated configuration, or exit 2 with one line on stderr."""
    try:
        config = Config.from_env()
        if service == DECISION:
            config.check_decision_credential()
        else:
            config.check_embedded_store()
    except ConfigError as exc:
        print(f"{_prefix(service)}: configuration error: {exc}", file=sys.stderr, flush=True)
        sys.exit(2)
    return config


class MetricsDirectory:
    """prometheus_client's multiprocess mode, so that ``/metrics`` answers for every worker
    of the service rather than the one the scrape reached.

    Switched on in the master before the first fork, and only with more than one worker
    (one worker keeps its plain in-process registry, the cheaper one): the directory,
    ``IAMGATE_METRICS_DIR/<service>`` or without that setting a directory of the system's
    temp dir removed at exit, is emptied of the files of an earlier run and named in
    ``PROMETHEUS_MULTIPROC_DIR``, which the workers inherit and prometheus_client reads
    when it is first imported -- after the fork: the master never imports it before.
    Each worker writes its figures to files named by its pid; a scrape merges them all.
    When a worker ends, its counters stay in the sum and its ``live*`` gauges are dropped
    (``mark_process_dead``). docs/deployment.md, "Metrics of several workers".
    """

    def __init__(self, service: str, configured: str):
        self._service = service
        self._configured = configured
        self.path: str | None = None
        self._owned = False  # a temp directory of ours, removed at exit

    def start(self, server) -> None:
        """``on_starting``: decide, prepare the directory, tell the workers-to-be."""
        if server.num_workers <= 1:
            # One worker: one registry in that process.  An inherited value would put
            # prometheus_client in multiprocess mode where nothing merges the files.
            os.environ.pop(MULTIPROCESS_DIR_VARIABLE, None)
            return
        if self._configured:
            path = os.path.join(self._configured, self._service)
        else:
            path = os.path.join(tempfile.gettempdir(), f"iamgate-metrics-{self._service}-{os.getpid()}")
            self._owned = True
        try:
            os.makedirs(path, exist_ok=True)
            # Files of an earlier run (a restarted container keeps its emptyDir) would
            # add their counts to this run's and show gauges of workers long gone.
            for name in os.listdir(path):
                if name.endswith(".db"):
                    os.unlink(os.path.join(path, name))
        except OSError as exc:
            print(f"{_prefix(self._service)}: configuration error: IAMGATE_METRICS_DIR: cannot use {path} for "
                  f"the metrics of {server.num_workers} workers: {exc.strerror or exc}", file=sys.stderr, flush=True)
            sys.exit(2)
        self.path = path
        # prometheus_client's own switch, read by the workers (shared/config.py reads it
        # back for the apps); writing the environment here is the library's contract.
        os.environ[MULTIPROCESS_DIR_VARIABLE] = path

    def worker_exited(self, pid: int) -> None:
        """``child_exit``: a dead worker's live gauges leave the merge; its counters stay."""
        if self.path is None:
            return
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid, self.path)

    def stop(self) -> None:
        """``on_exit``: a temp directory of ours goes; a configured one is emptied at the next start."""
        if self.path is not None and self._owned:
            shutil.rmtree(self.path, ignore_errors=True)


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
            "gunicorn.error": {"level": level, "handlers": ["stderr"], "propagate": False,
                               "qualname": "gunicorn.error"},
            "gunicorn.access": {"level": "WARNING", "handlers": ["stderr"], "propagate": False,
                                "qualname": "gunicorn.access"},
        },
    }


_metrics_directories: dict[str, MetricsDirectory] = {}


def settings(service: str) -> dict:
    """The module-level names of a gunicorn config module for ``service``."""
    config = load_config(service)
    if service == CONTROL_PLANE:
        host, port, workers, worker_class = config.host, config.port, config.workers, CONTROL_PLANE_WORKER_CLASS
        if config.is_memory_store:
            workers = 1
    else:
        host, port, workers = config.decision_host, config.decision_port, config.decision_workers
        worker_class = DECISION_WORKER_CLASS

    def one_worker_on_memory(server):
        if service == CONTROL_PLANE and config.is_memory_store:
            # memory:// lives inside one process: a second worker would be a second,
            # separate database (one email registered twice, tokens unknown to half the
            # requests).  Whatever IAMGATE_WORKERS or --workers say, run one.
            asked = max(server.num_workers, config.workers)
            server.num_workers = 1
            server.cfg.set("workers", 1)
            server.log.warning("IAMGATE_MONGODB_URI is memory://: running 1 worker%s; the embedded store lives "
                               "inside one process and nothing persists", f" (not {asked})" if asked > 1 else "")

    # gunicorn runs this again on SIGHUP (a new config module): the master keeps the one
    # directory it prepared at start, so later workers' exits are still marked.
    metrics_directory = _metrics_directories.setdefault(service, MetricsDirectory(service, config.metrics_dir))

    def on_starting(server):
        one_worker_on_memory(server)
        metrics_directory.start(server)  # after the memory:// rule: it counts the workers

    def child_exit(_server, worker):
        metrics_directory.worker_exited(worker.pid)

    def on_exit(_server):
        metrics_directory.stop()

    def post_worker_init(worker):
        worker.header_timeout = config.header_timeout  # shared/httpworker.py
        freeze_start_up()  # the app is loaded; the worker serves next

    values = {
        "bind": [f"{host}:{port}"],
        "workers": workers,
        "worker_class": worker_class,
        # The connection cap of each worker: its gevent pool, and the ConnectionSlots
        # that close idle connections to keep a slot free (shared/httpserver.py).
        "worker_connections": config.max_connections,
        "timeout": 60,
        "graceful_timeout": 20,
        "keepalive": KEEPALIVE_SECONDS,
        # gunicorn >= 25.1 opens a control socket under $HOME by default: nothing here
        # uses it, and a read-only root filesystem (the chart) would log errors for it.
        "control_socket_disable": True,
        "loglevel": config.log_level.lower(),
        "logconfig_dict": logconfig_dict(config.log_level),
        "logger_class": "shared.serving.JsonLinesLogger",
        "on_starting": on_starting,
        "child_exit": child_exit,
        "on_exit": on_exit,
        "post_worker_init": post_worker_init,
    }
    # Worker heartbeat files on tmpfs: never a disk write, and writable under a
    # read-only root filesystem (also in containers, where /dev/shm is a tmpfs).
    if os.path.isdir("/dev/shm"):
        values["worker_tmp_dir"] = "/dev/shm"
    return values
