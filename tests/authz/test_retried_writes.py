"""A write retried after a failure between its data and its event still stops cached allows.

Writes change the data first and emit the change-log event after; the event is what drops
cached decisions (this process's check cache, other replicas' through their tailers, every
decision service through the change stream). When something in between fails, the caller
gets an error and tries again, and the retry finds the change already made. These tests
prove that once the retry answers, checks follow the stored data: a suspension, an account
deletion, a permission revocation, a policy deactivation and an attribute change, each
retried after a store hiccup. They also prove what a repeat costs: a double click sends no
business event twice (docs/architecture.md, "Repeated writes").
"""
from __future__ import annotations

import json

import pytest

from controlplane.internal.service import change_frame
from decision.cache import DecisionCache, GrantsEntry
from shared.event_types import PUBLIC_EVENT_TYPES
from shared.rbac import Grants
from tests.abac.conftest import Abac
from tests.conftest import events_of

V1 = "/api/v1/applications/{}"


@pytest.fixture
def subject(application, stored_user, make_role, assign_role):
    user = stored_user(application)
    assign_role(application, user, make_role(application, permissions=["posts:read", "posts:delete"]))
    return user


@pytest.fixture
def abac(client, application, api_key):
    return Abac(client, application, api_key)


def _get_check(client, app, key, user_id, permission):
    response = client.simulate_get(V1.format(app["_id"]) + "/authz/check", headers={"Authorization": f"Bearer {key}"},
                                   params={"user_id": user_id, "permission": permission})
    assert response.status_code == 200, response.text
    return response.json


class _StoreHiccup(Exception):
    pass


def _fail_once(monkeypatch, owner, name):
    real = getattr(owner, name)
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise _StoreHiccup(f"{name} failed once")
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, flaky)


def _fail_emit_once(monkeypatch, ctx, owner, kind):
    """The first emit of ``kind`` through ``owner.events`` fails, as an event insert that
    hits a store hiccup would, after the write it follows."""
    real_emit = ctx.events.emit
    failed = []

    def emit(app_id, type_, *args, **kwargs):
        if type_ == kind and not failed:
            failed.append(type_)
            raise _StoreHiccup("event insert failed once")
        return real_emit(app_id, type_, *args, **kwargs)

    monkeypatch.setattr(owner.events, "emit", emit)


# --- the reviewer's findings ----------------------------------------------------------------------


def test_a_suspension_retried_after_a_failure_still_stops_cached_allows(ctx, client, application, api_key, subject,
                                                                      monkeypatch):
    """``UserAdminService.suspend`` writes the status, revokes sessions, then emits
    user.suspended. When the session revocation fails once (a store hiccup: the caller
    gets an error and retries), the retry finds the user no longer active; it must still
    tell the caches, or the permission check cache (and every decision service) keeps
    answering allowed for a suspended user for the cache TTL (an hour)."""
    assert _get_check(client, application, api_key, subject["_id"], "posts:read")["allowed"] is True  # cached

    admin = ctx.users.admin
    _fail_once(monkeypatch, admin.sessions, "revoke_user")
    with pytest.raises(_StoreHiccup):
        admin.suspend(application["_id"], subject["_id"])
    admin.suspend(application["_id"], subject["_id"])  # the administrator retries: 200, "suspended"
    assert ctx.store["users"].find_one({"_id": subject["_id"]})["status"] == "suspended"

    answer = _get_check(client, application, api_key, subject["_id"], "posts:read")
    assert answer["allowed"] is False, answer


def test_a_deletion_retried_after_a_failure_still_stops_cached_allows(ctx, client, application, api_key, subject,
                                                                    monkeypatch):
    """``SelfService.delete_account``: mark_deleted, then emit user.deleted only "if
    transitioned". When the emit fails once (the event insert hits a store hiccup), the
    retry does not transition again; its docstring promises to finish "whatever
    revocation an interrupted earlier deletion left undone", and the deleted user must
    not stay allowed from every cache for up to an hour."""
    assert _get_check(client, application, api_key, subject["_id"], "posts:read")["allowed"] is True  # cached

    _fail_emit_once(monkeypatch, ctx, ctx.selfservice, "user.deleted")
    with pytest.raises(_StoreHiccup):
        ctx.selfservice.delete_account(application["_id"], subject["_id"])
    with pytest.raises(Exception):  # noqa: B017 -- the retry answers 404 USER_NOT_FOUND
        ctx.selfservice.delete_account(application["_id"], subject["_id"])
    assert ctx.store["users"].find_one({"_id": subject["_id"]})["status"] == "deleted"

    answer = _get_check(client, application, api_key, subject["_id"], "posts:read")
    assert answer["allowed"] is False, answer


