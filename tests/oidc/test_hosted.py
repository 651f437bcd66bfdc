"""The hosted browser mode of GET /oidc/authorize (controlplane/oidc/hosted.py), driven
through falcon.testing by a small cookie-keeping browser: the login page, the MFA step,
the consent page, the 302 with the code that Authlib (an independent relying party)
exchanges; the browser session and prompt; CSRF, lockout, open redirects and the error
pages."""
from __future__ import annotations

import html
import json
import re
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
import pytest
from authlib.common.security import generate_token
from cryptography.hazmat.primitives.asymmetric import rsa

from shared.config import Rate
from tests.conftest import bearer
from tests.mfa.conftest import STEP, mfa_url, rfc6238
from tests.oidc.conftest import REDIRECT_URI, clients_url, pkce_pair
from tests.passkeys.authenticator import ORIGIN, RP_ID, SoftAuthenticator
from tests.plugins.users import fresh_address

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


class Browser:
    """Keeps cookies across falcon.testing requests, like a browser on one address."""

    def __init__(self, client):
        self.client = client
        self.cookies: dict[str, str] = {}
        self.address = fresh_address()
        self.last_set_cookies = {}

    def request(self, method, path, **kwargs):
        response = self.client.simulate_request(method, path, cookies=dict(self.cookies),
                                                remote_addr=self.address, **kwargs)
        self.last_set_cookies = response.cookies
        for name, cookie in response.cookies.items():
            if cookie.value == "" or (cookie.max_age is not None and cookie.max_age <= 0):
                self.cookies.pop(name, None)
            else:
                self.cookies[name] = cookie.value
        return response

    def get(self, url: str):
        parts = urlsplit(url)
        return self.request("GET", parts.path, query_string=parts.query or None)

    def post(self, path: str, fields: dict):
        return self.request("POST", path, body=urlencode(fields), headers=FORM)

    def submit(self, page, **fields):
        """Post the page's form (its action, csrf_token and request fields) with ``fields``."""
        return self.post(form_action(page), {**hidden_fields(page), **fields})


def hidden_fields(page, form: int = 0) -> dict:
    """The hidden fields of the page's first form (or its ``form``-th: the passkey form
    is one of its own)."""
    text = page.text.split("</form>")[form]
    return dict(re.findall(r'<input type="hidden" name="([a-z_]+)" value="([^"]*)">', text))


def form_action(page) -> str:
    return re.search(r'<form method="post" action="([^"]+)">', page.text).group(1)


def query_of(response) -> dict:
    assert response.status_code == 302, response.text
    return {k: v[0] for k, v in parse_qs(urlsplit(response.headers["location"]).query).items()}


def assert_page(response, title: str, status: int = 200):
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("text/html")
    assert f"<h1>{title}</h1>" in response.text, response.text
    policy = response.headers["content-security-policy"]
    # A page with a passkey ceremony loads our own script file too ('self').
    assert "frame-ancestors 'none'" in policy and re.search(r"script-src ('self' )?'nonce-", policy)
    assert response.headers["cache-control"] == "no-store"
    assert "location" not in response.headers


@pytest.fixture
def config_overrides(request):
    """Settings per test: ``@pytest.mark.parametrize("config_overrides", [{...}], indirect=True)``."""
    return getattr(request, "param", {})


@pytest.fixture
def rp(hosted_app, oidc_client):
    return oidc_client(hosted_app, name="Portal")


@pytest.fixture
def person(hosted_app, make_user):
    return make_user(hosted_app, name="Ada Lovelace")


@pytest.fixture
def browser(client):
    return Browser(client)


def authorize_url(rp, *, challenge=None, **params) -> str:
    query = {"response_type": "code", "client_id": rp["client_id"], "redirect_uri": REDIRECT_URI,
             "scope": "openid profile email", "state": "st-1", "nonce": "n-1",
             "code_challenge": challenge or pkce_pair()[1], "code_challenge_method": "S256", **params}
    return "/oidc/authorize?" + urlencode({k: v for k, v in query.items() if v is not None})


def sign_in(browser, rp, person, **params):
    """Login page -> credentials; the answer of the login post."""
    page = browser.get(authorize_url(rp, **params))
    assert_page(page, "Sign in")
    return browser.submit(page, email=person["email"], password=person["password"])


# ---------------------------------------------------------------- the whole flow


def test_login_consent_code_and_authlib_exchange(ctx, browser, hosted_app, rp, person, relying_party, config):
    session = relying_party(rp)
    verifier, nonce = generate_token(48), generate_token(20)
    url, state = session.create_authorization_url(f"{config.public_url}/oidc/authorize", code_verifier=verifier,
                                                  nonce=nonce)
    login_page = browser.get(url)
    assert_page(login_page, "Sign in")
    assert "Test App" in login_page.text  # the application's branding
    assert "form-action 'self' https://rp.example.com" in login_page.headers["content-security-policy"]
    assert set(hidden_fields(login_page)) == {"csrf_token", "request"}
    assert REDIRECT_URI not in login_page.text and state not in login_page.text  # nothing trusted to the page

    consent = browser.submit(login_page, email=person["email"], password=person["password"])
    assert_page(consent, "Allow access?")
    assert "<strong>Portal</strong>" in consent.text
    assert "See your email address" in consent.text and "See your name" in consent.text
    cookie = browser.last_set_cookies[f"iamgate_oidc_{hosted_app['_id']}"]
    assert cookie.http_only and cookie.same_site == "Lax" and cookie.path == "/oidc" and not cookie.secure

    callback = browser.submit(consent, decision="allow")
    assert callback.status_code == 302
    assert callback.headers["location"].startswith(REDIRECT_URI + "?")
    assert query_of(callback)["state"] == state

    token = session.fetch_token(f"{config.public_url}/oidc/token", authorization_response=callback.headers["location"],
                                code_verifier=verifier)
    claims = ctx.oidc.tokens.verify_id_token_hint(token["id_token"])
    assert claims["sub"] == person["id"] and claims["nonce"] == nonce and claims["aud"] == rp["client_id"]
    assert claims["sid"]  # the V1 session the hosted login started
    profile = session.get(f"{config.public_url}/oidc/userinfo").json()
    assert profile["email"] == person["email"] and profile["name"] == "Ada Lovelace"


def test_consent_is_recorded_and_emits_consent_granted(ctx, browser, rp, person, hosted_app):
    consent = sign_in(browser, rp, person)
    browser.submit(consent, decision="allow")
    kinds = [e["type"] for e in ctx.store["events"].find({"app_id": hosted_app["_id"]})]
    assert "consent.granted" in kinds and "user.login" in kinds


def test_deny_redirects_with_access_denied_and_records_nothing(ctx, browser, rp, person, hosted_app):
    consent = sign_in(browser, rp, person)
    denied = browser.submit(consent, decision="deny")
    assert query_of(denied) == {"error": "access_denied", "error_description": "The user denied the request.",
                                "state": "st-1"}
    assert ctx.store["oidc_consents"].count_documents({"app_id": hosted_app["_id"]}) == 0
    assert ctx.store["oidc_codes"].count_documents({}) == 0


def test_a_consent_page_cannot_be_posted_twice(browser, rp, person):
    consent = sign_in(browser, rp, person)
    assert browser.submit(consent, decision="allow").status_code == 302
    again = browser.submit(consent, decision="allow")
    assert_page(again, "This sign-in link is not valid", 400)
    assert "OIDC_AUTHORIZATION_REQUEST_EXPIRED" in again.text


def _sign_out_in_another_tab(browser, **_):
    assert_page(browser.submit(navigate(browser, "/oidc/logout")), "You are signed out")


def _revoke_the_v1_session(browser, ctx, hosted_app, person):
    ctx.users.sessions.revoke_user(hosted_app["_id"], person["id"], reason="revoked")


def _suspend_the_user(browser, ctx, hosted_app, person):
    ctx.users.admin.suspend(hosted_app["_id"], person["id"])


@pytest.mark.parametrize("end", [_sign_out_in_another_tab, _revoke_the_v1_session, _suspend_the_user],
                         ids=["sign-out", "V1 session revoked", "suspension"])
def test_a_consent_page_posted_after_its_sign_in_ended_asks_for_the_login(ctx, browser, hosted_app, oidc_client, rp,
                                                                          person, end):
    """A consent page can stay open for its ten minutes; on a shared computer the next
    person's Allow must not sign them in to the client as the one who signed out."""
    signed_in(browser, rp, person)
    other = oidc_client(hosted_app, name="Other")
    consent = browser.get(authorize_url(other))
    assert_page(consent, "Allow access?")
    end(browser, ctx=ctx, hosted_app=hosted_app, person=person)
    again = browser.submit(consent, decision="allow")
    assert_page(again, "Sign in")
    assert ctx.store["oidc_consents"].count_documents({"client_id": other["client_id"]}) == 0


