"""Calls to a provider: discovery pinned only when its issuer is the configured one, the
webhooks' SSRF rules (and their development override), no redirects, a total deadline,
and failures that say what went wrong, in words.  A failed create or update writes
nothing."""
from __future__ import annotations

import base64
import time
from urllib.parse import parse_qs

import pytest

from controlplane.connections.http import READ_CAP, ProviderError, ProviderHttp
from tests.conftest import assert_error, make_config
from tests.webhooks.test_connections import BIG, RawTarget, _head


def provider_error(resp) -> str:
    error = assert_error(resp, 502, "CONNECTION_PROVIDER_ERROR")
    assert error["message"] == f"The identity provider could not be used: {error['details']['reason']}"
    return error["details"]["reason"]


def test_a_discovery_issuer_that_differs_is_refused_and_nothing_is_written(create, provider, ctx):
    provider.discovery["issuer"] = "https://elsewhere.example.com"
    reason = provider_error(create())
    assert reason == f"discovery issuer https://elsewhere.example.com differs from the configured {provider.issuer}"
    assert ctx.store["connections"].count_documents({}) == 0
    assert ctx.store["events"].count_documents({"action": "upstream_connection.created"}) == 0


def test_the_issuer_must_be_equal_exactly(create, provider):
    """OpenID Connect Discovery 4.3: identical, so a trailing slash is another issuer."""
    reason = provider_error(create(issuer=provider.issuer + "/"))
    assert reason == f"discovery issuer {provider.issuer} differs from the configured {provider.issuer}/"


def test_an_update_to_a_refused_issuer_changes_nothing(create, client, connections_url, manager, provider):
    created = create().json["data"]
    provider.discovery["issuer"] = "https://elsewhere.example.com"
    url = f"{connections_url}/{created['id']}"
    provider_error(client.simulate_patch(url, json={"issuer": provider.issuer, "display_name": "x"},
                                         headers=manager))
    assert client.simulate_get(url, headers=manager).json["data"] == created


@pytest.mark.parametrize(("change", "words"), [
    ({"jwks_uri": None}, "the discovery document has no jwks_uri"),
    ({"token_endpoint": ""}, "the discovery document has no token_endpoint"),
    ({"authorization_endpoint": "ftp://x/auth"}, "the discovery document's authorization_endpoint: ftp://x/auth "
                                                 "is not an allowed URL: it must be an https URL"),
    # The hosted login page's CSP must name it (form-action): a host a CSP source cannot
    # spell would break that application's login page (a 500), so it is refused here.
    ({"authorization_endpoint": "https://my_idp.example.com/auth"},
     "the discovery document's authorization_endpoint: the host of https://my_idp.example.com/auth cannot be named "
     "in a page's Content-Security-Policy (letters, digits, dots and hyphens only)"),
])
def test_a_discovery_document_without_what_sign_in_needs_is_refused(create, provider, ctx, change, words):
    provider.discovery.update(change)
    assert provider_error(create()) == words
    assert ctx.store["connections"].count_documents({}) == 0


def test_redirects_are_not_followed(create, provider):
    provider.status, provider.headers = 302, {"Location": "http://127.0.0.1:1/elsewhere"}
    reason = provider_error(create())
    assert reason == (f"{provider.issuer}/.well-known/openid-configuration answered a redirect (302) to "
                      "http://127.0.0.1:1/elsewhere; redirects are not followed, configure the final URL")


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirects_body_is_read_no_further_than_the_cap(status):
    """A provider's 3xx is read like any answer, up to the cap (a ``requests.Session``
    would read it all, decompressed, to prepare the redirect it then does not follow)."""
    target = RawTarget(_head(status, BIG), b"x" * BIG)
    http = ProviderHttp(make_config(webhook_allow_private_targets=True, connection_http_timeout=10))
    try:
        with pytest.raises(ProviderError) as caught:
            http.get_json(target.url)
        assert target.done.wait(10)
    finally:
        target.close()
    assert caught.value.reason.startswith(f"{target.url} answered a redirect ({status})")
    assert target.sent < BIG // 4, f"{target.sent} bytes of the body were read"
    assert dict(target.request.headers)[b"accept-encoding"] == b"identity"


