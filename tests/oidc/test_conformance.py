"""The OpenID Foundation's conformance plans, module by module: "Basic OP"
(oidcc-basic-certification-test-plan, static client, client_secret_basic), "Config OP"
(oidcc-config-certification-test-plan) and "RP-Initiated Logout OP"
(oidcc-rp-initiated-logout-certification-test-plan).

Each test is named after one test module and sends what that module sends, through the
hosted pages as the suite's browser does, and checks what the module checks.  The suite
itself is not run here (it is a Java service); what each module sends and checks is
written from the module's description in the suite, and a docstring says so where a
module accepts more than one outcome and this provider picks one.

The whole plan runs twice (``plan``): once with a confidential client registered with
``require_pkce: false`` and requests without PKCE, exactly as the certification suite
sends them, and once with PKCE S256, as every other client of this provider must send.
"""
from __future__ import annotations

import base64
import json
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
import pytest

from tests.conftest import bearer
from tests.oidc.conftest import REDIRECT_URI, pkce_pair
from tests.oidc.test_hosted import Browser, assert_page, query_of

BYE = "https://rp.example.com/bye"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
UNREGISTERED = "https://rp.example.com/callback-not-registered"


class Suite:
    """The conformance suite's side: a browser that signs in on the hosted pages, and a
    client that calls the token and userinfo endpoints with client_secret_basic."""

    def __init__(self, client, browser, rp, person, config, *, pkce: bool):
        self.client, self.browser, self.rp, self.person = client, browser, rp, person
        self.issuer, self.pkce = config.public_url, pkce
        self.verifier = None

    # ------------------------------------------------------------ the authorization request

    def request(self, **params) -> dict:
        """The suite's authorization request: response_type=code, scope=openid, state and
        nonce (and PKCE S256 in the PKCE run); ``None`` leaves a parameter out."""
        query = {"response_type": "code", "client_id": self.rp["client_id"], "redirect_uri": REDIRECT_URI,
                 "scope": "openid", "state": "suite-state", "nonce": "suite-nonce"}
        if self.pkce:
            self.verifier, challenge = pkce_pair()
            query.update(code_challenge=challenge, code_challenge_method="S256")
        query.update(params)
        return {k: v for k, v in query.items() if v is not None}

    def get(self, **params):
        return self.browser.get("/oidc/authorize?" + urlencode(self.request(**params)))

    def sign_in(self, page):
        """The login page (and the consent page the first time) to the redirect."""
        assert_page(page, "Sign in")
        answer = self.browser.submit(page, email=self.person["email"], password=self.person["password"])
        if answer.status_code == 200 and "decision" in answer.text:
            answer = self.browser.submit(answer, decision="allow")
        return answer

    def authorize(self, **params) -> dict:
        """A whole authorization: the login when the page asks for it; the callback's query."""
        answer = self.get(**params)
        if answer.status_code == 200:
            answer = self.sign_in(answer)
        return query_of(answer)

    # ------------------------------------------------------------ the back channel

    def token(self, code: str, *, verifier: str | None = None, **extra):
        body = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI, **extra}
        if self.pkce:
            body["code_verifier"] = verifier or self.verifier
        return self.client.simulate_post("/oidc/token", body=urlencode(body), headers={**FORM, **self.basic()})

    def basic(self) -> dict:
        raw = f"{self.rp['client_id']}:{self.rp['client_secret']}".encode()
        return {"Authorization": "Basic " + base64.b64encode(raw).decode()}

    def tokens(self, **params) -> dict:
        """Authorization, then the code exchanged; the token response, its ID token checked."""
        callback = self.authorize(**params)
        assert callback["state"] == params.get("state", "suite-state") and callback["code"]
        response = self.token(callback["code"])
        assert response.status_code == 200, response.text
        assert response.headers["cache-control"] == "no-store"
        body = response.json
        assert body["token_type"].lower() == "bearer"
        body["claims"] = self.id_token_claims(body["id_token"])
        return body

    def id_token_claims(self, id_token: str) -> dict:
        """What every module checks of an ID token (OIDC Core 3.1.3.7): RS256 under a key
        of the JWKS, iss, aud, exp, iat, sub, and auth_time (iamgate always sends it)."""
        keys = jwt.PyJWKSet.from_dict(self.client.simulate_get("/.well-known/jwks.json").json)
        kid = jwt.get_unverified_header(id_token)["kid"]
        key = next(k for k in keys.keys if k.key_id == kid)
        claims = jwt.decode(id_token, key.key, algorithms=["RS256"], audience=self.rp["client_id"],
                            issuer=self.issuer, leeway=60,  # the tests move the clock on
                            options={"require": ["exp", "iat", "sub", "auth_time"]})
        assert claims["exp"] > claims["iat"]
        return claims

    def userinfo(self, access_token: str):
        return self.client.simulate_get("/oidc/userinfo", headers=bearer(access_token))

    def logout(self, method="GET", **params):
        if method == "POST":
            return self.browser.request("POST", "/oidc/logout", body=urlencode(params), headers=FORM)
        return self.browser.get("/oidc/logout?" + urlencode(params))