def test_max_age_holds_when_the_consent_page_is_posted(ctx, clock, browser, hosted_app, oidc_client, rp, person):
    """OIDC Core 3.1.2.1: the sign-in 30 s old when the page was shown is 150 s old when it
    is posted, past ``max_age=60``: the login page, not a code whose ``auth_time`` is
    older than the client asked for."""
    signed_in(browser, rp, person)
    other = oidc_client(hosted_app, name="Other")
    clock.advance(30)
    consent = browser.get(authorize_url(other, max_age="60"))
    assert_page(consent, "Allow access?")
    clock.advance(120)
    assert_page(browser.submit(consent, decision="allow"), "Sign in")


@pytest.mark.parametrize("params", [{"prompt": "login"}, {"max_age": "0"}], ids=["prompt=login", "max_age=0"])
def test_the_login_they_asked_for_is_the_one_the_consent_post_takes(browser, clock, rp, person, params):
    """``prompt=login`` and ``max_age=0`` asked for a sign-in, and this request's login was
    it: the consent post a few seconds later issues the code (no login loop)."""
    consent = sign_in(browser, rp, person, **params)
    assert_page(consent, "Allow access?")
    clock.advance(5)
    assert query_of(browser.submit(consent, decision="allow"))["code"]


def test_wrong_password_shows_the_login_page_again(ctx, browser, rp, person):
    page = browser.get(authorize_url(rp))
    again = browser.submit(page, email=person["email"], password="wrong password 1")
    assert_page(again, "Sign in", 401)
    assert "The email or password is not correct." in again.text
    assert hidden_fields(again)["request"] == hidden_fields(page)["request"]
    assert not [n for n in browser.cookies if n.startswith("iamgate_oidc_")]
    consent = browser.submit(again, email=person["email"], password=person["password"])
    assert_page(consent, "Allow access?")


@pytest.mark.parametrize("config_overrides", [{"webauthn_rp_id": RP_ID, "webauthn_origins": (ORIGIN,)}],
                         indirect=True)
def test_a_password_refused_for_a_passkey_account_shows_the_login_page(ctx, client, browser, rp, hosted_app, person,
                                                                      login):
    ctx.applications.update(hosted_app["_id"], {"passkeys": "passwordless", "passkeys_allow_password": False})
    headers = bearer(login(hosted_app, person["email"], person["password"])["access_token"])
    url = f"/api/v1/applications/{hosted_app['_id']}/auth/passkeys/registration"
    options = client.simulate_post(f"{url}/options", json={}, headers=headers).json["data"]
    registered = client.simulate_post(f"{url}/verify", headers=headers, json={
        "challenge_id": options["challenge_id"], "credential": SoftAuthenticator().create(options["options"])})
    assert registered.status_code == 201, registered.text
    page = browser.get(authorize_url(rp))
    refused = browser.submit(page, email=person["email"], password=person["password"])
    assert_page(refused, "Sign in", 403)
    assert "signs in with a passkey" in refused.text


# ---------------------------------------------------------------- MFA


@pytest.fixture
def mfa_secret(client, clock, hosted_app, person, login):
    return enrol_totp(client, clock, hosted_app, person, bearer(login(hosted_app, person["email"],
                                                                      person["password"])["access_token"]))


def enrol_totp(client, clock, hosted_app, person, headers) -> str:
    """The user's TOTP secret, set up and confirmed with the access token's ``headers``."""
    setup = client.simulate_post(mfa_url(hosted_app, person["id"], "/totp/setup"), json={}, headers=headers)
    secret = setup.json["data"]["secret"]
    confirm = client.simulate_post(mfa_url(hosted_app, person["id"], "/totp/confirm"), headers=headers,
                                   json={"method_id": setup.json["data"]["method_id"],
                                         "code": rfc6238(secret, clock())})
    assert confirm.status_code == 201, confirm.text
    clock.advance(2 * STEP)
    return secret


def test_the_mfa_step(browser, clock, rp, person, mfa_secret):
    mfa = sign_in(browser, rp, person)
    assert_page(mfa, "Two-step verification")
    assert not [n for n in browser.cookies if n.startswith("iamgate_oidc_")]  # not signed in yet
    wrong = browser.submit(mfa, code="000000" if rfc6238(mfa_secret, clock()) != "000000" else "111111")
    assert_page(wrong, "Two-step verification", 401)
    consent = browser.submit(wrong, code=rfc6238(mfa_secret, clock()))
    assert_page(consent, "Allow access?")
    assert browser.submit(consent, decision="allow").status_code == 302


def test_the_login_page_cannot_skip_the_mfa_step(browser, rp, person, mfa_secret):
    mfa = sign_in(browser, rp, person)
    # The handle is at the MFA step now: neither the consent nor the login post accepts it.
    assert_page(browser.post("/oidc/authorize/consent", {**hidden_fields(mfa), "decision": "allow"}),
                "This sign-in link is not valid", 400)
    assert_page(browser.post("/oidc/authorize/login", {**hidden_fields(mfa), "email": person["email"],
                                                       "password": person["password"]}),
                "This sign-in link is not valid", 400)


# ---------------------------------------------------------------- the browser session and prompt


def signed_in(browser, rp, person):
    consent = sign_in(browser, rp, person)
    assert browser.submit(consent, decision="allow").status_code == 302


def test_a_second_authorize_skips_login_and_consent(browser, rp, person):
    signed_in(browser, rp, person)
    verifier, challenge = pkce_pair()
    again = browser.get(authorize_url(rp, challenge=challenge, state="st-2"))
    query = query_of(again)
    assert query["state"] == "st-2" and query["code"]


@pytest.mark.parametrize("config_overrides", [{"public_url": "https://iam.example.com"}], indirect=True)
def test_the_cookie_is_secure_when_the_public_url_is_https(browser, rp, person, config_overrides):
    sign_in(browser, rp, person)
    cookies = [c for n, c in browser.last_set_cookies.items() if n.startswith("iamgate_oidc_")]
    assert cookies and cookies[0].secure and cookies[0].http_only


def test_prompt_login_forces_the_login(browser, rp, person):
    signed_in(browser, rp, person)
    page = browser.get(authorize_url(rp, prompt="login"))
    assert_page(page, "Sign in")


def test_prompt_none_without_a_session_is_login_required(browser, rp):
    assert query_of(browser.get(authorize_url(rp, prompt="none"))) == {
        "error": "login_required", "error_description": "The user is not signed in.", "state": "st-1"}


def test_prompt_none_without_consent_is_consent_required(browser, hosted_app, oidc_client, rp, person):
    signed_in(browser, rp, person)
    other = oidc_client(hosted_app, name="Other")
    assert query_of(browser.get(authorize_url(other, prompt="none")))["error"] == "consent_required"
    assert query_of(browser.get(authorize_url(rp, prompt="none")))["code"]


def test_a_session_needs_consent_for_a_new_client(browser, hosted_app, oidc_client, rp, person):
    signed_in(browser, rp, person)
    other = oidc_client(hosted_app, name="Other Portal")
    consent = browser.get(authorize_url(other))
    assert_page(consent, "Allow access?")
    assert "<strong>Other Portal</strong>" in consent.text
    assert query_of(browser.submit(consent, decision="allow"))["code"]


def test_logout_ends_the_browser_session(browser, rp, person):
    signed_in(browser, rp, person)
    page = browser.get("/oidc/logout")
    assert_page(page, "You are signed out")
    assert not [n for n in browser.cookies if n.startswith("iamgate_oidc_")]
    assert query_of(browser.get(authorize_url(rp, prompt="none")))["error"] == "login_required"


def test_a_stolen_cookie_stops_working_after_logout(client, ctx, browser, rp, person):
    signed_in(browser, rp, person)
    stolen = dict(browser.cookies)
    browser.get("/oidc/logout")
    thief = Browser(client)
    thief.cookies = stolen
    assert query_of(thief.get(authorize_url(rp, prompt="none")))["error"] == "login_required"
    assert ctx.store["oidc_browser_sessions"].count_documents({}) == 0


def test_revoking_the_users_sessions_ends_the_browser_session(ctx, browser, rp, person, hosted_app):
    signed_in(browser, rp, person)
    ctx.users.sessions.revoke_user(hosted_app["_id"], person["id"])
    assert query_of(browser.get(authorize_url(rp, prompt="none")))["error"] == "login_required"


