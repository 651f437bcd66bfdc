"""bcrypt runs in the gevent hub's thread pool, at a lower scheduling priority than the
event loop (shared/concurrency.py), so a burst of logins cannot starve other requests.
Checked in a subprocess: gevent must patch the process before anything else runs."""
import subprocess
import sys

import pytest

PROBE = """
from gevent import monkey
monkey.patch_all()
import os, threading
from controlplane.passwords import PasswordHasher

seen = {}
hasher = PasswordHasher(4)
original = hasher._check

def check(password, hashed):
    tid = threading.get_native_id()
    seen["tid"], seen["nice"] = tid, os.getpriority(os.PRIO_PROCESS, tid)
    return original(password, hashed)

hasher._check = check
assert hasher.verify("Correct-Horse-9", hasher.hash("Correct-Horse-9"))
loop = threading.get_native_id()
print(seen["tid"] != loop, seen["nice"] - os.getpriority(os.PRIO_PROCESS, loop))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread priority is a Linux feature")
def test_bcrypt_runs_on_a_lower_priority_pool_thread():
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    off_loop, niceness = result.stdout.split()
    assert off_loop == "True"
    assert int(niceness) == 10
