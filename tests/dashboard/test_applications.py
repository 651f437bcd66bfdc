"""Dashboard applications: list, create, get, update, branding, delete; roles and isolation."""
from __future__ import annotations

import pytest

from tests.conftest import assert_error

APPS = "/api/dashboard/applications"
ORGS = "/api/dashboard/organizations"
MISSING_ID = "00000000-0000-4000-8000-000000000000"


def app_path(app_id, suffix=""):
    return f"{APPS}/{app_id}{suffix}"


@pytest.fixture
def org_with_roles(dashboard_account, make_dashboard_account, make_dashboard_app):
    """The dashboard account's personal organization with an application and one
    account per non-owner role: (app, {role: account})."""
    app = make_dashboard_app(dashboard_account, name="Shared App")
    accounts = {"owner": dashboard_account}
    for role in ("admin", "member", "viewer"):
        account = make_dashboard_account()
        response = dashboard_account.post(f"{ORGS}/{dashboard_account.organization_id}/members",
                                          json={"email": account.email, "role": role})
        assert response.status_code == 201
        accounts[role] = account
    return app, accounts


# ---------------------------------------------------------------- create


def test_create_application_with_the_spec_defaults(dashboard_account):
    response = dashboard_account.post(APPS, json={"name": "Shop"})

    assert response.status_code == 201
    app = response.json["data"]
    assert app == {
        "id": app["id"],
        "name": "Shop",
        "environment": "development",
        "is_test_mode": False,
        "description": None,
        "organization_id": dashboard_account.organization_id,
        "role": "owner",
        "brand_name": None,
        "brand_logo_url": None,
        "brand_color": None,
        "brand_background": None,
        "branding_options": {
            "secondary_color": None, "font_family": None, "favicon_url": None, "button_border_radius": None,
            "custom_css": None, "dark_mode": {"enabled": False, "background": None, "color": None},
        },
        "branding": {"name": "Shop", "logo_url": None, "color": None, "background": None},
        "oauth_redirect_uris": [],
        "oauth_hosted_login_enabled": False,
        "oauth_hosted_registration_enabled": False,
        "max_concurrent_sessions": 0,
        "registration_rate_limit": None,
        "passkeys": "off",
        "passkeys_allow_password": True,
        "passkey_aaguids": [],
        "created_at": app["created_at"],
        "updated_at": app["created_at"],
    }
    assert dashboard_account.get(app_path(app["id"])).json["data"] == app


def test_create_application_with_every_field(dashboard_account):
    body = {"name": "n" * 255, "environment": "production", "is_test_mode": True, "description": "d" * 1000,
            "organization_id": dashboard_account.organization_id}
    app = dashboard_account.post(APPS, json=body).json["data"]
    assert {k: app[k] for k in body} == body


@pytest.mark.parametrize("body, field", [
    ({}, "name"),
    ({"name": ""}, "name"),
    ({"name": "n" * 256}, "name"),
    ({"name": "x", "environment": "qa"}, "environment"),
    ({"name": "x", "is_test_mode": "yes"}, "is_test_mode"),
    ({"name": "x", "description": "d" * 1001}, "description"),
    ({"name": "x", "organization_id": "acme"}, "organization_id"),
])
def test_create_application_validates_each_field(dashboard_account, ctx, body, field):
    error = assert_error(dashboard_account.post(APPS, json=body), 400, "VALIDATION_INVALID_FORMAT")
    assert list(error["details"]["fields"]) == [field]
    assert ctx.store["applications"].count_documents({}) == 0


def test_several_bad_fields_are_reported_together(dashboard_account):
    error = assert_error(dashboard_account.post(APPS, json={"name": "", "environment": "qa"}),
                         400, "VALIDATION_MULTIPLE_ERRORS")
    assert set(error["details"]["fields"]) == {"name", "environment"}


