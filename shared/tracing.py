"""OpenTelemetry tracing, off unless an OTLP endpoint is configured (issue 31, item 9).

OpenTelemetry's own variables switch it on and shape it, read by its SDK as every
OpenTelemetry program reads them: ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), ``OTEL_SERVICE_NAME``, ``OTEL_TRACES_SAMPLER``,
``OTEL_PROPAGATORS``, ``OTEL_BSP_*``... (``shared.config.tracing_requested`` decides on
or off; docs/configuration.md, "Tracing").

Off, this module imports nothing of OpenTelemetry (its SDK and exporter take a quarter of
a second to import) and every hook answers "nothing to do": no Falcon middleware, no
pymongo listener, the hot paths as they are; an outgoing call pays one global look-up.

On, each process (a gunicorn worker: ``create_app`` runs after the fork; the webhook
worker) builds one ``TracerProvider`` whose ``BatchSpanProcessor`` exports over OTLP/HTTP
in the background and is flushed when the process exits (the SDK's exit hook), and:

- ``RequestSpans``: a SERVER span per request, ``METHOD route-template``, child of the
  W3C ``traceparent`` the request carried. Both services then answer every request
  through Falcon: their WSGI hot paths (controlplane/hotpath.py, decision/hotpath.py) and
  the decision service's probes are switched off, so that no request goes untraced.
- ``store_listeners``: a CLIENT span per MongoDB command sent inside a trace (a
  request's, a webhook delivery's), named by operation and collection only.
- ``client_call`` and ``outgoing``: a CLIENT span per outgoing HTTP call (webhook
  deliveries, the decision service's reads from the control plane) whose ``traceparent``
  goes out with the call, so a check's trace continues into the control plane.

Never recorded: query strings (they may carry credentials), request or response
bodies, header values, MongoDB statements and values, webhook URL paths, error messages
of MongoDB (a duplicate-key message quotes the key) and of exceptions.

Hand-written rather than OpenTelemetry's contrib instrumentations (falcon, pymongo,
requests): the checks are answered before Falcon on our own HTTP server, the decision
service's client is ``http.client``, the pymongo instrumentation records statements
unless told otherwise, and patching libraries at run time would hide what is traced.
A middleware, a pymongo listener and explicit client spans say it in one place.
"""
from __future__ import annotations

import functools
from contextlib import contextmanager, nullcontext
from typing import Any
from urllib.parse import urlsplit

CONTROL_PLANE = "iamgate-controlplane"
DECISION = "iamgate-decision"
WORKER = "iamgate-worker"

# One tracer per process, as OpenTelemetry's own global provider is: the hooks sit where
# no configuration is passed (the store's client, the decision service's client). Not
# OpenTelemetry's global itself, which can be set only once and so not by every test.
# Any: OpenTelemetry is imported only when tracing starts.
_tracer: Any = None  # the process's tracer while tracing is on
_provider: Any = None
_otel: Any = None    # the OpenTelemetry names used here, imported when tracing starts
_UNTRACED = nullcontext()


def start(config, service_name: str) -> bool:
    """Start tracing in this process if the configuration asks for it; whether it is on.

    ``service_name`` is the default of ``OTEL_SERVICE_NAME``. Call it after the fork (in
    the worker process) and before the store is opened (its listener is given to the
    client). A second call (a second app in one process) keeps the first provider."""
    if _tracer is None and config.tracing:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
        if str(resource.attributes[SERVICE_NAME]).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: service_name}))
        provider = TracerProvider(resource=resource)  # the sampler from OTEL_TRACES_SAMPLER
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # endpoint, headers: OTEL_EXPORTER_OTLP_*
        use(provider)
    return active()


def use(provider) -> None:
    """Trace with ``provider`` from now on (``None``: stop tracing). ``start`` calls it;
    tests give a provider with an in-memory exporter."""
    global _tracer, _provider, _otel
    if provider is None:
        _tracer = _provider = None
        return
    if _otel is None:
        _otel = _import_otel()
    _provider, _tracer = provider, provider.get_tracer("iamgate")


def active() -> bool:
    return _tracer is not None


def provider():
    """The ``TracerProvider`` in use, or None."""
    return _provider


def _import_otel():
    from types import SimpleNamespace

    from opentelemetry import context, propagate, trace
    from opentelemetry.trace import SpanKind, StatusCode

    return SimpleNamespace(attach=context.attach, detach=context.detach, extract=propagate.extract,
                           inject=propagate.inject, set_span_in_context=trace.set_span_in_context,
                           current_span=trace.get_current_span,
                           SERVER=SpanKind.SERVER, CLIENT=SpanKind.CLIENT, INTERNAL=SpanKind.INTERNAL,
                           ERROR=StatusCode.ERROR)


