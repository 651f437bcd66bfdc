"""Pages.render: autoescaped, branded templates sent with the hosted-page headers."""
from __future__ import annotations

import re

import falcon
import jinja2
import pytest

from controlplane.pages import Pages

XSS = "<script>alert(1)</script>"

# The smallest context each hosted template needs (its header comment lists it).
CONTEXTS = {
    "verify_email.html": {"api": "/api/v1/applications/a1"},
    "reset_password.html": {"api": "/api/v1/applications/a1"},
    "oidc_login.html": {"action": "/oidc/authorize", "csrf_token": "t", "request_handle": "h"},
    "oidc_mfa.html": {"action": "/oidc/authorize", "csrf_token": "t", "request_handle": "h"},
    "oidc_consent.html": {"action": "/oidc/authorize", "csrf_token": "t", "request_handle": "h",
                          "client_name": "Client", "scopes": ["openid"]},
    "oidc_forgot.html": {"action": "/oidc/authorize", "csrf_token": "t", "request_handle": "h", "email": "",
                         "sent": False},
    "oidc_register.html": {"action": "/oidc/authorize", "csrf_token": "t", "request_handle": "h", "email": "",
                           "name": ""},
    "oidc_logged_out.html": {},
    "oidc_error.html": {"error_title": "Not valid", "error_description": "Unknown client."},
}


def render(pages, template, app=None, **context):
    resp = falcon.Response()
    pages.render(resp, template, app=app, **{**CONTEXTS[template], **context})
    return resp


def nonce_of(resp) -> str:
    policy = resp.headers["content-security-policy"]
    nonces = set(re.findall(r"'nonce-([^']+)'", policy))
    assert len(nonces) == 1, policy
    return nonces.pop()


def an_app(**values):
    return {"_id": "a1", "name": "Test App", **values}


@pytest.mark.parametrize("template", sorted(CONTEXTS))
def test_every_template_sends_the_hosted_page_headers(pages, template):
    resp = render(pages, template, app=an_app())
    assert resp.status_code == 200
    assert resp.content_type == "text/html; charset=utf-8"
    assert resp.headers["cache-control"] == "no-store"
    assert resp.headers["x-frame-options"] == "DENY"
    assert resp.headers["referrer-policy"] == "no-referrer"
    assert resp.headers["x-content-type-options"] == "nosniff"
    nonce = nonce_of(resp)
    directives = [d.strip() for d in resp.headers["content-security-policy"].split(";")]
    assert directives == [
        "default-src 'none'", f"style-src 'nonce-{nonce}'", f"script-src 'nonce-{nonce}'",
        "img-src https: data:", "form-action 'self'", "frame-ancestors 'none'", "base-uri 'none'",
    ]
    assert f'<style nonce="{nonce}">' in resp.text
    # No inline style attribute (the policy would refuse it) and no script without the nonce.
    assert "style=" not in resp.text
    assert resp.text.count("<script") == resp.text.count(f'<script nonce="{nonce}">')


@pytest.mark.parametrize("template", sorted(CONTEXTS))
def test_the_application_name_stays_text(pages, template):
    text = render(pages, template, app=an_app(brand_name=XSS)).text
    assert XSS not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_each_response_has_a_fresh_nonce(pages):
    assert nonce_of(render(pages, "oidc_logged_out.html")) != nonce_of(render(pages, "oidc_logged_out.html"))


def test_status_is_the_callers(pages):
    resp = falcon.Response()
    pages.render(resp, "oidc_error.html", app=None, status=400, **CONTEXTS["oidc_error.html"])
    assert resp.status_code == 400


def test_caller_values_are_escaped_in_text_and_attributes(pages):
    text = render(pages, "oidc_login.html", error=XSS, request_handle='h"><script>x()</script>').text
    assert XSS not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert 'value="h&#34;&gt;&lt;script&gt;x()&lt;/script&gt;"' in text
    consent = render(pages, "oidc_consent.html", client_name=XSS, client_logo_url='https://x/"onerror="y',
                     scopes=[XSS]).text
    assert XSS not in consent
    assert '"onerror="' not in consent