@pytest.fixture(params=["without-pkce", "with-pkce"])
def plan(request):
    return request.param == "with-pkce"


@pytest.fixture
def rp(hosted_app, oidc_client, plan):
    return oidc_client(hosted_app, name="Conformance Suite", require_pkce=plan,
                       allowed_scopes=["openid", "profile", "email", "offline_access"],
                       post_logout_redirect_uris=[BYE])


@pytest.fixture
def person(hosted_app, make_user):
    return make_user(hosted_app, name="Ada Lovelace")


@pytest.fixture
def suite(client, rp, person, config, plan):
    return Suite(client, Browser(client), rp, person, config, pkce=plan)


def error_of(response, error: str, state: str | None = "suite-state") -> dict:
    """An authorization error returned to the client: on the redirect URI, with state."""
    assert response.headers["location"].startswith(REDIRECT_URI + "?"), response.headers.get("location")
    query = query_of(response)
    assert query["error"] == error and query.get("state") == state, query
    return query


# ==================================================================== Basic OP


def test_oidcc_server(suite):
    """oidcc-server: the code flow end to end; the ID token is valid (RS256 under the
    JWKS, iss, aud, exp, iat, nonce) and userinfo answers the same sub."""
    tokens = suite.tokens()
    assert tokens["claims"]["nonce"] == "suite-nonce"
    info = suite.userinfo(tokens["access_token"])
    assert info.status_code == 200 and info.json["sub"] == tokens["claims"]["sub"]


def test_oidcc_server_client_secret_post(suite):
    """oidcc-server-client-secret-post: the same flow, client_secret_post at the token
    endpoint."""
    code = suite.authorize()["code"]
    body = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI,
            "client_id": suite.rp["client_id"], "client_secret": suite.rp["client_secret"]}
    if suite.pkce:
        body["code_verifier"] = suite.verifier
    response = suite.client.simulate_post("/oidc/token", body=urlencode(body), headers=FORM)
    assert response.status_code == 200, response.text
    suite.id_token_claims(response.json["id_token"])


def test_oidcc_response_type_missing(suite):
    """oidcc-response-type-missing: no response_type.  The module accepts an error page
    or an error on the redirect URI (invalid_request or unsupported_response_type); the
    client and redirect URI are valid, so this provider redirects with invalid_request."""
    error_of(suite.get(response_type=None), "invalid_request")


