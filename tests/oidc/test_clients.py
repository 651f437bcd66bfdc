"""V1/oidc/clients (oidc:manage): every field, the secret once and hashed, redirect URI
rules, PUT replacing lists, DELETE keeping issued tokens valid."""
import falcon.testing
import pytest

from controlplane.app import create_app
from shared.ids import digest
from tests.conftest import assert_error, bearer
from tests.oidc.conftest import REDIRECT_URI, clients_url


def test_create_returns_the_secret_once_and_stores_its_digest(client, ctx, application, manager_key):
    body = {"name": "Portal", "description": "the portal", "logo_url": "https://rp.example.com/logo.png",
            "redirect_uris": [REDIRECT_URI, "http://localhost:3000/cb", "http://127.0.0.1:8080/cb"],
            "post_logout_redirect_uris": ["https://rp.example.com/bye"], "allowed_scopes": ["openid", "email"]}
    response = client.simulate_post(clients_url(application), json=body, headers=bearer(manager_key))
    assert response.status_code == 201, response.text
    assert response.headers["cache-control"] == "no-store"
    data = response.json["data"]
    assert set(data) == {"id", "client_id", "client_secret", "name", "description", "logo_url", "redirect_uris",
                         "post_logout_redirect_uris", "allowed_scopes", "require_pkce", "grant_types",
                         "token_endpoint_auth_method", "backchannel_logout_uri", "allowed_origins",
                         "is_active", "previous_secret_expires_at", "created_at", "updated_at"}
    assert data["previous_secret_expires_at"] is None
    assert {k: data[k] for k in body} == body and data["is_active"] is True and data["require_pkce"] is True
    stored = ctx.store["oidc_clients"].find_one({"_id": data["id"]})
    assert stored["secret_digest"] == digest(data["client_secret"])
    assert data["client_secret"] not in str(stored)

    fetched = client.simulate_get(clients_url(application, f"/{data['id']}"), headers=bearer(manager_key))
    assert fetched.status_code == 200 and "client_secret" not in fetched.json["data"]
    by_client_id = client.simulate_get(clients_url(application, f"/{data['client_id']}"), headers=bearer(manager_key))
    assert by_client_id.json["data"]["id"] == data["id"]
    listed = client.simulate_get(clients_url(application), headers=bearer(manager_key)).json["data"]
    assert [c["id"] for c in listed] == [data["id"]] and "client_secret" not in listed[0]


def test_defaults_and_globally_unique_client_ids(client, application, make_application, oidc_client):
    first = oidc_client(application)
    second = oidc_client(make_application())
    assert first["allowed_scopes"] == ["openid", "profile", "email"]
    assert first["client_id"] != second["client_id"]


def test_offline_access_may_be_an_allowed_scope(client, application, manager_key, oidc_client):
    """Authorize accepts offline_access, so registration must too (it was a 400)."""
    created = oidc_client(application, allowed_scopes=["openid", "offline_access"])
    assert created["allowed_scopes"] == ["openid", "offline_access"]
    response = client.simulate_put(clients_url(application, f"/{created['id']}"), headers=bearer(manager_key),
                                   json={"allowed_scopes": ["openid", "email", "offline_access"]})
    assert response.status_code == 200, response.text
    assert response.json["data"]["allowed_scopes"] == ["openid", "email", "offline_access"]


def test_require_pkce_defaults_to_true_and_may_be_turned_off(client, application, manager_key, oidc_client):
    assert oidc_client(application)["require_pkce"] is True
    created = oidc_client(application, require_pkce=False)
    assert created["require_pkce"] is False
    response = client.simulate_put(clients_url(application, f"/{created['id']}"), headers=bearer(manager_key),
                                   json={"require_pkce": True})
    assert response.json["data"]["require_pkce"] is True
    refused = client.simulate_post(clients_url(application), headers=bearer(manager_key),
                                   json={"name": "x", "redirect_uris": [REDIRECT_URI], "require_pkce": "no"})
    assert "require_pkce" in assert_error(refused, 400, "VALIDATION_INVALID_FORMAT")["details"]["fields"]


@pytest.mark.parametrize("uri", ["http://rp.example.com/cb", "https://rp.example.com/cb#frag", "/relative/cb",
                                 "rp.example.com/cb", "custom-scheme://cb", "https://user:pw@rp.example.com/cb"])
def test_redirect_uris_must_be_absolute_https_without_fragment(client, application, manager_key, uri):
    response = client.simulate_post(clients_url(application), json={"name": "x", "redirect_uris": [uri]},
                                    headers=bearer(manager_key))
    error = assert_error(response, 400, "VALIDATION_INVALID_FORMAT")
    assert "redirect_uris" in error["details"]["fields"]


def test_create_validation(client, application, manager_key):
    response = client.simulate_post(clients_url(application), json={"name": "x" * 256, "redirect_uris": [],
                                                                    "allowed_scopes": ["admin"]},
                                    headers=bearer(manager_key))
    error = assert_error(response, 400, "VALIDATION_MULTIPLE_ERRORS")
    assert set(error["details"]["fields"]) == {"name", "redirect_uris", "allowed_scopes"}