def test_organization_id_is_required_when_the_account_is_in_several(dashboard_account, ctx):
    other_org = dashboard_account.post(ORGS, json={"name": "Second"}).json["data"]["id"]

    error = assert_error(dashboard_account.post(APPS, json={"name": "Ambiguous"}), 422, "VALIDATION_ERROR")
    assert "organization_id" in error["details"]["fields"]
    assert ctx.store["applications"].count_documents({}) == 0

    app = dashboard_account.post(APPS, json={"name": "Placed", "organization_id": other_org}).json["data"]
    assert app["organization_id"] == other_org


def test_an_account_in_no_organization_cannot_create(dashboard_account, make_dashboard_account):
    co_owner = make_dashboard_account()
    org = dashboard_account.organization_id
    dashboard_account.post(f"{ORGS}/{org}/members", json={"email": co_owner.email, "role": "owner"})
    assert dashboard_account.delete(f"{ORGS}/{org}/members/{dashboard_account.id}").status_code == 204
    assert_error(dashboard_account.post(APPS, json={"name": "Nowhere"}), 422, "VALIDATION_ERROR")


def test_create_in_a_foreign_organization_is_403(dashboard_account, make_dashboard_account, ctx):
    stranger = make_dashboard_account()
    for org_id in (stranger.organization_id, MISSING_ID):
        response = dashboard_account.post(APPS, json={"name": "Intruder", "organization_id": org_id})
        assert_error(response, 403, "FORBIDDEN")
    assert ctx.store["applications"].count_documents({}) == 0


@pytest.mark.parametrize("role", ["member", "viewer"])
def test_members_and_viewers_cannot_create(org_with_roles, role, ctx):
    _, accounts = org_with_roles
    org_id = accounts["owner"].organization_id
    # Their own personal organization makes them members of two organizations.
    response = accounts[role].post(APPS, json={"name": "Nope", "organization_id": org_id})
    assert_error(response, 403, "FORBIDDEN")
    assert ctx.store["applications"].count_documents({"organization_id": org_id}) == 1


def test_admins_can_create(org_with_roles):
    _, accounts = org_with_roles
    response = accounts["admin"].post(APPS, json={"name": "By admin",
                                                  "organization_id": accounts["owner"].organization_id})
    assert response.status_code == 201 and response.json["data"]["role"] == "admin"


@pytest.mark.parametrize("config_overrides", [{"max_applications_per_organization": 2}])
def test_application_limit_per_organization(dashboard_account, make_dashboard_app, ctx):
    first = make_dashboard_app(dashboard_account, name="one")
    make_dashboard_app(dashboard_account, name="two")

    error = assert_error(dashboard_account.post(APPS, json={"name": "three"}), 403, "resource_limit_exceeded")
    assert error["details"]["limit"] == 2
    assert ctx.store["applications"].count_documents({}) == 2

    # Another organization has its own budget; deleting frees a slot.
    other = dashboard_account.post(ORGS, json={"name": "Other"}).json["data"]["id"]
    assert dashboard_account.post(APPS, json={"name": "elsewhere", "organization_id": other}).status_code == 201
    assert dashboard_account.delete(app_path(first["id"])).status_code == 204
    again = dashboard_account.post(APPS, json={"name": "three", "organization_id": dashboard_account.organization_id})
    assert again.status_code == 201


# ---------------------------------------------------------------- list and get


def test_list_spans_every_organization_with_the_callers_role(org_with_roles, make_dashboard_app, clock):
    shared, accounts = org_with_roles
    viewer = accounts["viewer"]
    clock.advance(1)
    own = make_dashboard_app(viewer, name="Viewer's own", organization_id=viewer.organization_id)

    listed = viewer.get(APPS).json["data"]

    assert [(a["id"], a["role"]) for a in listed] == [(shared["id"], "viewer"), (own["id"], "owner")]
    filtered = viewer.get(APPS, params={"organization_id": viewer.organization_id}).json["data"]
    assert [a["id"] for a in filtered] == [own["id"]]


def test_list_filter_checks_the_organization(dashboard_account, make_dashboard_account):
    stranger = make_dashboard_account()
    assert_error(dashboard_account.get(APPS, params={"organization_id": stranger.organization_id}), 403, "FORBIDDEN")
    assert_error(dashboard_account.get(APPS, params={"organization_id": "nope"}), 400, "VALIDATION_INVALID_FORMAT")