@pytest.mark.parametrize("method", ["get", "post-header", "post-body"])
def test_oidcc_userinfo(suite, method):
    """oidcc-userinfo-get, oidcc-userinfo-post-header, oidcc-userinfo-post-body: the
    access token by GET with a bearer header, by POST with the header, by POST in the
    form body (RFC 6750 2.2); each answers the ID token's sub."""
    tokens = suite.tokens()
    if method == "get":
        response = suite.userinfo(tokens["access_token"])
    elif method == "post-header":
        response = suite.client.simulate_post("/oidc/userinfo", headers=bearer(tokens["access_token"]))
    else:
        response = suite.client.simulate_post("/oidc/userinfo", headers=FORM,
                                              body=urlencode({"access_token": tokens["access_token"]}))
    assert response.status_code == 200, response.text
    assert response.json["sub"] == tokens["claims"]["sub"]


def test_oidcc_ensure_request_without_nonce_succeeds_for_code_flow(suite):
    """oidcc-ensure-request-without-nonce-succeeds-for-code-flow: nonce is optional in
    the code flow; the ID token then has no nonce."""
    tokens = suite.tokens(nonce=None)
    assert "nonce" not in tokens["claims"]


@pytest.mark.parametrize("scope, claims", [
    ("openid profile", {"name"}),
    ("openid email", {"email", "email_verified"}),
    ("openid profile email", {"name", "email", "email_verified"}),
])
def test_oidcc_scope_profile_email_all(suite, scope, claims):
    """oidcc-scope-profile, oidcc-scope-email, oidcc-scope-all: userinfo answers the
    claims of each scope.  oidcc-scope-all asks for every scope discovery lists besides
    offline_access; address and phone are not supported (not in scopes_supported, so
    the suite skips oidcc-scope-address and oidcc-scope-phone; a request for them is
    invalid_scope, a deliberate difference, docs/oidc.md)."""
    tokens = suite.tokens(scope=scope)
    info = suite.userinfo(tokens["access_token"]).json
    assert claims <= set(info) and info["email" if "email" in claims else "name"]
    assert "address" not in suite.client.simulate_get("/.well-known/openid-configuration").json["scopes_supported"]
    error_of(suite.get(scope="openid address"), "invalid_scope")


def test_oidcc_ensure_other_scope_order_succeeds(suite):
    """oidcc-ensure-other-scope-order-succeeds: "email openid" is "openid email"."""
    tokens = suite.tokens(scope="email openid")
    assert "email" in suite.userinfo(tokens["access_token"]).json


@pytest.mark.parametrize("params", [
    {"display": "page"}, {"display": "popup"}, {"ui_locales": "se"}, {"claims_locales": "se"},
    {"acr_values": "1 2"}, {"extra": "foobar"},
    {"claims": json.dumps({"userinfo": {"name": {"essential": True}}, "id_token": {"email": {"essential": True}}})},
], ids=["oidcc-display-page", "oidcc-display-popup", "oidcc-ui-locales", "oidcc-claims-locales",
        "oidcc-ensure-request-with-acr-values-succeeds", "oidcc-ensure-request-with-unknown-parameter-succeeds",
        "oidcc-claims-essential"])
def test_ignored_parameters_succeed(suite, params):
    """oidcc-display-page, oidcc-display-popup, oidcc-ui-locales, oidcc-claims-locales,
    oidcc-ensure-request-with-acr-values-succeeds,
    oidcc-ensure-request-with-unknown-parameter-succeeds, oidcc-claims-essential: each
    parameter may be ignored, and the flow must succeed.  (The claims request parameter
    is ignored: discovery does not say claims_parameter_supported.)"""
    tokens = suite.tokens(**params)
    assert suite.userinfo(tokens["access_token"]).status_code == 200


def test_oidcc_login_hint(suite):
    """oidcc-login-hint: login_hint is accepted; iamgate pre-fills the email with it."""
    page = suite.get(login_hint=suite.person["email"])
    assert f'value="{suite.person["email"]}"' in page.text
    assert suite.token(query_of(suite.sign_in(page))["code"]).status_code == 200


