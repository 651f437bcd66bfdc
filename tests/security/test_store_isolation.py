"""Hardening: every store query names its application, even where ids are unguessable."""


def test_an_assignment_cannot_be_deleted_through_another_application(ctx, application, make_application):
    other = make_application()
    doc = {"_id": "a-1", "app_id": application["_id"], "user_id": "u", "role_id": "r", "scope": None,
           "expires_at": None, "assigned_at": ctx.clock()}
    ctx.store["role_assignments"].insert_one(doc)
    ctx.roles.store.delete_assignment_doc(other["_id"], "a-1")
    assert ctx.store["role_assignments"].find_one({"_id": "a-1"}) is not None
    ctx.roles.store.delete_assignment_doc(application["_id"], "a-1")
    assert ctx.store["role_assignments"].find_one({"_id": "a-1"}) is None