def test_a_permission_revocation_retried_after_a_failure_still_stops_cached_allows(ctx, client, application, api_key,
                                                                                  stored_user, make_role, assign_role,
                                                                                  monkeypatch):
    """``RoleService.update`` stores the new permission set, then emits
    permission.revoked/role.updated naming the holders. When the emit fails once, the
    administrator's retry finds nothing to change (200); it must still name the holders,
    or their cached grants keep the revoked permission for the cache TTL."""
    user = stored_user(application)
    role = make_role(application, permissions=["posts:read", "posts:delete"])
    assign_role(application, user, role)
    assert _get_check(client, application, api_key, user["_id"], "posts:delete")["allowed"] is True  # cached

    _fail_emit_once(monkeypatch, ctx, ctx.roles, "permission.revoked")
    with pytest.raises(_StoreHiccup):
        ctx.roles.update(application["_id"], role["_id"], {"permissions": ["posts:read"]})
    ctx.roles.update(application["_id"], role["_id"], {"permissions": ["posts:read"]})  # the retry: 200
    assert ctx.store["roles"].find_one({"_id": role["_id"]})["permissions"] == ["posts:read"]

    answer = _get_check(client, application, api_key, user["_id"], "posts:delete")
    assert answer["allowed"] is False, answer


# --- the same pattern in ABAC -----------------------------------------------------------------------


def test_a_policy_deactivation_retried_after_a_failure_still_stops_cached_allows(ctx, abac, stored_user,
                                                                                monkeypatch):
    """``AbacService.update_policy`` stores the change, then emits policy.updated; a retry
    that finds the policy already inactive must still make the caches read it again."""
    application = abac.app
    user = stored_user(application)
    policy = abac.create(name="reports for all", effect="allow", permissions=["reports:read"])
    assert abac.check(user["_id"], "reports:read")["allowed"] is True  # the policy set is cached

    _fail_emit_once(monkeypatch, ctx, ctx.abac, "policy.updated")
    with pytest.raises(_StoreHiccup):
        ctx.abac.update_policy(application["_id"], policy["id"], {"is_active": False})
    ctx.abac.update_policy(application["_id"], policy["id"], {"is_active": False})  # the retry: 200

    answer = abac.check(user["_id"], "reports:read")
    assert answer["allowed"] is False, answer


def test_an_attribute_change_retried_after_a_failure_still_stops_cached_allows(ctx, abac, stored_user, monkeypatch):
    """``AbacService.set_attribute`` stores the value, then emits attribute.set; a retry
    that finds the value already stored must still drop the user's cached grants (their
    attributes are cached with them)."""
    application = abac.app
    user = stored_user(application)
    abac.create(name="team a reads reports", effect="allow", permissions=["reports:read"],
                condition={"op": "eq", "left": {"attr": "user.attributes.team"}, "right": {"value": "a"}})
    abac.set(user["_id"], "team", "a")
    assert abac.check(user["_id"], "reports:read")["allowed"] is True  # the grants are cached

    _fail_emit_once(monkeypatch, ctx, ctx.abac, "attribute.set")
    with pytest.raises(_StoreHiccup):
        ctx.abac.set_attribute(application["_id"], user["_id"], "team", "b")
    ctx.abac.set_attribute(application["_id"], user["_id"], "team", "b")  # the retry: 200

    answer = abac.check(user["_id"], "reports:read")
    assert answer["allowed"] is False, answer


# --- what the retry finishes, and what a decision service makes of it -------------------------------


def test_a_retried_suspension_revokes_the_sessions_the_failed_attempt_left(ctx, application, user_token, monkeypatch):
    """The sessions would otherwise come back to life with an unsuspend."""
    admin, user_id = ctx.users.admin, user_token.user["id"]
    _fail_once(monkeypatch, admin.sessions, "revoke_user")
    with pytest.raises(_StoreHiccup):
        admin.suspend(application["_id"], user_id)
    assert ctx.store["sessions"].find_one({"user_id": user_id})["revoked_at"] is None

    admin.suspend(application["_id"], user_id)
    assert ctx.store["sessions"].find_one({"user_id": user_id})["revoked_reason"] == "suspended"