def test_oidcc_prompt_login(suite, clock):
    """oidcc-prompt-login: signed in, then prompt=login shows the login page again; the
    second ID token's auth_time is the new sign-in."""
    first = suite.tokens()
    clock.advance(2)
    page = suite.get(prompt="login")
    second = suite.token(query_of(suite.sign_in(page))["code"])
    assert suite.id_token_claims(second.json["id_token"])["auth_time"] > first["claims"]["auth_time"]


def test_oidcc_prompt_none_not_logged_in(suite):
    """oidcc-prompt-none-not-logged-in: no session and prompt=none is login_required on
    the redirect URI, with state."""
    error_of(suite.get(prompt="none"), "login_required")


def test_oidcc_prompt_none_logged_in(suite):
    """oidcc-prompt-none-logged-in: signed in, prompt=none answers a code at once, for the
    same sub."""
    first = suite.tokens()
    callback = query_of(suite.get(prompt="none"))
    second = suite.token(callback["code"])
    assert suite.id_token_claims(second.json["id_token"])["sub"] == first["claims"]["sub"]


def test_oidcc_max_age_1(suite, clock):
    """oidcc-max-age-1: signed in, a second later max_age=1 must sign the user in again;
    the new auth_time is later than the first."""
    first = suite.tokens()
    clock.advance(2)
    page = suite.get(max_age="1")
    second = suite.token(query_of(suite.sign_in(page))["code"])
    assert suite.id_token_claims(second.json["id_token"])["auth_time"] > first["claims"]["auth_time"]


def test_oidcc_max_age_10000(suite, clock):
    """oidcc-max-age-10000: signed in, max_age=10000 needs no new sign-in; auth_time is
    the first one."""
    first = suite.tokens()
    clock.advance(2)
    callback = query_of(suite.get(max_age="10000"))
    second = suite.token(callback["code"])
    assert suite.id_token_claims(second.json["id_token"])["auth_time"] == first["claims"]["auth_time"]


def test_oidcc_id_token_hint(suite):
    """oidcc-id-token-hint: signed in, then prompt=none with the first ID token as
    id_token_hint; the code is answered and the sub is the same."""
    first = suite.tokens()
    callback = query_of(suite.get(prompt="none", id_token_hint=first["id_token"]))
    second = suite.token(callback["code"])
    assert suite.id_token_claims(second.json["id_token"])["sub"] == first["claims"]["sub"]


def test_oidcc_codereuse(suite):
    """oidcc-codereuse: a code exchanged twice; the second exchange is invalid_grant."""
    callback = suite.authorize()
    assert suite.token(callback["code"]).status_code == 200
    again = suite.token(callback["code"])
    assert again.status_code == 400 and again.json["error"] == "invalid_grant"


def test_oidcc_codereuse_30seconds(suite, clock):
    """oidcc-codereuse-30seconds: 30 s later the code is exchanged again: invalid_grant,
    and the access token of the first exchange should no longer work (RFC 6749 4.1.2)."""
    callback = suite.authorize()
    first = suite.token(callback["code"]).json
    assert suite.userinfo(first["access_token"]).status_code == 200
    clock.advance(30)
    again = suite.token(callback["code"])
    assert again.status_code == 400 and again.json["error"] == "invalid_grant"
    assert suite.userinfo(first["access_token"]).status_code == 401


def test_oidcc_ensure_registered_redirect_uri(suite):
    """oidcc-ensure-registered-redirect-uri: an unregistered redirect_uri must be an
    error shown to the user, never a redirect."""
    response = suite.get(redirect_uri=UNREGISTERED)
    assert response.status_code == 400 and "location" not in response.headers
    assert response.headers["content-type"].startswith("text/html")


def unsigned_request_object(suite, **claims) -> str:
    header = base64.urlsafe_b64encode(b'{"alg":"none"}').rstrip(b"=").decode()
    body = {"iss": suite.rp["client_id"], "aud": suite.issuer, **suite.request(), **claims}
    payload = base64.urlsafe_b64encode(json.dumps(body).encode()).rstrip(b"=").decode()
    return f"{header}.{payload}."