def test_put_replaces_lists_and_toggles_is_active(client, application, manager_key, oidc_client):
    created = oidc_client(application, redirect_uris=[REDIRECT_URI, "https://rp.example.com/other"])
    response = client.simulate_put(clients_url(application, f"/{created['id']}"), headers=bearer(manager_key),
                                   json={"redirect_uris": ["https://rp.example.com/new"], "is_active": False,
                                         "description": None})
    assert response.status_code == 200, response.text
    data = response.json["data"]
    assert data["redirect_uris"] == ["https://rp.example.com/new"] and data["is_active"] is False
    assert data["name"] == created["name"] and data["allowed_scopes"] == created["allowed_scopes"]
    assert "client_secret" not in data


def test_permission_and_tenant_isolation(client, application, make_application, make_api_key, oidc_client,
                                         user_token):
    created = oidc_client(application)
    assert_error(client.simulate_get(clients_url(application), headers=user_token.headers), 403, "FORBIDDEN")
    other_app = make_application()
    other_key = make_api_key(other_app, permissions=["oidc:manage"])
    assert_error(client.simulate_get(clients_url(application), headers=bearer(other_key)), 401)
    foreign = client.simulate_get(clients_url(other_app, f"/{created['id']}"), headers=bearer(other_key))
    assert_error(foreign, 404, "OIDC_CLIENT_NOT_FOUND")


def test_delete_answers_204_and_issued_tokens_stay_valid(client, application, manager_key, user_token, rp_client,
                                                         issue_tokens):
    tokens = issue_tokens(user_token, rp_client)
    response = client.simulate_delete(clients_url(application, f"/{rp_client['id']}"), headers=bearer(manager_key))
    assert response.status_code == 204
    assert_error(client.simulate_get(clients_url(application, f"/{rp_client['id']}"), headers=bearer(manager_key)),
                 404, "OIDC_CLIENT_NOT_FOUND")
    assert_error(client.simulate_delete(clients_url(application, f"/{rp_client['id']}"),
                                        headers=bearer(manager_key)), 404, "OIDC_CLIENT_NOT_FOUND")
    info = client.simulate_get("/oidc/userinfo", headers=bearer(tokens["access_token"]))
    assert info.status_code == 200 and info.json["sub"] == user_token.user["id"]


# Hosts and ports a browser cannot be sent to, and that the hosted login's form-action
# (the origin of the redirect URI) cannot be written for.
UNUSABLE_REDIRECT_URIS = [
    "https://rp_app.example.com/cb",  # '_' is not a host-name character
    "https://bücher.example/cb",  # an IDN is accepted in punycode only
    "https://rp.example.com:99999/cb",
    "https://rp.example.com:0/cb",
    "https://rp.example.com:http/cb",
    "https://-rp.example.com/cb",
    "https://rp..example.com/cb",
    "https://[not-an-ip]/cb",  # urlsplit itself raises on it
    "https://rp.example.com/caf\u00e9",  # not ASCII: percent-encode it
    "https://rp.example.com/a\x00b",
]


@pytest.mark.parametrize("field", ["redirect_uris", "post_logout_redirect_uris"])
@pytest.mark.parametrize("uri", UNUSABLE_REDIRECT_URIS)
def test_unusable_hosts_and_ports_are_refused(client, application, manager_key, oidc_client, field, uri):
    body = {"name": "x", "redirect_uris": [REDIRECT_URI], field: [REDIRECT_URI, uri]}
    error = assert_error(client.simulate_post(clients_url(application), json=body, headers=bearer(manager_key)),
                         400, "VALIDATION_INVALID_FORMAT")
    assert field in error["details"]["fields"]
    created = oidc_client(application)
    update = client.simulate_put(clients_url(application, f"/{created['id']}"), json={field: [uri]},
                                 headers=bearer(manager_key))
    assert field in assert_error(update, 400, "VALIDATION_INVALID_FORMAT")["details"]["fields"]


def test_a_logo_url_with_a_bracketed_host_that_is_no_ip_is_refused(client, application, manager_key):
    body = {"name": "x", "redirect_uris": [REDIRECT_URI], "logo_url": "https://[not-an-ip]/logo.png"}
    error = assert_error(client.simulate_post(clients_url(application), json=body, headers=bearer(manager_key)),
                         400, "VALIDATION_INVALID_FORMAT")
    assert "logo_url" in error["details"]["fields"]


def test_an_http_logo_url_is_refused(client, application, manager_key, oidc_client):
    # The consent page shows the logo under a CSP whose img-src is https: only.
    body = {"name": "x", "redirect_uris": [REDIRECT_URI], "logo_url": "http://rp.example.com/logo.png"}
    error = assert_error(client.simulate_post(clients_url(application), json=body, headers=bearer(manager_key)),
                         400, "VALIDATION_INVALID_FORMAT")
    assert error["details"]["fields"] == {"logo_url": "must be a valid https URL"}
    created = oidc_client(application)
    update = client.simulate_put(clients_url(application, f"/{created['id']}"),
                                 json={"logo_url": "http://rp.example.com/logo.png"}, headers=bearer(manager_key))
    assert "logo_url" in assert_error(update, 400, "VALIDATION_INVALID_FORMAT")["details"]["fields"]


