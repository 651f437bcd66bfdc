"""OpenTelemetry tracing (shared/tracing.py): off unless an OTLP endpoint is set; on, a
span per request, per store command and per outgoing call, and W3C ``traceparent``
honoured and passed on -- from a decision service into the control plane too.

Spans are read with the SDK's in-memory exporter; the store's spans against
tests/mongo_wire.py, a MongoDB wire-protocol server pymongo talks to (mongomock, the
``memory://`` store, calls no pymongo listener).
"""
from __future__ import annotations

import gzip
import os
import secrets
import subprocess
import sys
import threading
from wsgiref.simple_server import make_server

import falcon.testing
import pymongo.errors
import pytest
import requests
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from controlplane.app import create_app
from decision.app import create_app as create_decision_service
from shared import tracing
from shared.config import Config
from tests import mongodb
from tests.conftest import bearer, make_config
from tests.decision.conftest import FakeMonotonic, wait_for
from tests.decision.fakecp import _Quiet, _Server
from tests.webhooks.conftest import Receiver

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
INTERNAL_TOKEN = "tracing-internal-token"
# What a span may say of a MongoDB command: never its filter, update or documents.
STORE_ATTRIBUTES = {"db.system.name", "db.operation.name", "db.collection.name", "db.namespace", "server.address",
                    "server.port", "error.type", "db.response.status_code"}


@pytest.fixture
def spans():
    """Tracing on, into an in-memory exporter, for this test only."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use(provider)
    yield exporter
    tracing.use(None)
    provider.shutdown()


@pytest.fixture
def config_overrides():
    return {"internal_token": INTERNAL_TOKEN, "webhook_allow_private_targets": True, "webhook_timeout": 1}


@pytest.fixture
def app(spans, config, clock):
    """The control plane, traced."""
    return create_app(config, clock=clock, start_background=False)


def _check(app_id, user_id="u1", permission="posts:read"):
    return f"/api/v1/applications/{app_id}/authz/check?user_id={user_id}&permission={permission}"


def _server_spans(exporter, route=None):
    return [span for span in exporter.get_finished_spans() if span.kind is SpanKind.SERVER
            and (route is None or span.attributes.get("http.route") == route)]


# ---------------------------------------------------------------- off

def test_the_otel_variables_switch_tracing_on():
    assert not Config.from_env(env={}).tracing
    assert Config.from_env(env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}).tracing
    assert Config.from_env(env={"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}).tracing
    assert not Config.from_env(env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                                    "OTEL_SDK_DISABLED": "true"}).tracing
    assert not Config.from_env(env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                                    "OTEL_TRACES_EXPORTER": "none"}).tracing


_OFF_PROBE = """
import sys
from controlplane.wsgi import create
from shared import tracing
from shared.tracing import RequestSpans