def test_oidcc_unsigned_request_object_supported_correctly_or_rejected_as_unsupported(suite):
    """oidcc-unsigned-request-object-supported-correctly-or-rejected-as-unsupported: a
    request object with alg none.  Discovery says request_parameter_supported: false, so
    the answer is request_not_supported on the redirect URI."""
    assert suite.client.simulate_get("/.well-known/openid-configuration").json["request_parameter_supported"] is False
    error_of(suite.get(request=unsigned_request_object(suite)), "request_not_supported")


def test_oidcc_ensure_request_object_with_redirect_uri(suite):
    """oidcc-ensure-request-object-with-redirect-uri: a request object carrying the
    redirect_uri too; as request objects are not supported, request_not_supported."""
    error_of(suite.get(request=unsigned_request_object(suite, redirect_uri=REDIRECT_URI)), "request_not_supported")


def test_oidcc_request_uri_unsigned_supported_correctly_or_rejected_as_unsupported(suite):
    """oidcc-request-uri-unsigned-supported-correctly-or-rejected-as-unsupported: a
    request_uri; discovery says request_uri_parameter_supported: false, so
    request_uri_not_supported on the redirect URI."""
    assert suite.client.simulate_get(
        "/.well-known/openid-configuration").json["request_uri_parameter_supported"] is False
    error_of(suite.get(request_uri="https://rp.example.com/request.jwt"), "request_uri_not_supported")


def test_oidcc_refresh_token(suite, hosted_app, oidc_client):
    """oidcc-refresh-token: scope openid offline_access with prompt=consent; the refresh
    token is redeemed (a new ID token for the same sub, OIDC Core 12.2), and the refresh
    token is refused to another client."""
    tokens = suite.tokens(scope="openid offline_access", prompt="consent")
    body = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
    refreshed = suite.client.simulate_post("/oidc/token", body=urlencode(body), headers={**FORM, **suite.basic()})
    assert refreshed.status_code == 200, refreshed.text
    claims = suite.id_token_claims(refreshed.json["id_token"])
    assert claims["sub"] == tokens["claims"]["sub"] and claims["auth_time"] == tokens["claims"]["auth_time"]
    other = oidc_client(hosted_app, name="Second client")
    stolen = suite.client.simulate_post("/oidc/token", headers=FORM, body=urlencode({
        **body, "refresh_token": refreshed.json["refresh_token"], "client_id": other["client_id"],
        "client_secret": other["client_secret"]}))
    assert stolen.status_code == 400 and stolen.json["error"] == "invalid_grant"


def test_oidcc_ensure_request_with_valid_pkce_succeeds(suite):
    """oidcc-ensure-request-with-valid-pkce-succeeds: PKCE S256 in both runs."""
    suite.pkce = True
    suite.tokens()


def test_oidcc_ensure_post_request_succeeds(suite):
    """oidcc-ensure-post-request-succeeds: the authorization request form-encoded in a
    POST (OIDC Core 3.1.2.1)."""
    page = suite.browser.request("POST", "/oidc/authorize", body=urlencode(suite.request()), headers=FORM)
    callback = query_of(suite.sign_in(page))
    assert callback["state"] == "suite-state"
    response = suite.token(callback["code"])
    assert response.status_code == 200
    assert suite.id_token_claims(response.json["id_token"])["nonce"] == "suite-nonce"


# ==================================================================== Config OP


