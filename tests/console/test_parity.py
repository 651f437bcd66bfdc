"""Nothing the console does is missing from the public API (controlplane/console/parity.py),
and a console write changes what the API write changes, with the same change-log events."""
from __future__ import annotations

import re

from controlplane.console.parity import CONSOLE_ACTIONS


def served(document: dict) -> dict[str, tuple[str, str]]:
    return {operation["operationId"]: (method.upper(), path)
            for path, item in document["paths"].items() for method, operation in item.items()}


def test_every_console_action_names_an_api_operation_of_the_document(client):
    operations = served(client.simulate_get("/openapi.json").json)
    missing = {action: operation_id for action, (_console, operation_id) in CONSOLE_ACTIONS.items()
               if operation_id not in operations or operations[operation_id][1].startswith("/console")}
    assert missing == {}


def test_every_console_action_is_a_documented_console_route(client):
    document = client.simulate_get("/openapi.json").json
    for action, (console, _operation_id) in CONSOLE_ACTIONS.items():
        method, path = console.split(" ")[:2]
        assert method.lower() in document["paths"].get(path, {}), action
        assert document["paths"][path][method.lower()]["tags"] == ["console"], action


def test_console_pages_are_documented_as_html_with_the_console_tag(client):
    document = client.simulate_get("/openapi.json").json
    pages = {path: item for path, item in document["paths"].items() if path.startswith("/console")}
    assert pages
    for path, item in pages.items():
        for method, operation in item.items():
            if path == "/console/assets/{filename}" or path.endswith("/audit/export"):
                continue  # files, not pages (the export is NDJSON)
            assert "text/html" in operation["responses"]["200"]["content"], (method, path)
            if method == "post":
                assert "CSRF_TOKEN_INVALID" in operation["responses"]["403"]["description"], path


def test_operation_ids_are_unique_and_read_as_method_and_path(client):
    document = client.simulate_get("/openapi.json").json
    ids = [op["operationId"] for item in document["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids))
    members = document["paths"]["/api/dashboard/organizations/{organizationId}/members"]["post"]
    assert members["operationId"] == "postApiDashboardOrganizationsByOrganizationIdMembers"
    assert all(re.fullmatch(r"(get|post|put|patch|delete)[A-Za-z0-9]+", op_id) for op_id in ids)


def change_log_after(ctx, write) -> list[dict]:
    before = ctx.store["events"].count_documents({})
    write()
    return list(ctx.store["events"].find().sort("seq", 1))[before:]


def shape(event: dict, app_id: str) -> dict:
    """An event without what differs between two writes: its sequence, time and ids, the
    request that made it (id, address, client) and the audit chain's seal."""
    differs = ("_id", "seq", "at", "created_at", "ts", "request_id", "ip", "user_agent", "sealed", "prev_hash", "hash")
    text = repr({key: value for key, value in event.items() if key not in differs})
    return {"type": event["type"], "body": text.replace(app_id, "<app>")}


def test_a_console_delete_leaves_the_change_log_event_an_api_delete_does(console, dashboard_account, ctx,
                                                                        make_dashboard_app):
    by_api, by_console = make_dashboard_app(dashboard_account, name="One"), make_dashboard_app(dashboard_account,
                                                                                                name="Two")
    api_events = change_log_after(ctx, lambda: dashboard_account.delete(f"/api/dashboard/applications/{by_api['id']}"))
    visitor = console()
    visitor.sign_in(dashboard_account)
    console_events = change_log_after(ctx, lambda: visitor.post(f"/console/applications/{by_console['id']}/delete",
                                                                {"confirm_name": "Two"}))
    assert [event["type"] for event in console_events] == ["application.deleted"]
    assert [shape(e, by_console["id"]) for e in console_events] == [shape(e, by_api["id"]) for e in api_events]