@pytest.mark.parametrize("uri", ["https://xn--bcher-kva.example/cb", "https://rp.example.com:65535/cb",
                                 "https://rp-1.example.com:8443/cb?x=1", "https://[2001:db8::1]/cb",
                                 "https://203.0.113.7/cb", "http://localhost:3000/cb",
                                 "https://rp.example.com/caf%C3%A9"])
def test_usable_hosts_and_ports_are_accepted(client, application, manager_key, uri):
    response = client.simulate_post(clients_url(application), json={"name": "x", "redirect_uris": [uri]},
                                    headers=bearer(manager_key))
    assert response.status_code == 201, response.text
    assert response.json["data"]["redirect_uris"] == [uri]


def _backchannel_refused(client, application, manager_key, oidc_client, uri) -> str:
    """The reason both create and update give for ``uri``; nothing is stored."""
    body = {"name": "x", "redirect_uris": [REDIRECT_URI], "backchannel_logout_uri": uri}
    created = client.simulate_post(clients_url(application), json=body, headers=bearer(manager_key))
    reason = assert_error(created, 400, "VALIDATION_INVALID_FORMAT")["details"]["fields"]["backchannel_logout_uri"]
    rp = oidc_client(application, backchannel_logout_uri="https://rp.example.com/logout")
    update = client.simulate_put(clients_url(application, f"/{rp['id']}"), json={"backchannel_logout_uri": uri},
                                 headers=bearer(manager_key))
    assert assert_error(update, 400, "VALIDATION_INVALID_FORMAT")["details"]["fields"] == {
        "backchannel_logout_uri": reason}
    stored = client.simulate_get(clients_url(application), headers=bearer(manager_key)).json["data"]
    assert [c["backchannel_logout_uri"] for c in stored if c["name"] == "x"] == []
    assert [c["backchannel_logout_uri"] for c in stored if c["id"] == rp["id"]] == ["https://rp.example.com/logout"]
    return reason


@pytest.mark.parametrize("uri, reason", [
    ("http://rp.example.com/logout", "must be an https URL"),
    ("http://127.0.0.1:9000/logout", "must be an https URL"),  # http for loopback only with the override
    ("https://rp.example.com/logout#frag", "must not contain a fragment"),
    ("https://127.0.0.1/logout", "must not target a private or local address (loopback)"),
    ("https://[::1]:8443/logout", "must not target a private or local address (loopback)"),
    ("https://10.0.0.7/logout", "must not target a private or local address (private)"),
    ("https://169.254.169.254/latest/meta-data", "must not target a private or local address (link-local)"),
    ("https://0x7f.1/logout", "must not target a private or local address (loopback)"),
    ("https://localhost/logout", "must not target a private or local address (localhost name)"),
])
def test_a_backchannel_logout_uri_must_be_a_public_https_url(client, application, manager_key, oidc_client, uri,
                                                             reason):
    assert _backchannel_refused(client, application, manager_key, oidc_client, uri).startswith(reason)


@pytest.mark.parametrize("config_overrides", [{"webhook_allow_private_targets": True}])
def test_the_development_override_allows_http_on_loopback_only(client, application, manager_key, oidc_client):
    assert oidc_client(application, backchannel_logout_uri="http://127.0.0.1:9000/bc")["backchannel_logout_uri"] \
        == "http://127.0.0.1:9000/bc"
    assert oidc_client(application, backchannel_logout_uri="https://10.0.0.7/bc")["backchannel_logout_uri"] \
        == "https://10.0.0.7/bc"
    reason = _backchannel_refused(client, application, manager_key, oidc_client, "http://rp.example.com/bc")
    assert reason.startswith("must be an https URL")


def test_a_name_that_resolves_to_a_private_address_is_refused(config, clock):
    """The webhook rules resolve the name at registration (every send checks again)."""
    app = create_app(config, clock=clock, resolver=lambda host, port: ["192.168.1.20"], start_background=False)
    client = falcon.testing.TestClient(app)
    application = app.services.applications.create({"name": "App"}, organization_id=None, owner_account_id=None)
    _, key = app.services.api_keys.create(application, {"name": "k", "permissions": ["oidc:manage"]})
    body = {"name": "x", "redirect_uris": [REDIRECT_URI], "backchannel_logout_uri": "https://intranet.example/bc"}
    response = client.simulate_post(clients_url(application), json=body, headers=bearer(key))
    assert assert_error(response, 400, "VALIDATION_INVALID_FORMAT")["details"]["fields"] == {
        "backchannel_logout_uri": "must not target a private or local address (private)"}