def test_the_browser_session_is_stored_hashed(ctx, browser, rp, person):
    signed_in(browser, rp, person)
    token = next(v for n, v in browser.cookies.items() if n.startswith("iamgate_oidc_"))
    stored = ctx.store["oidc_browser_sessions"].find_one()
    assert stored["_id"] != token and token not in str(stored)


def test_the_browser_session_expires(browser, clock, rp, person):
    signed_in(browser, rp, person)
    clock.advance(12 * 3600 + 1)
    assert query_of(browser.get(authorize_url(rp, prompt="none")))["error"] == "login_required"


def test_a_session_of_another_application_does_not_count(client, make_application, ctx, browser, rp, person,
                                                         oidc_client):
    signed_in(browser, rp, person)
    other_app = ctx.applications.update(make_application()["_id"], {"oauth_hosted_login_enabled": True})
    other = oidc_client(other_app)
    assert query_of(browser.get(authorize_url(other, prompt="none")))["error"] == "login_required"


# ---------------------------------------------------------------- CSRF and the pending request


def test_a_post_without_the_csrf_token_is_refused(ctx, browser, rp, person):
    page = browser.get(authorize_url(rp))
    fields = {**hidden_fields(page), "email": person["email"], "password": person["password"]}
    del fields["csrf_token"]
    refused = browser.post("/oidc/authorize/login", fields)
    assert_page(refused, "This form has expired", 403)
    assert "CSRF_TOKEN_INVALID" in refused.text
    assert ctx.store["oidc_browser_sessions"].count_documents({}) == 0


def test_a_cross_site_post_without_the_cookie_is_refused(client, browser, rp, person):
    page = browser.get(authorize_url(rp))
    attacker = Browser(client)  # the victim's browser does not send the Lax cookie cross-site
    refused = attacker.post("/oidc/authorize/login", {**hidden_fields(page), "email": person["email"],
                                                      "password": person["password"]})
    assert_page(refused, "This form has expired", 403)


def test_a_handle_is_bound_to_the_browser_that_started_it(client, browser, rp, person):
    page = browser.get(authorize_url(rp))
    other = Browser(client)
    own = other.get(authorize_url(rp))
    stolen = {**hidden_fields(own), "request": hidden_fields(page)["request"], "email": person["email"],
              "password": person["password"]}
    assert_page(other.post("/oidc/authorize/login", stolen), "This sign-in link is not valid", 400)


def test_the_pending_request_expires(browser, clock, rp, person):
    page = browser.get(authorize_url(rp))
    clock.advance(601)
    expired = browser.submit(page, email=person["email"], password=person["password"])
    assert_page(expired, "This sign-in link is not valid", 400)


def test_a_form_post_must_be_form_encoded(browser, rp):
    page = browser.get(authorize_url(rp))
    response = browser.request("POST", "/oidc/authorize/login", json=hidden_fields(page))
    assert response.status_code == 400 and response.json["error"] == "invalid_request"


# ---------------------------------------------------------------- brute force


def test_five_wrong_passwords_lock_the_account(browser, rp, person):
    page = browser.get(authorize_url(rp))
    for attempt in range(5):
        page = browser.submit(page, email=person["email"], password=f"wrong password {attempt}")
        assert_page(page, "Sign in", 401)
    locked = browser.submit(page, email=person["email"], password=person["password"])
    assert_page(locked, "Sign in", 429)
    assert not [n for n in browser.cookies if n.startswith("iamgate_oidc_")]


def test_the_login_ip_throttle_applies(browser, rp, person):
    page = browser.get(authorize_url(rp))
    statuses = []
    for attempt in range(11):
        page = browser.submit(page, email=f"nobody-{attempt}@example.com", password="whatever 123")
        statuses.append(page.status_code)
    assert statuses[:10] == [401] * 10 and statuses[10] == 429


# ---------------------------------------------------------------- errors and open redirects


@pytest.mark.parametrize("change", [
    {"redirect_uri": "https://evil.example.com/callback"},
    {"redirect_uri": REDIRECT_URI + "/../../evil"},
    {"redirect_uri": REDIRECT_URI + "?next=https://evil.example.com"},
    {"redirect_uri": "https://rp.example.com.evil.example.com/callback"},
    {"redirect_uri": None},
    {"client_id": None},
    {"client_id": "oc_unknown"},
])
def test_no_redirect_before_the_client_and_redirect_uri_are_validated(browser, rp, change):
    response = browser.get(authorize_url(rp, **change))
    assert_page(response, "This sign-in link is not valid", 400)
    assert "evil" not in response.text or "evil" in str(change)


def test_an_inactive_client_is_an_error_page(client, manager_key, hosted_app, browser, rp):
    client.simulate_put(clients_url(hosted_app, f"/{rp['id']}"), json={"is_active": False},
                        headers={"Authorization": f"Bearer {manager_key}"})
    response = browser.get(authorize_url(rp))
    assert_page(response, "This sign-in link is not valid", 400)
    assert "invalid_client" in response.text


@pytest.fixture
def manager_key(hosted_app, make_api_key):
    return make_api_key(hosted_app, permissions=["oidc:manage"])


def test_a_client_deactivated_during_the_login_stops_it(client, manager_key, hosted_app, browser, rp, person):
    page = browser.get(authorize_url(rp))
    client.simulate_put(clients_url(hosted_app, f"/{rp['id']}"), json={"is_active": False},
                        headers={"Authorization": f"Bearer {manager_key}"})
    response = browser.submit(page, email=person["email"], password=person["password"])
    assert_page(response, "This sign-in link is not valid", 400)


@pytest.mark.parametrize("uri", ["https://rp_app.example.com/cb", "https://bücher.example/cb",
                                 "https://rp.example.com:99999/cb"])
@pytest.mark.parametrize("change", [{}, {"scope": "email"}, {"prompt": "none"}])
def test_an_unusable_redirect_uri_stored_before_the_rules_is_an_error_page(ctx, browser, rp, person, uri, change):
    """Such a URI has no origin for the page's form-action: it used to be a 500. It is not
    known good either, so nothing is redirected to it, whatever the later error."""
    ctx.store["oidc_clients"].update_one({"_id": rp["id"]}, {"$set": {"redirect_uris": [uri]}})
    response = browser.get(authorize_url(rp, redirect_uri=uri, **change))
    assert_page(response, "This sign-in link is not valid", 400)
    assert "update the client" in response.text


@pytest.mark.parametrize("change, error", [
    ({"scope": "email"}, "invalid_scope"),
    ({"code_challenge_method": "plain"}, "invalid_request"),
    ({"code_challenge": None}, "invalid_request"),
    ({"response_type": "token"}, "unsupported_response_type"),
])
def test_later_errors_redirect_with_error_and_state(browser, rp, change, error):
    query = query_of(browser.get(authorize_url(rp, **change)))
    assert query["error"] == error and query["state"] == "st-1"


def test_without_hosted_login_a_browser_gets_401(ctx, application, oidc_client, browser):
    plain = oidc_client(application)
    response = browser.get(authorize_url(plain))
    assert response.status_code == 401 and response.json["error"] == "invalid_token"
    later = browser.get(authorize_url(plain, scope="email"))  # never redirected either
    assert later.status_code == 400 and later.json["error"] == "invalid_scope"


def test_the_json_mode_still_answers_with_a_bearer(client, rp, hosted_app, make_user_token):
    user = make_user_token(hosted_app)
    parts = urlsplit(authorize_url(rp))
    response = client.simulate_get(parts.path, query_string=parts.query, headers=user.headers)
    assert response.status_code == 200 and response.json["code"]


# ---------------------------------------------------------------- response modes, max_age, login_hint


def form_post_fields(page) -> dict:
    """The form_post page: a form to the redirect URI, submitted by the page's nonce'd script."""
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "location" not in page.headers and page.headers["cache-control"] == "no-store"
    assert re.search(r'<form method="post" action="([^"]+)"', page.text).group(1) == REDIRECT_URI
    policy = page.headers["content-security-policy"]
    nonce = re.search(r"script-src 'nonce-([^']+)'", policy).group(1)
    assert f'<script nonce="{nonce}">' in page.text and ".submit()" in page.text
    assert "form-action 'self' https://rp.example.com" in policy
    return hidden_fields(page)


def test_form_post_answers_the_code_in_a_self_submitting_form(browser, rp, person):
    signed_in(browser, rp, person)
    fields = form_post_fields(browser.get(authorize_url(rp, response_mode="form_post", state="st-9")))
    assert set(fields) == {"code", "state"} and fields["state"] == "st-9"


