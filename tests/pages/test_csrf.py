"""The signed double-submit CSRF cookie of the hosted forms: a post passes only with the
token of the page it came from, matching the browser's own signed cookie."""
from __future__ import annotations

import re

import falcon.testing
import pytest

from controlplane.pages import CSRF_COOKIE, CsrfTokenInvalid, Pages
from shared.errors import Forbidden
from shared.http import status_of
from tests.conftest import assert_error
from tests.pages.conftest import form_app, post_form


def open_form(client, cookies=None):
    """GET the form: (the csrf_token field, the iamgate_csrf cookie set, or None)."""
    headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())} if cookies else None
    response = client.simulate_get("/form", headers=headers)
    assert response.status_code == 200
    field = re.search(r'name="csrf_token" value="([^"]+)"', response.text).group(1)
    cookie = response.cookies.get(CSRF_COOKIE)
    return field, cookie


def test_the_error_is_a_403_with_its_own_code():
    assert issubclass(CsrfTokenInvalid, Forbidden) and status_of(CsrfTokenInvalid) == 403
    assert CsrfTokenInvalid.code == "CSRF_TOKEN_INVALID"


def test_the_page_sets_a_signed_httponly_lax_cookie_equal_to_the_field(form_client):
    field, cookie = open_form(form_client)
    assert cookie.value == field
    assert cookie.http_only and cookie.same_site == "Lax" and not cookie.secure
    assert cookie.path == "/"
    assert cookie.max_age is None and cookie.expires is None  # a browser-session cookie
    raw, _, mac = field.partition(".")
    assert len(raw) >= 43 and mac


def test_the_cookie_is_secure_when_cookies_are():
    client = falcon.testing.TestClient(form_app(Pages(secret_key="s" * 32, cookie_secure=True)))
    _, cookie = open_form(client)
    assert cookie.secure


def test_a_post_with_the_pages_token_and_cookie_passes(form_client):
    field, cookie = open_form(form_client)
    response = post_form(form_client, f"csrf_token={field}&email=a%40b.example", {CSRF_COOKIE: cookie.value})
    assert response.status_code == 200, response.text
    assert response.json["email"] == "a@b.example"


def test_a_browser_with_a_valid_cookie_keeps_it(form_client):
    field, cookie = open_form(form_client)
    again, new_cookie = open_form(form_client, {CSRF_COOKIE: cookie.value})
    assert again == field and new_cookie is None  # a second tab does not break the first


def test_an_unsigned_cookie_is_replaced(form_client):
    field, cookie = open_form(form_client, {CSRF_COOKIE: "chosen-by-attacker.x"})
    assert cookie is not None and field == cookie.value and field != "chosen-by-attacker.x"


def test_no_cookie_is_refused(form_client):
    field, _ = open_form(form_client)
    assert_error(post_form(form_client, f"csrf_token={field}"), 403, "CSRF_TOKEN_INVALID")


@pytest.mark.parametrize("body", ["", "csrf_token=", "email=a"])
def test_no_field_is_refused(form_client, body):
    _, cookie = open_form(form_client)
    assert_error(post_form(form_client, body, {CSRF_COOKIE: cookie.value}), 403, "CSRF_TOKEN_INVALID")


def test_a_tampered_field_is_refused(form_client):
    field, cookie = open_form(form_client)
    tampered = ("A" if field[0] != "A" else "B") + field[1:]
    assert_error(post_form(form_client, f"csrf_token={tampered}", {CSRF_COOKIE: cookie.value}), 403,
                 "CSRF_TOKEN_INVALID")


def test_a_forged_cookie_matching_the_field_is_refused(form_client):
    """Double submit alone would accept any equal pair; the signature refuses values we
    did not mint (a cookie planted by a sibling subdomain)."""
    forged = "attacker-chosen-value.bm90LWEtbWFj"
    assert_error(post_form(form_client, f"csrf_token={forged}", {CSRF_COOKIE: forged}), 403, "CSRF_TOKEN_INVALID")
    raw, _, mac = open_form(form_client)[0].partition(".")
    other_raw = raw[:-1] + ("A" if raw[-1] != "A" else "B")
    assert_error(post_form(form_client, f"csrf_token={other_raw}.{mac}", {CSRF_COOKIE: f"{other_raw}.{mac}"}), 403,
                 "CSRF_TOKEN_INVALID")


def test_the_token_of_another_browser_is_refused(form_client):
    mine, my_cookie = open_form(form_client)
    theirs, _ = open_form(form_client)
    assert mine != theirs
    assert_error(post_form(form_client, f"csrf_token={theirs}", {CSRF_COOKIE: my_cookie.value}), 403,
                 "CSRF_TOKEN_INVALID")


def test_a_token_signed_under_another_secret_key_is_refused(form_client):
    other = falcon.testing.TestClient(form_app(Pages(secret_key="another-secret-key-0123456789", cookie_secure=False)))
    field, cookie = open_form(other)
    assert_error(post_form(form_client, f"csrf_token={field}", {CSRF_COOKIE: cookie.value}), 403, "CSRF_TOKEN_INVALID")


def test_any_replica_accepts_the_token(form_client):
    """Nothing lives in process memory: a second Pages with the same key checks the post."""
    field, cookie = open_form(form_client)
    replica = falcon.testing.TestClient(form_app(Pages(secret_key="test-secret-key-0123456789abcdef",
                                                       cookie_secure=False)))
    assert post_form(replica, f"csrf_token={field}", {CSRF_COOKIE: cookie.value}).status_code == 200
