"""Signing in through a connection against a real, certified provider (panva's
oidc-provider on loopback, tests/connections/upstream.py), by the API an application's own
UI uses: ``POST V1/auth/connections/{id}/start`` gives the provider's URL, a browser-less
user (``requests``, following the redirects) signs in on the provider's real login page,
and the provider's answer goes to ``POST V1/auth/connections/callback``.

Each linking case of the issue: a first sign-in (JIT), a trusted verified email linked,
an unverified upstream email refused a link (nOAuth) and an unverified local account never
merged into (pre-account hijack), the same email from two providers, a changed email
under the same ``sub``, and the mix-up defence with a second provider instance.  Then each
preset (google, entra, gitlab as OpenID Connect; github as OAuth 2.0 with its user API)
configured against the local provider standing in for the real one."""
from __future__ import annotations

import secrets
from dataclasses import replace
from urllib.parse import parse_qsl, urlsplit

import pytest
import requests

from controlplane.connections.model import secret_box
from controlplane.connections.presets import PRESETS
from tests.connections.upstream import UPSTREAM_SECRET, endpoints_of, provider_login, redirect_params

APP_CALLBACK = "https://app.example.com/signed-in"  # the application's own page; never opened


@pytest.fixture
def config_overrides(live_url):
    return {"public_url": live_url, "webhook_allow_private_targets": True}


@pytest.fixture
def own_ui_app(ctx, application):
    ctx.applications.update(application["_id"], {"oauth_redirect_uris": [APP_CALLBACK]})
    return ctx.applications.get(application["_id"])


@pytest.fixture
def idp(upstreams, own_ui_app, add_connection, clock):
    """``idp(name, **fields)``: a provider instance and the application's connection to it."""
    def start(name: str = "local", *, accounts=None, github: bool = False, **fields):
        upstream = upstreams.start(clients=[{"client_id": "iamgate", "client_secret": UPSTREAM_SECRET,
                                             "redirect_uris": [APP_CALLBACK]}], accounts=accounts, github=github)
        fields = {"issuer": upstream.issuer, "client_id": "iamgate", "scopes": ("openid", "email", "profile"),
                  "endpoints": endpoints_of(upstream, clock()), **fields}
        return upstream, add_connection(own_ui_app, name=name, display_name=name.title(), **fields)
    return start


class OwnUi:
    """The application's own sign-in UI: a browser (``requests`` session) and the
    per-browser binding it keeps, calling the V1 sign-in routes."""

    def __init__(self, live_url: str, app: dict):
        self.v1 = f"{live_url}/api/v1/applications/{app['_id']}"
        self.browser = requests.Session()
        self.binding = secrets.token_urlsafe(24)

    def start(self, connection, **body) -> str:
        started = requests.post(f"{self.v1}/auth/connections/{connection.id}/start", timeout=10,
                                json={"redirect_uri": APP_CALLBACK, "binding": self.binding, **body})
        assert started.status_code == 200, started.text
        return started.json()["data"]["authorization_url"]

    def at_provider(self, upstream, connection, login: str, **body) -> dict:
        """The provider's answer (the query it sends to the application's page)."""
        back = provider_login(self.browser, upstream, self.start(connection, **body), login)
        assert back.headers["Location"].startswith(APP_CALLBACK), back.headers["Location"]
        return redirect_params(back)

    def callback(self, params: dict) -> requests.Response:
        return requests.post(f"{self.v1}/auth/connections/callback", json={"params": params, "binding": self.binding},
                             timeout=10)

    def sign_in(self, upstream, connection, login: str) -> requests.Response:
        return self.callback(self.at_provider(upstream, connection, login))


