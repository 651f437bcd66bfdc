"""The mix-up through a redirect URI below another (RFC 9700 4.4.1): proves it impossible.

A connection whose provider sends no ``iss`` (GitHub and many others) is told apart by
a redirect URI of its own (RFC 9700 4.4.2).  That holds only if no honest provider takes
one connection's redirect URI for another's, and GitHub accepts any redirect URI below
the callback URL registered for an OAuth App.  While a connection's own callback was
``.../callback/{connectionId}``, below the application's ``.../callback``, a GitHub app
registered with the application's callback (docs/connections.md said either works) also
accepted an attacker's connection's: the attacker's provider sent the victim on to
GitHub with the victim's state and ``redirect_uri=.../callback/{evil}``, GitHub's code
came back to the evil connection's callback, passed the arrival check, and was posted
to the attacker's token endpoint, where the attacker could redeem it as the victim.

Each connection's own callback is now beside the application's, at
``/oidc/connections/{applicationId}/{connectionId}/callback``.  These tests check that no
redirect URI of the hosted login is below another; that the attack finds no redirect
URI a GitHub-like provider accepts and whose answer reaches the evil token endpoint,
wherever the honest app is registered; that the honest connection still signs in; and
that the former path answers a page saying it moved, without reading the answer."""
from __future__ import annotations

import html
import re
from itertools import permutations
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
import requests

from controlplane.connections.model import Endpoints, secret_box
from controlplane.oidc import upstream
from shared.ids import new_id
from tests.connections.flow.provider import CLIENT_ID, CLIENT_SECRET
from tests.connections.flow.provider import Provider as ScriptedProvider
from tests.connections.upstream import callback_url
from tests.oidc.conftest import pkce_pair

RP_CALLBACK = "https://rp.example.com/callback"


@pytest.fixture
def config_overrides(live_url):
    # The hosted callbacks are under the public URL the browser uses; providers run on loopback.
    return {"public_url": live_url, "webhook_allow_private_targets": True}


@pytest.fixture
def rp(hosted_app, oidc_client):
    return oidc_client(hosted_app, redirect_uris=[RP_CALLBACK])


@pytest.fixture
def providers():
    """An honest provider standing in for GitHub (no ``iss``; its redirect URI rule set by
    the test through ``callback_url``) and the attacker's (no ``iss`` either)."""
    honest, evil = ScriptedProvider(iss_parameter=False), ScriptedProvider(iss_parameter=False)
    yield honest, evil
    honest.close()
    evil.close()


@pytest.fixture
def connections(ctx, config, clock, hosted_app, make_connection, providers):
    """The hosted-login application's connections to both: the honest one first."""
    honest, evil = providers
    first = _hosted_connection(ctx, config, make_connection, hosted_app, honest, "github")
    clock.advance(1)
    return first, _hosted_connection(ctx, config, make_connection, hosted_app, evil, "evil")


# ---------------------------------------------------------------- helpers of the hosted login


def _authorize_url(live_url, rp) -> str:
    query = {"response_type": "code", "client_id": rp["client_id"], "redirect_uri": RP_CALLBACK,
             "scope": "openid email profile", "state": "rp-state", "nonce": "rp-nonce",
             "code_challenge": pkce_pair()[1], "code_challenge_method": "S256"}
    return requests.Request("GET", f"{live_url}/oidc/authorize", params=query).prepare().url


def _hidden_fields(page: requests.Response) -> dict:
    text = page.text.split("</form>")[0]
    return dict(re.findall(r'<input type="hidden" name="([a-z_]+)" value="([^"]*)">', text))


def _form_action(page: requests.Response, live_url: str) -> str:
    return live_url + html.unescape(re.findall(r'<form method="post" action="([^"]+)">', page.text)[0])


def _hosted_connection(ctx, config, make_connection, app, provider: ScriptedProvider, name: str):
    """A connection of the hosted-login application to a scripted provider that sends no
    ``iss`` (GitHub, Entra and many others)."""
    issuer = provider.issuer
    connection = make_connection(
        app["_id"], name=name, display_name=name.title(), issuer=issuer, client_id=CLIENT_ID,
        client_secret_enc=secret_box(config.secret_key).encrypt(CLIENT_SECRET.encode()),
        endpoints=Endpoints(issuer=issuer, authorization_endpoint=f"{issuer}/authorize",
                            token_endpoint=f"{issuer}/token", userinfo_endpoint=f"{issuer}/userinfo",
                            jwks_uri=f"{issuer}/jwks", iss_parameter_supported=False, fetched_at=None))
    ctx.connections.store.insert(connection)
    return connection


def _to_provider(live_url, rp, connection) -> tuple[requests.Session, dict]:
    """A new browser's sign-in through ``connection`` from the login page: the browser,
    and the query of the authorization request iamgate sent it to the provider with."""
    browser = requests.Session()
    page = browser.get(_authorize_url(live_url, rp), timeout=10)
    assert page.status_code == 200, page.text[:500]
    went = browser.post(_form_action(page, live_url), data={**_hidden_fields(page), "connection": connection.id},
                        allow_redirects=False, timeout=10)
    assert went.status_code == 302, went.text[:500]
    return browser, dict(parse_qsl(urlsplit(went.headers["Location"]).query))