app = create()
assert app.hot_check is not None
assert not any(isinstance(m, RequestSpans) for m in app._unprepared_middleware)
assert not app.services.store.client._event_listeners.enabled_for_commands
from decision.app import create_app
from tests.conftest import make_config
decision = create_app(make_config(internal_token="t", control_plane_url="http://127.0.0.1:9"))
decision.service.follower.stop()
assert decision.hot_check is not None
assert not any(isinstance(m, RequestSpans) for m in decision.falcon()._unprepared_middleware)
assert not tracing.active() and tracing.provider() is None
loaded = sorted(name for name in sys.modules if name.startswith("opentelemetry"))
assert not loaded, loaded
print("untraced")
"""


def test_without_otel_variables_nothing_is_installed_or_even_imported(tmp_path):
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    env.update(IAMGATE_MONGODB_URI=f"{mongodb.wire_server().uri}iamgate_untraced", IAMGATE_BCRYPT_ROUNDS="4",
               IAMGATE_SECRET_KEY="test-secret-key-0123456789abcdef")
    done = subprocess.run([sys.executable, "-c", _OFF_PROBE], cwd=os.getcwd(), env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "untraced"


def test_start_follows_the_standard_variables(monkeypatch):
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    on = Config.from_env(env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    try:
        assert not tracing.start(Config.from_env(env={}), tracing.CONTROL_PLANE)
        assert tracing.start(on, tracing.DECISION)
        assert tracing.provider().resource.attributes["service.name"] == "iamgate-decision"
    finally:
        started = tracing.provider()
        tracing.use(None)
        if started is not None:
            started.shutdown()
    monkeypatch.setenv("OTEL_SERVICE_NAME", "sidecar-of-billing")
    try:
        tracing.start(on, tracing.DECISION)
        assert tracing.provider().resource.attributes["service.name"] == "sidecar-of-billing"
    finally:
        started = tracing.provider()
        tracing.use(None)
        started.shutdown()


# ---------------------------------------------------------------- requests

def test_a_request_is_a_server_span_child_of_its_traceparent(app, client, spans, application, make_api_key):
    assert app.hot_check is None  # traced, the cached check goes through Falcon too
    key = make_api_key(application, permissions=["authz:check"])
    app_id = application["_id"]
    response = client.simulate_get(_check(app_id), headers={**bearer(key), "traceparent": TRACEPARENT})
    assert response.status_code == 200
    [span] = _server_spans(spans)
    assert span.name == "GET /api/v1/applications/{applicationId}/authz/check"
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert format(span.parent.span_id, "016x") == PARENT_ID and span.parent.is_remote
    assert dict(span.attributes) == {
        "http.request.method": "GET", "url.path": f"/api/v1/applications/{app_id}/authz/check",
        "url.scheme": "http", "http.route": "/api/v1/applications/{applicationId}/authz/check",
        "iamgate.application_id": app_id, "http.response.status_code": 200}
    assert span.status.status_code is StatusCode.UNSET
    assert not any(key in str(value) for s in spans.get_finished_spans() for value in s.attributes.values())


def test_without_a_traceparent_a_request_starts_a_trace(client, spans):
    assert client.simulate_get("/healthz").status_code == 200
    [span] = _server_spans(spans)
    assert span.name == "GET /healthz" and span.parent is None
    assert "iamgate.application_id" not in span.attributes


def test_neither_the_query_nor_header_values_are_recorded(client, spans):
    response = client.simulate_get("/healthz", query_string="code=s3cr3t-code",
                                   headers={"Authorization": "Bearer s3cr3t-token"})
    assert response.status_code == 200
    [span] = _server_spans(spans)
    assert span.attributes["url.path"] == "/healthz"
    assert "s3cr3t" not in repr(dict(span.attributes)) + repr(span.events)


def test_work_that_fails_in_a_span_keeps_its_message_out(spans):
    with pytest.raises(RuntimeError):
        with tracing.span("webhook delivery", {"iamgate.delivery_id": "d1"}):
            raise RuntimeError("the receiver's secret is s3cr3t")
    [span] = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR and span.attributes["error.type"] == "RuntimeError"
    assert "s3cr3t" not in repr(dict(span.attributes)) + repr(span.events) + str(span.status.description)


def test_an_unrouted_request_is_named_by_its_method(client, spans):
    assert client.simulate_get("/no/such/path").status_code == 404
    [span] = _server_spans(spans)
    assert span.name == "GET" and "http.route" not in span.attributes
    assert span.attributes["http.response.status_code"] == 404
    assert span.status.status_code is StatusCode.UNSET  # a 4xx is the client's error, not the server's


def test_a_server_error_marks_the_span(client, ctx, spans, application, make_api_key, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(ctx.authz, "check", broken)
    key = make_api_key(application, permissions=["authz:check"])
    assert client.simulate_get(_check(application["_id"]), headers=bearer(key)).status_code == 500
    [span] = _server_spans(spans)
    assert span.attributes["http.response.status_code"] == 500
    assert span.status.status_code is StatusCode.ERROR


# ---------------------------------------------------------------- the store

@pytest.fixture
def wire_app(spans, clock):
    uri = f"{mongodb.wire_server().uri}iamgate_tracing_{secrets.token_hex(4)}"
    app = create_app(make_config(mongodb_uri=uri, internal_token=INTERNAL_TOKEN), clock=clock,
                     start_background=False)
    spans.clear()  # start-up's index creation ran outside any trace
    yield app
    app.services.store.client.drop_database(app.services.store.db.name)
    app.services.store.client.close()


def test_store_commands_are_client_spans_of_the_request(wire_app, spans):
    client = falcon.testing.TestClient(wire_app)
    application = wire_app.services.applications.create({"name": "Traced"}, organization_id=None,
                                                        owner_account_id=None)
    assert not spans.get_finished_spans()  # outside a trace: no spans
    response = client.simulate_get(f"/internal/v1/applications/{application['_id']}/users/u1/grants",
                                   headers={**bearer(INTERNAL_TOKEN), "traceparent": TRACEPARENT})
    assert response.status_code in (200, 404), response.text
    [request] = _server_spans(spans)
    commands = [span for span in spans.get_finished_spans() if span.kind is SpanKind.CLIENT]
    assert commands
    for span in commands:
        assert span.parent.span_id == request.context.span_id and span.context.trace_id == request.context.trace_id
        assert set(span.attributes) <= STORE_ATTRIBUTES
        assert span.attributes["db.system.name"] == "mongodb"
        assert span.name == f"{span.attributes['db.operation.name']} {span.attributes['db.collection.name']}"
    assert "find" in {span.attributes["db.operation.name"] for span in commands}


def test_a_failed_store_command_is_an_error_without_its_message(wire_app, spans):
    store = wire_app.services.store
    store["things"].insert_one({"_id": "secret-value"})
    with tracing.span("work", {}):
        with pytest.raises(pymongo.errors.DuplicateKeyError):
            store["things"].insert_one({"_id": "secret-value"})
    [failed] = [span for span in spans.get_finished_spans() if span.kind is SpanKind.CLIENT]
    assert failed.status.status_code is StatusCode.ERROR and failed.attributes["db.response.status_code"] == "11000"
    assert "secret-value" not in repr(dict(failed.attributes)) + str(failed.status.description)


# ---------------------------------------------------------------- outgoing calls

def test_a_webhook_delivery_is_traced_and_carries_its_traceparent(ctx, client, spans, application, make_api_key,
                                                                 make_role):
    receiver = Receiver()
    try:
        manager = bearer(make_api_key(application, permissions=["webhooks:manage"]))
        hook = client.simulate_post(f"/api/v1/applications/{application['_id']}/webhooks", headers=manager,
                                    json={"url": receiver.url + "/hooks/token-in-path", "events": ["role.created"]})
        assert hook.status_code == 201
        make_role(application, "editor", ["posts:edit"])
        ctx.webhooks.dispatcher.catch_up()
        spans.clear()
        assert ctx.webhooks.worker.run_once()
        [request] = receiver.requests
    finally:
        receiver.close()
    [delivery] = [span for span in spans.get_finished_spans() if span.name == "webhook delivery"]
    [post] = [span for span in spans.get_finished_spans() if span.kind is SpanKind.CLIENT]
    assert delivery.attributes["iamgate.application_id"] == application["_id"]
    assert delivery.attributes["iamgate.event"] == "role.created"
    assert post.parent.span_id == delivery.context.span_id
    assert post.attributes["http.request.method"] == "POST" and post.attributes["http.response.status_code"] == 200
    assert post.attributes["server.address"] == "127.0.0.1"
    assert "token-in-path" not in repr(dict(post.attributes))
    version, trace_id, parent_id, flags = request["headers"]["traceparent"].split("-")
    assert (trace_id, parent_id) == (format(post.context.trace_id, "032x"), format(post.context.span_id, "016x"))
    assert int(flags, 16) & 1  # sampled


def test_a_failed_webhook_post_marks_its_span(ctx, client, spans, application, make_api_key, make_role):
    receiver = Receiver()
    receiver.statuses = [503]
    try:
        manager = bearer(make_api_key(application, permissions=["webhooks:manage"]))
        client.simulate_post(f"/api/v1/applications/{application['_id']}/webhooks", headers=manager,
                             json={"url": receiver.url, "events": ["role.created"]})
        make_role(application, "editor", ["posts:edit"])
        ctx.webhooks.dispatcher.catch_up()
        assert ctx.webhooks.worker.run_once()
    finally:
        receiver.close()
    [post] = [span for span in spans.get_finished_spans() if span.kind is SpanKind.CLIENT]
    assert post.attributes["http.response.status_code"] == 503 and post.status.status_code is StatusCode.ERROR


@pytest.fixture
def control_plane(app):
    """The traced control plane with its change-log tailer (the decision service's stream
    needs it), served over HTTP on a free port."""
    server = make_server("127.0.0.1", 0, app, server_class=_Server, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    app.services.tailer.start()
    yield f"http://127.0.0.1:{server.server_port}"
    app.services.tailer.stop()
    server.shutdown()
    server.server_close()


def test_a_check_at_the_decision_service_continues_its_trace_into_the_control_plane(
        control_plane, config, clock, spans, application, make_api_key, stored_user, make_role, assign_role):
    user = stored_user(application)
    assign_role(application, user, make_role(application, permissions=["posts:read"]))
    key = make_api_key(application, permissions=["authz:check"])
    decision = create_decision_service(
        make_config(internal_token=INTERNAL_TOKEN, control_plane_url=control_plane, public_url=config.public_url),
        clock=clock, monotonic=FakeMonotonic(), backoff_max=0.1)
    try:
        assert decision.hot_check is None
        assert wait_for(decision.service.follower.trusted, timeout=5)
        spans.clear()
        response = falcon.testing.TestClient(decision).simulate_get(
            _check(application["_id"], user["_id"]), headers={**bearer(key), "traceparent": TRACEPARENT})
    finally:
        decision.service.follower.stop()
    assert response.status_code == 200 and response.json["allowed"] is True
    finished = spans.get_finished_spans()
    assert {format(span.context.trace_id, "032x") for span in finished} == {TRACE_ID}
    [check] = _server_spans(spans, "/api/v1/applications/{applicationId}/authz/check")
    assert format(check.parent.span_id, "016x") == PARENT_ID
    [grants] = _server_spans(spans, "/internal/v1/applications/{applicationId}/users/{userId}/grants")
    fetch = next(span for span in finished if span.context.span_id == grants.parent.span_id)
    assert fetch.kind is SpanKind.CLIENT and fetch.parent.span_id == check.context.span_id
    assert fetch.attributes["url.full"].endswith(f"/users/{user['_id']}/grants")
    assert fetch.attributes["http.response.status_code"] == 200


# ---------------------------------------------------------------- real processes

class OtlpReceiver:
    """An OTLP/HTTP trace endpoint (``POST /v1/traces``, protobuf) on a free port: keeps
    every span it is sent as (service.name, span)."""

    def __init__(self):
        from http.server import BaseHTTPRequestHandler

        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        self.spans: list = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                export = ExportTraceServiceRequest.FromString(body)
                for resource_spans in export.resource_spans:
                    service = next(a.value.string_value for a in resource_spans.resource.attributes
                                   if a.key == "service.name")
                    for scope_spans in resource_spans.scope_spans:
                        receiver.spans.extend((service, span) for span in scope_spans.spans)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self._server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self._server.shutdown()
        self._server.server_close()


def test_gunicorn_workers_export_over_otlp_and_flush_when_they_exit(tmp_path):
    """Both services under gunicorn (gevent workers, the provider built after the fork)
    export to an OTLP endpoint: the decision service every 100 ms, the control plane
    with a batch delay longer than the test, so its spans arrive when its worker exits.
    One trace runs from the decision service's check into the control plane's grants read."""
    from tests.e2e.processes import Admin, Processes, wait_until

    receiver = OtlpReceiver()
    processes = Processes(tmp_path, env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
                                         "OTEL_BSP_SCHEDULE_DELAY": "600000"})

    def traced(service):
        return {span.name for name, span in receiver.spans if name == service and span.trace_id.hex() == TRACE_ID}

    try:
        processes.start_control_plane()
        processes.start_decision_service(OTEL_BSP_SCHEDULE_DELAY="100")
        assert processes.decision_ready()
        admin = Admin(processes.control_url, name="traced")
        user = admin.user()
        admin.assign(user, admin.role(["posts:read"]))
        admin.http.close()  # a kept-alive connection would hold the control plane's worker past its grace
        check = requests.get(f"{processes.decision_url}/api/v1/applications/{admin.app_id}/authz/check",
                             params={"user_id": user, "permission": "posts:read"},
                             headers={**admin.headers, "traceparent": TRACEPARENT}, timeout=5)
        assert check.status_code == 200 and check.json()["allowed"] is True
        assert wait_until(lambda: len(traced("iamgate-decision")) >= 2, timeout=10), processes.logs()
        assert traced("iamgate-decision") == {"GET /api/v1/applications/{applicationId}/authz/check", "GET"}
        assert not traced("iamgate-controlplane")  # still in the worker's batch
    finally:
        processes.stop()
        receiver.close()
    assert "GET /internal/v1/applications/{applicationId}/users/{userId}/grants" in traced("iamgate-controlplane"), \
        processes.logs()


def test_the_webhook_worker_process_exports_its_deliveries_as_iamgate_worker(tmp_path, receiver):
    """``python -m controlplane worker`` starts tracing from the OTEL_* variables as the web
    processes do: a delivery it sends is a ``webhook delivery`` span, its POST a child whose
    ``traceparent`` the receiver got, under service.name ``iamgate-worker`` when
    OTEL_SERVICE_NAME is not set, and its batch is flushed when SIGTERM stops it."""
    from tests.e2e.processes import Admin, Processes, stop_process, wait_until

    otlp = OtlpReceiver()
    shared_uri = mongodb.shared_database_uri("iamgate_traced_worker")
    # On MongoDB the control plane delivers nothing itself: the worker sends every delivery.
    processes = Processes(tmp_path, env={"IAMGATE_MONGODB_URI": shared_uri,
                                         "IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS": "true"})
    try:
        processes.start_control_plane()
        processes.start_worker(OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url, OTEL_BSP_SCHEDULE_DELAY="600000")
        admin = Admin(processes.control_url, name="traced-worker")
        created = requests.post(f"{admin.v1}/webhooks", json={"url": receiver.url, "events": ["role.created"]},
                                headers=admin.headers, timeout=10)
        assert created.status_code == 201, created.text
        admin.role(["posts:edit"], name="editor")
        assert wait_until(lambda: len(receiver.requests) == 1, 30), processes.logs()
        assert not otlp.spans  # still in the worker's batch
        stop_process(processes.worker)
        assert processes.worker.returncode == 0, processes.logs()
    finally:
        processes.stop()
        otlp.close()
        mongodb.drop_database(shared_uri)
    assert {service for service, _ in otlp.spans} == {"iamgate-worker"}, processes.logs()
    [delivery] = [span for _, span in otlp.spans if span.name == "webhook delivery"]
    [post] = [span for _, span in otlp.spans if span.name == "POST"]
    assert {a.key: a.value.string_value for a in delivery.attributes}["iamgate.event"] == "role.created"
    assert post.parent_span_id == delivery.span_id
    # Its store was opened traced: the delivery's MongoDB commands are its children too.
    assert any(span.parent_span_id == delivery.span_id and any(a.key == "db.system.name" for a in span.attributes)
               for _, span in otlp.spans)
    _, trace_id, parent_id, _ = receiver.requests[0]["headers"]["traceparent"].split("-")
    assert (trace_id, parent_id) == (post.trace_id.hex(), post.span_id.hex())
