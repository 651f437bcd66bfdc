"""A real upstream OpenID provider for the connection tests: panva's ``oidc-provider``
(npm, OpenID Certified) run by Node on 127.0.0.1 (tests/node/upstream_provider.mjs).

- ``upstreams``: a factory fixture, ``upstreams.start(clients=..., accounts=...)`` ->
  ``Upstream``; each call starts one more instance on its own free port (the mix-up
  test runs two), waits for its discovery document, and stops them all at teardown;
- ``Upstream.accounts`` is the instance's account file: ``set_account(login, **claims)``
  changes what the next sign-in of that login returns (same ``sub``, a new email);
- ``provider_login(session, response, login)``: a browser-less user at the provider's
  real login page (``requests``, following the redirects), for the API-flow tests.

Without Node or the npm package the tests SKIP, saying why; in CI (``CI`` set) they FAIL
(``tests.npm``): ``.ci/run`` installs Node from Debian's packages and ``make
node-test-deps`` the package.
"""
from __future__ import annotations

import html
import json
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urljoin, urlsplit

import pytest
import requests

from controlplane.connections.model import Endpoints, secret_box
from tests.npm import NODE_DIR, missing_node, node_package, unavailable

SCRIPT = NODE_DIR / "upstream_provider.mjs"
READY_WITHIN = 30.0  # seconds for an instance to listen (about 1 s on a loaded 2-core machine)
REPORT_SIGNAL = signal.SIGUSR2
# The accounts every instance starts with; a test adds or changes its own.
UPSTREAM_SECRET = "upstream-client-secret-0123456789"  # the connections' client secret at the provider
ACCOUNTS = {
    "verified": {"email": "ada@example.com", "email_verified": True, "xms_edov": True, "name": "Ada Lovelace",
                 "groups": ["engineering"], "department": "R&D"},
    "unverified": {"email": "ada@example.com", "email_verified": False, "name": "Not Ada"},
    "changer": {"email": "grace@example.com", "email_verified": True, "name": "Grace Hopper"},
    "twin": {"email": "twin@example.com", "email_verified": True, "name": "Twin"},
}


@dataclass
class Upstream:
    """One running instance: its issuer, its clients, and its account file."""

    issuer: str
    clients: list[dict]
    accounts_path: Path
    process: subprocess.Popen
    log_path: Path
    reports: Path  # where Node writes its diagnostic report when sent REPORT_SIGNAL

    @property
    def client(self) -> dict:
        return self.clients[0]

    def set_account(self, login: str, **claims) -> None:
        accounts = json.loads(self.accounts_path.read_text())
        accounts[login] = claims
        self.accounts_path.write_text(json.dumps(accounts))

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


