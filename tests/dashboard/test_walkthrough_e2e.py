"""The README's curl walkthrough, run as written against the real processes (what
`make run` starts), only with the stack's port in place of 8000; the token it asks for
comes from the stack's mailbox, as a reader would paste it from the log."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import requests

from tests.e2e.conftest import start_stack
from tests.e2e.processes import mailbox

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture
def stack(tmp_path):
    stack = start_stack(tmp_path)
    yield stack
    stack.stop()


def walkthrough() -> str:
    text = README.read_text("utf-8").split("## Walkthrough", 1)[1]
    return re.search(r"```sh\n(.*?)```", text, re.S).group(1)


@pytest.mark.skipif(shutil.which("curl") is None, reason="the walkthrough uses curl")
def test_readme_walkthrough_works_as_written(stack, tmp_path):
    script = walkthrough().replace("http://127.0.0.1:8000", stack.control_url)

    run = subprocess.Popen(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, text=True,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        token = mailbox().token("ada@example.com", f"{stack.control_url}/dashboard/verify-email")
        stdout, stderr = run.communicate(token + "\n", timeout=60)
    finally:
        run.kill()

    assert run.returncode == 0, stderr + stack.logs()
    lines = stdout.strip().splitlines()
    assert '"email":"ada@example.com"' in lines[0]
    assert '"email_verified":true' in lines[1] and '"email":"ada@example.com"' in lines[2]
    app_id, api_key = lines[3], lines[4]
    assert re.fullmatch(r"[0-9a-f-]{36}", app_id) and api_key.startswith("sk_live_")
    assert lines[5].startswith('{"data":[]') and lines[6] == "204"
    # The key works over real HTTP; the logged-out cookie jar no longer opens the dashboard.
    roles = requests.get(f"{stack.control_url}/api/v1/applications/{app_id}/roles",
                         headers={"Authorization": f"Bearer {api_key}"})
    assert roles.status_code == 200
    # curl dropped the cookie logout expired.
    assert "iamgate_session" not in (tmp_path / "cookies.txt").read_text()


def test_session_cookie_flags_over_http(stack):
    body = {"email": "flags@example.com", "password": "Analytical-Engine-1843", "name": "Flags"}
    assert requests.post(f"{stack.control_url}/api/dashboard/register", json=body).status_code == 201

    response = requests.post(f"{stack.control_url}/api/dashboard/login",
                             json={"email": body["email"], "password": body["password"]})

    header = response.headers["Set-Cookie"]
    assert header.startswith("iamgate_session=")
    assert "HttpOnly" in header and "SameSite=Lax" in header and "Path=/" in header
    assert "Max-Age=43200" in header and "Secure" not in header
    me = requests.get(f"{stack.control_url}/api/dashboard/me", cookies=response.cookies)
    assert me.status_code == 200 and me.json()["data"]["email"] == body["email"]
