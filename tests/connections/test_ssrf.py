"""The webhooks' SSRF rules apply to every provider URL, without the development
override (IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS): an issuer that is, or resolves to, a
private or local address is refused as invalid before any call, and every call checks
the address again (DNS rebinding)."""
from __future__ import annotations

import pytest

from controlplane.app import create_app
from controlplane.connections.http import ProviderError, ProviderHttp
from tests.conftest import assert_error, make_config


def _names(host, port):
    return {"idp.internal.test": ["10.1.2.3"], "rebind.test": ["93.184.216.34", "127.0.0.1"]}[host]


@pytest.fixture
def config_overrides():
    return {"webhook_allow_private_targets": False, "connection_http_timeout": 10}


@pytest.fixture
def app(config, clock):
    return create_app(config, clock=clock, resolver=_names, start_background=False)


@pytest.mark.parametrize(("issuer", "words"), [
    ("http://idp.example.com", "it must be an https URL"),
    ("https://127.0.0.1:8443", "127.0.0.1 is not a public address (loopback)"),
    ("https://localhost", "localhost is not a public address (localhost name)"),
    ("https://10.0.0.5", "10.0.0.5 is not a public address (private)"),
    ("https://0x7f.1", "0x7f.1 is not a public address (loopback)"),
    ("https://[::ffff:169.254.169.254]",
     "::ffff:169.254.169.254 is not a public address (IPv6 form of a link-local IPv4 address)"),
    ("https://idp.internal.test", "idp.internal.test is not a public address (private)"),
    ("https://rebind.test", "rebind.test is not a public address (loopback)"),
])
def test_private_issuers_are_refused_as_invalid_without_the_override(request, issuer, words, ctx):
    create = request.getfixturevalue("create")
    resp = create(issuer=issuer)
    error = assert_error(resp, 400, "VALIDATION_INVALID_FORMAT")
    assert words in error["details"]["fields"]["issuer"], error
    assert ctx.store["connections"].count_documents({}) == 0


def test_the_local_provider_is_refused_without_the_override(create, provider, ctx):
    error = assert_error(create(), 400, "VALIDATION_INVALID_FORMAT")
    assert "must be an https URL" in error["details"]["fields"]["issuer"]
    assert provider.requests == []  # never called


def test_every_call_checks_the_address_again():
    """DNS rebinding: a name checked at configuration that later resolves to a private
    address is refused at the call, with the override's name in the reason."""
    http = ProviderHttp(make_config(connection_http_timeout=10), resolver=_names)
    with pytest.raises(ProviderError) as caught:
        http.get_json("https://rebind.test/.well-known/openid-configuration")
    assert caught.value.reason == ("https://rebind.test/.well-known/openid-configuration is refused: rebind.test "
                                   "is not a public address (loopback); private targets are allowed only with "
                                   "IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS, for development")
