"""The hash chain: each application's records sealed in seq order, linked by hash, and
``python -m controlplane audit verify`` naming the first record that was tampered with."""
from __future__ import annotations

from datetime import timedelta
from itertools import pairwise

import pytest

from controlplane import __main__ as cli
from controlplane.audit import context as audit
from controlplane.audit.chain import GENESIS, Sealer, link_hash
from shared.ids import new_id


@pytest.fixture
def sealer(ctx, clock):
    return Sealer(ctx.audit.store, clock, settle=5)


def record(ctx, app_id, n=1, **data):
    return [ctx.audit.record("user.login", result=audit.failure("invalid_credentials"),
                             target=audit.actor("user", f"u-{i}", f"u{i}@example.com"),
                             data={"i": i, **data}, application_id=app_id) for i in range(n)]


def chain(ctx, app_id):
    return list(ctx.store["events"].find({"chain": app_id}).sort("link", 1))


def run_verify(ctx, monkeypatch, capsys, *args) -> tuple[int, str]:
    monkeypatch.setenv("IAMGATE_MONGODB_URI", "mongodb://db.example:27017/iamgate")
    monkeypatch.setenv("IAMGATE_SECRET_KEY", ctx.config.secret_key)
    monkeypatch.setattr("controlplane.store.Store", lambda uri: ctx.store)
    status = cli.main(["audit", "verify", *args])
    return status, capsys.readouterr().out


def test_records_are_chained_per_application_in_seq_order(ctx, clock, sealer, make_application):
    a, b = make_application("A"), make_application("B")
    record(ctx, a["_id"], 3)
    record(ctx, b["_id"], 2)
    record(ctx, a["_id"], 2)
    clock.advance(6)
    assert sealer.seal_once() >= 7
    for app in (a, b):
        links = chain(ctx, app["_id"])
        assert [d["link"] for d in links] == list(range(1, len(links) + 1))
        assert [d["seq"] for d in links] == sorted(d["seq"] for d in links)
        assert links[0]["prev_hash"] == GENESIS
        assert all(later["prev_hash"] == earlier["hash"] for earlier, later in pairwise(links))
    assert ctx.audit.verify(application_id=a["_id"]).intact


def test_a_record_younger_than_the_settle_time_waits_with_everything_after_it(ctx, clock, sealer, application):
    record(ctx, application["_id"], 2)
    clock.advance(6)
    record(ctx, application["_id"], 1)
    sealed = sealer.seal_once()
    assert sealed >= 2 and ctx.store["events"].count_documents({"app_id": application["_id"], "sealed": False}) == 1
    clock.advance(6)
    assert sealer.seal_once() == 1


def test_audit_verify_names_the_record_that_was_edited(ctx, clock, sealer, application, monkeypatch, capsys):
    record(ctx, application["_id"], 5)
    clock.advance(6)
    sealer.seal_once()
    status, out = run_verify(ctx, monkeypatch, capsys, "--application", application["_id"])
    assert status == 0 and "chain intact" in out
    victim = chain(ctx, application["_id"])[3]
    ctx.store["events"].update_one({"_id": victim["_id"]}, {"$set": {"actor.id": "someone-else"}})
    status, out = run_verify(ctx, monkeypatch, capsys, "--application", application["_id"])
    assert status == 1
    assert f"chain broken at record {victim['_id']}" in out and "edited" in out


def test_audit_verify_names_the_record_after_one_that_was_removed(ctx, clock, sealer, application, monkeypatch,
                                                                    capsys):
    record(ctx, application["_id"], 4)
    clock.advance(6)
    sealer.seal_once()
    links = chain(ctx, application["_id"])
    ctx.store["events"].delete_one({"_id": links[1]["_id"]})
    status, out = run_verify(ctx, monkeypatch, capsys, "--application", application["_id"])
    assert status == 1 and f"chain broken at record {links[2]['_id']}" in out and "removed" in out


def test_a_rehashed_record_still_breaks_at_the_next_link(ctx, clock, sealer, application):
    """Re-computing the edited record's own hash does not help: the next record holds the old one."""
    record(ctx, application["_id"], 3)
    clock.advance(6)
    sealer.seal_once()
    links = chain(ctx, application["_id"])
    edited = {**links[1], "ip": "203.0.113.99"}
    ctx.store["events"].update_one({"_id": edited["_id"]}, {"$set": {
        "ip": edited["ip"], "hash": link_hash(edited["prev_hash"], edited)}})
    verdict = ctx.audit.verify(application_id=application["_id"])
    assert verdict.break_at["id"] == links[2]["_id"] and "prev_hash" in verdict.break_at["reason"]


