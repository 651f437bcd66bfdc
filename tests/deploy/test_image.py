"""The container image, checked without a container engine (issue 31, item 11).

The Dockerfile is read as text: a base pinned by digest, packages installed from the
committed lockfiles with their hashes, OCI labels and a HEALTHCHECK. The lockfile must
hold every runtime requirement of setup.cfg at a version it allows, and nothing of the
test tools or the embedded store. ``docker/healthcheck.py`` runs against real sockets.
"""
from __future__ import annotations

import configparser
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.e2e.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
LOCK = ROOT / "docker" / "requirements.lock"
BUILD_LOCK = ROOT / "docker" / "build-requirements.lock"
HEALTHCHECK = ROOT / "docker" / "healthcheck.py"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in lines]


def setup_cfg() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config


def requirements(value: str) -> list[Requirement]:
    return [Requirement(line) for line in value.splitlines() if line.strip() and not line.strip().startswith("#")]


def locked(path: Path) -> dict[str, tuple[str, list[str]]]:
    """{name: (version, [sha256 hashes])} of a pip-compile/uv lockfile."""
    packages: dict[str, tuple[str, list[str]]] = {}
    for block in re.split(r"\n(?=\S)", path.read_text()):
        first = block.split(None, 1)[0] if block.strip() else ""
        if not first or first.startswith("#"):
            continue
        name, version = re.fullmatch(r"([A-Za-z0-9._-]+)==([^\s;\\]+)", first).groups()
        packages[canonicalize_name(name)] = (version, re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
    return packages


def test_every_base_is_pinned_by_digest():
    args = dict(a.split("=", 1) for kind, a in instructions() if kind == "ARG" and "=" in a)
    bases = [a.split()[0] for kind, a in instructions() if kind == "FROM"]
    assert len(bases) == 2
    for base in bases:
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base)
        assert re.fullmatch(r"[\w./:-]+@sha256:[0-9a-f]{64}", image), image


def test_packages_come_from_the_lockfiles_with_their_hashes():
    installs = [command for kind, a in instructions() if kind == "RUN" for command in a.split("&&")
                if "pip install" in command]
    for lock in ("requirements.lock", "build-requirements.lock"):
        assert any(re.search(rf"--require-hashes .*-r {lock}$", c.strip()) for c in installs), lock
    # iamgate itself adds nothing the lockfile did not pin; every other install is a lockfile.
    (project,) = [c for c in installs if c.strip().endswith(" .")]
    assert "--no-deps" in project and "--no-build-isolation" in project
    assert all("--require-hashes" in c for c in installs if c is not project)
    copied = " ".join(a for kind, a in instructions() if kind == "COPY")
    assert "docker/requirements.lock" in copied and "docker/build-requirements.lock" in copied


def test_oci_labels_and_a_healthcheck():
    labels = " ".join(a for kind, a in instructions() if kind == "LABEL")
    for key in ("title", "description", "version", "revision", "licenses", "source", "base.name"):
        assert f"org.opencontainers.image.{key}=" in labels, key
    (healthcheck,) = [a for kind, a in instructions() if kind == "HEALTHCHECK"]
    assert "--interval=" in healthcheck and "--timeout=" in healthcheck
    assert "/usr/local/lib/iamgate/healthcheck.py" in healthcheck
    assert any(kind == "COPY" and a.split() == ["docker/healthcheck.py", "/usr/local/lib/iamgate/healthcheck.py"]
               for kind, a in instructions())


def test_the_lockfile_pins_every_runtime_requirement_and_nothing_else():
    packages = locked(LOCK)
    for name, (_version, hashes) in packages.items():
        assert hashes, f"{name} has no hash"
    for requirement in requirements(setup_cfg()["options"]["install_requires"]):
        name = canonicalize_name(requirement.name)
        assert name in packages, f"{name} is in install_requires but not in {LOCK.name}: run make lock"
        assert requirement.specifier.contains(packages[name][0], prereleases=True), (
            f"{name}=={packages[name][0]} does not meet {requirement}: run make lock")
    extras = setup_cfg()["options.extras_require"]
    kept_out = {canonicalize_name(r.name) for key in ("test", "embedded") for r in requirements(extras[key])}
    kept_out |= {"pytest", "mongomock", "setuptools", "wheel"}
    assert kept_out & set(packages) == set()
    assert locked(BUILD_LOCK).keys() >= {"setuptools", "wheel"}


def test_the_embedded_store_is_an_extra_that_make_run_installs_without_the_test_tools():
    config = setup_cfg()
    runtime = {canonicalize_name(r.name) for r in requirements(config["options"]["install_requires"])}
    assert "mongomock" not in runtime
    assert [r.name for r in requirements(config["options.extras_require"]["embedded"])] == ["mongomock"]
    makefile = (ROOT / "Makefile").read_text()

    def installs(target: str) -> str:
        stamp = re.search(rf"^{target}: (\S+)", makefile, re.M).group(1).replace("$(", r"\$\(").replace(")", r"\)")
        return re.search(rf"^{stamp}:.*\n\t.*pip install .*'(\.\[[^\]]*\])'", makefile, re.M).group(1)

    assert installs("run") == ".[embedded]"
    assert set(installs("test")[2:-1].split(",")) == {"test", "embedded"}


class _Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):
        self.send_response(self.status if self.path == "/healthz" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def serve():
    servers = []

    def start(status: int) -> int:
        handler = type("Handler", (_Health,), {"status": status})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_address[1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def healthcheck(control_plane: int, decision: int) -> subprocess.CompletedProcess:
    env = {"IAMGATE_PORT": str(control_plane), "IAMGATE_DECISION_PORT": str(decision),
           "HTTP_PROXY": "http://127.0.0.1:9"}  # loopback is asked directly, never through a proxy
    return subprocess.run([sys.executable, str(HEALTHCHECK)], env=env, capture_output=True, text=True, timeout=30)


def test_the_healthcheck_asks_whichever_service_the_container_runs(serve):
    assert healthcheck(serve(200), free_port()).returncode == 0   # the control plane
    assert healthcheck(free_port(), serve(200)).returncode == 0   # the decision service
    assert healthcheck(serve(500), free_port()).returncode == 1   # it answers, not healthy
    nothing = healthcheck(free_port(), free_port())
    assert nothing.returncode == 1
    assert "nothing answers" in nothing.stderr