def test_get_unknown_or_malformed_application_is_404(dashboard_account):
    assert_error(dashboard_account.get(app_path(MISSING_ID)), 404, "NOT_FOUND")
    assert_error(dashboard_account.get(app_path("not-a-uuid")), 404, "NOT_FOUND")


def test_apps_outside_any_organization_are_invisible(dashboard_account, application):
    assert application["_id"] not in [a["id"] for a in dashboard_account.get(APPS).json["data"]]
    assert_error(dashboard_account.get(app_path(application["_id"])), 404, "NOT_FOUND")


# ---------------------------------------------------------------- update


def test_update_changes_only_the_fields_sent(dashboard_account, dashboard_app, clock):
    clock.advance(5)
    body = {"name": "Renamed", "environment": "staging", "is_test_mode": True, "description": None,
            "oauth_hosted_login_enabled": True, "oauth_hosted_registration_enabled": True,
            "oauth_redirect_uris": ["https://app.example.com/callback"],
            "max_concurrent_sessions": 100}

    response = dashboard_account.put(app_path(dashboard_app["id"]), json=body)

    assert response.status_code == 200
    updated = response.json["data"]
    assert {k: updated[k] for k in body} == body
    assert updated["updated_at"] > dashboard_app["updated_at"]
    assert updated["created_at"] == dashboard_app["created_at"]
    assert updated["role"] == "owner"
    partial = dashboard_account.put(app_path(dashboard_app["id"]), json={"max_concurrent_sessions": 0}).json["data"]
    assert partial["max_concurrent_sessions"] == 0 and partial["name"] == "Renamed"
    assert dashboard_account.put(app_path(dashboard_app["id"]), json={}).json["data"]["name"] == "Renamed"


@pytest.mark.parametrize("body, field", [
    ({"name": None}, "name"),
    ({"name": "x" * 256}, "name"),
    ({"environment": "prod"}, "environment"),
    ({"description": "d" * 1001}, "description"),
    ({"max_concurrent_sessions": -1}, "max_concurrent_sessions"),
    ({"max_concurrent_sessions": 101}, "max_concurrent_sessions"),
    ({"max_concurrent_sessions": 1.5}, "max_concurrent_sessions"),
    ({"oauth_hosted_login_enabled": "true"}, "oauth_hosted_login_enabled"),
    ({"oauth_redirect_uris": ["javascript:alert(1)"]}, "oauth_redirect_uris"),
    ({"oauth_redirect_uris": "https://a.example.com"}, "oauth_redirect_uris"),
    ({"passkeys": "on"}, "passkeys"),
    ({"passkeys": None}, "passkeys"),
    ({"passkeys_allow_password": "no"}, "passkeys_allow_password"),
    ({"passkey_aaguids": ["not-a-uuid"]}, "passkey_aaguids"),
    ({"passkey_aaguids": [f"00000000-0000-0000-0000-{i:012d}" for i in range(101)]},
     "passkey_aaguids"),
])
def test_update_validates_each_field_and_changes_nothing(dashboard_account, dashboard_app, body, field):
    error = assert_error(dashboard_account.put(app_path(dashboard_app["id"]), json=body),
                         400, "VALIDATION_INVALID_FORMAT")
    assert list(error["details"]["fields"]) == [field]
    assert dashboard_account.get(app_path(dashboard_app["id"])).json["data"] == dashboard_app


def test_update_sets_the_passkey_settings(dashboard_account, dashboard_app):
    body = {"passkeys": "passwordless", "passkeys_allow_password": False,
            "passkey_aaguids": ["CB69481E-8FF7-4039-93EC-0A2729A154A8"]}
    updated = dashboard_account.put(app_path(dashboard_app["id"]), json=body).json["data"]
    assert {k: updated[k] for k in body} == {**body, "passkey_aaguids": ["cb69481e-8ff7-4039-93ec-0a2729a154a8"]}


