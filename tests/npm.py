"""The JavaScript packages some tests run (tests/node/package.json, locked by
package-lock.json): ``node_package(name)`` is the installed package's folder.

The packages are installed into tests/node/node_modules (gitignored) by ``make
node-test-deps`` or, when missing, by ``npm ci`` here, once per session.  A test that
needs them SKIPS, saying why, when Node or npm is absent or the install fails, except in CI
(``CI`` set), where it FAILS: ``.ci/run`` installs Node from Debian's packages, so a
missing package there is a broken pipeline, not a machine without Node.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

NODE_DIR = Path(__file__).resolve().parent / "node"
_install_lock = threading.Lock()


def missing_node() -> str | None:
    """Why the Node packages cannot be installed here, or None when they can."""
    for tool, package in (("node", "nodejs"), ("npm", "npm")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install {package}, or `make node-test-deps`)"
    return None


def unavailable(reason: str) -> None:
    """Skip the test for ``reason``; fail it in CI, which must run it."""
    if os.environ.get("CI"):
        pytest.fail(f"in CI, which must run this test: {reason}", pytrace=False)
    pytest.skip(reason)


def node_package(name: str) -> Path:
    """tests/node/node_modules/<name>, running ``npm ci`` first when it is missing;
    skips the test (fails it in CI) when that cannot be done."""
    folder = NODE_DIR / "node_modules" / name
    with _install_lock:
        if not folder.exists():
            reason = missing_node()
            if reason:
                unavailable(f"test needs the npm package {name}: {reason}")
            done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, capture_output=True,
                                  text=True, timeout=300)
            if done.returncode != 0 or not folder.exists():
                unavailable(f"test needs the npm package {name}: `npm ci` in tests/node failed: "
                            f"{done.stderr.strip()[-300:]}")
    return folder
