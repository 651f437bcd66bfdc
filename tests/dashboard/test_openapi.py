"""Every dashboard route is documented in /openapi.json with its body, security and errors."""
from __future__ import annotations

PUBLIC = {"/api/dashboard/register", "/api/dashboard/login", "/api/dashboard/logout"}


def test_every_dashboard_operation_is_documented(client):
    document = client.simulate_get("/openapi.json").json
    paths = {path: item for path, item in document["paths"].items() if path.startswith("/api/dashboard/")}
    expected = {
        "/api/dashboard/register": {"post"},
        "/api/dashboard/login": {"post"},
        "/api/dashboard/logout": {"post"},
        "/api/dashboard/me": {"get", "put"},
        "/api/dashboard/me/password": {"post"},
        "/api/dashboard/organizations": {"get", "post"},
        "/api/dashboard/organizations/{organizationId}/members": {"get", "post"},
        "/api/dashboard/organizations/{organizationId}/members/{accountId}": {"put", "delete"},
        "/api/dashboard/applications": {"get", "post"},
        "/api/dashboard/applications/{applicationId}": {"get", "put", "delete"},
        "/api/dashboard/applications/{applicationId}/branding": {"put"},
        "/api/dashboard/applications/{applicationId}/api-keys": {"get", "post"},
        "/api/dashboard/applications/{applicationId}/api-keys/{keyId}": {"delete"},
    }
    for path, methods in expected.items():
        assert set(paths[path]) >= methods, path
        for method in methods:
            operation = paths[path][method]
            assert operation["summary"] != "(undocumented)", (path, method)
            assert operation["tags"] == ["dashboard"]
            if path in PUBLIC:
                assert operation["security"] == []
            else:
                assert operation["security"] == [{"dashboardSession": []}]
                assert "401" in operation["responses"]
            if method in ("post", "put") and path not in ("/api/dashboard/logout",):
                assert "requestBody" in operation, (path, method)
                assert "415" in operation["responses"], (path, method)

    create = paths["/api/dashboard/applications"]["post"]
    body = create["requestBody"]["content"]["application/json"]["schema"]
    assert body["required"] == ["name"]
    assert body["properties"]["name"]["maxLength"] == 255
    assert body["properties"]["description"]["maxLength"] == 1000
    assert body["properties"]["environment"]["enum"] == ["development", "staging", "production"]
    assert body["properties"]["organization_id"]["format"] == "uuid"
    assert {"201", "403", "422"} <= set(create["responses"])
    assert "resource_limit_exceeded" in create["responses"]["403"]["description"]
    update = paths["/api/dashboard/applications/{applicationId}"]["put"]
    sessions = update["requestBody"]["content"]["application/json"]["schema"]["properties"]["max_concurrent_sessions"]
    assert (sessions["minimum"], sessions["maximum"]) == (0, 100)
    branding = paths["/api/dashboard/applications/{applicationId}/branding"]["put"]
    options = branding["requestBody"]["content"]["application/json"]["schema"]["properties"]["branding_options"]
    assert options["properties"]["custom_css"]["maxLength"] == 5000
