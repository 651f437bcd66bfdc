"""``python -m controlplane COMMAND``: the control plane's commands besides the web server.

Each command is one row of ``COMMANDS``: its name, a one-line help, a function that adds
its arguments, and the function that runs it with the parsed arguments and the
configuration (read from the environment, as the server reads it).

    python -m controlplane keys rotate [--timeout 60]
    python -m controlplane worker
    python -m controlplane audit verify --application ID  (or --organization ID)

Both wait for a MongoDB that is not up yet, retrying with backoff as the web processes
do (``controlplane.startup``): the worker until it answers, ``keys rotate`` for at most
``--timeout`` seconds, then it stops with one line.
"""
from __future__ import annotations

import argparse
import logging
import signal
import socket
import sys
import threading

from shared import tracing
from shared.config import Config, ConfigError
from shared.logs import configure_from

log = logging.getLogger("iamgate.commands")


def _keys_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["rotate"], help="rotate: sign new tokens with a new key")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds to wait for MongoDB to answer before giving up (default: 60)")


def _keys(args, config: Config) -> int:
    """Rotate the RS256 signing key (docs/oidc.md, "Rotating the signing key"): a new
    key becomes active for every replica within a minute (their key cache), and the old
    public key stays in the JWKS until every token it signed has expired."""
    from pymongo.errors import PyMongoError

    from controlplane.keys import SigningKeys
    from controlplane.startup import with_backoff
    from controlplane.store import Store, one_line
    from shared.crypto import SecretBox
    from shared.timeutil import utcnow

    if config.is_memory_store:
        print("keys rotate: IAMGATE_MONGODB_URI is memory://, whose keys live only inside the server process; "
              "point it at the server's MongoDB.", file=sys.stderr)
        return 2
    keys = SigningKeys(Store(config.mongodb_uri), SecretBox(config.secret_key), utcnow,
                       max_token_lifetime=max(config.access_token_ttl, config.oidc_access_token_ttl))
    try:
        # Waiting is safe to repeat (ensure_active is idempotent); the rotation itself is
        # tried once, just after the store answered, so a retry cannot rotate twice.
        old_kid = with_backoff(keys.ensure_active, give_up_after=args.timeout)
        new_kid, retire_at = keys.rotate()
    except PyMongoError as exc:  # one line, not the driver's traceback
        print(f"keys rotate: no key was rotated: MongoDB failed or did not answer within {args.timeout:g} s: "
              f"{one_line(exc)}", file=sys.stderr)
        return 1
    print(f"active signing key: {new_kid}")
    print(f"previous key {old_kid} stays in the JWKS until {retire_at.isoformat()}")
    return 0


def _worker_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fd", type=int,
                        help="serve /healthz, /readyz and /metrics on this inherited listening socket "
                             "(make run's launcher) instead of binding IAMGATE_HOST:IAMGATE_WORKER_PORT")


def _worker(args, config: Config) -> int:
    """The webhook worker (docs/webhooks.md, "Where delivery runs"): follows the change log, creates
    delivery records and sends due deliveries until SIGTERM or SIGINT.  Run as many as
    needed against one MongoDB: deliveries are leased, never sent twice by two workers.

    It starts as the web process does: ``/healthz`` at once on its own port, the start-up
    step retried with backoff until MongoDB answers, then ``/readyz`` answers 200 while
    the change-log tailer keeps polling."""
    from controlplane.launcher import PortInUse, listen
    from controlplane.ops.routes import worker_app
    from controlplane.services import build_services
    from shared.httpserver import CONTROL_PLANE_SERVER, ThreadedServer

    if config.is_memory_store:
        log.warning("IAMGATE_MONGODB_URI is memory://: this worker sees only its own empty store; "
                    "the control plane delivers in-process on memory://.")
    if config.webhook_allow_private_targets:
        log.warning("IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS is true: webhooks may target http:// URLs and "
                    "loopback or private addresses. For development only.")
    try:
        listener = (socket.socket(fileno=args.fd) if args.fd is not None
                    else listen(config.host, config.worker_port, "IAMGATE_HOST", "IAMGATE_WORKER_PORT"))
    except PortInUse as exc:
        print(f"iamgate worker: {exc}", file=sys.stderr)
        return 1
    tracing.start(config, tracing.WORKER)  # before the store opens: its listener
    services = build_services(config, streams=False)  # it serves no change streams
    server = ThreadedServer(listener, worker_app(services), CONTROL_PLANE_SERVER).start()
    stop = threading.Event()

    def shutdown(_signum, _frame):
        stop.set()

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    services.startup.start(deliver=True)
    host, port = listener.getsockname()[:2]
    log.info("webhook worker started", extra={"address": f"{host}:{port}"})
    while not stop.wait(0.5):
        pass
    server.stop()
    services.webhooks.worker.stop()
    services.tailer.stop()
    log.info("webhook worker stopped")
    return 0


def _audit_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["verify"], help="verify: check one chain of audit records")
    scope = parser.add_mutually_exclusive_group(required=True)
    scope.add_argument("--application", help="the application whose chain to check")
    scope.add_argument("--organization", help="the organization whose dashboard actions' chain to check")


def _audit(args, config: Config) -> int:
    """Check one hash chain of audit records (docs/audit.md, "Integrity"): exit 0 when
    every sealed record links to the one before and no record sits outside the chain, 1
    naming the first that does not."""
    from controlplane.audit.service import AuditLog
    from controlplane.audit.store import AuditStore
    from controlplane.events import EventLog
    from controlplane.store import Store
    from shared.timeutil import utcnow

    if config.is_memory_store:
        print("audit verify: IAMGATE_MONGODB_URI is memory://, whose records live only inside the server process; "
              "point it at the server's MongoDB.", file=sys.stderr)
        return 2
    store = Store(config.mongodb_uri)
    events = EventLog(store, utcnow)
    audit = AuditLog(AuditStore(store, events.records), events)
    verdict = audit.verify(application_id=args.application, organization_id=args.organization)
    print(f"{verdict.checked} sealed records checked; {verdict.unsealed} not sealed yet"
          + (f"; {len(verdict.late)} sealed late (after records with higher seqs)" if verdict.late else "")
          + (f"; {verdict.outside} outside the chain" if verdict.outside else ""))
    if verdict.intact:
        print("chain intact")
        return 0
    broken = verdict.break_at
    print(f"chain broken at record {broken['id']} (seq {broken['seq']}, link {broken['link']}): {broken['reason']}")
    return 1


# name -> (help, add_arguments, run)
COMMANDS = {
    "keys": ("manage the token signing keys", _keys_arguments, _keys),
    "worker": ("dispatch and send webhook deliveries", _worker_arguments, _worker),
    "audit": ("check the audit log's hash chain", _audit_arguments, _audit),
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
