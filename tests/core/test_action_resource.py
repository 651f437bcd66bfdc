"""``controlplane.resource.Action``: a route of one method whose body, status and caching
come from its declaration, driven through the real app (middleware included)."""
from __future__ import annotations

import pytest

from controlplane.auth import PUBLIC
from controlplane.openapi import op
from controlplane.resource import Action
from shared.validation import Schema, String
from tests.conftest import assert_error

NAME = Schema({"name": String(required=True, max_len=20)})
calls: list = []


class Create(Action):
    access = {"POST": PUBLIC}
    no_store = True
    docs = {"POST": op("Create a thing", body=NAME, ok=201)}

    def act(self, req, values, thingId):
        calls.append((thingId, values))
        return {"id": thingId, **values}


class Remove(Action):
    access = {"DELETE": PUBLIC}
    docs = {"DELETE": op("Remove a thing", ok=204)}

    def act(self, req, values, thingId):
        calls.append((thingId, values))
        return {"ignored": True}


class Own(Action):
    """A route whose answer fits no ``act`` keeps the responder it writes."""

    access = {"GET": PUBLIC}
    docs = {"GET": op("Read a thing")}

    def on_get(self, req, resp, thingId):
        resp.media = {"own": thingId}


@pytest.fixture
def probe(app):
    calls.clear()
    app.add_route("/test-action/{thingId}", Create())
    app.add_route("/test-action/{thingId}/remove", Remove())
    app.add_route("/test-action/{thingId}/own", Own())


def test_the_answer_has_the_documented_status_and_no_store(client, probe):
    response = client.simulate_post("/test-action/t1", json={"name": " box "})
    assert response.status_code == 201
    assert response.json == {"data": {"id": "t1", "name": "box"}}
    assert response.headers["Cache-Control"] == "no-store"
    assert calls == [("t1", {"name": "box"})]


def test_the_body_is_validated_by_the_documented_schema_before_act(client, probe):
    assert_error(client.simulate_post("/test-action/t1", json={}), 400, "VALIDATION_INVALID_FORMAT")
    assert calls == []


def test_a_204_answers_no_body_and_a_method_without_a_body_schema_gets_none(client, probe):
    response = client.simulate_delete("/test-action/t2/remove")
    assert response.status_code == 204
    assert response.text == ""
    assert "Cache-Control" not in response.headers
    assert calls == [("t2", None)]


def test_only_the_documented_method_is_routed(client, probe):
    assert not hasattr(Create, "on_get") and not hasattr(Remove, "on_post")
    assert client.simulate_get("/test-action/t1").status_code == 405


def test_a_responder_written_by_the_class_is_kept(client, probe):
    assert client.simulate_get("/test-action/t3/own").json == {"own": "t3"}
