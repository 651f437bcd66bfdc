"""HTTP conventions: the error envelope everywhere, request ids, JSON body rules."""
import pytest

from controlplane.auth import PUBLIC
from shared.http import client_ip, page_params, paginated, status_of
from shared.validation import Int, Schema, String
from tests.conftest import assert_error


class Echo:
    """A probe resource mounted only in these tests."""

    access = {"GET": PUBLIC, "POST": PUBLIC, "PUT": PUBLIC}
    schema = Schema({"name": String(required=True, max_len=5), "age": Int(min=0)})

    def on_get(self, req, resp):
        raise RuntimeError("secret stack detail")

    def on_post(self, req, resp):
        from shared.http import read_json, respond

        respond(resp, self.schema.validate(read_json(req)), status=201)

    on_put = on_post


@pytest.fixture
def probe(app):
    app.routes.add("/probe", Echo(), "test")
    return app


def test_unknown_route_is_404_envelope(client):
    assert_error(client.simulate_get("/does/not/exist"), 404, "NOT_FOUND")


def test_wrong_method_is_405_envelope_with_allow_header(client):
    response = client.simulate_delete("/healthz")
    assert_error(response, 405, "METHOD_NOT_ALLOWED")
    assert "GET" in response.headers["Allow"]


def test_post_without_json_content_type_is_415(client, probe):
    response = client.simulate_post("/probe", body="name=x",
                                    headers={"Content-Type": "application/x-www-form-urlencoded"})
    error = assert_error(response, 415, "UNSUPPORTED_MEDIA_TYPE")
    assert error["details"]["content_type"] == "application/x-www-form-urlencoded"
    assert_error(client.simulate_put("/probe", body="{}"), 415, "UNSUPPORTED_MEDIA_TYPE")


def test_json_content_type_with_charset_is_accepted(client, probe):
    response = client.simulate_post("/probe", body='{"name": "ab"}',
                                    headers={"Content-Type": "application/json; charset=utf-8"})
    assert response.status_code == 201
    assert response.json == {"data": {"name": "ab"}}


def test_malformed_json_is_400(client, probe):
    response = client.simulate_post("/probe", body="{nope", headers={"Content-Type": "application/json"})
    error = assert_error(response, 400, "VALIDATION_INVALID_FORMAT")
    assert "body" in error["details"]


def test_non_object_json_is_400(client, probe):
    assert_error(client.simulate_post("/probe", json=[1, 2]), 400, "VALIDATION_INVALID_FORMAT")


def test_one_bad_field_and_several_bad_fields(client, probe):
    one = assert_error(client.simulate_post("/probe", json={"name": "toolong"}), 400, "VALIDATION_INVALID_FORMAT")
    assert set(one["details"]["fields"]) == {"name"}
    several = assert_error(client.simulate_post("/probe", json={"age": -1}), 400, "VALIDATION_MULTIPLE_ERRORS")
    assert several["details"]["fields"] == {"name": "is required", "age": "must be at least 0"}


def test_unexpected_exception_is_500_without_stack_trace(client, probe):
    response = client.simulate_get("/probe")
    error = assert_error(response, 500, "INTERNAL_ERROR")
    assert "secret stack detail" not in response.text and "Traceback" not in response.text
    assert error["details"] == {}


def test_request_id_on_every_response_and_accepts_a_well_formed_incoming_one(client):
    generated = client.simulate_get("/healthz").headers["X-Request-Id"]
    assert len(generated) >= 16
    echoed = client.simulate_get("/healthz", headers={"X-Request-Id": "abc-123-def-456"})
    assert echoed.headers["X-Request-Id"] == "abc-123-def-456"
    forged = client.simulate_get("/nope", headers={"X-Request-Id": "<script>"})
    assert forged.headers["X-Request-Id"] != "<script>"
    assert forged.json["error"]["request_id"] == forged.headers["X-Request-Id"]


def test_body_over_one_mebibyte_is_413(client, probe):
    response = client.simulate_post("/probe", body="{" + " " * (1024 * 1024 + 10) + "}",
                                    headers={"Content-Type": "application/json"})
    assert_error(response, 413, "PAYLOAD_TOO_LARGE")


class FakeRequest:
    def __init__(self, params=None, remote="10.0.0.1", headers=None):
        self.params, self.remote_addr, self.headers = params or {}, remote, headers or {}

    def get_param(self, name):
        return self.params.get(name)

    def get_header(self, name):
        return self.headers.get(name)


def test_pagination_defaults_bounds_and_envelope():
    assert page_params(FakeRequest()) == (1, 15)
    assert page_params(FakeRequest({"page": "3", "per_page": "100"})) == (3, 100)
    for bad in ({"per_page": "101"}, {"per_page": "0"}, {"page": "0"}, {"page": "x"}):
        with pytest.raises(Exception) as info:
            page_params(FakeRequest(bad))
        assert status_of(type(info.value)) == 400
    assert paginated([1, 2], 31, 2, 15) == {"data": [1, 2], "current_page": 2, "last_page": 3, "per_page": 15,
                                            "total": 31}
    assert paginated([], 0, 1, 15)["last_page"] == 1


def test_client_ip_believes_forwarded_for_only_from_trusted_proxies():
    import ipaddress

    trusted = (ipaddress.ip_network("10.0.0.0/8"),)
    spoofed = FakeRequest(remote="203.0.113.9", headers={"X-Forwarded-For": "1.2.3.4"})
    assert client_ip(spoofed, trusted) == "203.0.113.9"
    proxied = FakeRequest(remote="10.0.0.5", headers={"X-Forwarded-For": "1.2.3.4, 198.51.100.7, 10.0.0.9"})
    assert client_ip(proxied, trusted) == "198.51.100.7"
    assert client_ip(proxied, ()) == "10.0.0.5"


def test_incoming_request_id_must_match_whole():
    """A trailing newline (which ``$`` alone would let through) is not a well-formed id."""
    from types import SimpleNamespace

    from shared.http import request_id
    from shared.request_ids import resolve_request_id as resolve

    def req(incoming):
        return SimpleNamespace(context=SimpleNamespace(), get_header=lambda name: incoming)

    assert request_id(req("abcdefgh-123")) == "abcdefgh-123"
    assert request_id(req("abcdefgh-123\n")) != "abcdefgh-123\n"
    assert resolve("abcdefgh-123") == "abcdefgh-123"
    assert resolve("abcdefgh-123\n") != "abcdefgh-123\n"
