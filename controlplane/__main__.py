"""``python -m controlplane COMMAND``: the control plane's commands besides the web server.

Each command is one row of ``COMMANDS``: its name, a one-line help, a function that adds
its arguments, and the function that runs it with the parsed arguments and the
configuration (read from the environment, as the server reads it).

    python -m controlplane keys rotate
    python -m controlplane worker [--metrics-port 9102]
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from shared import tracing
from shared.config import Config, ConfigError
from shared.logs import configure_from

log = logging.getLogger("iamgate.commands")


def _keys_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["rotate"], help="rotate: sign new tokens with a new key")


def _keys(args, config: Config) -> int:
    """Rotate the RS256 signing key (docs/oidc.md, "Rotating the signing key"): a new
    key becomes active for every replica within a minute (their key cache), and the old
    public key stays in the JWKS until every token it signed has expired."""
    from controlplane.keys import SigningKeys
    from controlplane.store import Store
    from shared.crypto import SecretBox
    from shared.timeutil import utcnow

    if config.is_memory_store:
        print("keys rotate: IAMGATE_MONGODB_URI is memory://, whose keys live only inside the server process; "
              "point it at the server's MongoDB.", file=sys.stderr)
        return 2
    keys = SigningKeys(Store(config.mongodb_uri), SecretBox(config.secret_key), utcnow,
                       max_token_lifetime=max(config.access_token_ttl, config.oidc_access_token_ttl))
    old_kid = keys.ensure_active()
    new_kid, retire_at = keys.rotate()
    print(f"active signing key: {new_kid}")
    print(f"previous key {old_kid} stays in the JWKS until {retire_at.isoformat()}")
    return 0


def _worker_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--metrics-port", type=int, default=0,
                        help="serve Prometheus metrics on this port (default: none)")
    parser.add_argument("--metrics-host", default="127.0.0.1")


def _worker(args, config: Config) -> int:
    """The webhook worker (ARCHITECTURE.md "Components"): follows the change log, creates
    delivery records and sends due deliveries until SIGTERM or SIGINT.  Run as many as
    needed against one MongoDB: deliveries are leased, never sent twice by two workers."""
    from controlplane.services import build_services

    if config.is_memory_store:
        log.warning("IAMGATE_MONGODB_URI is memory://: this worker sees only its own empty store; "
                    "the control plane delivers in-process on memory://.")
    if config.webhook_allow_private_targets:
        log.warning("IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS is true: webhooks may target http:// URLs and "
                    "loopback or private addresses. For development only.")
    tracing.start(config, tracing.WORKER)  # before the store opens: its listener
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


# name -> (help, add_arguments, run)
COMMANDS = {
    "keys": ("manage the token signing keys", _keys_arguments, _keys),
    "worker": ("dispatch and send webhook deliveries", _worker_arguments, _worker),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controlplane", description="iamgate control-plane commands")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (help_text, add_arguments, _) in COMMANDS.items():
        add_arguments(commands.add_parser(name, help=help_text))
    args = parser.parse_args(argv)
    try:
        config = Config.from_env()
    except ConfigError as exc:
        print(f"iamgate: configuration error: {exc}", file=sys.stderr)
        return 2
    configure_from(config)
    return COMMANDS[args.command][2](args, config)


if __name__ == "__main__":
    sys.exit(main())