def signed_in(response: requests.Response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()["data"]


def refused(response: requests.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code, response.text
    return response.json()["error"]


def identities(ctx, app, user_id: str) -> list[tuple[str, str, str]]:
    return sorted((i["connection_id"], i["issuer"], i["sub"]) for i in ctx.connection_sign_in.identities.list(
        app["_id"], user_id))


def verified_local_user(ctx, app, make_user, email: str, *, verified: bool = True) -> dict:
    user = make_user(app, email=email)
    ctx.store["users"].update_one({"_id": user["id"]}, {"$set": {"email_verified": verified}})
    return user


# ---------------------------------------------------------------- linking


def test_a_first_sign_in_creates_the_user_with_the_providers_claims(live_server, ctx, own_ui_app, idp):
    upstream, connection = idp(jit=True)
    ui = OwnUi(live_server, own_ui_app)
    answer = ui.at_provider(upstream, connection, "verified", login_hint="ada@example.com")
    assert answer["iss"] == upstream.issuer
    pair = signed_in(ui.callback(answer))
    assert pair["access_token"] and pair["refresh_token"]
    user = pair["user"]
    assert (user["email"], user["name"]) == ("ada@example.com", "Ada Lovelace")
    assert identities(ctx, own_ui_app, user["id"]) == [(connection.id, upstream.issuer, "verified")]
    # The state was single use: the same answer again is refused.
    refused(ui.callback(answer), 400, "CONNECTION_STATE_INVALID")


def test_a_trusted_verified_email_links_to_the_verified_local_account(live_server, ctx, own_ui_app, idp, make_user):
    local = verified_local_user(ctx, own_ui_app, make_user, "ada@example.com")
    upstream, connection = idp(linking="trusted_email", trusted=True)
    user = signed_in(OwnUi(live_server, own_ui_app).sign_in(upstream, connection, "verified"))["user"]
    assert user["id"] == local["id"]
    assert identities(ctx, own_ui_app, local["id"]) == [(connection.id, upstream.issuer, "verified")]


def test_an_unverified_upstream_email_is_never_linked_automatically(live_server, ctx, own_ui_app, idp, make_user):
    """nOAuth: a provider that lets anyone claim any email says email_verified false."""
    local = verified_local_user(ctx, own_ui_app, make_user, "ada@example.com")
    upstream, connection = idp(linking="trusted_email", trusted=True)
    error = refused(OwnUi(live_server, own_ui_app).sign_in(upstream, connection, "unverified"), 409,
                    "CONNECTION_LINK_REQUIRED")
    assert error["details"]["email"] == "ada@example.com" and error["details"]["link_id"]
    assert identities(ctx, own_ui_app, local["id"]) == []


def test_an_unverified_local_account_is_never_merged_into(live_server, ctx, own_ui_app, idp, make_user):
    """Pre-account hijack: someone registered the victim's address first and never verified it."""
    squatter = verified_local_user(ctx, own_ui_app, make_user, "ada@example.com", verified=False)
    upstream, connection = idp(linking="trusted_email", trusted=True)
    refused(OwnUi(live_server, own_ui_app).sign_in(upstream, connection, "verified"), 409, "CONNECTION_LINK_REQUIRED")
    assert identities(ctx, own_ui_app, squatter["id"]) == []


def test_an_untrusted_connection_never_links_automatically(live_server, ctx, own_ui_app, idp, make_user):
    local = verified_local_user(ctx, own_ui_app, make_user, "ada@example.com")
    upstream, connection = idp(linking="trusted_email", trusted=False)
    refused(OwnUi(live_server, own_ui_app).sign_in(upstream, connection, "verified"), 409, "CONNECTION_LINK_REQUIRED")
    assert identities(ctx, own_ui_app, local["id"]) == []


def test_linking_none_refuses_an_existing_email(live_server, ctx, own_ui_app, idp, make_user):
    local = verified_local_user(ctx, own_ui_app, make_user, "ada@example.com")
    upstream, connection = idp(linking="none")
    refused(OwnUi(live_server, own_ui_app).sign_in(upstream, connection, "verified"), 409, "CONNECTION_EMAIL_EXISTS")
    assert identities(ctx, own_ui_app, local["id"]) == []


def test_the_same_email_from_two_providers(live_server, ctx, own_ui_app, idp):
    """Two identities (one per provider); one user only when the second connection's
    linking allows it, never by the email alone.  The first connection is trusted, so
    the user it creates has a verified email a trusted_email connection may link to."""
    first, first_connection = idp("first", linking="none", trusted=True)
    second, second_connection = idp("second", linking="none")
    user = signed_in(OwnUi(live_server, own_ui_app).sign_in(first, first_connection, "twin"))["user"]
    refused(OwnUi(live_server, own_ui_app).sign_in(second, second_connection, "twin"), 409, "CONNECTION_EMAIL_EXISTS")
    assert identities(ctx, own_ui_app, user["id"]) == [(first_connection.id, first.issuer, "twin")]

    third, third_connection = idp("third", linking="trusted_email", trusted=True)
    again = signed_in(OwnUi(live_server, own_ui_app).sign_in(third, third_connection, "twin"))["user"]
    assert again["id"] == user["id"]
    assert identities(ctx, own_ui_app, user["id"]) == sorted([(first_connection.id, first.issuer, "twin"),
                                                              (third_connection.id, third.issuer, "twin")])


def test_a_changed_email_under_the_same_sub_is_the_same_identity(live_server, ctx, own_ui_app, idp):
    upstream, connection = idp(auto_update=True)
    ui = OwnUi(live_server, own_ui_app)
    before = signed_in(ui.sign_in(upstream, connection, "changer"))["user"]
    upstream.set_account("changer", email="grace.hopper@example.com", email_verified=True, name="Grace B. Hopper")
    after = signed_in(OwnUi(live_server, own_ui_app).sign_in(upstream, connection, "changer"))["user"]
    assert after["id"] == before["id"]
    assert identities(ctx, own_ui_app, before["id"]) == [(connection.id, upstream.issuer, "changer")]
    [identity] = ctx.connection_sign_in.identities.list(own_ui_app["_id"], before["id"])
    assert identity["email"] == "grace.hopper@example.com"  # the identity records what the provider says now
    user = ctx.users.directory.get(own_ui_app["_id"], before["id"])
    # auto_update refreshes the mapped profile; the local email stays the account's own.
    assert (user["name"], user["email"]) == ("Grace B. Hopper", "grace@example.com")


# ---------------------------------------------------------------- the mix-up defence


def test_an_answer_from_another_provider_is_refused(live_server, ctx, own_ui_app, idp):
    """RFC 9207 / RFC 9700 4.4: the state names the connection that started the sign-in;
    an answer carrying another issuer, or none from a provider that announces it sends
    one, is refused, and the state is spent."""
    honest, honest_connection = idp("honest")
    attacker, attacker_connection = idp("attacker")
    ui = OwnUi(live_server, own_ui_app)
    victim_state = state_of(ui.start(honest_connection))
    # The attacker's provider answers (its own code, its own iss) to the honest sign-in's state.
    mixed = ui.at_provider(attacker, attacker_connection, "verified")
    error = refused(ui.callback({**mixed, "state": victim_state}), 400, "CONNECTION_CALLBACK_INVALID")
    assert error["details"]["reason"] == "iss_mismatch"
    refused(ui.callback({**mixed, "state": victim_state}), 400, "CONNECTION_STATE_INVALID")

    stripped = ui.at_provider(attacker, attacker_connection, "verified")
    another_state = state_of(ui.start(honest_connection))
    error = refused(ui.callback({"code": stripped["code"], "state": another_state}), 400,
                    "CONNECTION_CALLBACK_INVALID")
    assert error["details"]["reason"] == "iss_missing"
    assert ctx.store["users"].count_documents({"app_id": own_ui_app["_id"]}) == 0


def state_of(authorization_url: str) -> str:
    return dict(parse_qsl(urlsplit(authorization_url).query))["state"]


# ---------------------------------------------------------------- presets against the local provider


def _preset_connection(preset_name: str, upstream, clock, **fields) -> dict:
    """The preset's type, scopes and claim mapping, with the local provider standing in
    for the real one (its issuer and endpoints)."""
    preset = PRESETS[preset_name]
    endpoints = endpoints_of(upstream, clock())
    if preset.type == "oauth2":
        endpoints = replace(endpoints, jwks_uri=None, iss_parameter_supported=False, fetched_at=None,
                            userinfo_endpoint=f"{upstream.issuer}/user")
    return {"type": preset.type, "preset": preset.name, "scopes": preset.scopes,
            "claim_mapping": preset.claim_mapping, "issuer": upstream.issuer, "endpoints": endpoints, **fields}


@pytest.mark.parametrize("preset", ["google", "entra", "gitlab", "github"])
def test_each_preset_signs_in_against_the_local_provider(live_server, ctx, config, clock, own_ui_app, upstreams,
                                                         add_connection, preset):
    upstream = upstreams.start(clients=[{"client_id": "iamgate", "client_secret": UPSTREAM_SECRET,
                                         "redirect_uris": [APP_CALLBACK],
                                         **({"token_endpoint_auth_method": "client_secret_post"}
                                            if preset == "github" else {})}], github=preset == "github")
    connection = add_connection(own_ui_app, name=preset, display_name=PRESETS[preset].display_name,
                                client_id="iamgate", linking="trusted_email", trusted=True,
                                **_preset_connection(preset, upstream, clock))
    pair = signed_in(OwnUi(live_server, own_ui_app).sign_in(upstream, connection, "verified"))
    assert pair["user"]["email"] == "ada@example.com"
    stored = ctx.store["users"].find_one({"_id": pair["user"]["id"]})
    assert stored["email_verified"] is True  # each preset's mapping read the provider's verification
    [(connection_id, issuer, sub)] = identities(ctx, own_ui_app, pair["user"]["id"])
    assert (connection_id, issuer) == (connection.id, upstream.issuer)
    assert sub == "verified" if preset != "github" else sub.isdigit()
    assert secret_box(config.secret_key).decrypt(connection.client_secret_enc).decode() == UPSTREAM_SECRET


def test_a_gitlab_connection_created_through_the_api_pins_the_local_providers_discovery(
        live_server, ctx, own_ui_app, upstreams, make_api_key):
    """A self-managed GitLab has its own issuer: V1/connections with preset gitlab and the
    local provider's issuer fetches and pins its discovery, and the sign-in works."""
    upstream = upstreams.start(clients=[{"client_id": "iamgate", "client_secret": UPSTREAM_SECRET,
                                         "redirect_uris": [APP_CALLBACK]}])
    key = make_api_key(own_ui_app, permissions=["connections:manage"])
    created = requests.post(f"{live_server}/api/v1/applications/{own_ui_app['_id']}/connections", timeout=10,
                            headers={"Authorization": f"Bearer {key}"},
                            json={"preset": "gitlab", "name": "gitlab", "issuer": upstream.issuer,
                                  "client_id": "iamgate", "client_secret": UPSTREAM_SECRET})
    assert created.status_code == 201, created.text
    connection = ctx.connections.get(own_ui_app["_id"], created.json()["data"]["id"])
    assert connection.endpoints.token_endpoint == f"{upstream.issuer}/token"
    assert connection.endpoints.iss_parameter_supported is True
    pair = signed_in(OwnUi(live_server, own_ui_app).sign_in(upstream, connection, "verified"))
    assert pair["user"]["email"] == "ada@example.com"