def test_a_retried_deletion_sends_the_lost_user_deleted_once(ctx, application, subject, monkeypatch):
    """The tenant's webhooks hear of the deletion (the failed attempt's event was never
    written), once: a further repeat finds it in the log and sends nothing."""
    _fail_emit_once(monkeypatch, ctx, ctx.selfservice, "user.deleted")
    for _ in range(3):
        with pytest.raises(Exception):  # noqa: B017 -- the hiccup, then 404 USER_NOT_FOUND
            ctx.selfservice.delete_account(application["_id"], subject["_id"])
    [event] = events_of(ctx, "user.deleted")
    assert event["subject"] == {"user_id": subject["_id"]} and event["user_ids"] == [subject["_id"]]


def test_a_decision_service_drops_what_the_retries_name(ctx, application, subject, stored_user, make_role,
                                                        assign_role, abac, clock):
    """The repeats' events reach decision services as change frames that drop the same
    entries the control plane's cache drops (the change stream sends them, and the
    sidecar's cache applies them)."""
    app_id = application["_id"]
    holder = stored_user(application)
    role = make_role(application, permissions=["posts:read"])
    assign_role(application, holder, role)
    policy = abac.create(name="reports for all", effect="allow", permissions=["reports:read"])
    ctx.users.admin.suspend(app_id, subject["_id"])
    ctx.abac.update_policy(app_id, policy["id"], {"is_active": False})
    head = ctx.events.head()

    ctx.users.admin.suspend(app_id, subject["_id"])
    ctx.roles.update(app_id, role["_id"], {"permissions": ["posts:read"]})
    ctx.abac.update_policy(app_id, policy["id"], {"is_active": False})
    repeats = ctx.events.read_after(head)
    assert [event.type for event in repeats] == ["grants.invalidated", "grants.invalidated", "policies.invalidated"]

    cache = DecisionCache(ttl=3600, maxsize=100, timer=lambda: clock().timestamp())
    cache.resync(0)
    for user_id in (subject["_id"], holder["_id"]):
        assert cache.store_grants(app_id, user_id, GrantsEntry(Grants.unknown(user_id), 1))
    for event in repeats:
        data = json.loads(change_frame(event).decode().split("data: ", 1)[1])
        cache.apply(data["seq"], data["app_id"], data["type"], data["user_ids"], data.get("policy_ids"))
    assert cache.grants(app_id, subject["_id"]) is None and cache.grants(app_id, holder["_id"]) is None
    assert data["policy_ids"] == [policy["id"]]


# --- what a repeat costs ------------------------------------------------------------------------------


def test_a_repeat_sends_no_business_event_twice(ctx, application, subject, stored_user, make_role, assign_role,
                                                abac):
    """A double click: each write's business event once, the repeats' kinds internal
    (never delivered to webhooks), and nothing at all for a repeat that cannot have left a
    decision stale: a role update naming no permissions (a display change), or one of a
    role nobody holds."""
    app_id = application["_id"]
    role = make_role(application, permissions=["posts:read", "posts:delete"])
    assign_role(application, stored_user(application), role)
    unheld = make_role(application, permissions=["posts:read"])
    policy = abac.create(name="reports for all", effect="allow", permissions=["reports:read"])
    for _ in range(2):
        ctx.users.admin.suspend(app_id, subject["_id"])
        ctx.roles.update(app_id, role["_id"], {"permissions": ["posts:read"]})
        ctx.abac.update_policy(app_id, policy["id"], {"is_active": False})
        ctx.abac.set_attribute(app_id, subject["_id"], "team", "a")
    for kind in ("user.suspended", "permission.revoked", "role.updated", "policy.updated", "attribute.set"):
        assert len(events_of(ctx, kind)) == 1, kind
    repeats = events_of(ctx, "grants.invalidated") + events_of(ctx, "policies.invalidated")
    assert sorted(event["data"]["repeat_of"] for event in repeats) == [
        "attribute.set", "policy.updated", "role.updated", "user.suspended"]
    assert not {"grants.invalidated", "policies.invalidated"} & set(PUBLIC_EVENT_TYPES)

    head = ctx.events.head()
    ctx.roles.update(app_id, role["_id"], {"display_name": role["display_name"]})
    ctx.roles.update(app_id, unheld["_id"], {"permissions": ["posts:read"]})
    assert ctx.events.read_after(head) == []
