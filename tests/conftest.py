"""Fixtures every test area shares: configuration, a controllable clock, the real
Falcon app (through ``falcon.testing``), and factories for applications and API keys.

Area-specific fixtures (users, tokens, roles...) live in ``tests/<area>/conftest.py``.
"""
from __future__ import annotations

import itertools
import logging
import threading
import types
from datetime import UTC, datetime, timedelta

import falcon.testing
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from controlplane import keys
from controlplane.app import create_app
from shared.config import Config
from tests import mongodb

# Area fixtures: each area owns its plugin module (users, tokens, roles ...).
pytest_plugins = ["tests.plugins.dashboard", "tests.plugins.users", "tests.plugins.roles",
                  "tests.browser"]

TEST_SECRET = "test-secret-key-0123456789abcdef"


class FakeClock:
    """A clock tests can move forward: expiry and lockout lapse without sleeping."""

    def __init__(self, start: datetime | None = None):
        self.now = start or datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def make_config(**overrides) -> Config:
    values = {"bcrypt_rounds": 4, "secret_key": TEST_SECRET}
    values.update(overrides)
    return Config.from_env(env={}, **values)


@pytest.fixture(autouse=True)
def _root_logging():
    """Entry points under test (``wsgi.create``, ``python -m controlplane`` commands) point
    the root logger at sys.stderr, which is the test's capture and is closed after it:
    every later log line, from any test or thread (the mailer's, say), would then print
    "Logging error ... I/O operation on closed file".  Put the root logger back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(autouse=True, scope="session")
def _signing_key_pool():
    """Every app a test builds generates its RS256 signing key, some 30 ms of a test's
    setup. The control plane's keys (and theirs only) come from a pool of real 2048-bit
    keys instead, each generated on first use, 32 before the first is handed out again:
    consecutive keys differ, so rotations and apps side by side still sign with keys of
    their own."""
    pool, handed_out = [], itertools.count()

    def generate_private_key(public_exponent, key_size):
        turn = next(handed_out) % 32
        if turn == len(pool):
            pool.append(rsa.generate_private_key(public_exponent=public_exponent, key_size=key_size))
        return pool[turn]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keys, "rsa", types.SimpleNamespace(generate_private_key=generate_private_key))
        yield


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def config_overrides():
    """Override in a test module (or with ``@pytest.mark.parametrize``) to change settings."""
    return {}


def pytest_report_header(config):
    return mongodb.describe()


def pytest_sessionstart(session):
    """``-q`` (setup.cfg's addopts) hides the header: say which store anyway."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and session.config.get_verbosity() < 0:
        reporter.write_line(mongodb.describe())


@pytest.fixture
def config(config_overrides):
    """With IAMGATE_TEST_MONGODB_URI, each test's app gets a database of its own there."""
    uri = None if "mongodb_uri" in config_overrides else mongodb.fresh_database_uri()
    yield make_config(**({"mongodb_uri": uri} if uri else {}), **config_overrides)
    mongodb.drop_database(uri)


@pytest.fixture
def app(config, clock):
    return create_app(config, clock=clock, start_background=False)


@pytest.fixture
def ctx(app):
    return app.services


@pytest.fixture
def client(app):
    return falcon.testing.TestClient(app)


@pytest.fixture
def application(ctx):
    """An application (tenant) created directly through the service layer."""
    return ctx.applications.create({"name": "Test App"}, organization_id=None, owner_account_id=None)


@pytest.fixture
def make_application(ctx):
    def make(name="Another App", **values):
        return ctx.applications.create({"name": name, **values}, organization_id=None, owner_account_id=None)

    return make


@pytest.fixture
def make_api_key(ctx):
    """``make_api_key(app, permissions=None)`` -> the secret, usable as a bearer token."""

    def make(app, permissions=None, name="test key"):
        values = {"name": name}
        if permissions is not None:
            values["permissions"] = permissions
        _, secret = ctx.api_keys.create(app, values)
        return secret

    return make


@pytest.fixture
def api_key(application, make_api_key):
    return make_api_key(application)


def events_of(ctx, type_, user_id=None):
    """Change-log events of ``type_`` (about ``user_id`` when given), oldest first."""
    query = {"type": type_}
    if user_id is not None:
        query["subject.user_id"] = user_id
    return list(ctx.store["events"].find(query).sort("seq", 1))


def in_parallel(n: int, call) -> list:
    """``call(i)`` for i in range(n), each in its own thread, released together; the results."""
    start, results, lock = threading.Barrier(n), [], threading.Lock()

    def run(i):
        start.wait()
        result = call(i)
        with lock:
            results.append(result)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def count_password_checks(ctx, monkeypatch) -> list:
    """The passwords ``ctx.hasher.verify`` is called with from now on (bcrypt runs)."""
    checks, lock = [], threading.Lock()
    real_verify = ctx.hasher.verify

    def counting(password, hashed):
        with lock:
            checks.append(password)
        return real_verify(password, hashed)

    monkeypatch.setattr(ctx.hasher, "verify", counting)
    return checks



@pytest.fixture
def receiver():
    """A local webhook receiver on 127.0.0.1 (tests/webhooks/conftest.py ``Receiver``): a
    test that posts to it allows private targets in its ``config_overrides``."""
    from tests.webhooks.conftest import Receiver

    local = Receiver()
    yield local
    local.close()


@pytest.fixture
def provider():
    """A local upstream OpenID provider (tests/connections/conftest.py ``Provider``)."""
    from tests.connections.conftest import Provider

    local = Provider()
    yield local
    local.close()

def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def assert_error(response, status: int, code: str | None = None):
    """The response is the spec's error envelope with ``status`` (and ``code``)."""
    assert response.status_code == status, response.text
    body = response.json
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"code", "message", "details", "request_id", "timestamp"}, error
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["details"], dict)
    assert error["request_id"] == response.headers["X-Request-Id"]
    if code is not None:
        assert error["code"] == code, error
    return error