def test_oidcc_discovery_endpoint_verification(suite):
    """oidcc-discovery-endpoint-verification: the issuer is the URL discovery was read
    from; every REQUIRED key (Discovery 3) is there; code is a response type; RS256
    signs ID tokens; openid is a scope; the endpoints answer; request objects are
    declared unsupported rather than left to default to true."""
    metadata = suite.client.simulate_get("/.well-known/openid-configuration").json
    assert metadata["issuer"] == suite.issuer
    for key in ("authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri"):
        assert metadata[key].startswith(suite.issuer + "/")
    assert "code" in metadata["response_types_supported"]
    assert "public" in metadata["subject_types_supported"]
    assert metadata["id_token_signing_alg_values_supported"] == ["RS256"]
    assert "openid" in metadata["scopes_supported"]
    assert {"sub", "iss", "aud", "exp", "iat", "auth_time"} <= set(metadata["claims_supported"])
    assert metadata["response_modes_supported"] == ["query", "form_post"]
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["request_parameter_supported"] is False and metadata["request_uri_parameter_supported"] is False
    assert suite.client.simulate_get(urlsplit(metadata["jwks_uri"]).path).json["keys"]


def test_oidcc_idtoken_rs256(suite):
    """oidcc-idtoken-rs256 (Config OP): the ID token is RS256, verified with the JWKS."""
    tokens = suite.tokens()
    assert jwt.get_unverified_header(tokens["id_token"])["alg"] == "RS256"


def test_oidcc_idtoken_unsigned(suite):
    """oidcc-idtoken-unsigned (Config OP): skipped by the suite unless discovery lists
    alg none; it does not, and no ID token is unsigned."""
    metadata = suite.client.simulate_get("/.well-known/openid-configuration").json
    assert "none" not in metadata["id_token_signing_alg_values_supported"]


# ==================================================================== RP-Initiated Logout OP


def assert_logged_out(suite):
    """What the logout modules check afterwards: prompt=none is login_required."""
    error_of(suite.get(prompt="none"), "login_required")


def assert_not_redirected(response):
    assert response.status_code in (200, 400) and "location" not in response.headers, response.headers
    assert response.headers["content-type"].startswith("text/html")


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_oidcc_rp_initiated_logout(suite, method):
    """oidcc-rp-initiated-logout: id_token_hint, post_logout_redirect_uri and state,
    by GET or POST (the OP must support both); the redirect carries the state, and the
    session is over."""
    tokens = suite.tokens()
    response = suite.logout(method, id_token_hint=tokens["id_token"], post_logout_redirect_uri=BYE, state="bye-1")
    assert response.status_code == 302 and response.headers["location"] == f"{BYE}?state=bye-1"
    assert_logged_out(suite)


def test_oidcc_rp_initiated_logout_bad_id_token_hint(suite):
    """oidcc-rp-initiated-logout-bad-id-token-hint: a hint that is not an ID token of
    this provider: an error, no redirect, and no logout."""
    suite.tokens()
    response = suite.logout(id_token_hint="not.an.id-token", post_logout_redirect_uri=BYE, state="bye-1")
    assert response.status_code == 400 and "location" not in response.headers
    assert "code" in query_of(suite.get(prompt="none"))


def test_oidcc_rp_initiated_logout_modified_id_token_hint(suite):
    """oidcc-rp-initiated-logout-modified-id-token-hint: the hint's payload altered (its
    signature no longer matches): an error, no redirect, and no logout."""
    tokens = suite.tokens()
    header, payload, signature = tokens["id_token"].split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    forged = base64.urlsafe_b64encode(json.dumps({**claims, "sub": "someone-else"}).encode()).rstrip(b"=").decode()
    response = suite.logout(id_token_hint=f"{header}.{forged}.{signature}", post_logout_redirect_uri=BYE)
    assert response.status_code == 400 and "location" not in response.headers
    assert "code" in query_of(suite.get(prompt="none"))


