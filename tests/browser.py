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
- ``save_screenshot(driver, name)``: a PNG of what the user sees, under docs/screenshots/.

Chromium is never downloaded: the driver and browser paths are given, so Selenium
Manager has nothing to look up.
"""
from __future__ import annotations

import importlib.util
import shutil
import socketserver
import tempfile
import threading
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest

from tests.e2e.processes import free_port

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
WINDOW = (1000, 760)

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


def start_chromium(profile_dir: str):
    """A headless Chromium WebDriver using ``profile_dir`` as its user data dir."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile_dir}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # for console_errors
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def console_errors(driver) -> list[str]:
    """The browser console's errors since the last call (a CSP violation is one: a
    refused style or script shows up here, not as a failed assertion)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def save_screenshot(driver, name: str) -> Path:
    """Save what ``driver`` shows as docs/screenshots/<name>.png (the page's full height
    at the test window's width) and return the path."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(WINDOW[0], max(WINDOW[1], int(height)))
    try:
        if not driver.save_screenshot(str(path)):
            raise RuntimeError(f"Chromium could not write {path}")
    finally:
        driver.set_window_size(*WINDOW)
    return path


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