# ---------------------------------------------------------------- requests

def request_middleware() -> list:
    """The Falcon middleware a service puts first in its list: ``[RequestSpans]`` while
    tracing, else none."""
    return [RequestSpans()] if _tracer is not None else []


class _EnvironHeaders:
    """Reads the propagation headers (``traceparent``, ``tracestate``, ``baggage``) out of
    a WSGI environ, where ``traceparent`` is ``HTTP_TRACEPARENT``."""

    @staticmethod
    def get(environ: dict, key: str) -> list[str] | None:
        value = environ.get("HTTP_" + key.upper().replace("-", "_"))
        return None if value is None else [value]

    @staticmethod
    def keys(environ: dict) -> list[str]:
        return [name[5:].lower().replace("_", "-") for name in environ if name.startswith("HTTP_")]


_ENVIRON_HEADERS = _EnvironHeaders()


class RequestSpans:
    """A SERVER span for each request (OpenTelemetry's HTTP semantic conventions): named
    ``METHOD route-template`` once routed (``METHOD`` alone when no route matched), with
    ``http.request.method``, ``url.path`` (never the query), ``url.scheme``, ``http.route``,
    ``iamgate.application_id`` when the route names one, ``http.response.status_code``, and
    the error status for a 5xx. It is the current span while the request runs, so store
    commands and outgoing calls are its children. First in the middleware list: every
    other middleware's work (authentication, its store reads) runs inside it."""

    def __init__(self):
        self._tracer = _tracer
        self._otel = _otel

    def process_request(self, req, _resp):
        otel = self._otel
        parent = otel.extract(req.env, getter=_ENVIRON_HEADERS)
        span = self._tracer.start_span(req.method, context=parent, kind=otel.SERVER, attributes={
            "http.request.method": req.method, "url.path": req.path, "url.scheme": req.scheme})
        req.context.trace_span = span
        req.context.trace_token = otel.attach(otel.set_span_in_context(span, parent))

    def process_resource(self, req, _resp, resource, params):
        span = req.context.trace_span
        if resource is not None:
            span.update_name(f"{req.method} {req.uri_template}")
            span.set_attribute("http.route", req.uri_template)
        application_id = params.get("applicationId")
        if application_id:
            span.set_attribute("iamgate.application_id", application_id)

    def process_response(self, req, resp, _resource, _req_succeeded):
        span = getattr(req.context, "trace_span", None)
        if span is None:
            return
        status = resp.status_code
        span.set_attribute("http.response.status_code", status)
        if status >= 500:
            span.set_status(self._otel.ERROR)
        span.end()
        self._otel.detach(req.context.trace_token)


# ---------------------------------------------------------------- the store

def store_listeners() -> list:
    """pymongo event listeners for a new ``MongoClient``: a ``CommandSpans`` while tracing,
    else none. (mongomock, the ``memory://`` store, calls no listener.)"""
    if _tracer is None:
        return []
    # pymongo accepts only its own listener classes. Imported here, not at the top: the
    # decision service imports this module and never loads pymongo.
    from pymongo.monitoring import CommandListener

    class Listener(CommandSpans, CommandListener):
        pass

    return [Listener(_tracer, _otel)]