@dataclass
class Upstreams:
    folder: Path
    started: list[Upstream] = field(default_factory=list)

    def start(self, *, clients: list[dict], accounts: dict | None = None, github: bool = False) -> Upstream:
        """A new instance on a loopback port of its own with these clients ({client_id,
        client_secret, redirect_uris}) and accounts (ACCOUNTS when None).  The instance
        listens on a port the kernel picks and names its issuer on its first line, so
        no other process can take the port between its choice and the listen.

        An instance that has not listened within ``READY_WITHIN`` seconds is asked for
        Node's diagnostic report (where its JavaScript and native stacks are), stopped and
        started once more; a second such instance fails the test with both logs and the
        report.  (Once in a full run an instance printed the library's first warning and
        then nothing for 60 s, which a run of its own never showed.)"""
        number = len(self.started)
        accounts_path = self.folder / f"accounts-{number}.json"
        accounts_path.write_text(json.dumps(ACCOUNTS if accounts is None else accounts))
        settings = {"clients": clients, "accounts": str(accounts_path), "github": github}
        stuck = []
        for attempt in range(2):
            upstream = self._launch(f"{number}-{attempt}", settings, clients, accounts_path)
            issuer = _wait_until_ready(upstream, READY_WITHIN)
            if issuer is not None:
                upstream.issuer = issuer
                _wait_for_discovery(upstream)
                return upstream
            stuck.append(f"attempt {attempt + 1}:\n{upstream.logs()}\n{_diagnostic_report(upstream)}")
            _stop(upstream)
        pytest.fail(f"the upstream provider did not listen within {READY_WITHIN} s, twice:\n" + "\n".join(stuck))

    def _launch(self, name: str, settings: dict, clients: list[dict], accounts_path: Path) -> Upstream:
        log_path, reports = self.folder / f"upstream-{name}.log", self.folder / f"reports-{name}"
        reports.mkdir()  # Node writes no report into a folder that is not there
        with log_path.open("wb") as log:
            process = subprocess.Popen(["node", "--report-on-signal", f"--report-signal={REPORT_SIGNAL.name}",
                                        f"--report-directory={reports}", str(SCRIPT), json.dumps(settings)],
                                       cwd=NODE_DIR, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        upstream = Upstream("", clients, accounts_path, process, log_path, reports)
        self.started.append(upstream)
        return upstream

    def stop(self) -> None:
        for upstream in self.started:
            _stop(upstream)


def _stop(upstream: Upstream) -> None:
    if upstream.process.poll() is not None:
        return
    upstream.process.terminate()
    try:
        upstream.process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        upstream.process.kill()
        upstream.process.wait(timeout=5)


def endpoints_of(upstream: Upstream, fetched_at) -> Endpoints:
    """The instance's endpoints as discovery gives them, as a connection pins them."""
    doc = requests.get(f"{upstream.issuer}/.well-known/openid-configuration", timeout=5).json()
    return Endpoints(issuer=doc["issuer"], authorization_endpoint=doc["authorization_endpoint"],
                     token_endpoint=doc["token_endpoint"], userinfo_endpoint=doc.get("userinfo_endpoint"),
                     jwks_uri=doc["jwks_uri"],
                     iss_parameter_supported=bool(doc.get("authorization_response_iss_parameter_supported")),
                     fetched_at=fetched_at)


def _wait_until_ready(upstream: Upstream, timeout: float) -> str | None:
    """The issuer the instance prints once it listens (``{"ready": issuer}``); None when
    it has not within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in upstream.log_path.read_text(errors="replace").splitlines():
            if line.startswith('{"ready":'):
                return json.loads(line)["ready"]
        if upstream.process.poll() is not None:
            pytest.fail(f"the upstream provider exited ({upstream.process.returncode}):\n{upstream.logs()}")
        time.sleep(0.05)
    return None


def _diagnostic_report(upstream: Upstream, within: float = 5.0) -> str:
    """Node's diagnostic report of a running instance, cut to its stacks and event loop
    handles (``--report-on-signal``).  Node writes it when its event loop turns, so an
    instance stuck in one long step (a busy loop, a native call) writes none."""
    upstream.process.send_signal(REPORT_SIGNAL)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for path in sorted(upstream.reports.glob("*.json")):
            try:
                report = json.loads(path.read_text())
            except ValueError:  # still being written
                continue
            return json.dumps({key: report.get(key) for key in ("javascriptStack", "nativeStack", "libuv")},
                              indent=1)[:6000]
        time.sleep(0.1)
    return f"(no diagnostic report within {within} s: the instance's event loop does not turn)"


def _wait_for_discovery(upstream: Upstream, timeout: float = 60) -> None:
    url = f"{upstream.issuer}/.well-known/openid-configuration"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if upstream.process.poll() is not None:
            pytest.fail(f"the upstream provider exited ({upstream.process.returncode}):\n{upstream.logs()}")
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.1)
    pytest.fail(f"the upstream provider did not serve {url} within {timeout} s:\n{upstream.logs()}")


@pytest.fixture
def upstreams(tmp_path):
    """Start upstream providers with ``upstreams.start(...)``; all stop at teardown."""
    reason = missing_node()
    if reason:
        unavailable(f"test needs Node for the upstream provider: {reason}")
    node_package("oidc-provider")
    started = Upstreams(tmp_path)
    yield started
    started.stop()


_FORM = re.compile(r'<form[^>]*action="([^"]+)"', re.I)


def follow(session: requests.Session, response: requests.Response, *, within: str) -> requests.Response:
    """Follow ``response``'s redirects while they stay under ``within`` (an origin or a
    URL prefix); the response returned is a page, or a redirect out of it."""
    while response.is_redirect and urljoin(response.url, response.headers["Location"]).startswith(
            within):
        response = session.get(urljoin(response.url, response.headers["Location"]),
                               allow_redirects=False, timeout=10)
    return response


def provider_login(session: requests.Session, upstream: Upstream, authorization_url: str, login: str
                   ) -> requests.Response:
    """A browser-less user at the provider: open ``authorization_url``, sign in as
    ``login`` on the real login page (its form post), and follow the provider's own
    redirects; returns the redirect out of the provider (to the redirect URI, with
    ``code``, ``state`` and ``iss``, or an error)."""
    page = follow(session, session.get(authorization_url, allow_redirects=False, timeout=10), within=upstream.issuer)
    if page.is_redirect:
        return page  # signed in at the provider already (its session cookie): straight back
    found = _FORM.search(page.text)
    assert found, f"not the provider's login page ({page.status_code} {page.url}):\n{page.text[:500]}"
    action = urljoin(page.url, html.unescape(found.group(1)))
    posted = session.post(action, data={"prompt": "login", "login": login, "password": "any"}, allow_redirects=False,
                          timeout=10)
    return follow(session, posted, within=upstream.issuer)


def redirect_params(response: requests.Response) -> dict[str, str]:
    """The query of the redirect ``response`` sends the browser to."""
    assert response.is_redirect, f"expected a redirect, got {response.status_code}:\n{response.text[:500]}"
    query = urlsplit(response.headers["Location"]).query
    return dict(parse_qsl(query))


def callback_url(live_url, app, connection_id: str | None = None) -> str:
    """The application's callback, or with ``connection_id`` that connection's own (beside
    the application's, not below it)."""
    return f"{live_url}/oidc/connections/{app['_id']}" + (f"/{connection_id}" if connection_id else "") + "/callback"


@pytest.fixture
def hosted_app(ctx, application):
    ctx.applications.update(application["_id"], {"oauth_hosted_login_enabled": True})
    return ctx.applications.get(application["_id"])


@pytest.fixture
def add_connection(ctx, config, make_connection):
    """``add_connection(app, **fields)`` stores an active oidc connection (make_connection's
    defaults) with the client secret encrypted as the store keeps it."""
    def add(app, **fields):
        sealed = secret_box(config.secret_key).encrypt(UPSTREAM_SECRET.encode())
        connection = make_connection(app["_id"], client_secret_enc=sealed, **fields)
        ctx.connections.store.insert(connection)
        return connection
    return add


@pytest.fixture
def local_idp(upstreams, live_url, hosted_app, add_connection, clock):
    """An oidc-provider instance whose client is this application's connection "local"."""
    def start(**fields):
        upstream = upstreams.start(clients=[{"client_id": "iamgate", "client_secret": UPSTREAM_SECRET,
                                             "redirect_uris": [callback_url(live_url, hosted_app)]}])
        connection = add_connection(hosted_app, name="local", display_name="Local IdP", issuer=upstream.issuer,
                                    client_id="iamgate", scopes=("openid", "email", "profile"),
                                    endpoints=endpoints_of(upstream, clock()), **fields)
        return upstream, connection
    return start
