"""Real-browser fixtures: the test's control plane served over real HTTP, and Debian's
headless Chromium driven through Selenium.

- ``live_url``: ``http://127.0.0.1:<free port>``, chosen before the app is built, so a
  test module can put it in ``config_overrides`` (``{"public_url": live_url}``: the OIDC
  issuer and cookie settings then match the address the browser uses);
- ``live_server``: the test's ``app`` (the same one ``client`` and ``ctx`` reach, so
  fixtures seed data as usual) served at ``live_url`` by ``wsgiref`` in a thread;
- ``browser``: a Selenium WebDriver for ``/usr/bin/chromium`` through
  ``/usr/bin/chromedriver`` (Debian's ``chromium`` and ``chromium-driver``), with a fresh
  profile per test (no cookies carried over).  The test SKIPS, saying why, when
  Chromium, its driver or the selenium package is missing; ``.ci/run`` installs them so
  CI always runs these tests;
- ``console_errors(driver)``: the console's errors, CSP violations included;
- ``screenshot(name)``: PNGs of what the user sees, desktop (``<name>.png``) and mobile
  (``<name>-mobile.png``), in a temporary folder, or in ``$IAMGATE_SCREENSHOTS_DIR``
  when set (``make screenshots`` sets it to docs/screenshots/), so a test run never
  writes into the work tree;
- ``accessibility(driver)``: axe-core's serious and critical violations on the page
  (``tests/node``: ``npm ci`` runs when axe-core is missing; skips without npm);
- ``check_page(name)``: both on the browser's page, the screenshots and an assertion
  that the scan finds nothing, for every page a user can land on;
- ``https_files(files)``: static files over https on 127.0.0.1 with a throwaway
  self-signed certificate, and ``start_chromium(profile, *flags)`` to trust just that
  certificate (the hosted pages load images from https only).

Chromium is never downloaded: the driver and browser paths are given, so Selenium
Manager has nothing to look up.
"""
from __future__ import annotations

import base64
import contextlib
import datetime
import hashlib
import importlib.util
import ipaddress
import json
import os
import shutil
import socketserver
import ssl
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest

from tests.e2e.processes import free_port
from tests.npm import node_package

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOTS_DIR = "IAMGATE_SCREENSHOTS_DIR"
WINDOW = (1000, 760)
MOBILE_WINDOW = (390, 760)  # a phone's CSS width

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",  # runs as root in CI containers, where the sandbox cannot start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",  # no calls home: tests see only their own traffic
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",  # containers give /dev/shm 64 MB, too little for a renderer
    f"--window-size={WINDOW[0]},{WINDOW[1]}",
)


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if importlib.util.find_spec("selenium") is None:
        return "the selenium package is not installed (pip install -e '.[test]')"
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not Path(path).exists():
            return f"{path} is missing: install Debian's {package} package (apt-get install {package})"
    return None


def start_chromium(profile_dir: str, *extra_flags: str):
    """A headless Chromium WebDriver using ``profile_dir`` as its user data dir."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile_dir}")
    for flag in extra_flags:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # for console_errors
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def waiting(driver, seconds: float = 10):
    """A ``WebDriverWait`` that retries through the errors a page in the middle of a
    navigation or an htmx swap gives (a node of the old document: Chromium's "Node with
    given id does not belong to the document", a stale element), until ``seconds``."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, seconds, ignored_exceptions=(WebDriverException,))


def console_errors(driver) -> list[str]:
    """The browser console's errors since the last call (a CSP violation is one: a
    refused style or script shows up here, not as a failed assertion)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def save_screenshot(driver, directory: Path, name: str) -> list[Path]:
    """Save what ``driver`` shows as ``<name>.png`` (desktop) and ``<name>-mobile.png``
    in ``directory``, each the page's full height at its width; return the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for suffix, (width, height) in (("", WINDOW), ("-mobile", MOBILE_WINDOW)):
        driver.set_window_size(width, height)
        # The window's height includes the browser's own frame (height - innerHeight).
        inner, full = driver.execute_script("return [window.innerHeight, document.documentElement.scrollHeight]")
        driver.set_window_size(width, max(height, int(full) + height - int(inner)))
        path = directory / f"{name}{suffix}.png"
        try:
            if not driver.save_screenshot(str(path)):
                raise RuntimeError(f"Chromium could not write {path}")
        finally:
            driver.set_window_size(*WINDOW)
        paths.append(path)
    return paths