def test_form_post_answers_errors_in_the_form_too(browser, rp):
    fields = form_post_fields(browser.get(authorize_url(rp, response_mode="form_post", prompt="none")))
    assert fields == {"error": "login_required", "error_description": "The user is not signed in.", "state": "st-1"}


def test_form_post_after_the_login_and_consent_pages(browser, rp, person):
    page = browser.get(authorize_url(rp, response_mode="form_post"))
    consent = browser.submit(page, email=person["email"], password=person["password"])
    assert set(form_post_fields(browser.submit(consent, decision="allow"))) == {"code", "state"}


def test_form_post_answers_a_denial_in_the_form(browser, rp, person):
    page = browser.get(authorize_url(rp, response_mode="form_post"))
    consent = browser.submit(page, email=person["email"], password=person["password"])
    assert form_post_fields(browser.submit(consent, decision="deny"))["error"] == "access_denied"


@pytest.mark.parametrize("mode", ["fragment", "unknown"])
def test_fragment_and_unknown_response_modes_are_invalid_request(browser, rp, mode):
    query = query_of(browser.get(authorize_url(rp, response_mode=mode)))
    assert query["error"] == "invalid_request" and query["state"] == "st-1"


def test_form_post_answers_a_repeated_state_in_the_form(browser, rp):
    """OAuth 2.0 Form Post Response Mode 2: errors too are answered in the mode asked for."""
    fields = form_post_fields(browser.get(authorize_url(rp, response_mode="form_post") + "&state=st-2"))
    assert fields == {"error": "invalid_request", "error_description": "The parameter state must not be repeated."}


def test_a_repeated_response_mode_is_answered_in_the_query(browser, rp):
    """No one mode was asked for, so the error goes the default way, in the query."""
    response = browser.get(authorize_url(rp, response_mode="form_post") + "&response_mode=form_post")
    assert query_of(response) == {"error": "invalid_request", "state": "st-1",
                                  "error_description": "The parameter response_mode must not be repeated."}


def test_max_age_asks_for_the_login_again(browser, clock, rp, person):
    signed_in(browser, rp, person)
    assert query_of(browser.get(authorize_url(rp, max_age="60")))["code"]
    assert_page(browser.get(authorize_url(rp, max_age="0")), "Sign in")
    clock.advance(61)
    assert_page(browser.get(authorize_url(rp, max_age="60")), "Sign in")
    assert query_of(browser.get(authorize_url(rp, max_age="600")))["code"]
    assert query_of(browser.get(authorize_url(rp, max_age="60", prompt="none")))["error"] == "login_required"


def test_login_hint_pre_fills_the_email_escaped(browser, rp):
    page = browser.get(authorize_url(rp, login_hint='ada@example.com"><script>x()</script>'))
    assert_page(page, "Sign in")
    assert 'value="ada@example.com&#34;&gt;&lt;script&gt;x()&lt;/script&gt;"' in page.text


def test_authorize_by_post_in_the_hosted_mode(browser, rp, person):
    query = dict(parse_qs(urlsplit(authorize_url(rp)).query))
    page = browser.post("/oidc/authorize", {k: v[0] for k, v in query.items()})
    assert_page(page, "Sign in")
    consent = browser.submit(page, email=person["email"], password=person["password"])
    assert query_of(browser.submit(consent, decision="allow"))["state"] == "st-1"


# ---------------------------------------------------------------- every page is branded, none is JSON

NAVIGATE = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}  # Chromium's


@pytest.fixture
def acme(ctx, hosted_app):
    ctx.applications.update_branding(hosted_app["_id"], {"brand_name": "Acme", "brand_color": "#0b7a53"})


def assert_branded(response, title: str, status: int):
    assert_page(response, title, status)
    assert '<span class="brand">Acme</span>' in response.text and "background:#0b7a53" in response.text


def navigate(browser, url: str):
    parts = urlsplit(url)
    return browser.request("GET", parts.path, query_string=parts.query or None, headers=NAVIGATE)


def test_an_expired_form_is_branded(acme, browser, clock, rp, person):
    page = browser.get(authorize_url(rp))
    clock.advance(601)
    assert_branded(browser.submit(page, email=person["email"], password=person["password"]),
                   "This sign-in link is not valid", 400)


def test_a_form_without_its_csrf_token_gets_a_branded_page(acme, browser, rp, person):
    page = browser.get(authorize_url(rp))
    fields = {**hidden_fields(page), "email": person["email"], "password": person["password"]}
    del fields["csrf_token"]
    assert_branded(browser.post(form_action(page), fields), "This form has expired", 403)


def test_a_malformed_form_gets_a_page_not_json(acme, browser, rp):
    page = browser.get(authorize_url(rp))
    response = browser.request("POST", form_action(page), body="request=a&request=b", headers=FORM)
    assert_branded(response, "This sign-in link is not valid", 400)


def test_an_unregistered_redirect_uri_of_a_known_client_is_branded(acme, browser, rp):
    response = browser.get(authorize_url(rp, redirect_uri="https://evil.example.com/callback"))
    assert_branded(response, "This sign-in link is not valid", 400)


def test_without_hosted_login_a_navigating_browser_gets_a_page(ctx, application, oidc_client, browser):
    plain = oidc_client(application)
    assert_page(navigate(browser, authorize_url(plain)), "Sign-in is not available here", 401)
    assert_page(navigate(browser, authorize_url(plain, scope="email")), "This sign-in link is not valid", 400)


def _hints(ctx, config, rp) -> dict:
    """id_token_hints a logout must refuse, each as a relying party could send it."""
    now = int(ctx.clock().timestamp())
    claims = {"iss": config.public_url, "sub": "someone", "aud": rp["client_id"], "iat": now, "exp": now + 60}
    foreign = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return {
        "malformed": "not.a.jwt",
        "bad signature": jwt.encode(claims, foreign, algorithm="RS256", headers={"kid": "someone-elses"}),
        "wrong aud": ctx.tokens.sign({**claims, "aud": "oc_not_a_client"}),
        "another issuer": ctx.tokens.sign({**claims, "iss": "https://idp.example.net"}),
    }


@pytest.mark.parametrize("kind", ["malformed", "bad signature", "wrong aud", "another issuer"])
def test_a_refused_id_token_hint_is_a_plain_branded_page(acme, ctx, config, client, browser, rp, person, kind):
    """A person gets words they can act on and the error code, never the developer's
    reason; nothing changes (still signed in)."""
    signed_in(browser, rp, person)
    hint = _hints(ctx, config, rp)[kind]
    bad = navigate(browser, "/oidc/logout?" + urlencode({"id_token_hint": hint, "post_logout_redirect_uri":
                                                         "https://rp.example.com/bye"}))
    assert_branded(bad, "Sign-out link is not valid", 400)
    assert "could not be checked, so you have not been signed out" in bad.text
    assert "Error code: <code>invalid_request</code>" in bad.text
    assert "id_token_hint" not in bad.text and "signature" not in bad.text and "issuer" not in bad.text
    assert query_of(browser.get(authorize_url(rp, prompt="none")))["code"]  # the browser session lives on
    # A program (no Accept: text/html) still gets the RFC 6749 JSON body, with the reason.
    program = client.simulate_get("/oidc/logout", params={"id_token_hint": hint})
    assert program.json["error"] == "invalid_request" and "id_token_hint" in program.json["error_description"]


def confirm_logout(browser, **params):
    """GET /oidc/logout without a hint, as a browser: the confirmation page."""
    return navigate(browser, "/oidc/logout" + (f"?{urlencode(params)}" if params else ""))


def test_without_a_hint_a_browser_is_asked_before_it_is_signed_out(acme, ctx, browser, rp, person):
    signed_in(browser, rp, person)
    page = confirm_logout(browser)
    assert_branded(page, "Sign out of Acme?", 200)
    assert form_action(page).startswith("/oidc/logout/confirm")
    assert set(hidden_fields(page)) == {"csrf_token"}
    assert query_of(browser.get(authorize_url(rp, prompt="none")))["code"]  # asking ended nothing
    assert_branded(browser.submit(page), "You are signed out", 200)
    assert not [n for n in browser.cookies if n.startswith("iamgate_oidc_")]
    assert query_of(browser.get(authorize_url(rp, prompt="none")))["error"] == "login_required"
    assert ctx.store["oidc_browser_sessions"].count_documents({}) == 0