def test_the_script_gets_its_api_base_as_a_json_string(pages):
    text = render(pages, "verify_email.html", api='/api/"</script><script>x()').text
    assert "</script><script>x()" not in text
    assert r'"/api/\"\u003c/script\u003e\u003cscript\u003ex()"' in text


def test_form_action_lists_the_origins_the_caller_passes(pages):
    resp = render(pages, "oidc_consent.html", form_action=["https://rp.example.com/callback?x=1",
                                                           "http://localhost:8080/cb", "https://rp.example.com/other"])
    assert "form-action 'self' https://rp.example.com http://localhost:8080;" in resp.headers["content-security-policy"]


@pytest.mark.parametrize("source", ["https://rp.example.com; script-src *", "javascript:alert(1)", "'unsafe-inline'",
                                    "/relative", "https://a b.example"])
def test_form_action_refuses_what_is_not_an_http_url(pages, source):
    with pytest.raises(ValueError):
        render(pages, "oidc_consent.html", form_action=[source])


def test_connect_src_only_when_asked(pages):
    assert "connect-src" not in render(pages, "oidc_login.html").headers["content-security-policy"]
    policy = render(pages, "verify_email.html", connect_src=["'self'"]).headers["content-security-policy"]
    assert "connect-src 'self'" in policy
    with pytest.raises(ValueError):
        render(pages, "verify_email.html", connect_src=["'self'; script-src *"])


def test_branding_colours_logo_and_name(pages):
    app = an_app(brand_name="Acme", brand_color="#112233", brand_background="#fafafa",
                 brand_logo_url="https://cdn.example.com/logo.png")
    text = render(pages, "oidc_login.html", app=app).text
    assert "background:#112233" in text and "background:#fafafa" in text
    assert '<img src="https://cdn.example.com/logo.png" alt="Acme logo">' in text
    assert '<span class="brand">Acme</span>' in text and "<title>Sign in - Acme</title>" in text


def test_an_http_logo_stored_before_the_api_refused_it_is_left_out(pages):
    # The CSP's img-src is https: only; an http image would only show as broken.
    app = an_app(brand_logo_url="http://cdn.example.com/logo.png",
                 branding_options={"favicon_url": "http://cdn.example.com/favicon.ico"})
    text = render(pages, "oidc_login.html", app=app).text
    assert "http://cdn.example.com" not in text and "<img" not in text


def test_the_application_name_is_the_brand_by_default(pages):
    text = render(pages, "oidc_logged_out.html", app=an_app()).text
    assert "signed out of Test App" in text
    assert "background:#2f5bea" in text  # the default brand colour


def test_without_an_application_the_page_is_neutral(pages):
    text = render(pages, "oidc_error.html", app=None).text
    assert '<span class="brand">' not in text and "<title>Not valid</title>" in text


def test_custom_css_is_sanitized_again_and_cannot_close_the_style_block(pages):
    css = "main{color:red}</style><script>alert(1)</script>@import url(https://evil.example/x.css);"
    text = render(pages, "oidc_login.html", app=an_app(branding_options={"custom_css": css})).text
    style = text[text.index("<style"):text.index("</style>")]
    assert "main{color:red}" in style
    assert "evil.example" not in text and "<script>alert" not in text
    assert text.count("</style>") == 1


def test_css_values_outside_the_schema_are_dropped(pages):
    options = {"font_family": 'x}</style><script>alert(1)</script>', "button_border_radius": "1px;}body{x:y",
               "secondary_color": "red;}", "dark_mode": {"enabled": True, "background": "#000;}"}}
    text = render(pages, "oidc_consent.html", app=an_app(brand_color="#fff;}", branding_options=options)).text
    assert "<script>alert" not in text and "1px;}" not in text and "red;}" not in text and "#fff;}" not in text
    assert "font-family:system-ui, sans-serif" in text and "border-radius:4px" in text


