"""The code exchange spends its code with one conditional write that also reads it
(``CodeStore.consume``) and reads the code again only to say why a refused exchange was
refused; it used to read the code first, spend it, and read it again when the spend
failed.  The two ways must answer alike.

Two worlds on one app: the same scenario of exchanges (good, another client's code, a
missing or wrong verifier, a wrong redirect_uri, a replay, an expired code, an unknown
one, a client without PKCE) runs once with the read-first exchange (``ReadFirst``, the
code before this change, kept here as the reference) and once with the real one, each on
fresh codes; after every step both must agree on the status, the error body, the code's
state (spent, replayed, naming a grant) and the events it wrote."""
from __future__ import annotations

import dataclasses

import pytest
from pymongo import ReturnDocument

from controlplane.oidc.errors import InvalidGrant
from controlplane.oidc.token import AuthorizationCodeGrant, _required
from shared.ids import digest, new_id
from shared.timeutil import aware
from tests.oidc.conftest import pkce_pair


class ReadFirst(AuthorizationCodeGrant):
    """The exchange as it was: read the code, check it, spend it, read it again when the
    spend failed."""

    def validate_token_request(self, client, params):
        _required(params, "code", "redirect_uri")
        code_digest = digest(params["code"])
        code = self.codes.get(code_digest)
        now = self.clock()
        if code is None or code["client_id"] != client["client_id"]:
            raise InvalidGrant("The code is invalid.")
        if code.get("used_at") is not None:
            self._replayed(code_digest, code)
        if code.get("code_challenge") is not None:
            _required(params, "code_verifier")
        if aware(code["expires_at"]) <= now:
            raise InvalidGrant("The code has expired.")
        used = self.codes._docs.find_one_and_update(
            {"_id": code_digest, "used_at": None, "expires_at": {"$gt": now}},
            {"$set": {"used_at": now, "grant_id": new_id()}}, return_document=ReturnDocument.AFTER)
        if used is None:
            self._replayed(code_digest, self.codes.get(code_digest))
        if params["redirect_uri"] != used["redirect_uri"]:
            self._fail(used, "redirect_uri_mismatch", "redirect_uri differs from the authorization request.")
        self._check_verifier(used, params.get("code_verifier"))
        return used


@pytest.fixture
def pkce_less(application, oidc_client):
    return oidc_client(application, require_pkce=False)


@pytest.fixture
def thief(application, oidc_client):
    return oidc_client(application, name="Thief")


def run(ctx, clock, authorize, exchange, user, rp, pkce_less, thief) -> list:
    """The scenario's outcomes: per step (status, error body or the answer's keys, the
    code's state, the events the step wrote)."""
    def code_for(client, *, challenge=True):
        verifier, pair_challenge = pkce_pair()
        params = {"challenge": pair_challenge} if challenge else {"code_challenge": None,
                                                                   "code_challenge_method": None}
        return authorize(user, client, **params).json["code"], verifier

    outcomes = []
    # Each run's first good exchange creates the connection (connection.created).
    ctx.store["oidc_consents"].update_many({}, {"$set": {"connected_at": None}})

    def step(client, code, verifier, **overrides):
        head = ctx.events.head()
        response = exchange(client, code, verifier, **overrides)
        doc = ctx.store["oidc_codes"].find_one({"_id": digest(code)}) or {}
        events = [(event["type"], event["data"].get("reason"))
                  for event in ctx.store["events"].find({"seq": {"$gt": head}}).sort("seq", 1) if event["type"]]
        body = sorted(response.json) if response.status_code == 200 else response.json
        outcomes.append((response.status_code, body, doc.get("used_at") is not None,
                         doc.get("replayed_at") is not None, doc.get("grant_id") is not None, events))

    a, b, c, d, e = (code_for(rp) for _ in range(5))
    step(thief, *a)                                  # another client's code: refused, not spent
    step(rp, a[0], None)                             # the verifier missing: refused, not spent
    step(rp, a[0], "")                               # an empty one too
    step(rp, *a, redirect_uri="https://rp.example.com/other")  # spent, a failed connection
    step(rp, *a)                                     # a replay of a spent code
    step(rp, *b)                                     # as it should be
    step(rp, *b)                                     # a replay: revokes what b issued
    step(thief, *b)                                  # another client's spent code
    step(rp, b[0], None)                             # a spent code without its verifier
    step(rp, c[0], "y" * 43)                         # a wrong verifier: spent
    step(rp, d[0], "short")                          # a malformed verifier: spent
    step(rp, "not-a-code", "v" * 43)                 # unknown
    f = code_for(pkce_less, challenge=False)
    step(pkce_less, f[0], "v" * 43)                  # a verifier for a code without a challenge
    g = code_for(pkce_less, challenge=False)
    step(pkce_less, g[0], None)                      # as it should be, without PKCE
    clock.advance(61)
    step(rp, *e)                                     # expired
    step(rp, *b)                                     # expired and spent: a replay still
    return outcomes


def test_the_one_write_spend_answers_as_read_first_did(ctx, clock, authorize, exchange, user_token, rp_client,
                                                       pkce_less, thief, monkeypatch):
    real = ctx.oidc.token.code_grant
    reference = ReadFirst(**{field.name: getattr(real, field.name) for field in dataclasses.fields(real)})
    monkeypatch.setattr(ctx.oidc.token, "code_grant", reference)
    expected = run(ctx, clock, authorize, exchange, user_token, rp_client, pkce_less, thief)
    monkeypatch.setattr(ctx.oidc.token, "code_grant", real)
    assert run(ctx, clock, authorize, exchange, user_token, rp_client, pkce_less, thief) == expected
    assert [outcome[0] for outcome in expected] == [400] * 5 + [200] + [400] * 7 + [200, 400, 400]


def test_an_exchange_reads_its_code_only_in_the_write_that_spends_it(ctx, authorize, exchange, user_token,
                                                                     rp_client, monkeypatch):
    """One code operation before the grant is written (the spend); the one after it is
    the check for a replay that raced the exchange."""
    verifier, challenge = pkce_pair()
    code = authorize(user_token, rp_client, challenge=challenge).json["code"]
    calls = []
    codes = ctx.oidc.token.code_grant.codes
    for name in ("get", "consume"):
        real = getattr(codes, name)
        monkeypatch.setattr(codes, name, lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
    assert exchange(rp_client, code, verifier).status_code == 200
    assert calls == ["consume", "get"]