def test_a_confirmed_logout_follows_a_uri_registered_on_the_named_client(acme, browser, rp, person):
    signed_in(browser, rp, person)
    page = confirm_logout(browser, client_id=rp["client_id"], post_logout_redirect_uri="https://rp.example.com/bye",
                          state="s 1")
    assert_branded(page, "Sign out of Acme?", 200)
    assert "form-action 'self' https://rp.example.com" in page.headers["content-security-policy"]
    done = browser.submit(page)
    assert done.status_code == 302 and done.headers["location"] == "https://rp.example.com/bye?state=s+1"
    assert query_of(browser.get(authorize_url(rp, prompt="none")))["error"] == "login_required"


@pytest.mark.parametrize("params, tampered", [
    ({"client_id": "__rp__", "post_logout_redirect_uri": "https://evil.example.com/"}, {}),
    ({"post_logout_redirect_uri": "https://rp.example.com/bye"}, {}),  # no client_id: nothing identifies a client
    ({"client_id": "oc_unknown", "post_logout_redirect_uri": "https://rp.example.com/bye"}, {}),
    ({"client_id": "__rp__", "post_logout_redirect_uri": "https://rp.example.com/bye"},
     {"post_logout_redirect_uri": "https://evil.example.com/"}),  # the hidden field edited before the post
])
def test_a_confirmed_logout_redirects_nowhere_else(acme, browser, rp, person, params, tampered):
    signed_in(browser, rp, person)
    params = {k: rp["client_id"] if v == "__rp__" else v for k, v in params.items()}
    page = confirm_logout(browser, **params)
    assert "evil.example.com" not in page.headers["content-security-policy"]
    done = browser.post(form_action(page), {**hidden_fields(page), **tampered})
    assert_page(done, "You are signed out", 200)


def test_a_confirmation_posted_without_its_csrf_token_changes_nothing(acme, browser, rp, person):
    signed_in(browser, rp, person)
    page = confirm_logout(browser)
    assert_branded(browser.post(form_action(page), {"csrf_token": "forged"}), "This form has expired", 403)
    assert query_of(browser.get(authorize_url(rp, prompt="none")))["code"]


def test_a_program_without_a_hint_is_signed_out_at_once(browser, rp, person):
    """Only a navigating browser is asked: the JSON mode's answer is as before."""
    signed_in(browser, rp, person)
    assert_page(browser.get("/oidc/logout"), "You are signed out")
    assert query_of(browser.get(authorize_url(rp, prompt="none")))["error"] == "login_required"


# ---------------------------------------------------------------- the links sign-in pages have


def test_cancel_at_the_login_page_goes_back_to_the_client_with_access_denied(ctx, browser, rp):
    page = browser.get(authorize_url(rp))
    query = query_of(browser.submit(page, decision="cancel"))
    assert query["error"] == "access_denied" and query["state"] == "st-1"
    assert ctx.store["oidc_pending_requests"].count_documents({}) == 0
    assert not [n for n in browser.cookies if n.startswith("iamgate_oidc_")]


def test_cancel_at_the_mfa_step_goes_back_to_the_client(browser, rp, person, mfa_secret):
    mfa = sign_in(browser, rp, person)
    assert query_of(browser.submit(mfa, decision="cancel"))["error"] == "access_denied"


def forgot_page(browser, rp, email=""):
    login_page = browser.get(authorize_url(rp))
    page = browser.submit(login_page, email=email, decision="forgot")
    assert_page(page, "Reset your password")
    return page


def test_forgot_password_sends_the_apis_reset_email_and_returns_to_the_same_sign_in(browser, rp, person, outbox):
    page = forgot_page(browser, rp, email=person["email"])
    assert f'value="{person["email"]}"' in page.text  # what the login page had typed
    sent = browser.submit(page, email=person["email"])
    assert_page(sent, "Reset your password")
    assert f"If an account exists for {person['email']}" in sent.text
    assert [mail.to for mail in outbox] == [person["email"]] and "/reset-password?token=" in outbox[0].body
    login_page = browser.submit(sent, decision="back")
    assert_page(login_page, "Sign in")
    consent = browser.submit(login_page, email=person["email"], password=person["password"])
    assert_page(consent, "Allow access?")


def test_forgot_password_does_not_tell_whether_an_account_exists(browser, rp, person, outbox):
    known = browser.submit(forgot_page(browser, rp), email=person["email"])
    unknown = browser.submit(forgot_page(browser, rp), email="nobody@example.com")
    assert known.status_code == unknown.status_code == 200
    assert known.text.split("<main>")[1].replace(person["email"], "X").replace(hidden_fields(known)["request"], "R") \
        == unknown.text.split("<main>")[1].replace("nobody@example.com", "X").replace(
            hidden_fields(unknown)["request"], "R")
    assert [mail.to for mail in outbox] == [person["email"]]


def test_forgot_password_has_the_apis_limit(browser, rp, person, outbox):
    page = forgot_page(browser, rp)
    for _ in range(3):
        assert browser.submit(page, email="nobody@example.com").status_code == 200
    limited = browser.submit(page, email="nobody@example.com")
    assert_page(limited, "Reset your password", 429)
    assert 'role="alert"' in limited.text
    assert_page(browser.submit(page, email="not an email"), "Reset your password", 400)


def test_not_you_on_the_consent_page_signs_in_someone_else(ctx, browser, hosted_app, oidc_client, rp, person,
                                                           make_user):
    signed_in(browser, rp, person)
    other_client = oidc_client(hosted_app, name="Other")
    consent = browser.get(authorize_url(other_client))  # the browser session: straight to consent
    assert_page(consent, "Allow access?")
    assert f"Signed in as {person['email']}." in consent.text
    login_page = browser.submit(consent, decision="switch")
    assert_page(login_page, "Sign in")
    assert not [n for n in browser.cookies if n.startswith("iamgate_oidc_")]
    assert ctx.store["oidc_browser_sessions"].count_documents({}) == 0
    someone = make_user(hosted_app, email="grace@example.com")
    consent = browser.submit(login_page, email=someone["email"], password=someone["password"])
    assert "Signed in as grace@example.com." in consent.text
    assert query_of(browser.submit(consent, decision="allow"))["code"]
    assert [s["user_id"] for s in ctx.store["oidc_browser_sessions"].find({})] == [someone["id"]]


@pytest.fixture
def open_registration(ctx, hosted_app):
    return ctx.applications.update(hosted_app["_id"], {"oauth_hosted_registration_enabled": True})


def register_page(browser, rp):
    login_page = browser.get(authorize_url(rp))
    page = browser.submit(login_page, decision="register")
    assert_page(page, "Create your account")
    return page


def test_create_account_is_offered_only_when_the_application_allows_it(ctx, hosted_app, browser, rp):
    assert "Create account" not in browser.get(authorize_url(rp)).text
    refused = browser.submit(browser.get(authorize_url(rp)), decision="register")
    assert_page(refused, "Sign in", 400)  # the login page again, nothing else
    ctx.applications.update(hosted_app["_id"], {"oauth_hosted_registration_enabled": True})
    assert 'value="register"' in browser.get(authorize_url(rp)).text


def test_create_account_registers_then_continues_the_authorization(ctx, open_registration, browser, rp, outbox):
    page = register_page(browser, rp)
    consent = browser.submit(page, name="Grace Hopper", email="Grace@Example.com", password="a sturdy passphrase 9")
    assert_page(consent, "Allow access?")
    user = ctx.store["users"].find_one({"email": "grace@example.com"})
    assert user["name"] == "Grace Hopper" and user["email_verified"] is False
    assert [mail.to for mail in outbox] == ["grace@example.com"]  # the API's verification email
    assert [s["user_id"] for s in ctx.store["oidc_browser_sessions"].find({})] == [user["_id"]]
    assert query_of(browser.submit(consent, decision="allow"))["state"] == "st-1"


def test_create_account_applies_the_registration_rules(ctx, open_registration, browser, rp, person):
    page = register_page(browser, rp)
    taken = browser.submit(page, name="Ada", email=person["email"], password="a sturdy passphrase 9")
    assert_page(taken, "Create your account", 409)
    weak = browser.submit(taken, name="Ada", email="new@example.com", password="password")
    assert_page(weak, "Create your account", 422)
    assert "The password" in weak.text and 'value="new@example.com"' in weak.text
    invalid = browser.submit(weak, name="", email="not an email", password="a sturdy passphrase 9")
    assert_page(invalid, "Create your account", 400)
    assert ctx.store["users"].count_documents({"email": "new@example.com"}) == 0
    assert_page(browser.submit(invalid, decision="back"), "Sign in")


