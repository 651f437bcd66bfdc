"""The README's curl walkthrough, run as written against the real processes (what
`make run` starts), only with the stack's port in place of 8000."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import requests

from tests.e2e.conftest import start_stack

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

    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)

    assert result.returncode == 0, result.stderr + stack.logs()
    lines = result.stdout.strip().splitlines()
    assert '"email":"ada@example.com"' in lines[0] and '"email":"ada@example.com"' in lines[1]
    app_id, api_key = lines[2], lines[3]
    assert re.fullmatch(r"[0-9a-f-]{36}", app_id) and api_key.startswith("sk_live_")
    assert lines[4].startswith('{"data":[]') and lines[5] == "204"
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
