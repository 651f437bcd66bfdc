import pytest

from shared.config import Config, ConfigError, Rate, variable_names


def test_defaults_follow_the_architecture_table():
    config = Config.from_env(env={})
    assert (config.host, config.port, config.decision_port) == ("127.0.0.1", 8000, 8181)
    assert config.mongodb_uri == "memory://" and config.is_memory_store
    assert config.access_token_ttl == 900
    assert (config.refresh_token_ttl, config.refresh_token_remember_me_ttl) == (604800, 2592000)
    assert config.rate_limit_login == Rate(10, 60)
    assert config.rate_limit_register == Rate(60, 60)
    assert config.webhook_retry_delays == (30, 300, 1800)
    assert config.bcrypt_rounds == 12
    assert config.secret_key_generated and len(config.secret_key) >= 32


@pytest.mark.parametrize("name, value", [
    ("IAMGATE_PORT", "eighty"),
    ("IAMGATE_PORT", "70000"),
    ("IAMGATE_RATE_LIMIT_LOGIN", "10"),
    ("IAMGATE_RATE_LIMIT_LOGIN", "a/b"),
    ("IAMGATE_MONGODB_URI", "postgres://x"),
    ("IAMGATE_PUBLIC_URL", "ftp://x"),
    ("IAMGATE_TRUSTED_PROXIES", "10.0.0.0/33"),
    ("IAMGATE_WEBHOOK_RETRY_DELAYS", "30,-1"),
    ("IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS", "maybe"),
    ("IAMGATE_BCRYPT_ROUNDS", "3"),
    ("IAMGATE_SECRET_KEY", "short"),
    ("IAMGATE_SMTP_URL", "http://mail"),
    ("IAMGATE_METRICS_DIR", "run/metrics"),
    ("IAMGATE_LOG_FLUSH_INTERVAL", "-1"),
    ("IAMGATE_LOG_FLUSH_INTERVAL", "5001"),
    ("IAMGATE_LOG_FLUSH_INTERVAL", "0.1"),
    ("IAMGATE_DECISION_LOG_RATE", "-1"),
    ("IAMGATE_DECISION_LOG_SAMPLE", "every"),
])
def test_a_bad_value_is_a_one_line_error_naming_the_variable(name, value):
    with pytest.raises(ConfigError) as info:
        Config.from_env(env={name: value})
    message = str(info.value)
    assert message.startswith(name) and "\n" not in message


def test_values_are_parsed():
    config = Config.from_env(env={
        "IAMGATE_TRUSTED_PROXIES": "10.0.0.0/8, 192.168.1.1",
        "IAMGATE_PUBLIC_URL": "https://id.example.com/",
        "IAMGATE_SECRET_KEY": "x" * 20,
        "IAMGATE_WEBHOOK_ALLOW_PRIVATE_TARGETS": "true",
    })
    assert [str(n) for n in config.trusted_proxies] == ["10.0.0.0/8", "192.168.1.1/32"]
    assert config.public_url == "https://id.example.com" and config.cookie_secure
    assert not config.secret_key_generated and config.webhook_allow_private_targets


def test_every_variable_is_listed_for_the_docs():
    names = variable_names()
    assert "IAMGATE_MONGODB_URI" in names and names["IAMGATE_ACCESS_TOKEN_TTL"] == "900"


def test_the_multiprocess_metrics_directory_comes_from_prometheus_clients_variable():
    """IAMGATE_METRICS_DIR is the operator's setting; PROMETHEUS_MULTIPROC_DIR is what the
    gunicorn master sets for its workers when more than one serves (shared/serving.py)."""
    config = Config.from_env(env={"IAMGATE_METRICS_DIR": "/run/iamgate/metrics"})
    assert (config.metrics_dir, config.multiprocess_metrics_dir) == ("/run/iamgate/metrics", "")
    config = Config.from_env(env={"PROMETHEUS_MULTIPROC_DIR": "/run/iamgate/metrics/decision"})
    assert config.multiprocess_metrics_dir == "/run/iamgate/metrics/decision"