def test_font_family_with_quotes_reaches_css_unescaped(pages):
    app = an_app(branding_options={"font_family": "'Helvetica Neue', Arial"})
    text = render(pages, "oidc_login.html", app=app).text
    assert "font-family:'Helvetica Neue', Arial;" in text


def test_dark_mode_adds_a_media_query(pages):
    options = {"dark_mode": {"enabled": True, "background": "#101010", "color": "#eeeeee"}}
    text = render(pages, "oidc_login.html", app=an_app(branding_options=options)).text
    assert "@media (prefers-color-scheme: dark)" in text and "background:#101010" in text
    assert "prefers-color-scheme" not in render(pages, "oidc_login.html", app=an_app()).text


def test_consent_describes_the_scopes_it_knows(pages):
    text = render(pages, "oidc_consent.html", app=an_app(brand_name="Acme"), client_name="Photo Printer",
                  scopes=["openid", "profile", "email", "offline_access", "custom:thing"]).text
    for description in ("Sign you in with your Acme account", "See your name",
                        "See your email address and whether it is verified",
                        "Stay signed in: keep access when you are not using it", "custom:thing"):
        assert f"<li>{description}</li>" in text
    assert "<strong>Photo Printer</strong>" in text
    assert '<button type="submit" name="decision" value="allow">Allow</button>' in text
    assert 'name="decision" value="deny"' in text


@pytest.mark.parametrize("template", ["oidc_login.html", "oidc_mfa.html", "oidc_consent.html", "oidc_forgot.html",
                                      "oidc_register.html"])
def test_hosted_forms_post_csrf_and_request_handle(pages, template):
    text = render(pages, template, csrf_token="tok.sig", request_handle="req-42").text
    assert '<form method="post" action="/oidc/authorize">' in text
    assert '<input type="hidden" name="csrf_token" value="tok.sig">' in text
    assert '<input type="hidden" name="request" value="req-42">' in text


def test_login_asks_for_email_and_password_and_shows_an_error(pages):
    text = render(pages, "oidc_login.html", error="Wrong email or password.").text
    assert 'name="email" type="email"' in text and 'name="password" type="password"' in text
    assert '<p class="error" role="alert" id="form-error">Wrong email or password.</p>' in text
    assert set(re.findall(r'name="([^"]+)"', text)) == {"viewport", "robots", "csrf_token", "request", "email",
                                                        "password", "decision"}
    assert "role=\"alert\"" not in render(pages, "oidc_login.html").text


def test_mfa_asks_for_one_code(pages):
    text = render(pages, "oidc_mfa.html").text
    assert 'name="code"' in text and 'autocomplete="one-time-code"' in text


def test_a_missing_context_variable_is_an_error_not_an_empty_field(pages):
    resp = falcon.Response()
    with pytest.raises(jinja2.UndefinedError):
        pages.render(resp, "oidc_login.html", app=None, action="/x", request_handle="h")


def test_templates_dir_can_be_replaced(tmp_path):
    (tmp_path / "hello.html").write_text("<p nonce='{{ nonce }}'>{{ branding.name }} {{ who }}</p>")
    resp = falcon.Response()
    Pages(secret_key="k" * 16, cookie_secure=True, templates_dir=str(tmp_path)).render(
        resp, "hello.html", app=an_app(), who="<b>")
    assert resp.text.startswith("<p nonce='") and resp.text.endswith("Test App &lt;b&gt;</p>")


def test_a_less_than_sign_the_sanitizer_missed_leaves_the_custom_css_out(pages, monkeypatch):
    monkeypatch.setattr("controlplane.pages.sanitize_css", lambda css: css)  # a sanitizer with a hole
    css = "a{color:red}</style><a href=https://evil.example/>Session expired</a>"
    text = render(pages, "oidc_login.html", app=an_app(branding_options={"custom_css": css})).text
    assert text.count("</style>") == 1 and "evil.example" not in text and "a{color:red}" not in text
