"""Deliveries carry Standard Webhooks headers that the unmodified reference library
verifies with the secret exactly as the API returned it.

The spec's X-Service-Signature covers the body only, so a captured delivery verified
again under a fresh timestamp and delivery id. ``webhook-signature`` covers
``webhook-id.webhook-timestamp.body``: the library (``standardwebhooks`` from PyPI, the
receiver's code, not ours) refuses a replay under a fresh id or timestamp, a stale
timestamp and an altered body. Deliveries are captured by a real HTTP receiver.
"""
from __future__ import annotations

import base64
import json
import re
import secrets
import time
import uuid
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from tests.webhooks.conftest import verify

SECRET_FORM = re.compile(r"whsec_[A-Za-z0-9+/]{43}=")  # the standard base64 of 32 bytes


def standard(secret: str, request: dict) -> dict:
    """The payload the reference library gives for a captured request (raises when it refuses)."""
    return Webhook(secret).verify(request["body"], request["headers"])


def refused(secret: str, headers: dict, body: bytes) -> bool:
    try:
        Webhook(secret).verify(body, headers)
    except WebhookVerificationError:
        return True
    return False


def test_every_delivery_verifies_with_the_secret_as_returned(make_webhook, receiver, make_role, make_user,
                                                             application, pump):
    hook = make_webhook(receiver.url, events=["role.created", "user.created"])
    assert SECRET_FORM.fullmatch(hook["secret"]) and len(base64.b64decode(hook["secret"][6:])) == 32
    make_role(application, "editor", ["posts:edit"])
    make_user(application, name="Ada \U0001F600 Lovelace")  # a body that is not ASCII
    make_role(application, "viewer", ["posts:read"])
    assert pump() == 3
    assert [standard(hook["secret"], r)["event"] for r in receiver.requests] == ["role.created", "user.created",
                                                                                 "role.created"]
    for request in receiver.requests:
        headers = request["headers"]
        assert verify(hook["secret"], request["body"], headers["X-Service-Signature"])  # the spec's, unchanged
        assert headers["webhook-id"] == headers["X-Service-Delivery-Id"]
        assert headers["webhook-timestamp"] == headers["X-Service-Timestamp"]
        assert headers["webhook-signature"].startswith("v1,")
    assert len({r["headers"]["webhook-id"] for r in receiver.requests}) == 3


def test_a_replay_under_a_fresh_id_or_timestamp_is_refused(make_webhook, receiver, make_role, application, pump):
    hook = make_webhook(receiver.url, events=["role.created"])
    make_role(application, "editor", ["posts:edit"])
    pump()
    [request] = receiver.requests
    headers, body, secret = request["headers"], request["body"], hook["secret"]
    assert not refused(secret, headers, body)
    later = str(int(headers["webhook-timestamp"]) + 60)
    for forged in ({"webhook-timestamp": later},
                   {"webhook-id": str(uuid.uuid4())},
                   {"webhook-timestamp": later, "webhook-id": str(uuid.uuid4()),
                    "X-Service-Timestamp": later, "X-Service-Delivery-Id": str(uuid.uuid4())}):
        assert refused(secret, {**headers, **forged}, body), forged
        # what the spec's signature alone could not tell apart from the original
        assert verify(secret, body, headers["X-Service-Signature"])
    assert refused(secret, headers, body.replace(b"editor", b"editer"))  # an altered body
    assert refused(secret, headers, body + b" ")
    assert refused("whsec_" + base64.b64encode(secrets.token_bytes(32)).decode(), headers, body)  # another secret
    stale = int(time.time()) - 301  # signed correctly, with the library's own signer, but too old
    resigned = Webhook(secret).sign(headers["webhook-id"], datetime.fromtimestamp(stale, UTC), body.decode())
    assert refused(secret, {**headers, "webhook-timestamp": str(stale), "webhook-signature": resigned}, body)


def test_a_retry_keeps_its_id_and_is_signed_afresh(clock, make_webhook, receiver, make_role, application, pump):
    receiver.statuses = [500, 200]
    hook = make_webhook(receiver.url, events=["role.created"])
    make_role(application, "editor", ["posts:edit"])
    pump()
    clock.advance(30)
    pump()
    first, retry = receiver.requests
    assert retry["headers"]["webhook-id"] == first["headers"]["webhook-id"]  # receivers dedupe on it
    assert int(retry["headers"]["webhook-timestamp"]) == int(first["headers"]["webhook-timestamp"]) + 30
    assert retry["headers"]["webhook-signature"] != first["headers"]["webhook-signature"]
    assert standard(hook["secret"], first) == standard(hook["secret"], retry)


def test_a_rotated_secret_is_in_the_standard_form_and_signs_what_follows(client, manager, hooks_url, make_webhook,
                                                                        receiver, make_role, application, pump):
    hook = make_webhook(receiver.url, events=["role.created"])
    resp = client.simulate_post(f"{hooks_url}/{hook['id']}/rotate-secret", json={}, headers=manager)
    secret = resp.json["data"]["secret"]
    assert SECRET_FORM.fullmatch(secret) and secret != hook["secret"]
    make_role(application, "editor", ["posts:edit"])
    pump()
    [request] = receiver.requests
    assert standard(secret, request)["event"] == "role.created"
    assert refused(hook["secret"], request["headers"], request["body"])


def _old_secret(decodable: bool) -> str:
    """A secret as webhooks made before the Standard Webhooks headers have it (``whsec_``
    and URL-safe base64), with a '-' or '_' in it (three in four have one), whose
    remaining characters the reference library can, or cannot, read as base64."""
    while True:
        secret = "whsec_" + secrets.token_urlsafe(32)
        if not {"-", "_"} & set(secret[6:]):
            continue
        try:
            Webhook(secret)
        except Exception:
            if not decodable:
                return secret
        else:
            if decodable:
                return secret


@pytest.mark.parametrize("decodable", [True, False])
def test_webhooks_with_a_secret_of_the_old_form_keep_working(ctx, make_webhook, receiver, make_role, application,
                                                             pump, decodable):
    hook = make_webhook(receiver.url, events=["role.created"])
    old = _old_secret(decodable)
    ctx.store["webhooks"].update_one({"_id": hook["id"]}, {"$set": {"secret": ctx.box.encrypt(old)}})
    make_role(application, "editor", ["posts:edit"])
    pump()
    [request] = receiver.requests
    assert verify(old, request["body"], request["headers"]["X-Service-Signature"])
    if decodable:
        assert json.loads(request["body"]) == standard(old, request)
    else:  # no key the library could use: no Standard Webhooks headers rather than ones nothing verifies
        assert not {name.lower() for name in request["headers"]} & {"webhook-id", "webhook-timestamp",
                                                                   "webhook-signature"}
