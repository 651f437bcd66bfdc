import logging
import shlex
import subprocess

import pytest

from shared.config import SECRET_KEY_RECIPE, Config, ConfigError, Rate, variable_names, warn_unknown_variables


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
    assert (config.header_timeout, config.max_connections) == (10, 1000)
    assert config.secret_key_generated and len(config.secret_key) >= 32


@pytest.mark.parametrize("name, value", [
    ("IAMGATE_PORT", "eighty"),
    ("IAMGATE_PORT", "70000"),
    ("IAMGATE_HOST", "999.1.1.1"),
    ("IAMGATE_HOST", "bad host"),
    ("IAMGATE_DECISION_HOST", "999.1.1.1"),
    ("IAMGATE_WORKER_PORT", "0"),
    ("IAMGATE_RATE_LIMIT_LOGIN", "10"),
    ("IAMGATE_RATE_LIMIT_LOGIN", "a/b"),
    ("IAMGATE_MONGODB_URI", "postgres://x"),
    ("IAMGATE_PUBLIC_URL", "ftp://x"),
    ("IAMGATE_PUBLIC_URL", "https://id.example.com:44x"),
    ("IAMGATE_PUBLIC_URL", "https://:443"),
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
    ("IAMGATE_HEADER_TIMEOUT", "0"),
    ("IAMGATE_HEADER_TIMEOUT", "2.5"),
    ("IAMGATE_MAX_CONNECTIONS", "9"),
    ("IAMGATE_MAX_CONNECTIONS", "many"),
    ("IAMGATE_DECISION_REQUEST_LOG_RATE", "-1"),
    ("IAMGATE_DECISION_REQUEST_LOG_SAMPLE", "every"),
    ("IAMGATE_DECISION_LOG_SAMPLE", "1.5"),
    ("IAMGATE_DECISION_LOG_SAMPLE", "-0.01"),
    ("IAMGATE_DECISION_LOG_SAMPLE", "nan"),
    ("IAMGATE_DECISION_LOG_SAMPLE", "1%"),
    ("IAMGATE_DECISION_LOG_DENIALS", "sometimes"),
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


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0", "::", "::1", "localhost", "iamgate-controlplane.ns.svc"])
def test_a_bind_address_is_an_ip_address_or_a_host_name(host):
    assert Config.from_env(env={"IAMGATE_HOST": host, "IAMGATE_DECISION_HOST": host}).host == host


@pytest.mark.parametrize("uri", ["mongodb://db.example:27017/iamgate", "mongodb+srv://cluster.example/iamgate"])
def test_a_mongodb_store_needs_the_secret_key_and_the_error_says_how_to_make_one(uri):
    """A key made at each start cannot decrypt what the previous start stored."""
    with pytest.raises(ConfigError) as info:
        Config.from_env(env={"IAMGATE_MONGODB_URI": uri})
    message = str(info.value)
    assert message.startswith("IAMGATE_SECRET_KEY") and "\n" not in message and SECRET_KEY_RECIPE in message
    made = subprocess.run(shlex.split(SECRET_KEY_RECIPE), capture_output=True, text=True, check=True).stdout.strip()
    config = Config.from_env(env={"IAMGATE_MONGODB_URI": uri, "IAMGATE_SECRET_KEY": made})
    assert config.secret_key == made and not config.secret_key_generated


def test_the_embedded_store_still_makes_a_key_per_start():
    first, second = Config.from_env(env={}), Config.from_env(env={"IAMGATE_MONGODB_URI": "memory://"})
    assert first.secret_key_generated and second.secret_key_generated and first.secret_key != second.secret_key


def test_a_misspelled_variable_is_reported_once_with_the_closest_name(caplog):
    config = Config.from_env(env={
        "IAMGATE_WORKER_PROT": "9000",       # a transposition
        "IAMGATE_SECRETKEY": "x" * 20,       # a missing underscore
        "IAMGATE_NOTHING_LIKE_IT": "1",      # no close name
        "IAMGATE_TEST_MONGODB_URI": "wire",  # the test suite's own (tests/mongodb.py)
        "IAMGATE_PORT": "8000",
    })
    assert config.worker_port == 8002 and config.secret_key_generated  # ignored, as before
    logger = logging.getLogger("iamgate.config")
    with caplog.at_level(logging.WARNING, logger="iamgate.config"):
        warn_unknown_variables(config, logger)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3
    assert "IAMGATE_WORKER_PROT is not an iamgate setting and is ignored; did you mean IAMGATE_WORKER_PORT?" \
        in messages
    assert any("IAMGATE_SECRETKEY" in m and "did you mean IAMGATE_SECRET_KEY?" in m for m in messages)
    assert any("IAMGATE_NOTHING_LIKE_IT" in m and "did you mean" not in m for m in messages)
    assert not any("IAMGATE_TEST_" in m or "IAMGATE_PORT " in m for m in messages)


def test_every_known_variable_passes_without_a_warning():
    assert Config.from_env(env=dict(variable_names())).unknown_variables == ()


def test_the_old_request_log_one_in_n_under_the_decision_log_name_says_where_it_moved():
    """IAMGATE_DECISION_LOG_SAMPLE is the decision log's share (0 to 1); a deployment that
    still sets the request log's old one-in-N there is told the new name."""
    with pytest.raises(ConfigError, match="now IAMGATE_DECISION_REQUEST_LOG_SAMPLE") as error:
        Config.from_env({"IAMGATE_DECISION_LOG_SAMPLE": "100"})
    assert "\n" not in str(error.value)
    assert Config.from_env({"IAMGATE_DECISION_LOG_SAMPLE": "0.01"}).decision_log_sample == 0.01