def test_update_accepts_the_bounds(dashboard_account, dashboard_app):
    for value in (0, 100):
        response = dashboard_account.put(app_path(dashboard_app["id"]), json={"max_concurrent_sessions": value})
        assert response.json["data"]["max_concurrent_sessions"] == value


@pytest.mark.parametrize("role", ["member", "viewer"])
def test_members_and_viewers_read_but_cannot_write(org_with_roles, role, ctx):
    app, accounts = org_with_roles
    account = accounts[role]

    got = account.get(app_path(app["id"]))
    assert got.status_code == 200 and got.json["data"]["role"] == role
    assert account.get(app_path(app["id"], "/api-keys")).status_code == 200
    assert_error(account.put(app_path(app["id"]), json={"name": "Hijacked"}), 403, "FORBIDDEN")
    assert_error(account.put(app_path(app["id"], "/branding"), json={"brand_name": "Hijacked"}), 403, "FORBIDDEN")
    assert_error(account.post(app_path(app["id"], "/api-keys"), json={"name": "mine"}), 403, "FORBIDDEN")
    assert_error(account.delete(app_path(app["id"])), 403, "FORBIDDEN")
    stored = ctx.store["applications"].find_one({"_id": app["id"]})
    assert stored["name"] == "Shared App" and stored["brand_name"] is None and stored["status"] == "active"
    assert ctx.store["api_keys"].count_documents({"app_id": app["id"]}) == 0


def test_forbidden_comes_before_body_validation(org_with_roles):
    app, accounts = org_with_roles
    assert_error(accounts["viewer"].put(app_path(app["id"]), json={"name": None}), 403, "FORBIDDEN")


def test_admins_can_write(org_with_roles):
    app, accounts = org_with_roles
    response = accounts["admin"].put(app_path(app["id"]), json={"name": "Admin edit"})
    assert response.status_code == 200 and response.json["data"]["role"] == "admin"


def test_tenant_isolation_another_account_sees_and_changes_nothing(dashboard_account, dashboard_app,
                                                                   make_dashboard_account, make_dashboard_app, ctx):
    intruder = make_dashboard_account()
    make_dashboard_app(intruder, name="Intruder's own")
    app_id = dashboard_app["id"]

    assert app_id not in [a["id"] for a in intruder.get(APPS).json["data"]]
    assert_error(intruder.get(app_path(app_id)), 404, "NOT_FOUND")
    assert_error(intruder.put(app_path(app_id), json={"name": "Pwned"}), 404, "NOT_FOUND")
    assert_error(intruder.put(app_path(app_id, "/branding"), json={"brand_name": "Pwned"}), 404, "NOT_FOUND")
    assert_error(intruder.get(app_path(app_id, "/api-keys")), 404, "NOT_FOUND")
    assert_error(intruder.post(app_path(app_id, "/api-keys"), json={"name": "steal"}), 404, "NOT_FOUND")
    assert_error(intruder.delete(app_path(app_id)), 404, "NOT_FOUND")

    assert dashboard_account.get(app_path(app_id)).json["data"] == dashboard_app
    assert ctx.store["api_keys"].count_documents({"app_id": app_id}) == 0


def test_a_foreign_application_and_an_unknown_one_look_the_same(dashboard_app, make_dashboard_account):
    intruder = make_dashboard_account()
    foreign = assert_error(intruder.get(app_path(dashboard_app["id"])), 404, "NOT_FOUND")
    unknown = assert_error(intruder.get(app_path(MISSING_ID)), 404, "NOT_FOUND")
    assert foreign["message"] == unknown["message"]


def test_application_routes_need_a_session(client, dashboard_app):
    for method, suffix in (("GET", ""), ("PUT", ""), ("DELETE", ""), ("PUT", "/branding"),
                           ("GET", "/api-keys"), ("POST", "/api-keys")):
        response = client.simulate_request(method, app_path(dashboard_app["id"], suffix), json={})
        assert_error(response, 401, "UNAUTHORIZED")
    assert_error(client.simulate_get(APPS), 401, "UNAUTHORIZED")
    assert_error(client.simulate_post(APPS, json={"name": "x"}), 401, "UNAUTHORIZED")


