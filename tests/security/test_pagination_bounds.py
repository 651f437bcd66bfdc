"""Pagination parameters are bounded on every paginated route.

A page number past 64 bits made a MongoDB skip that could not be encoded: 500 on the
roles, policies and dashboard users lists. ``page`` (at most ``MAX_PAGE``) and
``per_page`` (at most 100, the spec's limit) are read by one parser, in ASCII digits
only; anything else is 400 ``VALIDATION_INVALID_FORMAT`` naming the parameter. The routes
are the ones the OpenAPI document lists with a ``page`` parameter, so a new paginated
route is covered as soon as it is documented.
"""
from __future__ import annotations

import pytest

from shared.http import MAX_PAGE
from shared.ids import new_id
from tests.conftest import assert_error, bearer

KNOWN = {"/api/v1/applications/{applicationId}/roles", "/api/v1/applications/{applicationId}/abac/policies",
         "/api/dashboard/applications/{applicationId}/users"}


@pytest.fixture
def paginated_urls(client, ctx):
    """(url, headers, cookies) of every GET the OpenAPI document gives a ``page``
    parameter, with a credential it accepts (an API key for V1, a member's session for
    the dashboard)."""
    org_id, account_id = new_id(), new_id()
    ctx.store["organizations"].insert_one({"_id": org_id, "name": "Org", "applications_count": 0,
                                           "created_at": ctx.clock()})
    app = ctx.applications.create({"name": "Org App"}, organization_id=org_id, owner_account_id=None)
    ctx.store["organization_members"].insert_one({"organization_id": org_id, "account_id": account_id,
                                                  "role": "admin"})
    _, key = ctx.api_keys.create(app, {"name": "k", "permissions": ["roles:read", "policies:read",
                                                                     "oidc:manage", "webhooks:manage",
                                                                     "connections:manage"]})
    cookies = {"iamgate_session": ctx.dashboard.sessions.create({"_id": account_id})}
    paths = [path for path, operations in client.simulate_get("/openapi.json").json["paths"].items()
             if any(p["name"] == "page" for p in operations.get("get", {}).get("parameters", []))]
    assert KNOWN <= set(paths)
    return [(path.replace("{applicationId}", app["_id"]).replace("{organizationId}", org_id), bearer(key), cookies)
            for path in paths]


def test_paginated_routes_answer_within_the_bounds(client, paginated_urls):
    for url, headers, cookies in paginated_urls:
        for params in ({}, {"page": str(MAX_PAGE), "per_page": "100"}, {"page": "1", "per_page": "1"}):
            response = client.simulate_get(url, params=params, headers=headers, cookies=cookies)
            assert response.status_code == 200, (url, params, response.text)
        assert response.json["per_page"] == 1


@pytest.mark.parametrize("params, fields", [
    ({"page": "99999999999999999999"}, {"page"}),           # past 64 bits: was 500
    ({"page": "9" * 5000}, {"page"}),                        # past int()'s digit limit
    ({"page": str(MAX_PAGE + 1)}, {"page"}),
    ({"page": "0"}, {"page"}),
    ({"page": "-1"}, {"page"}),
    ({"page": "+2"}, {"page"}),
    ({"page": "1_0"}, {"page"}),                             # int() reads it as 10
    ({"page": "\uff12"}, {"page"}),                          # a fullwidth 2, which int() reads too
    ({"page": " 2"}, {"page"}),
    ({"per_page": "101"}, {"per_page"}),
    ({"per_page": "18446744073709551616"}, {"per_page"}),
    ({"page": "99999999999999999999", "per_page": "0"}, {"page", "per_page"}),
])
def test_out_of_bounds_pagination_is_400(client, paginated_urls, params, fields):
    for url, headers, cookies in paginated_urls:
        response = client.simulate_get(url, params=params, headers=headers, cookies=cookies)
        code = "VALIDATION_INVALID_FORMAT" if len(fields) == 1 else "VALIDATION_MULTIPLE_ERRORS"
        error = assert_error(response, 400, code)
        assert set(error["details"]["fields"]) == fields, (url, error)
