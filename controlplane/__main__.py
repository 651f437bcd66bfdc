"""``python -m controlplane COMMAND``: the control plane's commands besides the web server.

- ``worker``: the webhook worker (ARCHITECTURE.md "Components"): follows the change log,
  creates delivery records, and sends due deliveries, until SIGTERM or SIGINT.  Run as
  many as needed against one MongoDB: deliveries are leased, never sent twice by two
  workers.

Each command is one ``add_parser`` and one function; more join the same way.
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from shared.config import Config, ConfigError
from shared.logs import configure

log = logging.getLogger("iamgate.worker")


def worker(config: Config, args) -> int:
    """Dispatch and deliver webhooks until told to stop."""
    from controlplane.services import build_services

    if config.is_memory_store:
        log.warning("IAMGATE_MONGODB_URI is memory://: this worker sees only its own empty store; "
                    "the control plane delivers in-process on memory://.")
    if config.webhook_allow_private_targets:
        log.warning("IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS is true: webhooks may target http:// URLs and "
                    "loopback or private addresses. For development only.")
    services = build_services(config)
    services.store.ensure_indexes()
    if args.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(args.metrics_port, addr=args.metrics_host, registry=services.metrics.registry)
    stop = threading.Event()

    def shutdown(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    services.webhook_dispatcher.attach(services.tailer)
    services.webhook_worker.start()
    services.tailer.start()
    log.info("webhook worker started")
    while not stop.wait(0.5):
        pass
    services.webhook_worker.stop()
    services.tailer.stop()
    log.info("webhook worker stopped")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controlplane", description="iamgate control-plane commands")
    commands = parser.add_subparsers(dest="command", required=True)
    run_worker = commands.add_parser("worker", help="dispatch and send webhook deliveries")
    run_worker.add_argument("--metrics-port", type=int, default=0,
                            help="serve Prometheus metrics on this port (default: none)")
    run_worker.add_argument("--metrics-host", default="127.0.0.1")
    run_worker.set_defaults(run=worker)
    args = parser.parse_args(argv)
    try:
        config = Config.from_env()
    except ConfigError as exc:
        print(f"iamgate: configuration error: {exc}", file=sys.stderr)
        return 2
    configure(config.log_level)
    return args.run(config, args)


if __name__ == "__main__":
    sys.exit(main())