def test_a_provider_too_slow_is_a_timeout(create, provider, ctx):
    ctx.connections.http.timeout, provider.delay = 1, 1.5
    started = time.monotonic()
    reason = provider_error(create())
    assert reason == f"{provider.issuer}/.well-known/openid-configuration did not answer within 1 seconds"
    assert time.monotonic() - started < 5  # generous: the deadline, not the provider, ended it


@pytest.mark.parametrize(("status", "answer", "words"), [
    (500, {"oops": 1}, "answered HTTP 500"),
    (200, ["not", "an", "object"], "did not answer a JSON object"),
])
def test_answers_that_are_not_a_document(create, provider, status, answer, words):
    provider.status, provider.discovery = status, answer
    assert provider_error(create()) == f"{provider.issuer}/.well-known/openid-configuration {words}"


def test_tls_failures_are_named(create, provider):
    https = provider.issuer.replace("http://", "https://")  # the provider speaks plain HTTP
    reason = provider_error(create(issuer=https))
    assert reason.startswith(f"TLS with 127.0.0.1 failed for {https}/.well-known/openid-configuration: [SSL")


def test_a_json_array_is_an_answer_too(provider):
    """GitHub's /user/emails answers an array; a discovery document must be an object."""
    http = ProviderHttp(make_config(webhook_allow_private_targets=True, connection_http_timeout=10))
    provider.jwks = [{"email": "a@example.com", "primary": True, "verified": True}]
    assert http.get_json(f"{provider.issuer}/jwks") == provider.jwks
    with pytest.raises(ProviderError) as caught:
        http.get_object(f"{provider.issuer}/jwks")
    assert caught.value.reason == f"{provider.issuer}/jwks did not answer a JSON object"
    provider.jwks = "just a string"
    with pytest.raises(ProviderError) as caught:
        http.get_json(f"{provider.issuer}/jwks")
    assert caught.value.reason == f"{provider.issuer}/jwks did not answer a JSON object or array"


def test_an_answer_that_breaks_off_is_named(create, provider):
    provider.cut = True
    assert provider_error(create()) == (f"the answer of {provider.issuer}/.well-known/openid-configuration broke off "
                                        "(ProtocolError)")


def test_a_closed_port_is_named():
    http = ProviderHttp(make_config(webhook_allow_private_targets=True, connection_http_timeout=10))
    with pytest.raises(ProviderError) as caught:
        http.get_json("http://127.0.0.1:1/x")
    assert caught.value.reason == "cannot connect to http://127.0.0.1:1/x (ConnectionError)"


def test_an_answer_over_the_read_cap_is_refused(provider):
    http = ProviderHttp(make_config(webhook_allow_private_targets=True, connection_http_timeout=10))
    provider.jwks = {"keys": [], "padding": "x" * READ_CAP}
    with pytest.raises(ProviderError) as caught:
        http.get_json(f"{provider.issuer}/jwks")
    assert caught.value.reason == f"{provider.issuer}/jwks answered more than {READ_CAP} bytes"


def test_post_form_sends_client_secret_basic_and_reads_oauth_errors(provider):
    """RFC 6749 2.3.1: client id and secret are form-encoded before Basic."""
    http = ProviderHttp(make_config(webhook_allow_private_targets=True, connection_http_timeout=10))
    answer = http.post_form(f"{provider.issuer}/token", {"grant_type": "authorization_code", "code": "c 1"},
                            auth=("client:1", "sec ret/+"))
    assert answer == provider.token_answer
    sent = provider.posts[0]
    assert base64.b64decode(sent["authorization"].removeprefix("Basic ")) == b"client%3A1:sec+ret%2F%2B"
    assert parse_qs(sent["form"]) == {"grant_type": ["authorization_code"], "code": ["c 1"]}
    provider.status, provider.token_answer = 400, {"error": "invalid_grant", "error_description": "code used"}
    with pytest.raises(ProviderError) as caught:
        http.post_form(f"{provider.issuer}/token", {"code": "c"})
    assert caught.value.reason == f"{provider.issuer}/token answered HTTP 400: invalid_grant (code used)"
