"""A user's linked identities: listing, unlinking while another way in remains, and the
claim and role mapping a sign-in applies."""
from __future__ import annotations

from controlplane.connections.model import ClaimMapping, RoleRule
from tests.conftest import assert_error, events_of
from tests.connections.flow.conftest import Browser, identities_url
from tests.plugins.users import PASSWORD


def _signed_in(client, app, connection) -> dict:
    response = Browser(client, app).sign_in(connection.id)
    assert response.status_code == 200, response.text
    return response.json["data"]


def _bearer(pair) -> dict:
    return {"Authorization": f"Bearer {pair['access_token']}"}


def test_the_last_way_in_cannot_be_unlinked(client, ctx, idp_app, provider, add_connection):
    pair = _signed_in(client, idp_app, add_connection(idp_app, provider))
    user_id = pair["user"]["id"]
    [identity] = client.simulate_get(identities_url(idp_app, user_id), headers=_bearer(pair)).json["data"]
    response = client.simulate_delete(identities_url(idp_app, user_id, f"/{identity['id']}"), headers=_bearer(pair))
    assert_error(response, 409, "IDENTITY_LAST_SIGN_IN")
    assert ctx.store["identities"].count_documents({"_id": identity["id"]}) == 1
    assert events_of(ctx, "connection.revoked", user_id) == []


def test_an_identity_is_unlinked_while_another_remains(client, ctx, idp_app, provider, provider_b, add_connection):
    # A trusted: the account it makes is verified, so B's code links without handing it over.
    a = add_connection(idp_app, provider, trusted=True)
    b = add_connection(idp_app, provider_b, linking="verify")
    pair = _signed_in(client, idp_app, a)
    user_id = pair["user"]["id"]
    # Link B too (verify mode: proven by the emailed code, the account has no password).
    browser = Browser(client, idp_app)
    link_id = assert_error(browser.sign_in(b.id), 409, "CONNECTION_LINK_REQUIRED")["details"]["link_id"]
    codes = []
    ctx.mailer.send = lambda to, subject, body: codes.append(next(
        w for w in body.replace(".", " ").split() if w.isdigit() and len(w) == 6))
    assert browser.post("/link/code", {"link_id": link_id, "binding": browser.binding}).status_code == 202
    linked = browser.post("/link", {"link_id": link_id, "binding": browser.binding, "code": codes[0]})
    assert linked.status_code == 200, linked.text

    listed = {i["issuer"]: i["id"] for i in
              client.simulate_get(identities_url(idp_app, user_id), headers=_bearer(pair)).json["data"]}
    assert set(listed) == {provider.issuer, provider_b.issuer}
    first = listed[provider.issuer]
    response = client.simulate_delete(identities_url(idp_app, user_id, f"/{first}"), headers=_bearer(pair))
    assert response.status_code == 204, response.text
    [revoked] = events_of(ctx, "connection.revoked", user_id)
    assert revoked["data"] == {"kind": "upstream", "connection_id": a.id, "identity_id": first, "user_id": user_id,
                               "reason": "unlinked"}
    # The one left is now the last way in.
    last = listed[provider_b.issuer]
    assert_error(client.simulate_delete(identities_url(idp_app, user_id, f"/{last}"), headers=_bearer(pair)),
                 409, "IDENTITY_LAST_SIGN_IN")


def test_a_password_is_another_way_in(client, ctx, idp_app, provider, add_connection, make_user, login):
    user = make_user(idp_app, email="ada@example.com")
    connection = add_connection(idp_app, provider, linking="verify")
    browser = Browser(client, idp_app)
    link_id = assert_error(browser.sign_in(connection.id), 409)["details"]["link_id"]
    pair = browser.post("/link", {"link_id": link_id, "binding": browser.binding, "password": PASSWORD}).json["data"]
    [identity] = client.simulate_get(identities_url(idp_app, user["id"]), headers=_bearer(pair)).json["data"]
    response = client.simulate_delete(identities_url(idp_app, user["id"], f"/{identity['id']}"), headers=_bearer(pair))
    assert response.status_code == 204
    assert ctx.store["identities"].count_documents({"app_id": idp_app["_id"]}) == 0


def test_identities_are_the_users_own(client, idp_app, provider, add_connection, user_token, make_user_token):
    pair = _signed_in(client, idp_app, add_connection(idp_app, provider))
    other = make_user_token(idp_app)
    response = client.simulate_get(identities_url(idp_app, pair["user"]["id"]), headers=other.headers)
    assert_error(response, 403)
    response = client.simulate_delete(identities_url(idp_app, pair["user"]["id"], "/nope"), headers=_bearer(pair))
    assert_error(response, 404, "IDENTITY_NOT_FOUND")