def test_oidcc_rp_initiated_logout_no_id_token_hint(suite):
    """oidcc-rp-initiated-logout-no-id-token-hint: client_id and post_logout_redirect_uri
    without a hint.  The module accepts a page instead of the redirect; without a hint
    nothing proves who sent the user, so this provider signs the browser out and shows
    the logged-out page, never redirecting."""
    suite.tokens()
    response = suite.logout(client_id=suite.rp["client_id"], post_logout_redirect_uri=BYE, state="bye-1")
    assert_not_redirected(response)
    assert_logged_out(suite)


def test_oidcc_rp_initiated_logout_no_params(suite):
    """oidcc-rp-initiated-logout-no-params: the end_session_endpoint without any
    parameter: the logged-out page."""
    suite.tokens()
    assert_not_redirected(suite.logout())
    assert_logged_out(suite)


def test_oidcc_rp_initiated_logout_no_post_logout_redirect_uri(suite):
    """oidcc-rp-initiated-logout-no-post-logout-redirect-uri: a hint only: the logged-out
    page."""
    tokens = suite.tokens()
    assert_not_redirected(suite.logout(id_token_hint=tokens["id_token"]))
    assert_logged_out(suite)


def test_oidcc_rp_initiated_logout_no_state(suite):
    """oidcc-rp-initiated-logout-no-state: without state, the redirect is the registered
    URI itself (no state parameter, no empty query)."""
    tokens = suite.tokens()
    response = suite.logout(id_token_hint=tokens["id_token"], post_logout_redirect_uri=BYE)
    assert response.status_code == 302 and response.headers["location"] == BYE
    assert_logged_out(suite)


def test_oidcc_rp_initiated_logout_query_added_to_post_logout_redirect_uri(suite, client, hosted_app, manager_key):
    """oidcc-rp-initiated-logout-query-added-to-post-logout-redirect-uri: the client
    registers a post_logout_redirect_uri with a query; the redirect keeps that query and
    adds state to it."""
    with_query = BYE + "?foo=bar"
    url = f"/api/v1/applications/{hosted_app['_id']}/oidc/clients/{suite.rp['id']}"
    assert client.simulate_put(url, headers=bearer(manager_key),
                               json={"post_logout_redirect_uris": [with_query]}).status_code == 200
    tokens = suite.tokens()
    response = suite.logout(id_token_hint=tokens["id_token"], post_logout_redirect_uri=with_query, state="bye-1")
    location = urlsplit(response.headers["location"])
    assert location._replace(query="").geturl() == BYE
    assert parse_qs(location.query) == {"foo": ["bar"], "state": ["bye-1"]}


def test_oidcc_rp_initiated_logout_bad_post_logout_redirect_uri(suite):
    """oidcc-rp-initiated-logout-bad-post-logout-redirect-uri: a URI that is not
    registered is never followed."""
    tokens = suite.tokens()
    response = suite.logout(id_token_hint=tokens["id_token"], post_logout_redirect_uri=UNREGISTERED, state="bye-1")
    assert_not_redirected(response)


def test_rp_initiated_logout_client_id_not_the_hints_aud(suite, hosted_app, oidc_client):
    """Not a module of the plan: a client_id that is not the hint's aud (RP-Initiated Logout 2: the OP MUST verify
    they match): an error, no redirect, no logout."""
    tokens = suite.tokens()
    other = oidc_client(hosted_app, name="Other", post_logout_redirect_uris=[BYE])
    response = suite.logout(id_token_hint=tokens["id_token"], client_id=other["client_id"],
                            post_logout_redirect_uri=BYE)
    assert response.status_code == 400 and "location" not in response.headers
    assert "code" in query_of(suite.get(prompt="none"))


def test_rp_initiated_logout_client_id_matching_the_hint(suite):
    """Not a module of the plan: client_id beside the hint, as openid-client sends it: followed like the hint alone."""
    tokens = suite.tokens()
    response = suite.logout(id_token_hint=tokens["id_token"], client_id=suite.rp["client_id"],
                            post_logout_redirect_uri=BYE, state="s")
    assert response.status_code == 302 and response.headers["location"] == f"{BYE}?state=s"
