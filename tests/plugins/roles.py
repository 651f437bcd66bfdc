"""Fixtures of the roles area, shared by every test directory.

- ``stored_user(app, status="active", attributes=None)``: an end user inserted straight into
  the ``users`` collection (independent of the registration flow);
- ``token_for(app, user)``: an end-user access token for it;
- ``make_role(app, name, permissions, **fields)``: a role created through the service;
- ``assign_role(app, user, role, scope=None, expires_at=None)``: an assignment through the service;
- ``role_admin``: (application, user, token) of a user whose role grants roles:*, authz:check.
"""
from __future__ import annotations

import itertools

import pytest

from shared.ids import new_id

_names = itertools.count(1)


@pytest.fixture
def stored_user(ctx):
    def make(app, status="active", attributes=None, email=None):
        now = ctx.clock()
        doc = {
            "_id": new_id(),
            "app_id": app["_id"],
            "email": email or f"user{next(_names)}@example.com",
            "name": "Test User",
            "password_hash": None,
            "email_verified": True,
            "metadata": None,
            "avatar_url": None,
            "status": status,
            "created_at": now,
            "updated_at": now,
            "deleted_at": None,
            "suspended_at": None,
        }
        if attributes is not None:
            doc["attributes"] = attributes
        ctx.store["users"].insert_one(doc)
        return doc

    return make


@pytest.fixture
def token_for(ctx):
    def make(app, user):
        token, _ = ctx.tokens.issue_access_token(app["_id"], user["_id"], None)
        return token

    return make


@pytest.fixture
def make_role(ctx):
    def make(app, name=None, permissions=("posts:read",), **fields):
        values = {"name": name or f"role-{next(_names)}", "display_name": fields.pop("display_name", "A role"),
                  "permissions": list(permissions), "is_system_role": fields.pop("is_system_role", False), **fields}
        return ctx.roles.create(app["_id"], values)

    return make


@pytest.fixture
def assign_role(ctx):
    def assign(app, user, role, scope=None, expires_at=None):
        return ctx.roles.assign(app["_id"], user["_id"],
                                {"role_id": role["_id"], "scope": scope, "expires_at": expires_at})

    return assign


@pytest.fixture
def role_admin(application, stored_user, token_for, make_role, assign_role):
    user = stored_user(application)
    role = make_role(application, "administrator", ["roles:*", "authz:check"])
    assign_role(application, user, role)
    return application, user, token_for(application, user)