def test_forgetting_a_user_does_not_break_the_chain(ctx, clock, sealer, application):
    record(ctx, application["_id"], 3)
    ctx.events.emit(application["_id"], "user.created", {"user_id": "u-1", "email": "u1@example.com", "name": "U"},
                    subject={"user_id": "u-1"})
    clock.advance(6)
    sealer.seal_once()
    ctx.audit.forget_user(application["_id"], "u-1")
    assert ctx.store["events"].find_one({"target.id": "u-1"})["target"]["display"] == "u-1"
    assert ctx.store["events"].find_one({"action": "user.created"})["data"]["email"] == "u-1"
    assert ctx.audit.verify(application_id=application["_id"]).intact


def test_a_role_name_in_history_is_covered(ctx, clock, sealer, application):
    """Only a user's own email and name are outside the hash: a role's name is not."""
    ctx.events.emit(application["_id"], "role.created", {"role_id": "r-1", "name": "viewer"},
                    subject={"role_id": "r-1"})
    clock.advance(6)
    sealer.seal_once()
    ctx.store["events"].update_one({"action": "role.created"}, {"$set": {"data.name": "admin"}})
    assert not ctx.audit.verify(application_id=application["_id"]).intact


def test_one_sealer_at_a_time(ctx, clock, sealer, application):
    record(ctx, application["_id"], 2)
    clock.advance(6)
    other = Sealer(ctx.audit.store, clock, settle=5)
    assert sealer.seal_once() >= 2
    record(ctx, application["_id"], 1)
    clock.advance(6)
    assert other.seal_once() == 0  # the first sealer's lease still runs
    clock.advance(31)
    assert other.seal_once() == 1
    assert ctx.audit.verify(application_id=application["_id"]).intact


def test_a_record_written_late_is_chained_after_the_others_and_reported(ctx, clock, sealer, application):
    """A pass reads only the records after the last one it sealed; the late record, below
    it, is sealed by the pass from the start of the log that runs every minute."""
    seqs = record(ctx, application["_id"], 2)
    late = ctx.store["events"].find_one({"seq": seqs[0]})
    ctx.store["events"].delete_one({"_id": late["_id"]})  # its insert has not landed yet
    clock.advance(6)
    sealer.seal_once()
    ctx.store["events"].insert_one(late)
    clock.advance(6)
    assert sealer.seal_once() == 0
    clock.advance(60)
    assert sealer.seal_once() == 1
    verdict = ctx.audit.verify(application_id=application["_id"])
    assert verdict.intact and verdict.late == [late["_id"]]


def floors_asked(ctx, monkeypatch) -> list:
    """The ``after`` (the sealer's floor; None: from the start of the log) of each work
    list the sealer asks the store for, in order."""
    store, asked = ctx.audit.store, []
    settled = store.settled
    monkeypatch.setattr(store, "settled", lambda cutoff, limit, after=None: asked.append(after) or
                        settled(cutoff, limit, after))
    return asked


def test_a_pass_reads_only_the_records_after_the_last_it_sealed(ctx, clock, sealer, application, monkeypatch):
    """The unsealed set is an index on MongoDB; on memory:// a read from the start of the
    log was a scan of every event, every second."""
    asked = floors_asked(ctx, monkeypatch)
    first = record(ctx, application["_id"], 2)
    clock.advance(6)
    assert sealer.seal_once() >= 2
    second = record(ctx, application["_id"], 2)
    clock.advance(6)
    assert sealer.seal_once() == 2
    clock.advance(6)
    assert sealer.seal_once() == 0
    assert asked == [None, first[-1], second[-1]]
    clock.advance(31)  # the lease lapsed: another sealer may have sealed since, read from the start
    assert sealer.seal_once() == 0
    assert asked[-1] is None
    assert ctx.audit.verify(application_id=application["_id"]).intact


def test_the_floor_outlives_the_pass_from_the_start(ctx, clock, sealer, application, monkeypatch):
    """The minute's pass from the start of the log finds nothing to seal, or only records
    written late: the passes after it still read only the records after the floor (a
    floor dropped for good made every pass after the first minute a scan of the log)."""
    asked = floors_asked(ctx, monkeypatch)
    sealed = record(ctx, application["_id"], 3)
    clock.advance(6)
    assert sealer.seal_once() >= 3
    for _ in range(4):  # the lease (30 s) runs on; the pass from the start is due at 66 s
        clock.advance(25)
        assert sealer.seal_once() == 0
    assert asked == [None, sealed[-1], sealed[-1], None, sealed[-1]]
    late = ctx.store["events"].find_one({"seq": sealed[0]})
    ctx.store["events"].update_one({"_id": late["_id"]}, {"$set": {"sealed": False}})  # as if it landed late
    clock.advance(25)
    assert sealer.seal_once() == 0  # below the floor
    clock.advance(25)
    assert sealer.seal_once() == 1  # the next pass from the start
    clock.advance(1)
    assert sealer.seal_once() == 0
    assert asked[-3:] == [sealed[-1], None, sealed[-1]]


