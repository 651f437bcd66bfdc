"""read_form: application/x-www-form-urlencoded bodies of the hosted forms, bounded and strict."""
from __future__ import annotations

import falcon.testing
import pytest

from controlplane.pages import CSRF_COOKIE, MAX_FORM_BYTES, MAX_FORM_FIELDS, read_form
from shared.errors import PayloadTooLarge
from tests.conftest import assert_error
from tests.pages.conftest import post_form


@pytest.fixture
def csrf(form_client, pages):
    """(a ``csrf_token=...`` form field, the matching cookie)."""
    response = form_client.simulate_get("/form")
    cookie = response.cookies[CSRF_COOKIE].value
    return f"csrf_token={cookie}", {CSRF_COOKIE: cookie}


def test_fields_are_decoded_one_string_each(form_client, csrf):
    field, cookies = csrf
    body = f"{field}&email=ada%40example.com&password=a+b%26c%3D&empty=&request=r%C3%A9q"
    form = post_form(form_client, body, cookies).json
    assert form["email"] == "ada@example.com"
    assert form["password"] == "a b&c="
    assert form["empty"] == ""
    assert form["request"] == "réq"


def test_a_repeated_field_is_400(form_client, csrf):
    field, cookies = csrf
    error = assert_error(post_form(form_client, f"{field}&email=a&email=b", cookies), 400, "VALIDATION_INVALID_FORMAT")
    assert error["details"] == {"field": "email"}


@pytest.mark.parametrize("body", ["email", "email=a&&b=c", "%FF=1", "email=%C3%28"])
def test_a_malformed_body_is_400(form_client, csrf, body):
    field, cookies = csrf
    assert_error(post_form(form_client, f"{field}&{body}", cookies), 400, "VALIDATION_INVALID_FORMAT")


def test_too_many_fields_is_400(form_client, csrf):
    field, cookies = csrf
    body = field + "".join(f"&f{i}=x" for i in range(MAX_FORM_FIELDS))
    assert_error(post_form(form_client, body, cookies), 400, "VALIDATION_INVALID_FORMAT")


def test_as_many_fields_as_allowed_pass(form_client, csrf):
    field, cookies = csrf
    body = field + "".join(f"&f{i}=x" for i in range(MAX_FORM_FIELDS - 1))
    assert post_form(form_client, body, cookies).status_code == 200


def test_a_body_over_the_bound_is_413(form_client, csrf):
    field, cookies = csrf
    body = f"{field}&pad=" + "x" * MAX_FORM_BYTES
    error = assert_error(post_form(form_client, body, cookies), 413, "PAYLOAD_TOO_LARGE")
    assert error["details"] == {"max_bytes": MAX_FORM_BYTES}


def test_a_declared_length_over_the_bound_is_413_before_reading():
    req = falcon.testing.create_req(method="POST", body=b"a=1", headers={
        "Content-Type": "application/x-www-form-urlencoded", "Content-Length": str(MAX_FORM_BYTES + 1)})
    with pytest.raises(PayloadTooLarge):
        read_form(req)
    assert req.bounded_stream.read() == b"a=1"  # nothing was read


def test_the_form_is_read_once_and_kept():
    req = falcon.testing.create_req(method="POST", body=b"a=1",
                                    headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert read_form(req) is read_form(req) == {"a": "1"}


def test_a_json_body_is_415_on_a_form_resource(form_client, csrf):
    _, cookies = csrf
    assert_error(post_form(form_client, '{"csrf_token": "x"}', cookies, content_type="application/json"), 415,
                 "UNSUPPORTED_MEDIA_TYPE")
