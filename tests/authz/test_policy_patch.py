"""The control plane's cached policy set is patched, not read whole, after a policy event
(controlplane/authz/service.py): a check after an edit reads just the edited policy, and
answers as a check over a fresh read would. Counted store reads, through the real app."""
from __future__ import annotations

import pytest

from controlplane.events import Event
from shared.invalidation import MAX_PATCHED_POLICIES
from tests.abac.conftest import abac  # noqa: F401

OWNER = {"op": "eq", "left": {"attr": "resource.owner"}, "right": {"attr": "user.id"}}
NOBODY = {"op": "eq", "left": {"attr": "resource.owner"}, "right": {"value": "nobody"}}


@pytest.fixture
def reads(ctx, monkeypatch):
    """Every read of active policies: ("all", app_id) or ("ids", app_id, [ids])."""
    reader, seen = ctx.authz.policy_reader, []
    real_active, real_by_ids = reader.active, reader.active_by_ids
    monkeypatch.setattr(reader, "active", lambda app_id: seen.append(("all", app_id)) or real_active(app_id))
    monkeypatch.setattr(reader, "active_by_ids", lambda app_id, ids: seen.append(("ids", app_id, sorted(ids)))
                        or real_by_ids(app_id, ids))
    return seen


@pytest.fixture
def world(abac, stored_user):  # noqa: F811
    user = stored_user(abac.app)["_id"]
    policies = [abac.create(name=f"p{i}", permissions=["docs:read"], condition=NOBODY) for i in range(5)]
    return abac, user, policies


def allowed(abac, user) -> bool:  # noqa: F811
    return abac.check(user, "docs:read", resource={"owner": user})["allowed"]


def test_a_check_after_an_edit_reads_only_the_edited_policy(world, reads):
    abac, user, policies = world  # noqa: F811
    assert allowed(abac, user) is False
    assert reads == [("all", abac.app["_id"])]  # the first check reads the set whole
    reads.clear()
    assert allowed(abac, user) is False and reads == []  # then the cache answers

    response = abac.request("PUT", f"/abac/policies/{policies[2]['id']}", json={"condition": OWNER})
    assert response.status_code == 200, response.text
    assert allowed(abac, user) is True
    assert reads == [("ids", abac.app["_id"], [policies[2]["id"]])]
    reads.clear()
    assert abac.check(user, "docs:read", resource={"owner": user})["cached"] is True and reads == []


def test_patched_answers_follow_creates_deactivations_and_deletes(world, reads):
    abac, user, policies = world  # noqa: F811
    assert allowed(abac, user) is False
    deny = abac.create(name="deny", effect="deny", permissions=["docs:*"])
    allow = abac.create(name="allow", permissions=["docs:read"], condition=OWNER)
    assert allowed(abac, user) is False  # the new deny wins
    assert abac.request("PUT", f"/abac/policies/{deny['id']}", json={"is_active": False}).status_code == 200
    assert allowed(abac, user) is True
    assert abac.request("DELETE", f"/abac/policies/{allow['id']}").status_code == 204
    assert allowed(abac, user) is False
    assert abac.check(user, "docs:read")["policies_checked"] == len(policies)
    assert [read[0] for read in reads] == ["all", "ids", "ids", "ids"]  # the two creates in one read


def test_a_policy_event_naming_no_policy_reads_the_set_whole(ctx, world, reads, clock):
    abac, user, _ = world  # noqa: F811
    allowed(abac, user)
    ctx.authz.apply_event(Event(ctx.events.head() + 1, abac.app["_id"], "policy.updated", {}, {}, (), clock()))
    reads.clear()
    allowed(abac, user)
    assert reads == [("all", abac.app["_id"])]


def test_more_pending_policies_than_a_patch_takes_read_the_set_whole(ctx, world, reads, clock):
    abac, user, _ = world  # noqa: F811
    allowed(abac, user)
    head = ctx.events.head()
    for n in range(MAX_PATCHED_POLICIES + 1):
        ctx.authz.apply_event(Event(head + 1 + n, abac.app["_id"], "policy.updated", {"policy_id": f"p{n}"}, {}, (),
                                    clock()))
    reads.clear()
    allowed(abac, user)
    assert reads == [("all", abac.app["_id"])]


def test_an_event_during_a_patch_keeps_the_set_marked(ctx, world, reads, clock, monkeypatch):
    """No stale re-fill: a policy changed while a patch read others is read on the next
    check, not lost behind the patched set."""
    abac, user, policies = world  # noqa: F811
    allowed(abac, user)
    reader = ctx.authz.policy_reader
    assert abac.request("PUT", f"/abac/policies/{policies[0]['id']}", json={"name": "renamed"}).status_code == 200
    racing = reader.active_by_ids

    def edit_meanwhile(app_id, ids):
        found = racing(app_id, ids)
        monkeypatch.setattr(reader, "active_by_ids", reads_after)  # once
        response = abac.request("PUT", f"/abac/policies/{policies[1]['id']}", json={"condition": OWNER})
        assert response.status_code == 200
        return found

    reads_after = reader.active_by_ids
    monkeypatch.setattr(reader, "active_by_ids", edit_meanwhile)
    assert allowed(abac, user) is False  # answered at the patch's seq: before the racing edit
    assert allowed(abac, user) is True   # the racing edit is patched in now
    # the patch that lost the race was not stored: both policies are read again
    assert reads[-1] == ("ids", abac.app["_id"], sorted([policies[0]["id"], policies[1]["id"]]))


def test_min_revision_is_answered_from_a_patch_once_every_event_up_to_it_applied(ctx, world, reads):
    abac, user, policies = world  # noqa: F811
    allowed(abac, user)
    ctx.tailer.begin()
    ctx.tailer.last_seq = ctx.events.head()  # the tailer has applied everything so far
    response = abac.request("PUT", f"/abac/policies/{policies[3]['id']}", json={"condition": OWNER})
    revision = int(response.headers["X-Iamgate-Revision"])
    reads.clear()
    assert abac.check(user, "docs:read", resource={"owner": user}, min_revision=revision)["allowed"] is True
    assert reads == [("ids", abac.app["_id"], [policies[3]["id"]])]


def test_min_revision_past_what_was_applied_reads_the_set_whole(ctx, world, reads):
    """Another replica's write may not have reached this process yet: a patch cannot show it."""
    abac, user, policies = world  # noqa: F811
    allowed(abac, user)
    ctx.tailer.begin()
    ctx.tailer.last_seq = 0  # this process has applied nothing it did not write itself
    response = abac.request("PUT", f"/abac/policies/{policies[3]['id']}", json={"condition": OWNER})
    revision = int(response.headers["X-Iamgate-Revision"])
    ctx.store.next_seq("events")  # a write elsewhere, its event not yet applied here
    reads.clear()
    assert abac.check(user, "docs:read", resource={"owner": user}, min_revision=revision + 1)["allowed"] is True
    assert reads == [("all", abac.app["_id"])]


def test_a_whole_read_yields_between_batches(ctx, abac, monkeypatch):  # noqa: F811
    import controlplane.abac.store as policy_store

    for i in range(250):
        ctx.store["abac_policies"].insert_one({
            "_id": f"p{i:03d}", "app_id": abac.app["_id"], "name": f"p{i}", "effect": "allow",
            "permissions": ["docs:read"], "condition": None, "is_active": True, "created_at": i, "updated_at": i})
    pauses = []
    monkeypatch.setattr(policy_store, "yield_to_others", lambda: pauses.append(1))
    assert len(ctx.authz.policy_reader.active(abac.app["_id"])) == 250
    assert len(pauses) == 250 // policy_store.ACTIVE_BATCH
