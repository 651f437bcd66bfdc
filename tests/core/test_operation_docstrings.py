"""An operation's summary and description are the docstring of the function that serves
it (``controlplane.resource.Resource``): ``on_<method>``, or an ``Action``'s ``act``."""
from __future__ import annotations

import falcon
import pytest

from controlplane.auth import PUBLIC
from controlplane.openapi import Routes, build_document, list_op, op
from controlplane.resource import Action, Resource
from controlplane.users.resources import Refresh
from shared.validation import Schema, String

NAME = Schema({"name": String(required=True, max_len=20)})


class Things(Resource):
    access = {"GET": PUBLIC, "POST": PUBLIC}
    docs = {"GET": list_op({"type": "object"}, errors=[]), "POST": op(body=NAME, ok=201)}

    def on_get(self, req, resp):
        """List the things

        Oldest first,
        whole or a page."""

    def on_post(self, req, resp):
        """Create a thing, whose
        summary spans two lines

        First paragraph of the
        description.

        Second paragraph."""


class Create(Action):
    access = {"POST": PUBLIC}
    docs = {"POST": op(body=NAME, ok=201)}

    def act(self, req, values):
        """Create a thing with act"""


class Own(Action):
    access = {"GET": PUBLIC}
    docs = {"GET": op()}

    def on_get(self, req, resp):
        """Read a thing with its own responder"""

    def act(self, req, values):
        """Not this one: the responder the class writes serves the route."""


class Explicit(Resource):
    access = {"GET": PUBLIC}
    docs = {"GET": op("Said in op()", description="Kept as given.")}

    def on_get(self, req, resp):
        """Not this one: op() says it."""


def test_the_first_paragraph_is_the_summary_and_the_rest_the_description():
    assert (Things.docs["GET"]["summary"], Things.docs["GET"]["description"]) == (
        "List the things", "Oldest first, whole or a page.")
    assert Things.docs["POST"]["summary"] == "Create a thing, whose summary spans two lines"
    assert Things.docs["POST"]["description"] == "First paragraph of the description.\n\nSecond paragraph."


def test_an_action_is_documented_by_act_unless_it_writes_its_own_responder():
    assert (Create.docs["POST"]["summary"], Create.docs["POST"]["description"]) == ("Create a thing with act", None)
    assert Own.docs["GET"]["summary"] == "Read a thing with its own responder"


def test_text_given_to_op_is_kept():
    assert (Explicit.docs["GET"]["summary"], Explicit.docs["GET"]["description"]) == (
        "Said in op()", "Kept as given.")


def test_the_document_shows_the_docstrings():
    routes = Routes(falcon.App())
    routes.add("/things", Things(), "things")
    routes.add("/things/create", Create(), "things")
    paths = build_document(routes, title="t", version="1", server_url="http://x")["paths"]
    assert paths["/things"]["get"]["summary"] == "List the things"
    assert paths["/things"]["get"]["description"].startswith("Oldest first, whole or a page. ")  # then the gate
    assert paths["/things"]["post"]["description"].startswith("First paragraph of the description.\n\nSecond")
    assert paths["/things/create"]["post"]["summary"] == "Create a thing with act"


def test_the_areas_operations_are_documented_by_their_docstrings():
    assert Refresh.docs["POST"]["summary"] == "Exchange a refresh token for a new token pair"
    assert Refresh.docs["POST"]["description"].startswith("Rotates the refresh token. Presenting an already")


@pytest.mark.parametrize("serving", ["on_get", "act"])
def test_an_operation_with_neither_text_nor_docstring_is_refused_when_its_class_is_defined(serving):
    def undocumented(self, req, resp):
        pass

    with pytest.raises(TypeError, match=r"Undocumented.docs\['GET'\] has no summary: give the function that serves "
                                        r"it \(.*undocumented\) a docstring"):
        type("Undocumented", (Action if serving == "act" else Resource,),
             {"docs": {"GET": op()}, serving: undocumented})


def test_a_responder_with_no_docstring_is_refused_even_when_a_parent_s_has_one():
    class Parent(Resource):
        def on_get(self, req, resp):
            """Another route's text."""

    with pytest.raises(TypeError, match="has no summary"):
        class Child(Parent):
            docs = {"GET": op()}

            def on_get(self, req, resp):
                pass
