"""Hardening item 10: ``roles:manage`` is administration.

The spec lets its holder create a ``*:*`` role and assign it to itself (and create a
system role that can never change again).  That cannot be fixed without breaking the
spec, so it is said plainly where people hand the permission out: the OpenAPI
description of every roles:manage operation, the API key permissions field, and
docs/security.md.  The test performs the escalation so the documentation stays true.
"""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_roles_manage_holder_can_grant_itself_everything(client, application, stored_user, token_for,
                                                           make_role, assign_role):
    user = stored_user(application)
    assign_role(application, user, make_role(application, permissions=["roles:manage"]))
    headers = {"Authorization": f"Bearer {token_for(application, user)}"}
    base = f"/api/v1/applications/{application['_id']}"
    role = client.simulate_post(f"{base}/roles", headers=headers,
                                json={"name": "god", "display_name": "God", "permissions": ["*:*"]})
    assert role.status_code == 201, role.text
    r = client.simulate_post(f"{base}/users/{user['_id']}/roles", headers=headers,
                             json={"role_id": role.json["data"]["id"]})
    assert r.status_code == 201, r.text
    assert client.simulate_get(f"{base}/webhooks", headers=headers).status_code == 200


def test_the_openapi_document_says_roles_manage_is_administration(client):
    paths = client.simulate_get("/openapi.json").json["paths"]
    manage = [op for item in paths.values() for op in item.values()
              if "permission roles:manage" in op.get("description", "")]
    assert manage and all("administration" in op["description"] and "*:*" in op["description"] for op in manage)


def test_docs_security_says_so():
    text = (ROOT / "docs" / "security.md").read_text()
    assert "roles:manage" in text and "administration" in text