def axe_violations(driver, source: str) -> list[dict]:
    """axe-core's serious and critical violations on the page ``driver`` shows.

    The script goes in through WebDriver: Chromium runs ``execute_script`` in the page
    without applying its Content-Security-Policy, so the hosted pages' ``script-src
    'nonce-...'`` neither blocks it nor has to be loosened for the test (the test of
    this module checks that on a hosted page)."""
    driver.execute_script(source)
    driver.set_script_timeout(30)
    result = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']})"
        ".then(r => done(JSON.stringify(r.violations)), e => done(JSON.stringify({error: String(e)})));")
    violations = json.loads(result)
    if isinstance(violations, dict):
        raise RuntimeError(f"axe-core failed: {violations['error']}")
    return [{"id": v["id"], "impact": v["impact"], "help": v["help"],
             "nodes": [node["html"] for node in v["nodes"]]}
            for v in violations if v["impact"] in ("serious", "critical")]


@pytest.fixture(scope="session")
def screenshots_dir(tmp_path_factory) -> Path:
    target = os.environ.get(SCREENSHOTS_DIR)
    return Path(target) if target else tmp_path_factory.mktemp("screenshots")


@pytest.fixture
def screenshot(browser, screenshots_dir):
    """``screenshot(name)``: the browser's page, desktop and mobile, in ``screenshots_dir``."""
    return lambda name: save_screenshot(browser, screenshots_dir, name)


@pytest.fixture
def check_page(browser, screenshot, accessibility):
    def check(name: str) -> None:
        screenshot(name)
        assert accessibility(browser) == [], f"axe-core on {name}"
    return check


@pytest.fixture(scope="session")
def axe_source() -> str:
    return (node_package("axe-core") / "axe.min.js").read_text(encoding="utf-8")


@pytest.fixture
def accessibility(axe_source):
    """``accessibility(driver)``: the serious and critical axe-core violations of the page."""
    return lambda driver: axe_violations(driver, axe_source)


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a browser keeps idle connections open; they must not block shutdown


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # the app logs requests itself
        pass


@pytest.fixture
def live_port() -> int:
    return free_port()


@pytest.fixture
def live_url(live_port) -> str:
    return f"http://127.0.0.1:{live_port}"


@pytest.fixture
def live_server(app, live_port, live_url):
    """Serve the test's ``app`` over HTTP at ``live_url`` until the test ends."""
    server = make_server("127.0.0.1", live_port, app, server_class=_ThreadingServer, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="live-server", daemon=True)
    thread.start()
    yield live_url
    server.shutdown()
    server.server_close()
    thread.join(10)


@pytest.fixture
def browser():
    """A headless Chromium WebDriver with a fresh profile; skips when Chromium is missing."""
    reason = missing_browser()
    if reason:
        pytest.skip(f"real-browser test skipped: {reason}")
    profile = tempfile.mkdtemp(prefix="iamgate-chromium-")
    driver = start_chromium(profile)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@contextlib.contextmanager
def https_files(files: dict[str, tuple[str, bytes]]):
    """Serve ``files`` (``{path: (content type, body)}``) over https at 127.0.0.1 with a
    fresh self-signed certificate.  Yields ``(origin, chromium_flag)``: the flag makes
    Chromium trust that certificate's key, and nothing else it would refuse."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    spki = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    pin = base64.b64encode(hashlib.sha256(spki).digest()).decode("ascii")
    with tempfile.TemporaryDirectory(prefix="iamgate-tls-") as folder:
        cert_path, key_path = Path(folder, "cert.pem"), Path(folder, "key.pem")
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_path, key_path)

        class Files(BaseHTTPRequestHandler):
            def do_GET(self):
                content_type, body = files.get(self.path.split("?")[0], ("text/plain", b""))
                self.send_response(200 if self.path.split("?")[0] in files else 404)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Files)
        server.daemon_threads = True
        server.socket = context.wrap_socket(server.socket, server_side=True)
        thread = threading.Thread(target=server.serve_forever, name="https-files", daemon=True)
        thread.start()
        try:
            yield f"https://127.0.0.1:{server.server_address[1]}", f"--ignore-certificate-errors-spki-list={pin}"
        finally:
            server.shutdown()
            server.server_close()
            thread.join(10)