class CommandSpans:
    """A CLIENT span per MongoDB command sent while a span is current (a request, a
    webhook delivery): ``db.system.name`` mongodb, ``db.operation.name``,
    ``db.collection.name``, ``db.namespace``, ``server.address`` and ``server.port``; on
    failure the error status and the server's error code name. Never the command's
    filter, update or documents: they hold password hashes, secrets and personal data.
    Commands outside any trace (the change-log tailer's polls, the delivery queue's
    claims, index creation at start-up) are not traced: each would be a trace of its own.

    pymongo calls ``started`` and then ``succeeded`` or ``failed`` on the thread that
    sent the command, so the span's parent is that thread's current span."""

    def __init__(self, tracer, otel):
        self._tracer = tracer
        self._otel = otel
        self._spans: dict = {}

    def started(self, event) -> None:
        if not self._otel.current_span().get_span_context().is_valid:
            return
        operation = event.command_name
        target = event.command.get("collection" if operation == "getMore" else operation)
        attributes = {"db.system.name": "mongodb", "db.operation.name": operation,
                      "db.namespace": event.database_name}
        name = operation
        if isinstance(target, str):
            attributes["db.collection.name"] = target
            name = f"{operation} {target}"
        if event.connection_id:
            attributes["server.address"], attributes["server.port"] = event.connection_id[:2]
        span = self._tracer.start_span(name, kind=self._otel.CLIENT, attributes=attributes)
        self._spans[(event.connection_id, event.request_id)] = span

    def succeeded(self, event) -> None:
        span = self._spans.pop((event.connection_id, event.request_id), None)
        if span is None:
            return
        # A write the server refused (a duplicate key) still answers ok: 1, its errors listed.
        errors = event.reply.get("writeErrors") or [event.reply.get("writeConcernError") or {}]
        if errors[0]:
            self._failure(span, errors[0])
        span.end()

    def failed(self, event) -> None:
        span = self._spans.pop((event.connection_id, event.request_id), None)
        if span is None:
            return
        self._failure(span, event.failure if isinstance(event.failure, dict) else {})
        span.end()

    def _failure(self, span, error: dict) -> None:
        """The error status and the server's code: never its message, which may quote values."""
        code = error.get("code")
        span.set_attribute("error.type", str(error.get("codeName") or code or "error"))
        if code is not None:
            span.set_attribute("db.response.status_code", str(code))
        span.set_status(self._otel.ERROR)


# ---------------------------------------------------------------- outgoing calls

def propagate(headers: dict) -> dict:
    """``headers`` plus the current trace's ``traceparent`` (and ``tracestate``): the
    headers of an outgoing call made inside a ``client_call`` or ``outgoing`` span."""
    if _tracer is None:
        return headers
    headers = dict(headers)
    _otel.inject(headers)
    return headers


class _Call:
    """What ``client_call`` yields: report the answer with ``answered``."""

    def __init__(self, span):
        self._span = span

    def answered(self, status: int | None, error: str | None = None) -> None:
        """The response's status, or None and the reason (``error.type``) when none came."""
        span = self._span
        if span is None:
            return
        if status is not None:
            span.set_attribute("http.response.status_code", status)
        if error is not None or status is None or status >= 400:
            span.set_attribute("error.type", error or str(status))
            span.set_status(_otel.ERROR)


_NO_CALL = _Call(None)


@contextmanager
def client_call(method: str, attributes: dict):
    """A CLIENT span named ``method`` around one outgoing HTTP call, current while it
    runs (``propagate`` then gives its ``traceparent``); yields a ``_Call``."""
    if _tracer is None:
        yield _NO_CALL
        return
    with _tracer.start_as_current_span(method, kind=_otel.CLIENT, attributes={"http.request.method": method,
                                                                             **attributes},
                                       record_exception=False, set_status_on_exception=False) as span:
        yield _Call(span)


def outgoing(method: str, attributes_of):
    """Decorates a function making one outgoing HTTP call that returns on success and
    raises otherwise: a ``client_call`` span around each call, with the attributes
    ``attributes_of(*args)`` gives, status 200 on return, the exception's class as
    ``error.type`` when it raises. The function sends ``propagate(headers)``."""
    def decorate(call):
        @functools.wraps(call)
        def traced(*args, **kwargs):
            if _tracer is None:
                return call(*args, **kwargs)
            with client_call(method, attributes_of(*args)) as outcome:
                try:
                    result = call(*args, **kwargs)
                except Exception as exc:
                    outcome.answered(None, type(exc).__name__)
                    raise
                outcome.answered(200)
                return result
        return traced
    return decorate


def url_attributes(url: str) -> dict:
    """``url.full``, ``server.address`` and ``server.port`` of a URL without query or
    credentials (the caller's guarantee)."""
    parts = urlsplit(url)
    return {"url.full": url, "server.address": parts.hostname or "",
            "server.port": parts.port or (443 if parts.scheme == "https" else 80)}


def span(name: str, attributes: dict):
    """An INTERNAL span around work that is not a request (a webhook delivery attempt):
    its store commands and outgoing calls become its children."""
    if _tracer is None:
        return _UNTRACED
    return _internal_span(name, attributes)


@contextmanager
def _internal_span(name: str, attributes: dict):
    with _tracer.start_as_current_span(name, kind=_otel.INTERNAL, attributes=attributes, record_exception=False,
                                       set_status_on_exception=False) as current:
        try:
            yield current
        except Exception as exc:  # its class, never its message
            current.set_attribute("error.type", type(exc).__name__)
            current.set_status(_otel.ERROR)
            raise