def test_dashboard_actions_chain_per_organization(ctx, clock, sealer, monkeypatch, capsys):
    for _ in range(2):
        ctx.audit.record("organization.member_added", result=audit.success(),
                         target=audit.actor("dashboard_account", "acc"), organization_id="org-1")
    clock.advance(6)
    sealer.seal_once()
    status, out = run_verify(ctx, monkeypatch, capsys, "--organization", "org-1")
    assert status == 0 and "2 sealed records checked" in out


def test_audit_verify_refuses_the_embedded_store(monkeypatch, capsys):
    monkeypatch.setenv("IAMGATE_MONGODB_URI", "memory://")
    assert cli.main(["audit", "verify", "--application", "x"]) == 2
    assert "memory://" in capsys.readouterr().err


def test_a_sealer_back_after_another_held_the_lease_reads_the_heads_again(ctx, clock, sealer, application):
    """The heads a sealer carries between passes are its own only while its lease runs on
    without a gap: after another sealer extended the chain, the first one's would break it."""
    record(ctx, application["_id"], 2)
    clock.advance(6)
    assert sealer.seal_once() >= 2
    clock.advance(31)  # the first sealer's lease lapses
    other = Sealer(ctx.audit.store, clock, settle=5)
    record(ctx, application["_id"], 2)
    clock.advance(6)
    assert other.seal_once() == 2
    clock.advance(31)
    record(ctx, application["_id"], 1)
    clock.advance(6)
    assert sealer.seal_once() == 1
    links = chain(ctx, application["_id"])
    assert [d["link"] for d in links] == list(range(1, len(links) + 1))
    assert ctx.audit.verify(application_id=application["_id"]).intact


def test_a_failed_pass_forgets_the_heads(ctx, clock, sealer, application, monkeypatch):
    """A seal that raised may have landed: the next pass reads the head from the records."""
    record(ctx, application["_id"], 1)
    clock.advance(6)
    assert sealer.seal_once() >= 1
    record(ctx, application["_id"], 2)
    clock.advance(6)
    store, seal = ctx.audit.store, ctx.audit.store.seal

    def seal_then_fail(record_id, **fields):
        seal(record_id, **fields)
        raise ConnectionError("the answer to the seal was lost")

    monkeypatch.setattr(store, "seal", seal_then_fail)
    with pytest.raises(ConnectionError):
        sealer.seal_once()
    monkeypatch.setattr(store, "seal", seal)
    assert sealer.seal_once() == 1
    assert ctx.audit.verify(application_id=application["_id"]).intact


def test_a_sealer_holding_its_lease_reads_each_head_once(ctx, clock, sealer, application, monkeypatch):
    store, reads = ctx.audit.store, []
    head = store.chain_head
    monkeypatch.setattr(store, "chain_head", lambda chain: reads.append(chain) or head(chain))
    for _ in range(3):
        record(ctx, application["_id"], 2)
        clock.advance(6)
        assert sealer.seal_once() >= 2
    assert reads == [application["_id"]]
    assert ctx.audit.verify(application_id=application["_id"]).intact


def test_only_settled_records_are_read(ctx, clock, sealer, application, monkeypatch):
    """The work list stops at the first young record: nothing after it is read to be passed over."""
    record(ctx, application["_id"], 3)
    clock.advance(6)
    young = record(ctx, application["_id"], 4)
    store, read = ctx.audit.store, []
    settled = store.settled
    monkeypatch.setattr(store, "settled", lambda cutoff, limit, after=None: read.extend(settled(cutoff, limit, after))
                        or read)
    assert sealer.seal_once() >= 3
    assert not {d["seq"] for d in read} & set(young)


