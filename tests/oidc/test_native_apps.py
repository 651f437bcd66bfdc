"""Native apps (RFC 8252): a loopback IP redirect URI matches on any port (7.3), a
private-use scheme redirect (7.1) is accepted for public clients only."""
import pytest

from tests.conftest import assert_error
from tests.oidc.conftest import assert_oauth_error, clients_url, pkce_pair

LOOPBACKS = ["http://127.0.0.1/callback", "http://[::1]/callback"]


@pytest.fixture
def native(application, oidc_client):
    return oidc_client(application, token_endpoint_auth_method="none",
                       redirect_uris=[*LOOPBACKS, "com.example.app:/oauth2redirect"])


def code_flow(client, authorize, user_token, app, redirect_uri):
    """Authorize and exchange with ``redirect_uri``; the token response."""
    verifier, challenge = pkce_pair()
    response = authorize(user_token, app, challenge=challenge, redirect_uri=redirect_uri)
    assert response.status_code == 200, response.text
    assert response.json["redirect_uri"] == redirect_uri
    return client.simulate_post("/oidc/token", json={
        "grant_type": "authorization_code", "code": response.json["code"], "redirect_uri": redirect_uri,
        "code_verifier": verifier, "client_id": app["client_id"]})


@pytest.mark.parametrize("redirect_uri", ["http://127.0.0.1:49152/callback", "http://127.0.0.1:8080/callback",
                                          "http://[::1]:61000/callback", "http://127.0.0.1/callback"])
def test_a_loopback_redirect_matches_on_any_port(client, authorize, user_token, native, redirect_uri):
    response = code_flow(client, authorize, user_token, native, redirect_uri)
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("redirect_uri", ["http://127.0.0.1:49152/other", "http://127.0.0.1:49152/callback?x=1",
                                          "https://127.0.0.1:49152/callback", "http://localhost:49152/callback",
                                          "http://127.0.0.2:49152/callback"])
def test_only_the_port_may_differ(authorize, user_token, native, redirect_uri):
    assert_oauth_error(authorize(user_token, native, redirect_uri=redirect_uri), "invalid_request")


def test_a_confidential_clients_loopback_redirect_is_an_exact_match(client, authorize, user_token, application,
                                                                    oidc_client):
    """RFC 8252 7.3's any port is for native apps: a confidential client's server
    listens on a known port, and another local process must not get its codes."""
    server = oidc_client(application, redirect_uris=["http://127.0.0.1:8000/callback", "http://[::1]/callback"])
    assert authorize(user_token, server, redirect_uri="http://127.0.0.1:8000/callback").status_code == 200
    assert authorize(user_token, server, redirect_uri="http://[::1]/callback").status_code == 200
    for other_port in ("http://127.0.0.1:8001/callback", "http://127.0.0.1/callback", "http://[::1]:9000/callback"):
        assert_oauth_error(authorize(user_token, server, redirect_uri=other_port), "invalid_request")


def test_the_exchange_needs_the_port_the_authorization_used(client, authorize, user_token, native):
    verifier, challenge = pkce_pair()
    code = authorize(user_token, native, challenge=challenge, redirect_uri="http://127.0.0.1:5000/callback").json
    response = client.simulate_post("/oidc/token", json={
        "grant_type": "authorization_code", "code": code["code"], "redirect_uri": "http://127.0.0.1:5001/callback",
        "code_verifier": verifier, "client_id": native["client_id"]})
    assert_oauth_error(response, "invalid_grant")


def test_a_private_use_scheme_redirect(client, authorize, user_token, native):
    assert code_flow(client, authorize, user_token, native, "com.example.app:/oauth2redirect").status_code == 200


def test_private_use_schemes_are_for_public_clients(client, application, manager_key, rp_client):
    auth = {"Authorization": f"Bearer {manager_key}"}
    for field in ("redirect_uris", "post_logout_redirect_uris"):
        body = {"name": "x", "redirect_uris": ["https://rp.example.com/cb"], field: ["com.example.app:/cb"]}
        response = client.simulate_post(clients_url(application), json=body, headers=auth)
        assert response.status_code == 400 and field in response.json["error"]["details"]["fields"]
    update = client.simulate_put(clients_url(application, f"/{rp_client['id']}"),
                                 json={"redirect_uris": ["com.example.app:/cb"]}, headers=auth)
    assert update.status_code == 400


@pytest.mark.parametrize("uri", ["com.example.app:/cb#frag", "myapp:/cb", "http://[::2]/cb"])
def test_bad_native_redirects_are_refused(client, application, manager_key, uri):
    response = client.simulate_post(clients_url(application), json={
        "name": "x", "redirect_uris": [uri], "token_endpoint_auth_method": "none"},
        headers={"Authorization": f"Bearer {manager_key}"})
    assert response.status_code == 400 and "redirect_uris" in response.json["error"]["details"]["fields"]


@pytest.mark.parametrize("field", ["redirect_uris", "post_logout_redirect_uris"])
@pytest.mark.parametrize("uri", ["evil.example.com", "com.example.app/cb", "evil.example.com/cb"])
def test_a_redirect_without_a_scheme_is_refused(client, application, manager_key, native, field, uri):
    """RFC 6749 3.1.2 and RFC 8252 7.1: an absolute URI, with its scheme; a reverse
    domain name without ":" is no private-use scheme."""
    auth = {"Authorization": f"Bearer {manager_key}"}
    body = {"name": "x", "token_endpoint_auth_method": "none", "redirect_uris": LOOPBACKS, field: [uri]}
    created = client.simulate_post(clients_url(application), json=body, headers=auth)
    assert "absolute" in str(assert_error(created, 400, "VALIDATION_INVALID_FORMAT")["details"]["fields"][field])
    updated = client.simulate_put(clients_url(application, f"/{native['id']}"), json={field: [uri]}, headers=auth)
    assert field in assert_error(updated, 400, "VALIDATION_INVALID_FORMAT")["details"]["fields"]


def test_a_loopback_redirect_with_a_bad_port_is_refused(authorize, user_token, native):
    for uri in ("http://127.0.0.1:0/callback", "http://127.0.0.1:70000/callback"):
        assert_oauth_error(authorize(user_token, native, redirect_uri=uri), "invalid_request")


def test_the_hosted_pages_send_a_native_app_its_code(ctx, client, application, native, make_user):
    """The hosted login and consent pages redirect to a private-use scheme and to a
    loopback port, each allowed by the pages' CSP form-action (which holds the redirect
    that follows the consent post)."""
    from tests.oidc.test_hosted import Browser, assert_page, authorize_url

    ctx.applications.update(application["_id"], {"oauth_hosted_login_enabled": True})
    person = make_user(application)
    for redirect_uri, source in (("com.example.app:/oauth2redirect", "com.example.app:"),
                                 ("http://127.0.0.1:49152/callback", "http://127.0.0.1:49152")):
        browser = Browser(client)
        login_page = browser.get(authorize_url(native, redirect_uri=redirect_uri))
        assert_page(login_page, "Sign in")
        assert f"form-action 'self' {source}" in login_page.headers["content-security-policy"]
        answer = browser.submit(login_page, email=person["email"], password=person["password"])
        if answer.status_code == 200:  # the first time; the consent is remembered after
            assert_page(answer, "Allow access?")
            answer = browser.submit(answer, decision="allow")
        assert answer.status_code == 302 and answer.headers["location"].startswith(redirect_uri + "?code=")
