"""A lone surrogate in a JSON body is refused where the body is parsed.

json reads ``"\\ud800"`` (a UTF-16 surrogate escape without its pair) as a Python string
that is no Unicode text: it fails wherever it is later encoded (MongoDB, bcrypt, an HMAC,
the response), which was a 500 on about twenty routes, many unauthenticated. The body
parser (``shared.http.parse_json``, which the decision service's hot path matches) now
answers 400 ``VALIDATION_INVALID_FORMAT`` before any route sees it.

The sweep takes every operation with a JSON body from the OpenAPI document, so a new route
is covered as soon as it is documented, and sends the surrogate in each of its string
fields, with credentials that let the request reach the body: an API key holding every
permission, the path's own user's access token, and a dashboard session of the
application's organization.
"""
from __future__ import annotations

import pytest

from controlplane.apikeys.service import V1_PERMISSIONS
from shared.ids import new_id
from tests.conftest import assert_error, bearer
from tests.plugins.users import fresh_address

LONE = "\\ud800"  # as it travels in the JSON text: an escape, not a character

# Every permission a key may hold, so each route answers past its gate.
EVERY_PERMISSION = list(V1_PERMISSIONS)


def surrogate_bodies(schema: dict) -> list[str]:
    """JSON texts: one per string property of the schema with the surrogate as its value,
    and one with the surrogate as a key (for a body without documented strings)."""
    strings = [name for name, field in (schema.get("properties") or {}).items()
               if "string" in (field.get("type") if isinstance(field.get("type"), list) else [field.get("type")])]
    return [f'{{"{name}":"{LONE}"}}' for name in strings] + [f'{{"{LONE}":"x","a":["b{LONE}"]}}']


@pytest.fixture
def world(client, ctx, dashboard_account, make_dashboard_app, make_user_token):
    app = make_dashboard_app(dashboard_account)
    user = make_user_token({"_id": app["id"]})
    _, key = ctx.api_keys.create(ctx.applications.get(app["id"]), {"name": "all", "permissions": EVERY_PERMISSION})
    ids = {"applicationId": app["id"], "userId": user.user["id"], "organizationId": dashboard_account.organization_id,
           "accountId": dashboard_account.id}
    credentials = [bearer(key), user.headers]
    return ids, credentials, dashboard_account.cookies


def refused_at_parsing(response) -> bool:
    """400 VALIDATION_INVALID_FORMAT in the envelope, or RFC 6749's invalid_request from
    the OIDC endpoints, which keep that body."""
    if response.status_code != 400:
        return False
    error = response.json["error"]
    return error == "invalid_request" if isinstance(error, str) else error["code"] == "VALIDATION_INVALID_FORMAT"


def json_operations(client):
    document = client.simulate_get("/openapi.json").json
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            content = (operation.get("requestBody") or {}).get("content", {}) if isinstance(operation, dict) else {}
            if "application/json" in content:
                yield method.upper(), path, content["application/json"]["schema"]


def test_the_sweep_covers_the_routes_that_answered_500(client):
    paths = {path for _, path, _ in json_operations(client)}
    assert len(paths) >= 40
    v1 = "/api/v1/applications/{applicationId}"
    assert paths >= {"/api/dashboard/password/forgot", "/api/dashboard/email/verify", "/api/dashboard/organizations",
                     "/api/dashboard/applications", v1 + "/users/token/refresh", v1 + "/users/logout",
                     v1 + "/users/email/verify", v1 + "/users/{userId}/profile", v1 + "/users/register",
                     v1 + "/authz/check", "/oidc/token"}


# Routes that read no body: they ignore it whatever it holds (and must not fail on it).
BODYLESS = {"/api/dashboard/logout", "/api/dashboard/email/resend",
            "/api/dashboard/applications/{applicationId}/users/{userId}/suspend",
            "/api/dashboard/applications/{applicationId}/users/{userId}/unsuspend",
            "/api/v1/applications/{applicationId}/webhooks/{webhookId}/rotate-secret",
            "/api/v1/applications/{applicationId}/webhooks/{webhookId}/deliveries/{deliveryId}/redeliver",
            "/api/v1/applications/{applicationId}/connections/{connectionId}/test"}


def test_a_lone_surrogate_in_any_json_body_is_400(client, world):
    ids, credentials, cookies = world
    answered = {}
    # The dashboard logout, which ends the session the others use, goes last; before it
    # the suspension (which stamps the user, so the user's token is refused from then on).
    for method, path, schema in sorted(json_operations(client), key=lambda op: (
            op[1] == "/api/dashboard/logout", op[1].endswith("/suspend") or op[1].endswith("/unsuspend"))):
        url = path
        for name, value in ids.items():
            url = url.replace("{" + name + "}", value)
        url = "/".join(new_id() if part.startswith("{") else part for part in url.split("/"))
        for body in surrogate_bodies(schema):
            for headers in credentials:  # the first one the route accepts
                response = client.simulate_request(method, url, body=body, cookies=cookies, remote_addr=fresh_address(),
                                                   headers={**headers, "Content-Type": "application/json"})
                if response.status_code not in (401, 403):
                    break
            answered[(method, path, body)] = response
    wrong = {key: (r.status_code, r.text[:200]) for key, r in answered.items()
             if not (refused_at_parsing(r) or key[1] in BODYLESS and r.status_code < 500)}
    assert not wrong, "\n".join(f"{k}: {v}" for k, v in wrong.items())


@pytest.mark.parametrize("body", [
    b'{"email":"\xed\xa0\x80@example.com"}',                                # UTF-8 of U+D800
    '{"email":"\ud800@example.com"}'.encode("utf-16-le", "surrogatepass"),   # UTF-16 of U+D800
    b'{"email":"a\\udfff@example.com"}',
])
def test_a_surrogate_in_any_encoding_of_the_body_is_400(client, body):
    """Bodies are read in the encoding they are in (UTF-8, or UTF-16/32 when they start so),
    strictly: a surrogate encoded as bytes is refused like the escape. (The dashboard's
    forgot-password, unauthenticated, answered 500.)"""
    response = client.simulate_post("/api/dashboard/password/forgot", body=body,
                                    headers={"Content-Type": "application/json"})
    assert_error(response, 400, "VALIDATION_INVALID_FORMAT")


def test_a_surrogate_pair_is_an_ordinary_character(client, application):
    body = '{"email":"pair@example.com","password":"Secret-pass-1","name":"\\ud83d\\ude00"}'
    response = client.simulate_post(f"/api/v1/applications/{application['_id']}/users/register", body=body,
                                    headers={"Content-Type": "application/json"})
    assert response.status_code == 201 and response.json["data"]["name"] == "\U0001F600"