# ---------------------------------------------------------------- the layout


def test_no_redirect_uri_of_the_hosted_login_is_below_another():
    """The application's callback and every connection's own: none begins with another,
    so a provider that accepts any redirect URI below (or even just beginning with) the
    registered one accepts no other connection's."""
    public_url, app_id = "https://id.example.com", new_id()
    uris = [upstream.callback_url(public_url, app_id), *(upstream.callback_url(public_url, app_id, new_id())
                                                        for _ in range(3))]
    for registered, other in permutations(uris, 2):
        assert not other.startswith(registered), f"{other} is below {registered}"


# ---------------------------------------------------------------- the attack, end to end


@pytest.mark.parametrize("registered", ["the application's callback", "the honest connection's own"])
def test_a_github_like_provider_sends_no_code_of_its_own_to_the_attackers_connection(
        live_server, hosted_app, rp, providers, connections, registered):
    """The attacker's provider bounces the victim, with the victim's state (which names
    the evil connection), to the honest GitHub-like provider, under each redirect URI of
    the hosted login it could name; the honest app is registered with the application's
    callback (what docs/connections.md once said works) or with the honest connection's
    own (what the console shows).  Whatever the provider does (a code back to a redirect
    URI it accepts, or its error back to the registered one) the answer is refused and
    the honest provider's code never reaches the attacker's token endpoint."""
    honest, evil = providers
    honest_connection, evil_connection = connections
    # The redirect URIs as iamgate sends them, each connection's own and the application's.
    honest_own = _to_provider(live_server, rp, honest_connection)[1]["redirect_uri"]
    evil_own = _to_provider(live_server, rp, evil_connection)[1]["redirect_uri"]
    shared = callback_url(live_server, hosted_app)
    honest.callback_url = {"the application's callback": shared, "the honest connection's own": honest_own}[registered]
    for named in (evil_own, shared, honest_own):
        victim, to_evil = _to_provider(live_server, rp, evil_connection)
        # The evil provider sends the victim on to the honest one with the victim's state, a
        # redirect URI of its choosing and a PKCE challenge of the attacker's.
        forged = {"response_type": "code", "client_id": CLIENT_ID, "redirect_uri": named,
                  "scope": "read:user user:email", "state": to_evil["state"],
                  "code_challenge": pkce_pair()[1], "code_challenge_method": "S256"}
        at_honest = requests.get(f"{honest.issuer}/authorize?{urlencode(forged)}", allow_redirects=False,
                                 timeout=10)
        assert at_honest.status_code == 302
        honest_code = dict(parse_qsl(urlsplit(at_honest.headers["Location"]).query)).get("code")
        back = victim.get(at_honest.headers["Location"], allow_redirects=False, timeout=10)

        leaked = [request for request in evil.token_requests
                  if honest_code is not None and request["form"].get("code") == honest_code]
        assert not leaked, (f"the honest provider's code, sent back to {named}, went to the attacker's token "
                            "endpoint (mix-up, RFC 9700 4.4.1)")
        assert back.status_code == 400, f"{named}: {back.status_code} {back.text[:300]}"
    assert not evil.token_requests


def test_the_honest_connection_signs_in_at_the_redirect_uri_the_console_shows(live_server, hosted_app, rp,
                                                                                providers, connections):
    """The GitHub-like provider registered with the honest connection's own redirect URI
    accepts what iamgate sends, and the sign-in goes on to the consent page."""
    honest, _ = providers
    honest_connection, _ = connections
    honest.callback_url = callback_url(live_server, hosted_app, honest_connection.id)
    browser, to_honest = _to_provider(live_server, rp, honest_connection)
    assert to_honest["redirect_uri"] == honest.callback_url
    at_honest = requests.get(f"{honest.issuer}/authorize?{urlencode(to_honest)}", allow_redirects=False, timeout=10)
    back = browser.get(at_honest.headers["Location"], allow_redirects=False, timeout=10)
    assert back.status_code == 200 and "Allow access" in back.text, back.text[:500]
    assert [request["form"]["redirect_uri"] for request in honest.token_requests] == [honest.callback_url]


def test_the_former_own_callback_answers_that_it_moved_and_reads_nothing(live_server, ctx, hosted_app, rp,
                                                                         providers, connections):
    """``.../callback/{connectionId}`` is gone: kept alive it would keep the attack open.
    A browser an old registration at the provider sends there gets a 404 page saying
    the address moved; the answer it carries is not read (nothing is exchanged) and the
    sign-in's state is left as it was."""
    _, evil = providers
    _, evil_connection = connections
    victim, to_evil = _to_provider(live_server, rp, evil_connection)
    states = list(ctx.store["connection_states"].find())
    former = f"{live_server}/oidc/connections/{hosted_app['_id']}/callback/{evil_connection.id}"
    answer = victim.get(former, params={"code": "a-code", "state": to_evil["state"]}, allow_redirects=False,
                        timeout=10)
    assert answer.status_code == 404 and answer.headers["Content-Type"].startswith("text/html")
    assert "This sign-in address has moved" in answer.text and "new redirect URI" in answer.text
    assert answer.headers["Cache-Control"] == "no-store"
    assert not evil.token_requests and list(ctx.store["connection_states"].find()) == states
