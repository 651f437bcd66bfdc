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
