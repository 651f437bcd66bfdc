"""Retention (IAMGATE_AUDIT_RETENTION_DAYS through the TTL index), account deletion that
keeps the records but not the person's email and name, and the GDPR export's share of
the audit log."""
from __future__ import annotations

import json

import pytest

from controlplane.audit import context as audit
from shared.config import Config, ConfigError
from tests.conftest import bearer

V1 = "/api/v1/applications/{}/users/{}"


def ttl_of(ctx) -> int:
    declared = ctx.store._indexes["events"]
    return next(m.document["expireAfterSeconds"] for m in declared.values() if "expireAfterSeconds" in m.document)


def test_records_are_kept_90_days_by_default(ctx):
    assert ctx.config.audit_retention_days == 90
    assert ttl_of(ctx) == 90 * 24 * 3600


@pytest.mark.parametrize("config_overrides", [{"audit_retention_days": 400}])
def test_the_retention_is_the_ttl_of_the_records(ctx):
    assert ttl_of(ctx) == 400 * 24 * 3600
    info = ctx.store["events"].index_information()
    assert any(index.get("expireAfterSeconds") == 400 * 24 * 3600 for index in info.values())


@pytest.mark.parametrize("raw", ["0", "-1", "ninety", "36501"])
def test_a_bad_retention_is_a_one_line_error_naming_the_variable(raw):
    with pytest.raises(ConfigError) as caught:
        Config.from_env(env={"IAMGATE_AUDIT_RETENTION_DAYS": raw, "IAMGATE_SECRET_KEY": "x" * 32})
    assert "IAMGATE_AUDIT_RETENTION_DAYS" in str(caught.value) and "\n" not in str(caught.value)


def test_a_deleted_account_keeps_its_records_under_its_id(client, ctx, application, make_user_token):
    me = make_user_token(application)
    user_id, email, name = me.user["id"], me.user["email"], me.user["name"]
    ctx.audit.record("user.login", result=audit.failure("invalid_credentials"),
                     target=audit.actor("user", user_id, email), application_id=application["_id"])
    before = list(ctx.store["events"].find({"app_id": application["_id"], "target.id": user_id}))
    assert email in json.dumps(before, default=str)
    response = client.simulate_delete(V1.format(application["_id"], user_id), headers=bearer(me.access_token))
    assert response.status_code == 204, response.text
    after = list(ctx.store["events"].find({"app_id": application["_id"], "$or": [
        {"target.id": user_id}, {"actor.id": user_id}]}))
    assert {d["_id"] for d in before} <= {d["_id"] for d in after}  # nothing was deleted
    text = json.dumps(after, default=str)
    assert email not in text and name not in text
    created = next(d for d in after if d["action"] == "user.created")
    assert created["data"]["email"] == user_id and created["target"]["display"] == user_id


def test_no_record_names_a_deleted_account_not_even_those_its_deletion_writes(
        client, ctx, application, make_user_token, oidc_client, issue_tokens, make_api_key):
    """A user with an OIDC grant deletes their account with their own token: the deletion
    itself writes records (user.deleted, the grant's connection.revoked) whose actor is the
    user; none of them, nor any earlier one, may still hold the email or the name."""
    me = make_user_token(application)
    user_id, email, name = me.user["id"], me.user["email"], me.user["name"]
    issue_tokens(me, oidc_client(application))
    key = bearer(make_api_key(application, permissions=["roles:manage"]))
    role = client.simulate_post(f"/api/v1/applications/{application['_id']}/roles", headers=key,
                                json={"name": "editor", "display_name": "Editor", "permissions": ["posts:read"]})
    assigned = client.simulate_post(V1.format(application["_id"], user_id) + "/roles", headers=key,
                                    json={"role_id": role.json["data"]["id"]})
    assert assigned.status_code in (200, 201), assigned.text
    claimed = audit.actor("user", user_id, email)
    ctx.audit.record("user.login", result=audit.failure("invalid_credentials"), actor=claimed, target=claimed,
                     application_id=application["_id"])
    response = client.simulate_delete(V1.format(application["_id"], user_id), headers=bearer(me.access_token))
    assert response.status_code == 204, response.text
    records = list(ctx.store["events"].find({"app_id": application["_id"]}))
    mine = [d for d in records if user_id in (d["actor"]["id"], d["target"]["id"])]
    assert {"user.created", "role.assigned", "user.login", "connection.revoked", "user.deleted"} <= \
        {d["action"] for d in mine}
    text = json.dumps(records, default=str)
    assert email not in text and name not in text
    for doc in mine:
        for side in ("actor", "target"):
            if doc[side]["id"] == user_id:
                assert doc[side]["display"] == user_id, (doc["action"], side, doc[side])


def test_the_gdpr_export_holds_the_users_own_records_and_nobody_elses(client, ctx, application, make_user_token):
    me, other = make_user_token(application), make_user_token(application)
    ctx.audit.record("user.login", result=audit.failure("invalid_credentials"),
                     target=audit.actor("user", me.user["id"], me.user["email"]), application_id=application["_id"])
    ctx.audit.record("user.login", result=audit.failure("invalid_credentials"),
                     target=audit.actor("user", other.user["id"], other.user["email"]),
                     application_id=application["_id"])
    response = client.simulate_get(V1.format(application["_id"], me.user["id"]) + "/data-export",
                                   headers=bearer(me.access_token))
    assert response.status_code == 200, response.text
    logs = response.json["data"]["audit_logs"]
    assert {"status": "failure", "reason": "invalid_credentials"} in [r["result"] for r in logs]
    assert all(me.user["id"] in (r["actor"]["id"], r["target"]["id"]) for r in logs)
    assert other.user["email"] not in response.text


def test_a_changed_retention_retimes_the_existing_ttl_index():
    """MongoDB refuses to create an index again with another expiry (IndexOptionsConflict,
    85); ``ensure_indexes`` then changes the expiry in place with collMod."""
    from pymongo import IndexModel
    from pymongo.errors import OperationFailure

    from controlplane.store import Store

    calls = []

    class Collection:
        def create_indexes(self, models):
            calls.append(("create", len(models)))
            if len(calls) == 1:
                raise OperationFailure("Index already exists with different options", code=85)

    class Database:
        def __getitem__(self, name):
            return Collection()

        def command(self, *args, **kwargs):
            calls.append((*args, kwargs))

    store = Store.__new__(Store)
    store.db, store._indexes = Database(), {}
    store.declare_indexes({"events": [IndexModel([("at", 1)], expireAfterSeconds=400 * 86400),
                                      IndexModel([("seq", 1)])]})
    store.ensure_indexes()
    assert calls == [("create", 2),
                     ("collMod", "events", {"index": {"keyPattern": {"at": 1}, "expireAfterSeconds": 400 * 86400}}),
                     ("create", 2)]
