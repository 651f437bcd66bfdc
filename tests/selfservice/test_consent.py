"""DELETE V1/users/{userId}/consent: every OIDC consent of the user is withdrawn and the
OIDC refresh tokens issued under them are revoked; revoked_count is the number of
consents withdrawn.  The OIDC provider writes these collections; here they are seeded."""
from datetime import timedelta

import pytest

from shared.errors import NotFound
from tests.conftest import events_of


@pytest.fixture
def me(user_token):
    return user_token


def withdraw(call, app, user):
    response = call("DELETE", app, user, "/consent")
    assert response.status_code == 200, response.text
    data = response.json["data"]
    assert set(data) == {"revoked_count", "message"}
    assert isinstance(data["message"], str) and data["message"]
    return data


def test_without_consents_the_count_is_zero(call, application, me, ctx):
    assert withdraw(call, application, me)["revoked_count"] == 0
    assert events_of(ctx, "consent.withdrawn") == []


def test_every_live_consent_is_withdrawn_and_its_tokens_revoked(call, application, me, ctx, clock, oidc_consent,
                                                                 oidc_refresh_token):
    first = oidc_consent(application, me.user["id"], client_id="client-a")
    second = oidc_consent(application, me.user["id"], client_id="client-b", scopes=("openid",))
    earlier = oidc_consent(application, me.user["id"], client_id="client-c", withdrawn=True)
    tokens = [oidc_refresh_token(application, me.user["id"], "client-a"),
              oidc_refresh_token(application, me.user["id"], "client-a"),
              oidc_refresh_token(application, me.user["id"], "client-b")]
    clock.advance(60)

    data = withdraw(call, application, me)
    assert data["revoked_count"] == 2  # the consent withdrawn earlier does not count again
    for consent in (first, second):
        assert ctx.store["oidc_consents"].find_one({"_id": consent["_id"]})["withdrawn_at"] is not None
    earlier_withdrawn_at = ctx.store["oidc_consents"].find_one({"_id": earlier["_id"]})["withdrawn_at"]
    assert earlier_withdrawn_at < clock.now - timedelta(seconds=59)  # left as it was
    for token in tokens:
        doc = ctx.store["oidc_refresh_tokens"].find_one({"_id": token["_id"]})
        assert doc["revoked_at"] is not None and doc["revoked_reason"] == "consent_withdrawn"

    events = events_of(ctx, "consent.withdrawn")
    assert len(events) == 1
    assert events[0]["data"] == {"user_id": me.user["id"], "client_ids": ["client-a", "client-b"],
                                 "revoked_count": 2, "grants_revoked": 3}
    assert events[0]["subject"] == {"user_id": me.user["id"]}


def test_withdrawing_again_counts_zero(call, application, me, oidc_consent):
    oidc_consent(application, me.user["id"])
    assert withdraw(call, application, me)["revoked_count"] == 1
    assert withdraw(call, application, me)["revoked_count"] == 0


def test_other_users_and_applications_keep_their_consents(call, application, me, ctx, make_user_token,
                                                          make_application, oidc_consent, oidc_refresh_token):
    other = make_user_token(application)
    foreign_app = make_application()
    kept = [oidc_consent(application, other.user["id"], client_id="client-a"),
            oidc_consent(foreign_app, me.user["id"], client_id="client-a")]  # same user id, another tenant
    kept_tokens = [oidc_refresh_token(application, other.user["id"], "client-a"),
                   oidc_refresh_token(foreign_app, me.user["id"], "client-a")]
    oidc_consent(application, me.user["id"], client_id="client-a")
    assert withdraw(call, application, me)["revoked_count"] == 1
    for consent in kept:
        assert ctx.store["oidc_consents"].find_one({"_id": consent["_id"]})["withdrawn_at"] is None
    for token in kept_tokens:
        assert ctx.store["oidc_refresh_tokens"].find_one({"_id": token["_id"]})["revoked_at"] is None


def test_consent_of_a_deleted_user_is_404(ctx, application, me):
    ctx.store["users"].update_one({"_id": me.user["id"]}, {"$set": {"status": "deleted"}})
    with pytest.raises(NotFound) as caught:
        ctx.selfservice.withdraw_consent(application["_id"], me.user["id"])
    assert caught.value.code == "USER_NOT_FOUND"
