"""docs/architecture.md's "How to add an area", followed as written with a throwaway area.

The area, ``notes``, is written under ``tmp_path`` and found as ``controlplane.notes``
through ``controlplane.__path__``; the doc's edits of ``controlplane/services.py`` and
``controlplane/app.py`` are made to copies there, loaded in place of the real modules for
the test only.  Nothing is written into the work tree.  The app the edited ``create_app``
builds must then answer the area's routes, list them in its OpenAPI document, answer
their errors in the envelope, and the area must keep tests/core/test_layers.py's rules.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import textwrap
from pathlib import Path

import falcon.testing
import pytest

import controlplane
from controlplane import events as events_module
from shared.event_types import EVENT_TYPES
from tests.core import test_layers as layers

V1 = "/api/v1/applications/{applicationId}"

# Steps 1 to 4: the area's files, as an author following the doc writes them.
NOTES_AREA = {
    "__init__.py": "",
    "errors.py": '''
        """Errors of notes."""
        from shared.errors import NotFound


        class NoteNotFound(NotFound):
            """No note with this id in the application."""

            code, message = "RESOURCE_NOT_FOUND", "Note not found."
            detail_names = ("note_id",)
        ''',
    "store.py": '''
        """MongoDB access of notes; this area owns the ``notes`` collection."""
        from pymongo import ASCENDING, IndexModel

        from controlplane.collection import AppCollection

        INDEXES = {"notes": [IndexModel([("app_id", ASCENDING), ("created_at", ASCENDING)])]}


        class NoteStore(AppCollection):
            name, indexes = "notes", INDEXES
        ''',
    "service.py": '''
        """Notes: the rules, and the events they emit."""
        from __future__ import annotations

        from dataclasses import dataclass

        from controlplane.events import EventLog
        from controlplane.notes.errors import NoteNotFound
        from controlplane.notes.store import NoteStore
        from shared.ids import is_uuid, new_id
        from shared.timeutil import Clock, isoformat


        @dataclass(eq=False)
        class NoteService:
            store: NoteStore
            events: EventLog
            clock: Clock

            def list(self, app_id: str) -> list[dict]:
                return self.store.list(app_id)

            def get(self, app_id: str, note_id: str) -> dict:
                doc = self.store.get(app_id, note_id) if is_uuid(note_id) else None
                if doc is None:
                    raise NoteNotFound(note_id)
                return doc

            def create(self, app_id: str, values: dict) -> dict:
                doc = {"_id": new_id(), "app_id": app_id, "text": values["text"], "created_at": self.clock()}
                self.store.insert(doc)
                self.events.emit(app_id, "note.created", {"note_id": doc["_id"]}, subject={"note_id": doc["_id"]})
                return doc


        def serialize_note(doc: dict) -> dict:
            return {"id": doc["_id"], "text": doc["text"], "created_at": isoformat(doc["created_at"])}
        ''',
    "schemas.py": '''
        """Request validation and response shapes of notes."""
        from shared.validation import ID, TIME, Schema, String

        CREATE_NOTE = Schema({"text": String(required=True, min_len=1, max_len=1000)})
        NOTE = {"type": "object", "properties": {"id": ID, "text": {"type": "string"}, "created_at": TIME}}
        ''',
    "resources.py": '''
        """HTTP resources of notes: reads need notes:read, writes notes:manage."""
        from __future__ import annotations

        from controlplane.auth import permission
        from controlplane.notes import schemas
        from controlplane.notes.errors import NoteNotFound
        from controlplane.notes.service import NoteService, serialize_note
        from controlplane.openapi import op
        from controlplane.resource import Resource
        from shared.errors import PermissionMissing, ValidationFailed
        from shared.http import read_json, respond

        READ, MANAGE = permission("notes:read"), permission("notes:manage")


        class Notes(Resource):
            access = {"GET": READ, "POST": MANAGE}
            docs = {
                "GET": op(response={"type": "array", "items": schemas.NOTE}, errors=[PermissionMissing]),
                "POST": op(body=schemas.CREATE_NOTE, ok=201, response=schemas.NOTE,
                           errors=[ValidationFailed, PermissionMissing]),
            }

            def __init__(self, notes: NoteService):
                self.notes = notes

            def on_get(self, req, resp, applicationId):
                """List notes"""
                respond(resp, [serialize_note(doc) for doc in self.notes.list(applicationId)])

            def on_post(self, req, resp, applicationId):
                """Create a note

                Answers the new note, with its id."""
                values = schemas.CREATE_NOTE.validate(read_json(req))
                respond(resp, serialize_note(self.notes.create(applicationId, values)), status=201)


        class Note(Resource):
            access = {"GET": READ}
            docs = {"GET": op(response=schemas.NOTE, errors=[PermissionMissing, NoteNotFound])}

            def __init__(self, notes: NoteService):
                self.notes = notes

            def on_get(self, req, resp, applicationId, noteId):
                """Get a note"""
                respond(resp, serialize_note(self.notes.get(applicationId, noteId)))
        ''',
    "routes.py": '''
        """Routes of the notes area."""
        from controlplane.notes import resources

        V1 = "/api/v1/applications/{applicationId}"
        TAG = "notes"


        def add_routes(routes, services):
            routes.add(f"{V1}/notes", resources.Notes(services.notes), TAG)
            routes.add(f"{V1}/notes/{{noteId}}", resources.Note(services.notes), TAG)
        ''',
}


# What the fixture below does, as the doc's section says it (with "labels" for "notes").
DOC_STEPS = (
    "derives from `controlplane.collection.Collection`",
    '`name, indexes = "labels", INDEXES`',
    "`LabelService(store, events, clock)`",
    "the docstring of the function that serves it",
    "add a new kind there first",
    'routes.add(f"{V1}/labels", resources.Labels(services.labels), "labels")',
    "a `labels: LabelService` field on `Services`",
    "`labels = LabelService(LabelStore(store), events, clock)`",
    "`labels=labels`",
    "from controlplane.labels import routes as labels_routes",
    "add `labels_routes` to `AREAS`",
)


def how_to_add_an_area() -> str:
    """The section, its lines joined (a step may wrap anywhere)."""
    text = (layers.ROOT / "docs" / "architecture.md").read_text()
    return " ".join(text.split("### How to add an area\n", 1)[1].split("\n## ", 1)[0].split())


@pytest.mark.parametrize("step", DOC_STEPS)
def test_the_doc_gives_the_steps_followed_here(step):
    assert step in how_to_add_an_area()


def insert_after_line(source: str, line: int, text: str) -> str:
    lines = source.splitlines(keepends=True)
    return "".join(lines[:line] + [text] + lines[line:])


def node_named(tree: ast.Module, kind: type, name: str):
    for node in tree.body:
        if isinstance(node, kind) and name in {getattr(node, "name", None),
                                                *(getattr(t, "id", None) for t in getattr(node, "targets", ()))}:
            return node
    raise AssertionError(f"the doc's step names {name!r}, which is no longer there")


def edit_services(source: str) -> str:
    """Step 5: a ``notes: NoteService`` field on ``Services``, one line building it, and
    that line's service handed to ``Services(...)``."""
    tree = ast.parse(source)
    fields_end = node_named(tree, ast.ClassDef, "Services").end_lineno
    build = node_named(tree, ast.FunctionDef, "build_services")
    returned = build.body[-1]
    assert isinstance(returned, ast.Return) and returned.value.func.id == "Services"
    building = "    notes = NoteService(NoteStore(store), events, clock)\n"
    source = insert_after_line(source, returned.lineno - 1, building)
    assert "    return Services(\n" in source
    source = source.replace("    return Services(\n", "    return Services(\n        notes=notes,\n", 1)
    source = insert_after_line(source, fields_end, "    notes: NoteService\n")
    imports = "from controlplane.notes.service import NoteService\nfrom controlplane.notes.store import NoteStore\n"
    return source.replace("from __future__ import annotations\n", "from __future__ import annotations\n" + imports, 1)