def test_create_account_is_refused_when_registration_is_closed(ctx, hosted_app, browser, rp):
    page = browser.get(authorize_url(rp))
    response = browser.post("/oidc/authorize/register", {**hidden_fields(page), "name": "Eve",
                                                         "email": "eve@example.com", "password": "a sturdy pass 9"})
    assert_page(response, "Sign in", 400)
    assert ctx.store["users"].count_documents({"email": "eve@example.com"}) == 0


# ---------------------------------------------------------------- passkeys and amr


def register_passkey(client, app, person, login, authenticator: SoftAuthenticator, headers=None) -> None:
    headers = headers or bearer(login(app, person["email"], person["password"])["access_token"])
    url = f"/api/v1/applications/{app['_id']}/auth/passkeys/registration"
    options = client.simulate_post(f"{url}/options", json={}, headers=headers)
    assert options.status_code == 200, options.text
    data = options.json["data"]
    registered = client.simulate_post(f"{url}/verify", headers=headers, json={
        "challenge_id": data["challenge_id"], "credential": authenticator.create(data["options"])})
    assert registered.status_code == 201, registered.text


def passkey_options(page) -> dict:
    """The options the page's passkey form hands to its script (data-passkey-options)."""
    return json.loads(html.unescape(re.search(r"data-passkey-options='([^']*)'", page.text).group(1)))


def post_passkey(browser, page, authenticator: SoftAuthenticator, **falsify):
    """What the page's script posts: the passkey form's fields and the credential's JSON."""
    credential = authenticator.get(passkey_options(page), **falsify)
    return browser.post(form_action(page), {**hidden_fields(page, passkey_form(page)),
                                            "credential": json.dumps(credential)})


def passkey_form(page) -> int:
    return next(i for i, form in enumerate(page.text.split("</form>")) if "data-passkey-options" in form)


def amr_of(ctx, exchange, rp, callback, verifier) -> list[str] | None:
    tokens = exchange(rp, query_of(callback)["code"], verifier)
    assert tokens.status_code == 200, tokens.text
    return ctx.oidc.tokens.verify_id_token_hint(tokens.json["id_token"]).get("amr")


PASSKEYS = pytest.mark.parametrize("config_overrides", [{"webauthn_rp_id": RP_ID, "webauthn_origins": (ORIGIN,)}],
                                   indirect=True)


@PASSKEYS
def test_a_passkey_alone_signs_in_and_the_id_token_says_hwk_user(ctx, client, browser, rp, hosted_app, person,
                                                                 login, exchange):
    app = ctx.applications.update(hosted_app["_id"], {"passkeys": "passwordless"})
    authenticator = SoftAuthenticator()
    register_passkey(client, app, person, login, authenticator)
    verifier, challenge = pkce_pair()
    page = browser.get(authorize_url(rp, challenge=challenge))
    assert_page(page, "Sign in")
    assert 'autocomplete="username webauthn"' in page.text
    assert "script-src 'self' 'nonce-" in page.headers["content-security-policy"]
    script = re.search(r'<script type="module" src="(/oidc/assets/passkeys\.[0-9a-f]{16}\.js)"></script>', page.text)
    asset = client.simulate_get(script.group(1))
    assert asset.status_code == 200 and asset.headers["content-type"].startswith("text/javascript")
    assert "parseRequestOptionsFromJSON" in asset.text
    assert client.simulate_get("/oidc/assets/passkeys.0000000000000000.js").status_code == 404

    consent = post_passkey(browser, page, authenticator)
    assert_page(consent, "Allow access?")  # the same continuation as after a password
    callback = browser.submit(consent, decision="allow")
    assert amr_of(ctx, exchange, rp, callback, verifier) == ["hwk", "user"]


@PASSKEYS
def test_a_refused_passkey_shows_the_login_page_with_its_words_and_no_autofill(ctx, client, browser, rp, hosted_app,
                                                                              person, login):
    app = ctx.applications.update(hosted_app["_id"], {"passkeys": "passwordless"})
    authenticator = SoftAuthenticator()
    register_passkey(client, app, person, login, authenticator)
    page = browser.get(authorize_url(rp))
    refused = post_passkey(browser, page, authenticator, user_verified=False)
    assert_page(refused, "Sign in", 400)
    assert "needs user verification" in refused.text
    assert "data-passkey-autofill" not in refused.text and "data-passkey-options" in refused.text
    assert not [n for n in browser.cookies if n.startswith("iamgate_oidc_")]
    malformed = browser.post(form_action(refused), {**hidden_fields(refused, passkey_form(refused)), "credential": "{"})
    assert_page(malformed, "Sign in", 400)


@PASSKEYS
def test_the_login_page_offers_no_passkey_unless_the_application_signs_in_with_one_alone(ctx, browser, rp,
                                                                                       hosted_app):
    ctx.applications.update(hosted_app["_id"], {"passkeys": "second_factor"})
    page = browser.get(authorize_url(rp))
    assert "data-passkey-options" not in page.text and 'autocomplete="username"' in page.text
    assert "script-src 'nonce-" in page.headers["content-security-policy"]


def test_a_code_as_the_second_factor_says_pwd_otp_mfa(ctx, browser, rp, person, exchange, clock, mfa_secret):
    verifier, challenge = pkce_pair()
    mfa = sign_in(browser, rp, person, challenge=challenge)
    consent = browser.submit(mfa, code=rfc6238(mfa_secret, clock()))
    callback = browser.submit(consent, decision="allow")
    assert amr_of(ctx, exchange, rp, callback, verifier) == ["pwd", "otp", "mfa"]


@PASSKEYS
def test_a_security_key_as_the_second_factor_says_pwd_hwk_mfa(ctx, client, browser, rp, hosted_app, person, login,
                                                              exchange):
    app = ctx.applications.update(hosted_app["_id"], {"passkeys": "second_factor"})
    security_key = SoftAuthenticator(resident=False, user_verifying=False)
    register_passkey(client, app, person, login, security_key)
    verifier, challenge = pkce_pair()
    mfa = sign_in(browser, rp, person, challenge=challenge)
    assert_page(mfa, "Two-step verification")
    assert "Use a passkey" in mfa.text and 'id="code"' not in mfa.text  # no TOTP: the passkey only
    consent = post_passkey(browser, mfa, security_key)
    callback = browser.submit(consent, decision="allow")
    assert amr_of(ctx, exchange, rp, callback, verifier) == ["pwd", "hwk", "mfa"]


@PASSKEYS
def test_the_mfa_step_takes_only_a_passkey_answering_this_logins_challenge(ctx, client, browser, rp, hosted_app,
                                                                           person, make_user, login):
    """Ada typed her password and is at the MFA step; Grace's passkey answering the login
    page's sign-in-alone challenge must not finish Ada's login as Grace (with an ``amr``
    of pwd, hwk and mfa Grace never earned), nor may any challenge but this login's."""
    app = ctx.applications.update(hosted_app["_id"], {"passkeys": "passwordless"})
    register_passkey(client, app, person, login, SoftAuthenticator())
    grace, graces_key = make_user(hosted_app, name="Grace Hopper"), SoftAuthenticator()
    register_passkey(client, app, grace, login, graces_key)
    login_page = browser.get(authorize_url(rp))
    alone, alone_options = hidden_fields(login_page, passkey_form(login_page)), passkey_options(login_page)
    mfa = browser.submit(login_page, email=person["email"], password=person["password"])
    assert_page(mfa, "Two-step verification")
    graces_sessions = ctx.store["sessions"].count_documents({"user_id": grace["id"]})
    answer = browser.post(form_action(mfa), {**hidden_fields(mfa, passkey_form(mfa)),
                                             "challenge_id": alone["challenge_id"],
                                             "credential": json.dumps(graces_key.get(alone_options))})
    assert_page(answer, "Two-step verification", 400)
    assert ctx.store["oidc_pending_requests"].find_one({"stage": "mfa"}) is not None  # still Ada's MFA step
    assert ctx.store["sessions"].count_documents({"user_id": grace["id"]}) == graces_sessions


