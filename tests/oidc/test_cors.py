"""CORS for browser apps: discovery and JWKS answer any origin; token, userinfo, revoke
and introspect answer preflights and add Access-Control-Allow-Origin only for an origin
an active client lists in allowed_origins (validated at registration)."""
import pytest

from tests.conftest import assert_error
from tests.oidc.conftest import clients_url

SPA_ORIGIN = "https://spa.example.com"
PROTECTED = ["/oidc/token", "/oidc/userinfo", "/oidc/revoke", "/oidc/introspect"]


@pytest.fixture
def spa(application, oidc_client):
    return oidc_client(application, token_endpoint_auth_method="none", allowed_origins=[SPA_ORIGIN])


def preflight(client, path, origin, method="POST"):
    return client.simulate_options(path, headers={"Origin": origin, "Access-Control-Request-Method": method,
                                                  "Access-Control-Request-Headers": "authorization, content-type"})


@pytest.mark.parametrize("path", PROTECTED)
def test_a_registered_origin_passes_the_preflight(client, spa, path):
    response = preflight(client, path, SPA_ORIGIN)
    assert response.status_code in (200, 204)
    assert response.headers["access-control-allow-origin"] == SPA_ORIGIN
    assert "POST" in response.headers["access-control-allow-methods"]
    assert {"authorization", "content-type"} <= {h.strip().lower() for h in
                                                 response.headers["access-control-allow-headers"].split(",")}
    assert "Origin" in response.headers["vary"]


@pytest.mark.parametrize("path", PROTECTED)
def test_another_origin_gets_no_cors_headers(client, spa, path):
    for origin in ("https://evil.example.com", "https://spa.example.com:8443", "http://spa.example.com"):
        response = preflight(client, path, origin)
        assert "access-control-allow-origin" not in response.headers
        answer = client.simulate_post(path, json={}, headers={"Origin": origin})
        assert "access-control-allow-origin" not in answer.headers


@pytest.mark.parametrize("path", ["/.well-known/openid-configuration", "/.well-known/jwks.json"])
def test_public_documents_answer_any_origin(client, path):
    response = client.simulate_get(path, headers={"Origin": "https://anyone.example.org"})
    assert response.status_code == 200 and response.headers["access-control-allow-origin"] == "*"
    assert preflight(client, path, "https://anyone.example.org", "GET").headers["access-control-allow-origin"] == "*"


def test_answers_and_errors_carry_the_origin(client, spa):
    refused = client.simulate_get("/oidc/userinfo", headers={"Origin": SPA_ORIGIN})
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == SPA_ORIGIN
    assert "WWW-Authenticate" in refused.headers["access-control-expose-headers"]
    token = client.simulate_post("/oidc/token", json={"grant_type": "refresh_token", "refresh_token": "x",
                                                      "client_id": spa["client_id"]}, headers={"Origin": SPA_ORIGIN})
    assert token.status_code == 400 and token.headers["access-control-allow-origin"] == SPA_ORIGIN


def test_an_inactive_clients_origins_are_not_allowed(client, application, manager_key, spa):
    client.simulate_put(clients_url(application, f"/{spa['id']}"), json={"is_active": False},
                        headers={"Authorization": f"Bearer {manager_key}"})
    assert "access-control-allow-origin" not in preflight(client, "/oidc/token", SPA_ORIGIN).headers


def _delete_cut_short(ctx, monkeypatch, app):
    """Begin deleting ``app`` and stop before its purge: the application is marked
    deleting, its clients are still stored (a crash mid-deletion leaves it so until start-up
    finishes it)."""
    def store_gone(_app_id):
        raise RuntimeError("the store went away mid-purge")

    monkeypatch.setattr(ctx.applications.store, "purge", store_gone)
    with pytest.raises(RuntimeError):
        ctx.applications.delete(app["_id"])
    monkeypatch.undo()


def test_an_application_being_deleted_opens_no_origin(client, ctx, monkeypatch, application, spa):
    _delete_cut_short(ctx, monkeypatch, application)
    assert ctx.store["oidc_clients"].count_documents({"allowed_origins": SPA_ORIGIN, "is_active": True}) == 1
    for path in PROTECTED:
        assert "access-control-allow-origin" not in preflight(client, path, SPA_ORIGIN).headers
        answer = client.simulate_post(path, json={}, headers={"Origin": SPA_ORIGIN})
        assert "access-control-allow-origin" not in answer.headers


def test_an_origin_another_live_application_lists_stays_open(client, ctx, monkeypatch, make_application, oidc_client,
                                                             spa):
    """The application being deleted is skipped, not taken for the answer."""
    doomed = make_application("Doomed")
    oidc_client(doomed, token_endpoint_auth_method="none", allowed_origins=[SPA_ORIGIN])
    _delete_cut_short(ctx, monkeypatch, doomed)
    assert preflight(client, "/oidc/token", SPA_ORIGIN).headers["access-control-allow-origin"] == SPA_ORIGIN


@pytest.mark.parametrize("origin", ["https://spa.example.com/", "https://spa.example.com/app", "spa.example.com",
                                    "https://SPA.example.com", "http://spa.example.com", "https://spa.example.com#x",
                                    "https://spa.example.com?x", "*", "null"])
def test_origins_are_validated(client, application, manager_key, origin):
    response = client.simulate_post(clients_url(application), json={
        "name": "x", "redirect_uris": ["https://rp.example.com/cb"], "allowed_origins": [origin]},
        headers={"Authorization": f"Bearer {manager_key}"})
    assert response.status_code == 400 and "allowed_origins" in response.json["error"]["details"]["fields"]


def test_usable_origins(spa, application, oidc_client):
    assert spa["allowed_origins"] == [SPA_ORIGIN]
    local = oidc_client(application, allowed_origins=["http://127.0.0.1:5173", "http://localhost:3000",
                                                      "https://[2001:db8::1]:8443"])
    assert len(local["allowed_origins"]) == 3


# An Origin header is the RFC 6454 6.2 serialization of the page's origin: an http(s)
# scheme, the host as the browser writes it, and the port only when it is not the
# scheme's default.  Written any other way, an allowed origin would never match.
@pytest.mark.parametrize("origin, why", [
    ("com.example.app://spa", "https"),  # a private-use scheme, even for a confidential client
    ("https://spa.example.com:", "empty port"),
    ("https://spa.example.com:443", "drop the default port :443"),
    ("http://localhost:80", "drop the default port :80"),
    ("https://spa.example.com:08443", "https://spa.example.com:8443"),
    ("https://[2001:db8:0:0::1]", "https://[2001:db8::1]"),
    ("https://127.1", "dotted decimal"),
])
def test_an_origin_no_browser_sends_is_refused_at_registration_and_update(client, application, manager_key, spa,
                                                                          origin, why):
    headers = {"Authorization": f"Bearer {manager_key}"}
    created = client.simulate_post(clients_url(application), headers=headers, json={
        "name": "x", "redirect_uris": ["https://rp.example.com/cb"], "allowed_origins": [origin]})
    updated = client.simulate_put(clients_url(application, f"/{spa['id']}"), headers=headers,
                                  json={"allowed_origins": [SPA_ORIGIN, origin]})
    for response in (created, updated):
        fields = assert_error(response, 400, "VALIDATION_INVALID_FORMAT")["details"]["fields"]
        assert [key for key in fields if key.startswith("allowed_origins")] == list(fields)
        assert why in " ".join(fields.values())