def edit_app(source: str) -> str:
    """Step 6: ``notes_routes`` added to ``AREAS`` (and imported)."""
    areas = node_named(ast.parse(source), ast.Assign, "AREAS")
    lines = source.splitlines(keepends=True)
    last = lines[areas.end_lineno - 1]
    closing = areas.end_col_offset - 1
    assert last[closing] == ")"
    lines[areas.end_lineno - 1] = last[:closing] + ", notes_routes" + last[closing:]
    source = "".join(lines)
    return source.replace("from __future__ import annotations\n",
                          "from __future__ import annotations\nfrom controlplane.notes import routes as notes_routes\n",
                          1)


def load(name: str, path, monkeypatch):
    """Import ``path`` as module ``name`` for this test only."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def area(tmp_path, monkeypatch):
    """The ``notes`` area and the edited composition root and app, under ``tmp_path``:
    the edited ``controlplane.app`` module."""
    root = tmp_path / "controlplane"
    (root / "notes").mkdir(parents=True)
    for name, text in NOTES_AREA.items():
        (root / "notes" / name).write_text(textwrap.dedent(text).lstrip())
    real = layers.ROOT / "controlplane"
    (root / "services.py").write_text(edit_services((real / "services.py").read_text()))
    (root / "app.py").write_text(edit_app((real / "app.py").read_text()))
    # Step 2: the kind it emits, added to the catalogue the change log checks.
    monkeypatch.setattr(events_module, "EVENT_TYPES", {**EVENT_TYPES, "note.created": "a note is created"})
    monkeypatch.setattr(controlplane, "__path__", [*controlplane.__path__, str(root)])
    importlib.invalidate_caches()
    try:
        load("controlplane.services", root / "services.py", monkeypatch)
        yield load("controlplane.app", root / "app.py", monkeypatch)
    finally:
        for name in [name for name in sys.modules if name.startswith("controlplane.notes")]:
            del sys.modules[name]


@pytest.fixture
def notes_app(area, config, clock):
    return area.create_app(config, clock=clock, start_background=False)


@pytest.fixture
def tenant(notes_app):
    """(application id, a client, headers of a key with notes:read and notes:manage, of one
    with notes:read only)."""
    services = notes_app.services
    application = services.applications.create({"name": "Notes"}, organization_id=None, owner_account_id=None)

    def key(*permissions):
        _, secret = services.api_keys.create(application, {"name": "notes", "permissions": list(permissions)})
        return {"Authorization": f"Bearer {secret}"}

    client = falcon.testing.TestClient(notes_app)
    return application["_id"], client, key("notes:read", "notes:manage"), key("notes:read")


def test_the_new_area_answers_its_routes(notes_app, tenant):
    app_id, client, manager, _ = tenant
    path = V1.format(applicationId=app_id) + "/notes"
    created = client.simulate_post(path, json={"text": "remember the milk"}, headers=manager)
    assert created.status_code == 201, created.text
    note = created.json["data"]
    assert note["text"] == "remember the milk"
    assert int(created.headers["X-Iamgate-Revision"]) == notes_app.services.events.head()  # its event was emitted
    assert client.simulate_get(path, headers=manager).json["data"] == [note]
    assert client.simulate_get(f"{path}/{note['id']}", headers=manager).json["data"] == note
    # Step 1's indexes were created with everyone else's.
    assert any(list(index["key"]) == [("app_id", 1), ("created_at", 1)]
               for index in notes_app.services.store["notes"].index_information().values())


@pytest.mark.parametrize("method, suffix, body, who, status, code", [
    ("GET", "/notes/0d6c2f4e-3b7a-4e1d-8c5f-9a2b4d6e8f01", None, "manager", 404, "RESOURCE_NOT_FOUND"),
    ("POST", "/notes", {}, "manager", 400, "VALIDATION_INVALID_FORMAT"),
    ("POST", "/notes", {"text": "x"}, "reader", 403, "FORBIDDEN"),
])
def test_its_errors_come_in_the_envelope(notes_app, tenant, method, suffix, body, who, status, code):
    app_id, client, manager, reader = tenant
    answer = client.simulate_request(method, V1.format(applicationId=app_id) + suffix, json=body,
                                     headers=manager if who == "manager" else reader)
    assert answer.status_code == status
    error = answer.json["error"]
    assert set(error) == {"code", "message", "details", "request_id", "timestamp"}
    assert error["code"] == code
    assert notes_app.services.store["notes"].count_documents({}) == 0


def test_the_openapi_document_lists_it(tenant):
    _, client, _, _ = tenant
    document = client.simulate_get("/openapi.json").json
    assert {"name": "notes"} in document["tags"]
    listed, item = document["paths"][f"{V1}/notes"], document["paths"][f"{V1}/notes/{{noteId}}"]
    assert set(listed) == {"get", "post"} and set(item) == {"get"}
    assert listed["post"]["tags"] == ["notes"]
    assert (listed["post"]["summary"], item["get"]["summary"]) == ("Create a note", "Get a note")
    assert listed["post"]["description"].startswith("Answers the new note, with its id. ")  # then its gate
    assert "VALIDATION_INVALID_FORMAT" in listed["post"]["responses"]["400"]["description"]
    assert "RESOURCE_NOT_FOUND" in item["get"]["responses"]["404"]["description"]


def area_sources(area) -> dict[str, tuple[str, bool]]:
    """The repository's modules with the ``notes`` area's, as test_layers reads them."""
    notes = Path(area.__file__).parent / "notes"
    sources = layers.repository_sources()
    for name in NOTES_AREA:
        module = "controlplane.notes" if name == "__init__.py" else f"controlplane.notes.{name[:-3]}"
        sources[module] = ((notes / name).read_text(), name == "__init__.py")
    return sources


def test_the_area_keeps_the_layers(area):
    assert layers.violations(area_sources(area)) == layers.KNOWN_VIOLATIONS


def test_another_area_reading_its_store_or_collection_is_caught(area):
    sources = area_sources(area)
    planted = {
        "controlplane.roles.planted": ("from controlplane.notes.store import NoteStore", False),
        "controlplane.roles.planted_store": ("class Notes(Collection):\n    name, indexes = 'notes', {}", False),
    }
    assert layers.violations(sources | planted) - layers.KNOWN_VIOLATIONS == {
        (layers.AREA_STORE, "controlplane.roles.planted", "controlplane.notes.store"),
        (layers.OWNERS, "controlplane.notes.store + controlplane.roles.planted_store", "notes"),
    }
