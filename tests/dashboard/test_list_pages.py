"""The lists the spec answers whole (an account's organizations, an organization's
members and applications, an application's API keys, OIDC clients and webhooks) page on
the server when the caller asks (``page``/``per_page``, the spec's pagination), and stay
the whole ``{"data": [...]}`` array for a caller that does not, as the spec says."""
from __future__ import annotations

import pytest


@pytest.fixture
def config_overrides():
    return {"webhook_allow_private_targets": True}


def walk(get, path: str, per_page: int) -> list:
    """Every item of ``path`` read a page at a time, checking each page's envelope."""
    whole = get(path)
    assert whole.status_code == 200, whole.text
    assert set(whole.json) == {"data"} and isinstance(whole.json["data"], list)  # unpaged: as the spec says
    items = whole.json["data"]
    assert len(items) > per_page  # more than a page
    last = -(-len(items) // per_page)
    seen = []
    join = "&" if "?" in path else "?"
    for page in range(1, last + 1):
        answer = get(f"{path}{join}page={page}&per_page={per_page}")
        assert answer.status_code == 200, answer.text
        body = answer.json
        assert (body["current_page"], body["last_page"], body["per_page"], body["total"]) == (
            page, last, per_page, len(items))
        assert 0 < len(body["data"]) <= per_page
        seen += body["data"]
    assert seen == items  # the same order, nothing lost or repeated
    beyond = get(f"{path}{join}page={last + 1}&per_page={per_page}").json
    assert beyond["data"] == [] and beyond["total"] == len(items)
    refused = get(f"{path}{join}per_page=101")
    assert refused.status_code == 400 and "per_page" in refused.json["error"]["details"]["fields"]
    return items


def test_organizations_members_applications_and_api_keys_page_when_asked(dashboard_account, make_dashboard_account,
                                                                          ctx):
    account = dashboard_account
    for name in ("Beta", "Gamma"):
        assert account.post("/api/dashboard/organizations", json={"name": name}).status_code == 201
    orgs = walk(account.get, "/api/dashboard/organizations", 2)
    assert len(orgs) == 3

    org_id = account.organization_id
    for _ in range(2):
        other = make_dashboard_account()
        ctx.dashboard.organizations.add_member(account.id, org_id, other.email, "viewer", ip="10.9.9.9")
    assert len(walk(account.get, f"/api/dashboard/organizations/{org_id}/members", 2)) == 3

    for name in ("One", "Two", "Three"):
        created = account.post("/api/dashboard/applications", json={"name": name, "organization_id": org_id})
        assert created.status_code == 201, created.text
    apps = walk(account.get, f"/api/dashboard/applications?organization_id={org_id}", 2)
    assert [app["name"] for app in apps] == ["One", "Two", "Three"]

    app_id = apps[0]["id"]
    for name in ("a", "b", "c"):
        assert account.post(f"/api/dashboard/applications/{app_id}/api-keys", json={"name": name}).status_code == 201
    keys = walk(account.get, f"/api/dashboard/applications/{app_id}/api-keys", 2)
    assert [key["name"] for key in keys] == ["a", "b", "c"] and all("key" not in key for key in keys)


def test_oidc_clients_and_webhooks_page_when_asked(application, api_key, client):
    base = f"/api/v1/applications/{application['_id']}"
    auth = {"Authorization": f"Bearer {api_key}"}

    def get(path):
        return client.simulate_get(path, headers=auth)

    for n in range(3):
        assert client.simulate_post(f"{base}/oidc/clients", headers=auth, json={
            "name": f"client {n}", "redirect_uris": [f"https://c{n}.example/cb"]}).status_code == 201
        assert client.simulate_post(f"{base}/webhooks", headers=auth, json={
            "url": f"http://127.0.0.1:9/hook{n}", "events": ["user.created"]}).status_code == 201
    # Creation order (created_at, then _id within one instant of the test clock).
    assert sorted(c["name"] for c in walk(get, f"{base}/oidc/clients", 2)) == ["client 0", "client 1", "client 2"]
    hooks = walk(get, f"{base}/webhooks", 2)
    assert sorted(h["url"] for h in hooks) == [f"http://127.0.0.1:9/hook{n}" for n in range(3)]
    assert all("secret" not in hook for hook in hooks)
