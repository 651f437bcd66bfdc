"""The decision service's own token verification (decision/tokens.py) and a withdrawn
signing key: docs/oidc.md says that to retire a compromised key at once the operator
rotates and deletes its document, and every token it signed stops verifying within a
minute. The control plane's key cache lives a minute; the sidecar's JWKS did five, and
a token it had verified once was answered from memory until its ``exp``, whatever its
key. Now a remembered token is answered only while its ``kid`` is in the JWKS, read
again every minute, so both stop within the minute."""
from __future__ import annotations

import time

import jwt
import pytest

from decision.tokens import JWKS_MAX_AGE, TokenVerifier
from shared.errors import Unauthorized


class Monotonic:
    def __init__(self):
        self.offset = 0.0

    def __call__(self):
        return time.monotonic() + self.offset

    def advance(self, seconds):
        self.offset += seconds


class ControlPlane:
    """The decision service's control-plane client, answering the JWKS from the real keys."""

    def __init__(self, keys):
        self.keys = keys

    def jwks(self):
        return self.keys.jwks()


def sidecar(ctx):
    mono = Monotonic()
    return TokenVerifier(ControlPlane(ctx.keys), ctx.clock, issuer=ctx.config.public_url, timer=mono,
                         monotonic=mono), mono


def delete_compromised_key(ctx) -> None:
    """Rotate, then delete the old key's document (docs/oidc.md, "Rotating the signing key")."""
    old_kid = ctx.keys.signing_key()[0]
    ctx.keys.rotate()
    ctx.store["signing_keys"].delete_one({"_id": old_kid})
    ctx.keys._reload()


def test_a_remembered_token_of_a_withdrawn_key_stops_within_a_minute(ctx, clock, application):
    token, _ = ctx.tokens.issue_access_token(application["_id"], "user-1", None)
    verifier, mono = sidecar(ctx)
    assert verifier.verify(token, application["_id"])[0] == "user-1"  # verified once, remembered

    delete_compromised_key(ctx)
    with pytest.raises(Unauthorized):
        ctx.tokens.verify(token, audience=application["_id"])  # the control plane refuses it
    clock.advance(JWKS_MAX_AGE + 1)
    mono.advance(JWKS_MAX_AGE + 1)
    with pytest.raises(Unauthorized):
        verifier.verify(token, application["_id"])


def test_a_new_forgery_with_a_withdrawn_key_is_refused_after_a_minute(ctx, clock, application):
    verifier, mono = sidecar(ctx)
    warmup, _ = ctx.tokens.issue_access_token(application["_id"], "user-0", None)
    verifier.verify(warmup, application["_id"])  # the sidecar has read the JWKS
    stolen_kid, stolen = ctx.keys.signing_key()
    delete_compromised_key(ctx)

    mono.advance(61)
    clock.advance(61)
    now = int(clock().timestamp())
    forged = jwt.encode({"iss": ctx.config.public_url, "sub": "victim", "aud": application["_id"], "iat": now,
                         "exp": now + 900, "jti": "j"}, stolen, algorithm="RS256", headers={"kid": stolen_kid})
    with pytest.raises(Unauthorized):
        verifier.verify(forged, application["_id"])


def test_a_remembered_token_of_a_published_key_costs_no_verification(ctx, application, monkeypatch):
    """The memory still saves the RSA check while the key stays published."""
    token, _ = ctx.tokens.issue_access_token(application["_id"], "user-1", None)
    verifier, _ = sidecar(ctx)
    verifier.verify(token, application["_id"])
    monkeypatch.setattr(verifier, "_verify", lambda *args: pytest.fail("verified again"))
    assert verifier.verify(token, application["_id"])[0] == "user-1"
