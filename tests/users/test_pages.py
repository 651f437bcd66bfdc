"""The hosted pages the email links open: branded, inert on GET, locked down."""
import re

import pytest

from tests.conftest import assert_error

PAGES = ["verify-email", "reset-password"]


@pytest.mark.parametrize("page", PAGES)
def test_page_is_branded_html_with_a_strict_policy(client, application, ctx, page):
    ctx.applications.update_branding(application["_id"], {"brand_name": "Acme", "brand_color": "#112233"})
    response = client.simulate_get(f"/pages/{application['_id']}/{page}", params={"token": "abc"})
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/html")
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["Referrer-Policy"] == "no-referrer"
    policy = response.headers["Content-Security-Policy"]
    nonce = re.search(r"'nonce-([^']+)'", policy).group(1)
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert f'<script nonce="{nonce}">' in response.text
    assert "Acme" in response.text and "#112233" in response.text
    assert f"/api/v1/applications/{application['_id']}" in response.text


@pytest.mark.parametrize("page", PAGES)
def test_opening_the_link_consumes_nothing_and_reflects_nothing(client, application, make_user, outbox, ctx, page):
    make_user(application)
    token = outbox[-1].token
    response = client.simulate_get(f"/pages/{application['_id']}/{page}", params={"token": token})
    assert token not in response.text
    assert ctx.store["user_tokens"].count_documents({"used_at": None}) == 1


def test_brand_name_is_escaped(client, application, ctx):
    ctx.applications.update_branding(application["_id"], {"brand_name": "<script>alert(1)</script>"})
    text = client.simulate_get(f"/pages/{application['_id']}/verify-email").text
    assert "<script>alert(1)</script>" not in text and "&lt;script&gt;" in text


def test_unknown_application_is_404(client):
    assert_error(client.simulate_get("/pages/00000000-0000-4000-8000-000000000000/verify-email"), 404, "NOT_FOUND")


def test_every_users_route_is_in_the_openapi_document(client):
    paths = client.simulate_get("/openapi.json").json["paths"]
    v1 = "/api/v1/applications/{applicationId}/users"
    for path in ("/register", "/login", "/logout", "/token/refresh", "/{userId}/change-password",
                 "/password/forgot", "/password/reset", "/email/verify", "/email/resend"):
        operation = paths[v1 + path]["post"]
        assert operation["requestBody"]["content"]["application/json"]["schema"]["properties"]
    assert paths[v1 + "/login"]["post"]["security"] == []
    assert paths[v1 + "/{userId}/change-password"]["post"]["security"] == [{"bearer": []}]
    assert "AUTH_ACCOUNT_LOCKED" in paths[v1 + "/login"]["post"]["responses"]["429"]["description"]
    assert "201" in paths[v1 + "/register"]["post"]["responses"]
    assert "204" in paths[v1 + "/logout"]["post"]["responses"]
    admin = "/api/dashboard/applications/{applicationId}/users"
    assert paths[admin]["get"]["security"] == [{"dashboardSession": []}]
    assert paths[admin + "/{userId}/suspend"]["post"] and paths[admin + "/{userId}/unsuspend"]["post"]