# ---------------------------------------------------------------- branding


def test_branding_update_returns_the_application_with_the_branding_object(dashboard_account, dashboard_app):
    body = {
        "brand_name": "Acme", "brand_logo_url": "https://cdn.example.com/logo.png",
        "brand_color": "#1A2b3C", "brand_background": "#fff",
        "branding_options": {
            "secondary_color": "#00ff0080", "font_family": "Inter, 'Helvetica Neue', sans-serif",
            "favicon_url": "https://cdn.example.com/favicon.ico", "button_border_radius": "8px",
            "custom_css": ".btn { color: red; }", "dark_mode": {"enabled": True, "background": "#000000"},
        },
    }

    response = dashboard_account.put(app_path(dashboard_app["id"], "/branding"), json=body)

    assert response.status_code == 200
    app = response.json["data"]
    assert app["branding"] == {"name": "Acme", "logo_url": "https://cdn.example.com/logo.png",
                               "color": "#1A2b3C", "background": "#fff"}
    assert {k: app[k] for k in ("brand_name", "brand_logo_url", "brand_color", "brand_background")} == {
        k: body[k] for k in ("brand_name", "brand_logo_url", "brand_color", "brand_background")}
    assert app["branding_options"] == {**body["branding_options"],
                                       "dark_mode": {"enabled": True, "background": "#000000", "color": None}}
    assert app["id"] == dashboard_app["id"] and app["role"] == "owner" and app["name"] == dashboard_app["name"]
    assert dashboard_account.get(app_path(dashboard_app["id"])).json["data"] == app


def test_branding_options_merge_field_by_field(dashboard_account, dashboard_app):
    path = app_path(dashboard_app["id"], "/branding")
    dashboard_account.put(path, json={"brand_color": "#111111",
                                      "branding_options": {"font_family": "Inter", "dark_mode": {"enabled": True}}})
    app = dashboard_account.put(path, json={"branding_options": {"dark_mode": {"color": "#eeeeee"}}}).json["data"]
    assert app["brand_color"] == "#111111"
    assert app["branding_options"]["font_family"] == "Inter"
    assert app["branding_options"]["dark_mode"] == {"enabled": True, "background": None, "color": "#eeeeee"}
    cleared = dashboard_account.put(path, json={"brand_color": None}).json["data"]
    assert cleared["brand_color"] is None and cleared["branding"]["color"] is None


def test_branding_name_falls_back_to_the_application_name(dashboard_account, dashboard_app):
    app = dashboard_account.put(app_path(dashboard_app["id"], "/branding"), json={"brand_color": "#123456"}).json
    assert app["data"]["branding"]["name"] == dashboard_app["name"]


@pytest.mark.parametrize("body, field", [
    ({"brand_color": "red"}, "brand_color"),
    ({"brand_color": "#12345"}, "brand_color"),
    ({"brand_color": "#ggg"}, "brand_color"),
    ({"brand_background": "123456"}, "brand_background"),
    ({"brand_logo_url": "not a url"}, "brand_logo_url"),
    ({"brand_logo_url": "javascript:alert(1)"}, "brand_logo_url"),
    ({"brand_logo_url": "ftp://files.example.com/logo.png"}, "brand_logo_url"),
    # Mixed content: the hosted pages' CSP (img-src https: data:) would block it.
    ({"brand_logo_url": "http://cdn.example.com/logo.png"}, "brand_logo_url"),
    ({"branding_options": {"favicon_url": "http://cdn.example.com/favicon.ico"}}, "branding_options.favicon_url"),
    ({"brand_name": "b" * 256}, "brand_name"),
    ({"branding_options": {"secondary_color": "blue"}}, "branding_options.secondary_color"),
    ({"branding_options": {"favicon_url": "data:image/png;base64,AAAA"}}, "branding_options.favicon_url"),
    ({"branding_options": {"button_border_radius": "8px; background: url(x)"}},
     "branding_options.button_border_radius"),
    ({"branding_options": {"font_family": "x; } body { display:none"}}, "branding_options.font_family"),
    ({"branding_options": {"custom_css": "a" * 5001}}, "branding_options.custom_css"),
    ({"branding_options": {"dark_mode": {"enabled": "yes"}}}, "branding_options.dark_mode.enabled"),
    ({"branding_options": {"dark_mode": {"background": "black"}}}, "branding_options.dark_mode.background"),
    ({"branding_options": "dark"}, "branding_options"),
])
def test_branding_validation(dashboard_account, dashboard_app, body, field):
    response = dashboard_account.put(app_path(dashboard_app["id"], "/branding"), json=body)
    error = assert_error(response, 400, "VALIDATION_INVALID_FORMAT")
    assert list(error["details"]["fields"]) == [field]
    assert dashboard_account.get(app_path(dashboard_app["id"])).json["data"] == dashboard_app


