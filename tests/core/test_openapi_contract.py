"""The OpenAPI documents are the contract: both validate as OpenAPI 3.1, every
operation documents the statuses its shape implies, and the schemas say what the
server enforces."""
from __future__ import annotations

import falcon
import falcon.testing
import pytest
from openapi_spec_validator import validate

from controlplane.openapi import list_op
from decision.openapi import OpenApiDocument, build_document
from shared import checks
from shared.errors import ValidationFailed


@pytest.fixture
def document(client):
    return client.simulate_get("/openapi.json").json


def operations(document):
    for path, item in document["paths"].items():
        for method, operation in item.items():
            yield path, method, operation


def test_the_control_plane_document_validates(document):
    validate(document)


def test_the_decision_document_validates_and_is_served():
    app = falcon.App()
    app.add_route("/openapi.json", OpenApiDocument())
    served = falcon.testing.TestClient(app).simulate_get("/openapi.json")
    assert served.status_code == 200
    assert served.json == build_document()
    validate(served.json)


def test_both_documents_share_the_check_schemas(document):
    decision = build_document()["paths"]
    for path in ("/api/v1/applications/{applicationId}/authz/check",
                 "/api/v1/applications/{applicationId}/authz/check-bulk"):
        for method, operation in decision[path].items():
            ours = document["paths"][path][method]
            assert operation.get("requestBody") == ours.get("requestBody"), (path, method)
            assert operation["responses"]["200"] == ours["responses"]["200"], (path, method)
            assert ({p["name"]: p["required"] for p in operation["parameters"]}
                    == {p["name"]: p["required"] for p in ours["parameters"]})
    user_id = next(p for p in decision["/api/v1/applications/{applicationId}/authz/check"]["get"]["parameters"]
                   if p["name"] == "user_id")
    assert user_id["required"] is True


def test_every_operation_documents_its_implied_statuses(document):
    for path, method, operation in operations(document):
        responses = operation["responses"]
        assert responses["500"] == {"$ref": "#/components/responses/InternalError"}, (method, path)
        if method in ("post", "put", "patch") and path.startswith("/oidc/"):
            # Another media type is RFC 6749's malformed request there, not the envelope's 415.
            assert "415" not in responses and "invalid_request" in responses["400"]["description"], (method, path)
        elif method in ("post", "put", "patch") and "415" not in responses:
            media = set(operation.get("requestBody", {}).get("content", {}))
            assert media and not operation["requestBody"]["required"], (method, path)  # accepts no body too
        if "requestBody" in operation and "description" not in operation["requestBody"]:  # a declared schema
            assert {"400", "413"} <= set(responses), (method, path)
        if operation["security"]:
            assert "401" in responses, (method, path)
        if operation["security"] == [{"bearer": []}] and "internal" not in path:
            assert "429" in responses, (method, path)
        if "{applicationId}" in path and not path.startswith("/api/dashboard/"):
            assert "APPLICATION_NOT_FOUND" in responses["404"]["description"] or "NOT_FOUND" in \
                responses["404"]["description"], (method, path)


def test_every_paged_operation_documents_the_400_of_its_page_parameters(document):
    for path, method, operation in operations(document):
        query = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
        if {"page", "per_page"} <= query:
            assert "VALIDATION_INVALID_FORMAT" in operation["responses"]["400"]["description"].split(), (method, path)


def test_a_list_names_the_error_of_its_page_parameters_without_being_told():
    assert list_op({"type": "object"}, errors=[])["errors"] == (ValidationFailed,)


def test_rate_limited_answers_document_their_headers(document):
    limited = [op["responses"]["429"] for _, _, op in operations(document) if "429" in op["responses"]]
    assert limited
    for response in limited:
        assert set(response["headers"]) == {"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
                                            "Retry-After"}


def test_bodiless_cookie_posts_document_their_content_type_and_415(document):
    for path in ("/api/dashboard/logout",):
        operation = document["paths"][path]["post"]
        assert "application/json" in operation["requestBody"]["content"]
        assert "415" in operation["responses"]


def test_required_strings_refuse_empty_in_schema_and_server(document, dashboard_account):
    register = document["paths"]["/api/dashboard/register"]["post"]["requestBody"]["content"]["application/json"]
    assert register["schema"]["properties"]["name"]["minLength"] == 1
    response = dashboard_account.client.simulate_post(
        "/api/dashboard/register", json={"email": "x@example.com", "password": "Analytical-Engine-1843", "name": ""})
    assert response.status_code == 400


def test_update_schemas_require_nothing_but_refuse_empty(document):
    app_update = document["paths"]["/api/dashboard/applications/{applicationId}"]["put"]
    schema = app_update["requestBody"]["content"]["application/json"]["schema"]
    assert "required" not in schema
    assert schema["properties"]["name"]["minLength"] == 1


def test_dashboard_me_put_requires_name(document, dashboard_account):
    schema = document["paths"]["/api/dashboard/me"]["put"]["requestBody"]["content"]["application/json"]["schema"]
    assert schema["required"] == ["name"]
    assert dashboard_account.put("/api/dashboard/me", json={}).status_code == 400
    assert dashboard_account.put("/api/dashboard/me", json={"name": ""}).status_code == 400
    renamed = dashboard_account.put("/api/dashboard/me", json={"name": "Ada"})
    assert renamed.status_code == 200 and renamed.json["data"]["name"] == "Ada"


def test_an_empty_organization_id_query_is_refused(dashboard_account):
    response = dashboard_account.get("/api/dashboard/applications", query_string="organization_id=")
    assert response.status_code == 400
    assert response.json["error"]["details"]["fields"] == {"organization_id": "must be a UUID"}


def test_path_parameters_can_be_narrowed(document):
    put = document["paths"]["/api/v1/applications/{applicationId}/users/{userId}/attributes/{key}"]["put"]
    key = next(p for p in put["parameters"] if p["name"] == "key")
    assert key["schema"]["pattern"] and key["schema"]["maxLength"] == 64


def test_integral_numbers_are_integers_as_json_schema_says():
    from shared.validation import Int, Invalid

    assert Int().clean(2.0) == 2 and type(Int().clean(2.0)) is int
    with pytest.raises(Invalid):
        Int().clean(2.5)


def test_url_fields_say_their_scheme():
    import re

    from shared.validation import Url

    pattern = Url(schemes=("https",)).schema()["pattern"]
    assert re.search(pattern, "https://example.com/hook")
    assert not re.search(pattern, "http://example.com/hook")
    assert not re.search(pattern, "0")


def test_scope_schema_forbids_control_characters():
    pattern = checks.Scope().schema()["pattern"]
    import re
    assert re.search(pattern, "tenant:1")
    assert not re.search(pattern, "tenant\n1")
    assert not re.search(pattern, "   ")
