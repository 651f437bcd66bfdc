"""An application's deletion cut short (a crash, or a store failure, part-way through):
it is finished at the next start (``ApplicationService.finish_deletions``), and nothing
it owed is lost on the way: the organization's slot comes back, the decision caches are
told (``application.deleted``), and no webhook of the tenant goes out meanwhile
(tests/webhooks/test_delivery.py)."""
from __future__ import annotations

import pytest

from tests.conftest import events_of

APPS = "/api/dashboard/applications"


class Crash(Exception):
    """A process dying, or the store failing, part-way through a deletion's purge."""


def interrupt_the_purge(ctx, monkeypatch):
    """The next purge fails before it removes anything (the application stays marked
    ``deleting``); later purges (the start-up's ``finish_deletions``) run normally."""
    real, calls = ctx.applications.store.purge, []

    def purge(app_id):
        calls.append(app_id)
        if len(calls) == 1:
            raise Crash("killed mid-deletion")
        return real(app_id)

    monkeypatch.setattr(ctx.applications.store, "purge", purge)


@pytest.mark.parametrize("config_overrides", [{"max_applications_per_organization": 1}])
def test_an_interrupted_deletion_gives_the_organizations_slot_back(dashboard_account, make_dashboard_app, ctx,
                                                                   monkeypatch):
    """The slot was given back only after the purge returned, in the request; the
    start-up's finish purged without it, leaving the organization at its limit with no
    application, for good. The counter is now corrected from the applications there
    are when it looks full."""
    app = make_dashboard_app(dashboard_account, name="doomed")
    interrupt_the_purge(ctx, monkeypatch)
    with pytest.raises(Crash):
        ctx.dashboard.applications.delete_application(app["id"])  # what DELETE .../applications/{id} runs
    ctx.applications.finish_deletions()  # what the next start does

    assert ctx.store["applications"].count_documents({}) == 0
    again = dashboard_account.post(APPS, json={"name": "replacement"})
    assert again.status_code == 201, again.text
    assert dashboard_account.post(APPS, json={"name": "one more"}).status_code == 403  # the limit holds


def test_a_deletion_whose_event_was_lost_still_tells_the_caches(dashboard_account, make_dashboard_app, ctx,
                                                               monkeypatch):
    """Decision services and every worker's lookup caches are told of a deletion only by
    ``application.deleted``. When its write failed after the application was marked
    ``deleting``, the retry is 404 and the finish at start wrote nothing: the finish now
    writes it when the change log has none, and only then."""
    app = make_dashboard_app(dashboard_account, name="doomed")
    real_emit, failed = ctx.applications.events.emit, []

    def emit(app_id, type_, *args, **kwargs):
        if type_ == "application.deleted" and not failed:
            failed.append(app_id)
            raise Crash("the store hiccuped on the event's write")
        return real_emit(app_id, type_, *args, **kwargs)

    monkeypatch.setattr(ctx.applications.events, "emit", emit)
    assert dashboard_account.delete(f"{APPS}/{app['id']}").status_code == 500
    assert dashboard_account.delete(f"{APPS}/{app['id']}").status_code == 404  # invisible from the start
    ctx.applications.finish_deletions()
    ctx.applications.finish_deletions()  # a second start finds nothing left to do

    assert ctx.store["applications"].count_documents({"_id": app["id"]}) == 0
    assert [e["data"] for e in events_of(ctx, "application.deleted")] == [{"application_id": app["id"]}]


def test_the_finish_writes_no_second_event_for_a_deletion_that_wrote_one(dashboard_account, make_dashboard_app,
                                                                        ctx, monkeypatch):
    app = make_dashboard_app(dashboard_account, name="doomed")
    interrupt_the_purge(ctx, monkeypatch)
    with pytest.raises(Crash):
        ctx.applications.delete(app["id"])
    ctx.applications.finish_deletions()
    assert len(events_of(ctx, "application.deleted")) == 1
