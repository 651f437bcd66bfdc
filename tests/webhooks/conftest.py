"""Fixtures of the webhooks area: a real HTTP receiver in the test process, a webhook
pointing at it, and helpers that run dispatch and delivery one step at a time.

Targets must be https and public in production; these tests send to 127.0.0.1 over
http, so they run with IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS on (``config_overrides``),
except the SSRF tests, which build their own policy."""
from __future__ import annotations

import hashlib
import hmac
import json
import sys
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from controlplane.webhooks.store import delivery_id, new_event_delivery

V1 = "/api/v1/applications/{}"


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A sender that went away (a killed worker process, a closed keep-alive
        # connection) is what some tests do, not an error worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class Receiver:
    """Answers POSTs with the next status of ``statuses`` (the last one repeats), the
    headers ``headers`` and the body ``answer``, after ``delay`` seconds; records each
    request's headers, raw body and peer (address, port): one port per connection."""

    def __init__(self):
        self.requests: list[dict] = []
        self.statuses = [200]
        self.delay = 0.0
        self.hold = None  # a threading.Event: hold every request until it is set
        self.answer = b"ok"  # the response body
        self.headers: dict[str, str] = {}  # more response headers
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver.lock:
                    receiver.requests.append({"headers": dict(self.headers), "body": body, "path": self.path,
                                              "at": time.monotonic(), "peer": self.client_address})
                    status = receiver.statuses.pop(0) if len(receiver.statuses) > 1 else receiver.statuses[0]
                if receiver.hold is not None:
                    receiver.hold.wait(30)
                if receiver.delay:
                    time.sleep(receiver.delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(receiver.answer)))
                    if 300 <= status < 400:
                        self.send_header("Location", receiver.redirect_to)
                    for name, value in receiver.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(receiver.answer)
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        self.redirect_to = "http://127.0.0.1:9/"
        self.server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/iamgate"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        if self.hold is not None:
            self.hold.set()
        self.server.shutdown()
        self.server.server_close()

    def events(self) -> list[str]:
        return [json.loads(r["body"])["event"] for r in self.requests]


def verify(secret: str, body: bytes, header: str) -> bool:
    """A receiver's check, written from the spec alone (not the service's code)."""
    expected = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return header.startswith("sha256=") and hmac.compare_digest(header[len("sha256="):], expected)


@pytest.fixture
def config_overrides():
    return {"webhook_allow_private_targets": True, "webhook_timeout": 1, "webhook_retry_delays": (30, 300, 1800)}


@pytest.fixture
def manager(application, make_api_key):
    """Bearer headers of an API key holding webhooks:manage."""
    return {"Authorization": f"Bearer {make_api_key(application, permissions=['webhooks:manage'])}"}


@pytest.fixture
def hooks_url(application):
    return V1.format(application["_id"]) + "/webhooks"


@pytest.fixture
def make_webhook(client, manager, hooks_url):
    def make(url, events=("user.created",)):
        resp = client.simulate_post(hooks_url, json={"url": url, "events": list(events)}, headers=manager)
        assert resp.status_code == 201, resp.json
        return resp.json["data"]

    return make


@pytest.fixture
def pump(ctx):
    """Dispatch everything in the change log, then run due deliveries until none is due."""

    def run(max_rounds=1000):
        ctx.webhooks.dispatcher.catch_up()
        sent = 0
        while ctx.webhooks.worker.run_once():
            sent += 1
            assert sent < max_rounds
        return sent

    return run


# --- the delivery queue under the per-application cap (test_fairness*.py)

LEASE = timedelta(seconds=60)


@pytest.fixture
def queue(ctx, clock):
    """``queue(app_id, n)``: queue ``n`` deliveries of the application, each a second
    after the one before; the store."""
    store = ctx.webhooks.worker.store
    seqs = iter(range(1, 1_000_000))

    def add(app_id: str, n: int = 1):
        for _ in range(n):
            seq = next(seqs)
            store.insert_delivery(new_event_delivery(delivery_id(f"hook-{app_id}", seq), app_id, f"hook-{app_id}",
                                                     seq, "role.created", "{}", now=clock(),
                                                     expires_at=clock() + timedelta(days=1)))
            clock.advance(1)
        return store

    return add


def claim(store, clock, cap):
    now = clock()
    return store.claim(now, now + LEASE, per_application=cap)