@PASSKEYS
def test_the_login_pages_passkey_form_takes_only_a_sign_in_alone_challenge(ctx, client, browser, rp, hosted_app,
                                                                           person, login):
    """A second factor's challenge (from the API: UV only preferred, no user handle
    needed) posted to the login page's passkey form with a security key that never
    verified the user must not sign in with ``amr`` ["hwk", "user"]."""
    app = ctx.applications.update(hosted_app["_id"], {"passkeys": "passwordless"})
    security_key = SoftAuthenticator(resident=False, user_verifying=False)
    register_passkey(client, app, person, login, security_key)
    page = browser.get(authorize_url(rp))
    api_login = client.simulate_post(f"/api/v1/applications/{app['_id']}/users/login", remote_addr=fresh_address(),
                                     json={"email": person["email"], "password": person["password"]}).json["data"]
    second = client.simulate_post(f"/api/v1/applications/{app['_id']}/auth/passkeys/authentication/options",
                                  remote_addr=fresh_address(),
                                  json={"challenge_token": api_login["challenge_token"]}).json["data"]
    answer = browser.post(form_action(page), {**hidden_fields(page, passkey_form(page)),
                                              "challenge_id": second["challenge_id"],
                                              "credential": json.dumps(security_key.get(second["options"]))})
    assert_page(answer, "Sign in", 400)
    assert "challenge is unknown, expired or already used" in answer.text
    assert ctx.store["oidc_pending_requests"].find_one({"stage": "login"}) is not None


# Two per-IP budgets of one rate (IAMGATE_RATE_LIMIT_LOGIN): a sign-in attempt (a
# password, a passkey) draws a unit of the login budget (login:<app>:<ip>); a page
# showing that stores a passkey challenge draws one of the login page budget
# (login-page:<app>:<ip>), unless it is the MFA page a sign-in leads to, which the
# sign-in's unit pays.  Once the page budget is spent a page shows no passkey and still
# takes a password or a code: a third party, which can make a browser GET the login
# page, can never spend the budget of its sign-ins.
BUDGET = pytest.mark.parametrize("config_overrides", [{"webauthn_rp_id": RP_ID, "webauthn_origins": (ORIGIN,),
                                                       "rate_limit_login": Rate(5, 60)}], indirect=True)


def units(ctx, app, browser, budget: str = "login") -> int:
    """Units of the browser's ``budget`` (login, login-page) drawn in this window (the
    counter goes past the limit once refusals are counted too)."""
    counters = ctx.store["rate_limits"].find({"_id": {"$regex": f"^{budget}:{app['_id']}:{browser.address}\\|"}})
    return min(ctx.config.rate_limit_login.limit, sum(counter["n"] for counter in counters))


def challenges(ctx, app, kind: str | None = None) -> int:
    return ctx.store["passkey_challenges"].count_documents({"app_id": app["_id"], **({"kind": kind} if kind else {})})


@BUDGET
def test_reloading_the_login_page_stores_no_more_challenges_than_the_page_budget(ctx, browser, rp, hosted_app,
                                                                                 person):
    app = ctx.applications.update(hosted_app["_id"], {"passkeys": "passwordless"})
    url = authorize_url(rp)
    pages = [browser.get(url) for _ in range(12)]
    for page in pages:
        assert_page(page, "Sign in")
    assert all("data-passkey-options" in page.text for page in pages[:5])
    assert not any("data-passkey-options" in page.text for page in pages[5:])
    assert 'autocomplete="username"' in pages[-1].text  # a page without a passkey ceremony
    assert challenges(ctx, app) == units(ctx, app, browser, "login-page") == 5
    assert units(ctx, app, browser) == 0  # showing a page is no sign-in attempt
    signed_in = browser.submit(pages[-1], email=person["email"], password=person["password"])
    assert_page(signed_in, "Sign in faster next time")  # the offer of a passkey, for a user without one
    assert units(ctx, app, browser) == 1


@BUDGET
def test_another_sites_cookieless_gets_of_the_login_page_never_refuse_the_users_password(ctx, client, rp,
                                                                                         hosted_app, person):
    """Any web page the user visits can make the browser GET /oidc/authorize (ten
    ``<img>`` of it: no cookie, no CSRF token, no click; the client id and redirect URI
    are public), and so can colleagues behind the same NAT opening the login page.  Those
    showings spend the page budget, which only hides the passkey button: the user's own
    password sign-in from that address goes through."""
    ctx.applications.update(hosted_app["_id"], {"passkeys": "passwordless"})
    user = Browser(client)
    url = authorize_url(rp)
    for _ in range(10):  # the other page's <img> tags: the user's address, no cookies
        loaded = client.simulate_get("/oidc/authorize", query_string=url.split("?", 1)[1], remote_addr=user.address)
        assert loaded.status_code == 200
    page = user.get(url)
    assert_page(page, "Sign in")
    assert "data-passkey-options" not in page.text  # the page budget is spent: no passkey button
    signed_in = user.submit(page, email=person["email"], password=person["password"])
    assert_page(signed_in, "Sign in faster next time")


# IAMGATE_RATE_LIMIT_AUTHORIZE: every page the GET shows stores its pending request for
# ten minutes, so the requests one address may store are bounded (authorize-ip:<ip>,
# across applications); past it the browser goes back to the client with
# temporarily_unavailable.  What stores no request (a code for a live session,
# prompt=none) draws nothing.
STORED = pytest.mark.parametrize("config_overrides", [{"rate_limit_authorize": Rate(3, 60)}], indirect=True)


def pending_requests(ctx) -> int:
    return ctx.store["oidc_pending_requests"].count_documents({})


@STORED
def test_an_address_stores_no_more_authorization_requests_than_its_budget(ctx, client, browser, rp, hosted_app,
                                                                           oidc_client):
    for shown in range(1, 4):
        assert_page(browser.get(authorize_url(rp, state=f"st-{shown}")), "Sign in")
        assert pending_requests(ctx) == shown
    refused = browser.get(authorize_url(rp, state="st-4"))
    assert refused.headers["location"].startswith(REDIRECT_URI + "?")
    assert query_of(refused) == {"error": "temporarily_unavailable", "state": "st-4",
                                 "error_description": "Too many sign-ins were started from this network; "
                                                      "try again in a minute."}
    assert pending_requests(ctx) == 3  # refused before anything is stored
    other = authorize_url(oidc_client(hosted_app, name="Other"), state="st-5")
    assert query_of(browser.get(other))["error"] == "temporarily_unavailable"  # the address's, not the client's
    assert_page(Browser(client).get(authorize_url(rp)), "Sign in")  # another address has its own
    assert pending_requests(ctx) == 4


@STORED
def test_what_stores_no_request_draws_nothing_from_the_budget(ctx, browser, rp, person):
    consent = sign_in(browser, rp, person)  # draws one: the login page
    assert browser.submit(consent, decision="allow").status_code == 302
    for attempt in range(5):  # a live browser session with consent: a code each time
        assert "code" in query_of(browser.get(authorize_url(rp, state=f"again-{attempt}")))
    stranger = Browser(browser.client)
    stranger.address = browser.address
    for _ in range(5):  # prompt=none without a session: login_required, nothing stored
        assert query_of(stranger.get(authorize_url(rp, prompt="none")))["error"] == "login_required"
    assert_page(stranger.get(authorize_url(rp)), "Sign in")  # the second unit
    assert_page(stranger.get(authorize_url(rp)), "Sign in")  # the third
    assert query_of(stranger.get(authorize_url(rp)))["error"] == "temporarily_unavailable"


@STORED
def test_a_consent_page_draws_on_the_budget_too(browser, rp, hosted_app, person, oidc_client):
    consent = sign_in(browser, rp, person)
    assert browser.submit(consent, decision="allow").status_code == 302
    other = oidc_client(hosted_app, name="Other")
    assert_page(browser.get(authorize_url(other)), "Allow access?")  # a live session, a new client: unit two
    assert_page(browser.get(authorize_url(other)), "Allow access?")  # three
    refused = browser.get(authorize_url(other, state="st-9"))
    assert query_of(refused) == {"error": "temporarily_unavailable", "state": "st-9",
                                 "error_description": "Too many sign-ins were started from this network; "
                                                      "try again in a minute."}


@BUDGET
def test_a_failed_password_draws_on_the_login_budget_and_its_page_on_the_page_budget(ctx, browser, rp, hosted_app,
                                                                                    person):
    app = ctx.applications.update(hosted_app["_id"], {"passkeys": "passwordless"})
    page = browser.get(authorize_url(rp))
    assert (units(ctx, app, browser), units(ctx, app, browser, "login-page"), challenges(ctx, app)) == (0, 1, 1)
    for attempt in range(1, 5):
        page = browser.submit(page, email=person["email"], password=f"wrong password {attempt}")
        assert_page(page, "Sign in", 401)
        assert "data-passkey-options" in page.text
        assert units(ctx, app, browser) == attempt
        assert units(ctx, app, browser, "login-page") == challenges(ctx, app) == attempt + 1
    page = browser.submit(page, email=person["email"], password="wrong password 5")
    assert_page(page, "Sign in", 401)  # the fifth attempt; the page budget is spent
    assert "data-passkey-options" not in page.text and challenges(ctx, app) == 5
    for _ in range(3):
        page = browser.submit(page, email=person["email"], password="wrong password")
        assert_page(page, "Sign in", 429)
        assert "data-passkey-options" not in page.text
    assert challenges(ctx, app) == 5


