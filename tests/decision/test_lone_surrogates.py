"""The decision service refuses a lone surrogate in a check body as the control plane does:
400 VALIDATION_INVALID_FORMAT, on the hot path's routes too, where
orjson refuses the body and the fallback parser (``shared.http.parse_json``) must refuse it
as well rather than answer a check for a user id that is no Unicode text."""
from __future__ import annotations

import pytest

from tests.conftest import assert_error
from tests.decision.conftest import bulk_path, check_path


@pytest.mark.parametrize("body", [
    '{"user_id":"\\ud800","permission":"posts:read","permissions":["posts:read"]}',
    '{"user_id":"USER","permission":"posts:read","permissions":["posts:read"],"resource":{"\\udc00":1}}',
    '{"user_id":"USER","permission":"posts:read","permissions":["posts:read"],"context":{"a":["\\ud83d"]}}',
])
def test_a_lone_surrogate_in_a_check_body_is_400(tenant, body):
    body = body.replace("USER", tenant.user_with("posts:read"))
    for path in (check_path(tenant.app_id), bulk_path(tenant.app_id)):
        response = tenant.client.simulate_post(path, body=body, headers={"Authorization": f"Bearer {tenant.key}",
                                                                         "Content-Type": "application/json"})
        error = assert_error(response, 400, "VALIDATION_INVALID_FORMAT")
        assert "surrogate" in error["details"]["body"]


def test_a_surrogate_pair_is_an_ordinary_character(tenant):
    user = tenant.user_with("posts:read")
    response = tenant.post({"user_id": user, "permission": "posts:read", "context": {"mood": "\U0001F600"}})
    assert response.status_code == 200 and response.json["allowed"] is True