def slipped_in(ctx, at, *, app_id=None, organization_id=None, **marks) -> dict:
    """A record written straight into the store by someone with write access to the
    database (or by the change log before the audit log existed), in the shape the
    EventLog writes, dated ``at``, with the log's next seq, but not part of any chain;
    ``marks``: its ``sealed`` (and any chain fields) as the intruder sets them."""
    doc = {
        "_id": new_id(), "seq": ctx.store.next_seq("events"), "app_id": app_id, "type": None, "subject": {},
        "data": {"forged": True}, "user_ids": [], "at": at, "action": "role.deleted", "result": {"status": "success"},
        "actor": {"type": "api_key", "id": "key-of-someone-innocent", "display": None},
        "target": {"type": "role", "id": "r-1", "display": None}, "organization_id": organization_id,
        "request_id": "req-forged", "ip": "198.51.100.7", "user_agent": "curl", **marks,
    }
    ctx.store["events"].insert_one(doc)
    return doc


@pytest.mark.parametrize("marks", [
    pytest.param({"sealed": True}, id="marked-sealed-without-a-link"),
    pytest.param({}, id="no-sealed-field-like-a-pre-audit-record"),
    pytest.param({"sealed": True, "chain": "another-application", "link": 1, "prev_hash": GENESIS},
                 id="claiming-another-chain"),
])
def test_a_record_slipped_in_beside_the_chain_is_reported_by_verify(ctx, clock, sealer, auditor, client, monkeypatch,
                                                                      capsys, marks):
    """docs/audit.md, "Integrity": inserting a record leaves a break that ``audit verify``
    finds.  A record of the application dated now that is not in its chain and not
    waiting to be sealed (marked sealed, or without the field, as if older than the audit
    log) is listed by the API as history; verify names it, and the CLI exits 1."""
    app, headers = auditor
    record(ctx, app["_id"], 3)
    clock.advance(6)
    sealer.seal_once()
    assert ctx.audit.verify(application_id=app["_id"]).intact

    forged = slipped_in(ctx, clock(), app_id=app["_id"], **marks)
    clock.advance(6)
    sealer.seal_once()  # the sealer runs on: it never chains the forged record

    listed = client.simulate_get(f"/api/v1/applications/{app['_id']}/audit-events", headers=headers).json["data"]
    assert forged["_id"] in [r["id"] for r in listed]  # the API shows it as history
    verdict = ctx.audit.verify(application_id=app["_id"])
    assert (verdict.intact, verdict.outside, verdict.break_at["id"]) == (False, 1, forged["_id"])
    status, out = run_verify(ctx, monkeypatch, capsys, "--application", app["_id"])
    assert status == 1 and "1 outside the chain" in out and f"chain broken at record {forged['_id']}" in out


def test_records_older_than_the_chain_and_records_waiting_to_be_sealed_are_not_reported(ctx, clock, sealer,
                                                                                        application):
    """Only records outside the chain that nothing explains count: those without the
    ``sealed`` field written before the chain's first record (the log before the audit
    log existed) and those the sealer has not reached yet (``sealed: false``) pass, and a
    record without the field dated after the chain began is the one verify reports."""
    app_id = application["_id"]
    for i in range(3):  # the change log before the audit log existed: no sealed field
        slipped_in(ctx, clock() - timedelta(days=3, seconds=i), app_id=app_id)
    record(ctx, app_id, 2)
    clock.advance(6)
    sealer.seal_once()
    record(ctx, app_id, 2)  # not settled yet: waiting for the sealer
    verdict = ctx.audit.verify(application_id=app_id)
    assert (verdict.intact, verdict.unsealed, verdict.outside) == (True, 2, 0)

    forged = slipped_in(ctx, clock(), app_id=app_id)
    verdict = ctx.audit.verify(application_id=app_id)
    assert (verdict.outside, verdict.unsealed, verdict.break_at["id"]) == (1, 2, forged["_id"])
    assert "written after the chain began" in verdict.break_at["reason"]


def test_a_record_slipped_into_an_organizations_dashboard_actions_is_reported_there_only(ctx, clock, sealer):
    """The organization's chain (dashboard actions outside any application) is checked
    the same way, and a record slipped into another organization's is that one's."""
    for org in ("org-1", "org-2"):
        ctx.audit.record("organization.member_added", result=audit.success(),
                         target=audit.actor("dashboard_account", "acc"), organization_id=org)
    clock.advance(6)
    sealer.seal_once()
    forged = slipped_in(ctx, clock(), organization_id="org-2", sealed=True)
    assert ctx.audit.verify(organization_id="org-1").intact
    verdict = ctx.audit.verify(organization_id="org-2")
    assert (verdict.outside, verdict.break_at["id"]) == (1, forged["_id"])
    assert "marked sealed but not in this chain" in verdict.break_at["reason"]