@pytest.mark.parametrize("config_overrides", [{"webauthn_rp_id": RP_ID, "webauthn_origins": (ORIGIN,),
                                               "rate_limit_login": Rate(5, 60), "mfa_max_attempts": 15}],
                         indirect=True)
def test_the_mfa_pages_passkey_challenges_draw_on_the_sign_in_or_the_page_budget(ctx, client, browser, clock, rp,
                                                                                  hosted_app, person, login):
    """The MFA page the password leads to has its challenge on the password's unit (no
    third party can hide the passkey of a user whose only second factor it is); shown
    again after a refused passkey or code, on a unit of the page budget."""
    app = ctx.applications.update(hosted_app["_id"], {"passkeys": "second_factor"})
    headers = bearer(login(app, person["email"], person["password"])["access_token"])
    mfa_secret = enrol_totp(client, clock, app, person, headers)
    register_passkey(client, app, person, login, SoftAuthenticator(), headers=headers)
    challenges_before = challenges(ctx, app)
    mfa = sign_in(browser, rp, person)  # the password's unit, and the page's challenge on it
    assert_page(mfa, "Two-step verification")
    assert "data-passkey-options" in mfa.text and 'id="code"' in mfa.text
    assert (units(ctx, app, browser), units(ctx, app, browser, "login-page")) == (1, 0)
    refused = post_passkey(browser, mfa, SoftAuthenticator())  # not the user's: an attempt, and the page again
    assert_page(refused, "Two-step verification", 400)
    assert "data-passkey-options" in refused.text
    assert (units(ctx, app, browser), units(ctx, app, browser, "login-page")) == (2, 1)
    wrong = "000000" if rfc6238(mfa_secret, clock()) != "000000" else "111111"
    page = refused
    for shown in (2, 3):  # a code draws on no budget; the page shown again draws on the page budget
        page = browser.submit(page, code=wrong)
        assert_page(page, "Two-step verification", 401)
        assert "data-passkey-options" in page.text and units(ctx, app, browser, "login-page") == shown
    for shown in (4, 5):
        page = browser.submit(page, code="")
        assert "data-passkey-options" in page.text and units(ctx, app, browser, "login-page") == shown
    for _ in range(10):
        page = browser.submit(page, code="")
        assert page.status_code in (400, 401) and "Two-step verification" in page.text
        assert "data-passkey-options" not in page.text and 'id="code"' in page.text
    # Six showings, each with its challenge (the refused passkey used one up).
    assert challenges(ctx, app) - challenges_before == 5
    assert units(ctx, app, browser) == 2
    assert_page(browser.submit(page, code=rfc6238(mfa_secret, clock())), "Allow access?")


@BUDGET
def test_the_passkey_offer_shown_again_draws_on_the_page_budget(ctx, browser, rp, hosted_app, person):
    """The offer a password sign-in leads to is that sign-in's (one per sign-in); each
    time it is shown again (a post that is neither "Add" nor "Not now", a refused
    registration) its new registration challenge draws a unit of the page budget, and
    once that is spent the offer has no "Add a passkey": it says so, and "Continue" goes
    on without the "Not now" that would stop later offers."""
    app = ctx.applications.update(hosted_app["_id"], {"passkeys": "second_factor"})
    page = browser.get(authorize_url(rp))
    offer = browser.submit(page, email=person["email"], password=person["password"])
    assert_page(offer, "Sign in faster next time")
    assert challenges(ctx, app, "registration") == 1
    for shown in range(1, 21):  # neither decision=passkey nor decision=skip: the offer again
        offer = browser.submit(offer, decision="")
        assert_page(offer, "Sign in faster next time", 400)
        assert ("data-passkey-create" in offer.text) == (shown <= 5)
    limit = ctx.config.rate_limit_login.limit
    assert challenges(ctx, app, "registration") == 1 + limit == 1 + units(ctx, app, browser, "login-page")
    assert units(ctx, app, browser) == 1  # the password's
    # Nothing to add: the page says so and only goes on, and going on is no "Not now".
    assert 'id="offer-later"' in offer.text and "Not now" not in offer.text
    assert_page(browser.submit(offer, decision="later"), "Allow access?")
    assert "iamgate_passkey_declined" not in browser.last_set_cookies


def test_a_password_alone_says_pwd(ctx, browser, rp, person, exchange):
    verifier, challenge = pkce_pair()
    consent = sign_in(browser, rp, person, challenge=challenge)
    callback = browser.submit(consent, decision="allow")
    assert amr_of(ctx, exchange, rp, callback, verifier) == ["pwd"]
    # A later authorize through the browser session keeps how the user signed in.
    verifier, challenge = pkce_pair()
    again = browser.get(authorize_url(rp, challenge=challenge))
    assert amr_of(ctx, exchange, rp, again, verifier) == ["pwd"]


@PASSKEYS
def test_after_a_password_the_offer_to_add_a_passkey_registers_one(ctx, browser, rp, hosted_app, person, exchange):
    ctx.applications.update(hosted_app["_id"], {"passkeys": "second_factor"})
    verifier, challenge = pkce_pair()
    offer = sign_in(browser, rp, person, challenge=challenge)
    assert_page(offer, "Sign in faster next time")
    assert "data-passkey-create" in offer.text
    refused = post_created(browser, offer, SoftAuthenticator(), origin="https://evil.example")
    assert_page(refused, "Sign in faster next time", 400)
    assert ctx.passkeys.list(hosted_app["_id"], person["id"]) == []
    consent = post_created(browser, refused, SoftAuthenticator())
    assert_page(consent, "Allow access?")  # the sign-in goes on
    assert len(ctx.passkeys.list(hosted_app["_id"], person["id"])) == 1
    callback = browser.submit(consent, decision="allow")
    assert amr_of(ctx, exchange, rp, callback, verifier) == ["pwd"]
    # The passkey is now the user's second factor, and no other is offered.
    assert_page(sign_in(browser, rp, person, prompt="login"), "Two-step verification")


@PASSKEYS
def test_not_now_is_remembered_by_the_browser_for_that_user(ctx, browser, client, rp, hosted_app, person,
                                                            make_user):
    ctx.applications.update(hosted_app["_id"], {"passkeys": "second_factor"})
    offer = sign_in(browser, rp, person)
    consent = browser.submit(offer, decision="skip")
    assert_page(consent, "Allow access?")
    cookie = browser.last_set_cookies["iamgate_passkey_declined"]
    assert cookie.http_only and cookie.path == "/oidc" and cookie.max_age > 300 * 24 * 3600
    assert person["id"] not in cookie.value
    browser.submit(consent, decision="allow")
    again = sign_in(browser, rp, person, prompt="login")
    assert again.status_code == 302  # consent given, no offer: straight to the code
    # Another user in the same browser is still offered one; another browser is too.
    other = make_user(hosted_app, name="Grace Hopper")
    assert_page(sign_in(browser, rp, other, prompt="login"), "Sign in faster next time")
    assert_page(sign_in(Browser(client), rp, person), "Sign in faster next time")


def post_created(browser, page, authenticator: SoftAuthenticator, **falsify):
    """What the offer's script posts: the passkey form's fields and the new credential."""
    credential = authenticator.create(passkey_options(page), **falsify)
    return browser.post(form_action(page), {**hidden_fields(page, passkey_form(page)),
                                            "credential": json.dumps(credential)})


@pytest.mark.parametrize("destination", ["image", "empty", "script"])
def test_a_page_cannot_sign_the_browser_out_behind_its_back(browser, rp, person, destination):
    """A same-site page's ``<img src=/oidc/logout>`` or ``fetch()`` carries the
    ``SameSite=Lax`` cookie and no ``Accept: text/html``; its Fetch Metadata says it is not
    a navigation, so it gets the confirmation page, and nothing ends."""
    signed_in(browser, rp, person)
    page = browser.request("GET", "/oidc/logout", headers={"Accept": "*/*", "Sec-Fetch-Dest": destination,
                                                            "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Site": "same-site"})
    assert page.status_code == 200 and form_action(page).startswith("/oidc/logout/confirm")
    assert query_of(browser.get(authorize_url(rp, prompt="none")))["code"]
