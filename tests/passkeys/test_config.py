"""IAMGATE_WEBAUTHN_RP_ID and IAMGATE_WEBAUTHN_ORIGINS: defaults from the public URL, and a
one-line start-up error naming the variable when the RP ID cannot serve the origins."""
import pytest

from controlplane.console.web import origin_of
from shared.config import Config, ConfigError, browser_origin


def config(**env):
    return Config.from_env(env={f"IAMGATE_{k.upper()}": v for k, v in env.items()})


def test_defaults_come_from_the_public_url():
    got = config(public_url="https://id.example.com/")
    assert (got.webauthn_rp_id, got.webauthn_origins) == ("id.example.com", ("https://id.example.com",))


def test_a_public_url_on_an_ip_address_leaves_passkeys_unavailable():
    got = config()  # http://127.0.0.1:8000
    assert got.webauthn_rp_id == "" and got.webauthn_origins == ("http://127.0.0.1:8000",)
    assert config(public_url="http://localhost:8000").webauthn_rp_id == "localhost"


def test_a_parent_domain_serves_its_subdomains():
    got = config(public_url="https://id.example.com", webauthn_rp_id="Example.COM",
                 webauthn_origins="https://app.example.com, https://id.example.com")
    assert got.webauthn_rp_id == "example.com"
    assert got.webauthn_origins == ("https://app.example.com", "https://id.example.com")


@pytest.mark.parametrize("env, browser_origin", [
    ({"IAMGATE_PUBLIC_URL": "https://id.example.com/iam"}, "https://id.example.com"),
    ({"IAMGATE_PUBLIC_URL": "https://id.example.com:443"}, "https://id.example.com"),
    ({"IAMGATE_PUBLIC_URL": "http://localhost:80/"}, "http://localhost"),
    ({"IAMGATE_PUBLIC_URL": "https://id.example.com", "IAMGATE_WEBAUTHN_RP_ID": "example.com",
      "IAMGATE_WEBAUTHN_ORIGINS": "https://app.example.com:443"}, "https://app.example.com"),
    ({"IAMGATE_PUBLIC_URL": "https://id.example.com", "IAMGATE_WEBAUTHN_RP_ID": "example.com",
      "IAMGATE_WEBAUTHN_ORIGINS": "HTTPS://App.Example.COM/"}, "https://app.example.com"),
], ids=["public-url-with-a-path", "public-url-with-the-default-port", "http-default-port-and-slash",
        "origin-with-the-default-port", "origin-in-capitals"])
def test_the_configured_origins_are_what_a_browser_sends(env, browser_origin):
    """docs/configuration.md: IAMGATE_WEBAUTHN_ORIGINS defaults to "the origin of
    IAMGATE_PUBLIC_URL", and the ceremony compares the client data's origin with the list
    as strings.  A browser serializes an origin as scheme://host[:port], the host in lower
    case, without a path and without the scheme's default port (HTML "ASCII serialization
    of an origin").  A public URL with a path was taken whole (``_origin`` refused it and
    the raw URL was used), and an explicit :443 was kept, so every passkey ceremony of
    such a deployment failed with PASSKEY_ORIGIN_MISMATCH although the page was the
    configured one.  Each setting is the one origin a browser sends, and nothing else."""
    got = Config.from_env(env=env)
    assert got.webauthn_origins == (browser_origin,), got.webauthn_origins


def test_two_spellings_of_one_origin_are_listed_once():
    """Normalised, ``https://app.example.com`` and ``https://APP.example.com:443`` are the
    same origin: the list the ceremony is given holds it once."""
    got = config(public_url="https://id.example.com", webauthn_rp_id="example.com",
                 webauthn_origins="https://app.example.com, https://APP.example.com:443, http://app.example.com:8080")
    assert got.webauthn_origins == ("https://app.example.com", "http://app.example.com:8080")


@pytest.mark.parametrize("env, names", [
    ({"webauthn_rp_id": "127.0.0.1"}, ("IAMGATE_WEBAUTHN_RP_ID", "localhost")),
    ({"webauthn_rp_id": "::1"}, ("IAMGATE_WEBAUTHN_RP_ID",)),
    ({"webauthn_rp_id": "com"}, ("IAMGATE_WEBAUTHN_RP_ID",)),
    ({"webauthn_rp_id": "exa mple.com"}, ("IAMGATE_WEBAUTHN_RP_ID",)),
    ({"public_url": "https://id.example.com", "webauthn_rp_id": "other.com"},
     ("IAMGATE_WEBAUTHN_RP_ID", "https://id.example.com")),
    ({"public_url": "https://example.com", "webauthn_origins": "https://evilexample.com"},
     ("IAMGATE_WEBAUTHN_RP_ID", "https://evilexample.com")),  # a suffix of the text is not a parent domain
    ({"webauthn_origins": "ftp://example.com"}, ("IAMGATE_WEBAUTHN_ORIGINS",)),
    ({"webauthn_origins": "https://example.com/login"}, ("IAMGATE_WEBAUTHN_ORIGINS",)),
    # Not origins either: what follows the host is never in one a browser sends.
    ({"webauthn_origins": "https://example.com?next=/"}, ("IAMGATE_WEBAUTHN_ORIGINS",)),
    ({"webauthn_origins": "https://example.com#top"}, ("IAMGATE_WEBAUTHN_ORIGINS",)),
    ({"webauthn_origins": "https://admin@example.com"}, ("IAMGATE_WEBAUTHN_ORIGINS",)),
    ({"webauthn_origins": "https://example.com:0"}, ("IAMGATE_WEBAUTHN_ORIGINS",)),
    ({"webauthn_origins": "https://example.com:444x"}, ("IAMGATE_WEBAUTHN_ORIGINS",)),
])
def test_a_bad_setting_is_one_line_naming_the_variable(env, names):
    with pytest.raises(ConfigError) as raised:
        config(**env)
    message = str(raised.value)
    assert "\n" not in message
    assert all(name in message for name in names), message


def test_an_internationalised_public_url_gives_the_ascii_origin_a_browser_sends():
    """Browsers write an origin's host in its ASCII form (IDNA: ``bücher.example`` is
    ``xn--bcher-kva.example``), in the Origin header and in the WebAuthn client data: the
    default origins, the default RP ID and the console's origin are that form, or every
    console form and every passkey ceremony of such a deployment would be refused."""
    config = Config.from_env({"IAMGATE_PUBLIC_URL": "https://Bücher.example/iam"})
    assert config.webauthn_origins == ("https://xn--bcher-kva.example",)
    assert config.webauthn_rp_id == "xn--bcher-kva.example"
    assert origin_of(config.public_url) == "https://xn--bcher-kva.example"
    assert browser_origin("https://bücher.example:443") == "https://xn--bcher-kva.example"
