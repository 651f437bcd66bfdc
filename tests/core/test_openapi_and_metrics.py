"""GET /openapi.json documents every route the app serves; /metrics counts them."""
import re


def served_routes(app):
    """Every (template, method) Falcon will dispatch to a responder of ours, read from
    the router itself rather than from our own registry."""
    found = set()

    def walk(nodes):
        for node in nodes:
            if node.resource is not None:
                for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
                    if hasattr(node.resource, "on_" + method.lower()):
                        found.add((node.uri_template, method))
            walk(node.children)

    walk(app._router._roots)
    return found


def test_every_route_is_documented(client, app):
    document = client.simulate_get("/openapi.json").json
    assert document["openapi"].startswith("3.1")
    documented = {(path, method.upper()) for path, item in document["paths"].items() for method in item}
    routes = served_routes(app)
    assert routes, "the router walk found nothing"
    assert routes - documented == set()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            assert operation["summary"] and operation["summary"] != "(undocumented)", (method, path)
            assert operation["responses"], (method, path)
            for name in re.findall(r"{([^}]+)}", path):
                assert any(p["name"] == name and p["in"] == "path" for p in operation["parameters"]), (path, name)


def test_public_routes_declare_no_security_and_others_do(client):
    paths = client.simulate_get("/openapi.json").json["paths"]
    assert paths["/healthz"]["get"]["security"] == []
    secured = [op for item in paths.values() for op in item.values() if op["security"]]
    for operation in secured:
        assert "401" in operation["responses"]


def test_metrics_count_requests_by_route_template_and_status(client):
    client.simulate_get("/healthz")
    client.simulate_get("/nowhere/123")
    text = client.simulate_get("/metrics").text
    assert 'iamgate_http_requests_total{method="GET",route="/healthz",status="200"} 1.0' in text
    assert 'route="unmatched",status="404"' in text
    assert "iamgate_http_request_duration_seconds_bucket" in text


def test_recorded_requests_render_as_prometheus_clients_own_metrics_render(monkeypatch):
    """``MetricsMiddleware.record`` counts with shared.hotmetrics: the same samples as
    prometheus_client's ``Counter.inc`` and ``Histogram.observe``, at every bucket bound and between."""
    from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

    from shared import metrics as metrics_module
    from shared.hotmetrics import BUCKETS, MetricsMiddleware
    from shared.metrics import HttpMetrics

    fast, public = HttpMetrics("iamgate"), CollectorRegistry()
    requests = Counter("iamgate_http_requests_total", "HTTP requests by route and status",
                       ("method", "route", "status"), registry=public)
    latency = Histogram("iamgate_http_request_duration_seconds", "HTTP request latency by route",
                        ("method", "route"), buckets=BUCKETS, registry=public)
    middleware = MetricsMiddleware(fast)
    elapsed = [0.0, *BUCKETS, *(b * 1.0001 for b in BUCKETS), 7.5, 1e-9]
    for i, seconds in enumerate(elapsed):
        method, route, status = ("GET", "/a", 200) if i % 3 else ("BREW", "/b/{id}", 404)
        monkeypatch.setattr(metrics_module.time, "perf_counter", lambda seconds=seconds: 100.0 + seconds)
        middleware.record(method, route, status, 100.0)
        method = "OTHER" if method == "BREW" else method
        requests.labels(method, route, str(status)).inc()
        latency.labels(method, route).observe((100.0 + seconds) - 100.0)
    rendered = generate_latest(fast.registry)
    assert rendered == generate_latest(public)
    assert b'iamgate_http_requests_total{method="OTHER",route="/b/{id}",status="404"} 11.0' in rendered