def test_claim_and_role_mapping_on_first_sign_in_and_auto_update(client, ctx, idp_app, provider, add_connection):
    ctx.roles.create(idp_app["_id"], {"name": "staff", "display_name": "Staff", "permissions": ["documents:read"]})
    connection = add_connection(
        idp_app, provider, auto_update=True,
        claim_mapping=ClaimMapping(attributes={"department": "department"}),
        role_mapping=(RoleRule(claim="groups", value="staff", role="staff"),
                      RoleRule(claim="groups", value="nobody", role="staff"),
                      RoleRule(claim="groups", value="admins", role="no-such-role")))
    user_id = _signed_in(client, idp_app, connection)["user"]["id"]
    assert ctx.users.directory.attributes(idp_app["_id"], user_id) == {"department": "research"}
    assert [r["name"] for r in ctx.roles.user_roles(idp_app["_id"], user_id)] == ["staff"]
    # auto_update: the next sign-in refreshes the mapped fields.
    provider.accounts["verified"].update(name="Ada King", department="engineering")
    pair = _signed_in(client, idp_app, connection)
    assert pair["user"]["name"] == "Ada King"
    assert ctx.users.directory.attributes(idp_app["_id"], user_id) == {"department": "engineering"}
    assert [e["data"]["changed"] for e in events_of(ctx, "user.updated", user_id)] == [["name"]]


def test_without_auto_update_later_sign_ins_leave_the_user_alone(client, ctx, idp_app, provider, add_connection):
    connection = add_connection(idp_app, provider, auto_update=False)
    user_id = _signed_in(client, idp_app, connection)["user"]["id"]
    provider.accounts["verified"]["name"] = "Someone Else"
    assert _signed_in(client, idp_app, connection)["user"]["name"] == "Ada"
    assert events_of(ctx, "user.updated", user_id) == []


def test_an_administrator_lists_and_unlinks_with_users_permissions(client, ctx, idp_app, provider, provider_b,
                                                                   add_connection, make_api_key, make_application,
                                                                   make_user_token):
    """GET needs the user's own token or users:read, DELETE the user's own token or
    users:manage; another application's key and another user's token are refused."""
    a, b = add_connection(idp_app, provider), add_connection(idp_app, provider_b)
    pair = _signed_in(client, idp_app, a)
    user_id = pair["user"]["id"]
    ctx.store["identities"].insert_one({**ctx.store["identities"].find_one({"user_id": user_id}),
                                        "_id": "00000000-0000-4000-8000-0000000000b2", "connection_id": b.id,
                                        "issuer": provider_b.issuer})
    listing, headers = identities_url(idp_app, user_id), lambda key: {"Authorization": f"Bearer {key}"}
    reader = make_api_key(idp_app, ["users:read"])
    listed = client.simulate_get(listing, headers=headers(reader))
    assert listed.status_code == 200, listed.text
    assert len(listed.json["data"]) == 2
    assert_error(client.simulate_get(listing, headers=headers(make_api_key(idp_app, ["roles:read"]))), 403)
    stranger = make_api_key(make_application("Other App"), ["users:read", "users:manage"])
    assert client.simulate_get(listing, headers=headers(stranger)).status_code in (401, 403, 404)
    assert_error(client.simulate_get(listing, headers=make_user_token(idp_app).headers), 403)

    item = identities_url(idp_app, user_id, "/00000000-0000-4000-8000-0000000000b2")
    assert_error(client.simulate_delete(item, headers=headers(reader)), 403)
    assert client.simulate_delete(item, headers=headers(stranger)).status_code in (401, 403, 404)
    assert ctx.store["identities"].count_documents({"user_id": user_id}) == 2
    response = client.simulate_delete(item, headers=headers(make_api_key(idp_app, ["users:manage"])))
    assert response.status_code == 204, response.text
    assert ctx.store["identities"].count_documents({"user_id": user_id}) == 1


def test_the_upstream_name_is_cleaned_as_registration_cleans_it(client, ctx, idp_app, provider, add_connection):
    """Control characters, line separators and bidirectional controls become one space
    (``one_line``, as ``DisplayName``): the name goes into mails, as one line of text."""
    connection = add_connection(idp_app, provider, auto_update=True)
    provider.accounts["verified"]["name"] = "Ada\r\nBcc: x@evil.test\u202e"
    user_id = _signed_in(client, idp_app, connection)["user"]["id"]
    assert ctx.store["users"].find_one({"_id": user_id})["name"] == "Ada Bcc: x@evil.test"
    provider.accounts["verified"]["name"] = "\u2066Ada\u2028King\x85"
    assert _signed_in(client, idp_app, connection)["user"]["name"] == "Ada King"
    assert ctx.store["users"].find_one({"_id": user_id})["name"] == "Ada King"
    # A name of control characters only is no name: the mapped field is left alone.
    provider.accounts["verified"]["name"] = "\n\u202e\t"
    assert _signed_in(client, idp_app, connection)["user"]["name"] == "Ada King"
