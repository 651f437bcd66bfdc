"""panva's openid-client (npm), a certified OpenID relying party library nobody here
wrote, signs a user in against the real control plane process and walks the provider's
whole surface with its own API: discovery, the authorization URL with PKCE S256 and
max_age, the code grant (its ID token checks: signature, iss, aud, nonce, auth_time
against max_age), userinfo, refresh, introspection, revocation and the end-session URL.
The script is tests/node/openid_client_rp.mjs.  Skipped, saying why, without Node;
failed instead in CI (``CI`` set), which installs Node."""
from __future__ import annotations

import json
import subprocess

import pytest

from tests.e2e.processes import Admin, Processes
from tests.npm import NODE_DIR, missing_node, node_package, unavailable

REDIRECT_URI = "https://rp.example.com/callback"
POST_LOGOUT_URI = "https://rp.example.com/bye"


@pytest.fixture
def openid_client():
    """Node and the installed package, before any process starts."""
    reason = missing_node()
    if reason:
        unavailable(f"test needs Node: {reason}")
    return node_package("openid-client")


@pytest.fixture
def control_plane(tmp_path):
    processes = Processes(tmp_path)
    processes.start_control_plane()
    yield processes
    processes.stop()


def test_openid_client_runs_every_step_against_the_real_provider(openid_client, control_plane):
    admin = Admin(control_plane.control_url, name="rp")
    registered = admin.http.post(f"{admin.v1}/oidc/clients", headers=admin.headers, timeout=10, json={
        "name": "Node RP", "redirect_uris": [REDIRECT_URI], "post_logout_redirect_uris": [POST_LOGOUT_URI]})
    assert registered.status_code == 201, registered.text
    rp = registered.json()["data"]
    user_id = admin.user("ada")
    settings = {"issuer": control_plane.control_url, "client_id": rp["client_id"],
                "client_secret": rp["client_secret"], "redirect_uri": REDIRECT_URI,
                "post_logout_redirect_uri": POST_LOGOUT_URI, "user_access_token": admin.access_token(user_id)}

    run = subprocess.run(["node", "openid_client_rp.mjs", json.dumps(settings)], cwd=NODE_DIR,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, f"openid-client failed:\n{run.stderr}\n{control_plane.logs()}"
    steps = json.loads(run.stdout)

    assert steps["discovery"] == {"issuer": control_plane.control_url,
                                  "end_session_endpoint": f"{control_plane.control_url}/oidc/logout"}
    code = steps["code"]
    assert code["code_challenge_method"] == "S256" and code["max_age"] == "300"
    assert code["sub"] == user_id and code["aud"] == rp["client_id"]
    assert isinstance(code["auth_time"], int) and code["sid"] and code["has_refresh_token"]
    assert steps["userinfo"] == {"sub": user_id, "email": admin.emails[user_id]}
    assert steps["refresh"] == {"rotated": True, "sub": user_id, "new_access_token": True}
    assert steps["introspect"] == {"active": True, "client_id": rp["client_id"], "sub": user_id}
    assert steps["revoke"] == {"active_after": False, "refresh_error": "invalid_grant"}
    assert steps["end_session"] == {"status": 302, "location": f"{POST_LOGOUT_URI}?state=bye",
                                    "refresh_error": "invalid_grant"}
