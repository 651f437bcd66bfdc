"""IAMGATE_WEBAUTHN_RP_ID and IAMGATE_WEBAUTHN_ORIGINS: defaults from the public URL, and a
one-line start-up error naming the variable when the RP ID cannot serve the origins."""
import pytest

from shared.config import Config, ConfigError


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
])
def test_a_bad_setting_is_one_line_naming_the_variable(env, names):
    with pytest.raises(ConfigError) as raised:
        config(**env)
    message = str(raised.value)
    assert "\n" not in message
    assert all(name in message for name in names), message