def test_custom_css_of_exactly_5000_characters_is_accepted(dashboard_account, dashboard_app):
    css = "a{}" + " " * 4997
    response = dashboard_account.put(app_path(dashboard_app["id"], "/branding"),
                                     json={"branding_options": {"custom_css": css}})
    assert response.status_code == 200
    assert response.json["data"]["branding_options"]["custom_css"] == css


@pytest.mark.parametrize("css, forbidden", [
    ("a{color:red}</style><script>alert(1)</script>", "</style"),
    ("</STYLE >body{}", "style"),
    ("@import url('https://evil.example.com/x.css'); a{color:red}", "@import"),
    ("@IMPORT 'evil.css';", "@import"),
    ("a{width: expression(alert(1))}", "expression("),
    ("a{width: EXPRESSION (alert(1))}", "expression"),
    ("a{background: url(javascript:alert(1))}", "javascript:"),
    ("a{background: url('JavaScript:alert(1)')}", "javascript:"),
    ("a{background: url(https://evil.example.com/track.gif)}", "evil.example.com"),
    ("a{background: url(//evil.example.com/track.gif)}", "evil.example.com"),
    ('a{background: url( "http://evil.example.com/t.gif" )}', "evil.example.com"),
    ("a{background: url(data:image/svg+xml;base64,PHN2Zz4=)}", "data:"),
    ("@im@importport 'https://evil.example.com/x.css';", "@import"),
    ("a{b:c}<img src=x onerror=alert(1)>", "<"),
    ("a{background:url(x</style><a/href=https://evil.example/>Session_expired:_continue_here</a><!--)}", "<"),
    ("a{font-family:x\\</style/x}", "<"),
    ("a{background\\3c\\2fstyle\\3e:red} b{behavior:x}", "<"),
])
def test_custom_css_is_sanitised(dashboard_account, dashboard_app, css, forbidden):
    response = dashboard_account.put(app_path(dashboard_app["id"], "/branding"),
                                     json={"branding_options": {"custom_css": css}})
    assert response.status_code == 200
    stored = response.json["data"]["branding_options"]["custom_css"]
    assert forbidden.lower() not in stored.lower()


def test_custom_css_keeps_harmless_rules_and_relative_urls(dashboard_account, dashboard_app):
    css = ".login { color: #333; background: url(/static/bg.png) no-repeat; }"
    response = dashboard_account.put(app_path(dashboard_app["id"], "/branding"),
                                     json={"branding_options": {"custom_css": css}})
    assert response.json["data"]["branding_options"]["custom_css"] == css


# ---------------------------------------------------------------- delete


def test_delete_is_204_and_the_application_is_gone(dashboard_account, dashboard_app):
    assert dashboard_account.delete(app_path(dashboard_app["id"])).status_code == 204
    assert_error(dashboard_account.get(app_path(dashboard_app["id"])), 404, "NOT_FOUND")
    assert dashboard_account.get(APPS).json["data"] == []
    assert_error(dashboard_account.delete(app_path(dashboard_app["id"])), 404, "NOT_FOUND")
