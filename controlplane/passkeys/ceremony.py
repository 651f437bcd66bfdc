"""The two WebAuthn ceremonies (W3C Web Authentication, Level 3), through py_webauthn.

Registration (section 7.1, "Registering a New Credential") and authentication (7.2,
"Verifying an Authentication Assertion"): options out as the JSON a browser's
``PublicKeyCredential.parseCreationOptionsFromJSON`` / ``parseRequestOptionsFromJSON``
reads unchanged, responses in as the JSON of ``PublicKeyCredential.toJSON()``.

Every failure is one of the area's 400 errors.  Origin (7.1 step 9, 7.2 step 13) and RP
ID hash (7.1 step 13, 7.2 step 15) are checked here first, so they get their own codes
and no message repeats the expected value (py_webauthn's would).  So is where the
ceremony ran: client data saying it ran in a frame that is not same-origin with its
ancestors (``crossOrigin`` true, or any ``topOrigin``: the steps after the origin's in
7.1 and 7.2) is refused as a wrong origin, since no page of ours may be framed by another
origin (``frame-ancestors 'none'``) and py_webauthn 3 reads ``crossOrigin`` without
checking it and ignores ``topOrigin``.  No clock, no I/O.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import (
    base64url_to_bytes,
    bytes_to_base64url,
    parse_attestation_object,
    parse_authentication_credential_json,
    parse_authenticator_data,
    parse_client_data_json,
    parse_registration_credential_json,
)
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AttestationConveyancePreference,
    AuthenticatorSelectionCriteria,
    AuthenticatorTransport,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from controlplane.passkeys.errors import OriginMismatch, RpIdMismatch, VerificationFailed

TIMEOUT_MS = 300_000  # the browser's prompt lasts as long as the challenge does
# Section 7.1 ("Verify that the credentialId is <= 1023 bytes"): a longer id is refused,
# since a stored id goes back in every later options answer (excludeCredentials).
MAX_CREDENTIAL_ID_BYTES = 1023
# What a malformed response can raise inside the parsers, beyond py_webauthn's own errors.
_MALFORMED = (WebAuthnException, ValueError, KeyError, TypeError, AttributeError, IndexError)


@dataclass(frozen=True)
class RelyingParty:
    """The configured RP ID and accepted origins (IAMGATE_WEBAUTHN_RP_ID/ORIGINS)."""

    rp_id: str
    origins: tuple[str, ...]


@dataclass(frozen=True)
class NewCredential:
    credential_id: str  # base64url
    public_key: str  # COSE key, base64url
    sign_count: int
    aaguid: str
    user_verified: bool
    backed_up: bool
    backup_eligible: bool
    transports: list[str]
    discoverable: bool | None  # the credProps extension's answer, when the browser gave it


@dataclass(frozen=True)
class Assertion:
    sign_count: int
    user_verified: bool
    backed_up: bool
    backup_eligible: bool


def _options_json(options) -> dict:
    return json.loads(options_to_json(options))


def _descriptor(credential_id: str, transports=()) -> PublicKeyCredentialDescriptor:
    known = [AuthenticatorTransport(t) for t in transports if t in {m.value for m in AuthenticatorTransport}]
    return PublicKeyCredentialDescriptor(id=base64url_to_bytes(credential_id), transports=known or None)


def registration_options(rp: RelyingParty, *, rp_name: str, user_id: str, user_name: str, display_name: str,
                         challenge: bytes, exclude: list[dict], attestation: str = "none") -> dict:
    """PublicKeyCredentialCreationOptionsJSON.  The user handle is the user's id (no
    personal data, section 14.6.1); a resident key is preferred, user verification too,
    so one passkey can serve both as a second factor and alone."""
    options = generate_registration_options(
        rp_id=rp.rp_id, rp_name=rp_name, user_id=user_id.encode(), user_name=user_name,
        user_display_name=display_name, challenge=challenge, timeout=TIMEOUT_MS,
        attestation=AttestationConveyancePreference(attestation),
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.PREFERRED, user_verification=UserVerificationRequirement.PREFERRED),
        exclude_credentials=[_descriptor(c["credential_id"], c.get("transports") or ()) for c in exclude],
    )
    result = _options_json(options)
    result["extensions"] = {"credProps": True}  # tells whether the key is discoverable
    return result


def authentication_options(rp: RelyingParty, *, challenge: bytes, allow: list[dict], user_verification: str) -> dict:
    """PublicKeyCredentialRequestOptionsJSON; an empty ``allow`` lets the authenticator
    offer its discoverable credentials (a sign-in without an email)."""
    options = generate_authentication_options(
        rp_id=rp.rp_id, challenge=challenge, timeout=TIMEOUT_MS,
        allow_credentials=[_descriptor(c["credential_id"], c.get("transports") or ()) for c in allow],
        user_verification=UserVerificationRequirement(user_verification),
    )
    return _options_json(options)


def _check_origin_and_rp(rp: RelyingParty, client_data_json: bytes, rp_id_hash: bytes) -> None:
    if parse_client_data_json(client_data_json).origin not in rp.origins:
        raise OriginMismatch()
    members = json.loads(client_data_json)  # a JSON object: parse_client_data_json checked it
    if members.get("crossOrigin", False) is not False or "topOrigin" in members:
        raise OriginMismatch()  # run in another origin's frame: our origin, someone else's page
    if rp_id_hash != hashlib.sha256(rp.rp_id.encode()).digest():
        raise RpIdMismatch()


def verify_registration(rp: RelyingParty, response: dict, *, challenge: bytes) -> NewCredential:
    try:
        parsed = parse_registration_credential_json(response)
        auth_data = parse_attestation_object(parsed.response.attestation_object).auth_data
        _check_origin_and_rp(rp, parsed.response.client_data_json, auth_data.rp_id_hash)
        verified = verify_registration_response(credential=parsed, expected_challenge=challenge,
                                                expected_rp_id=rp.rp_id, expected_origin=list(rp.origins))
    except (OriginMismatch, RpIdMismatch):
        raise
    except _MALFORMED:
        raise VerificationFailed() from None
    if len(verified.credential_id) > MAX_CREDENTIAL_ID_BYTES:
        raise VerificationFailed()
    extensions = response.get("clientExtensionResults")
    cred_props = extensions.get("credProps") if isinstance(extensions, dict) else None
    rk = cred_props.get("rk") if isinstance(cred_props, dict) else None
    return NewCredential(
        credential_id=bytes_to_base64url(verified.credential_id),
        public_key=bytes_to_base64url(verified.credential_public_key),
        sign_count=verified.sign_count, aaguid=verified.aaguid, user_verified=verified.user_verified,
        backed_up=verified.credential_backed_up, backup_eligible=bool(auth_data.flags.be),
        transports=[t.value for t in parsed.response.transports or ()],
        discoverable=rk if isinstance(rk, bool) else None,
    )


def credential_id_of(response: dict) -> str:
    """The credential id an assertion names (its ``rawId``), before anything is verified."""
    try:
        return bytes_to_base64url(parse_authentication_credential_json(response).raw_id)
    except _MALFORMED:
        raise VerificationFailed() from None


def user_handle_of(response: dict) -> str | None:
    """The user handle a discoverable credential returned (the user's id), or None."""
    try:
        handle = parse_authentication_credential_json(response).response.user_handle
        return handle.decode() if handle else None
    except (*_MALFORMED, UnicodeDecodeError):
        raise VerificationFailed() from None


def verify_assertion(rp: RelyingParty, response: dict, *, challenge: bytes, public_key: str) -> Assertion:
    """Signature, challenge, origin, RP ID, user presence.  User verification and the
    sign count are the caller's to judge (their own error codes), so py_webauthn is given
    a count of 0 and never refuses on it."""
    try:
        parsed = parse_authentication_credential_json(response)
        auth_data = parse_authenticator_data(parsed.response.authenticator_data)
        _check_origin_and_rp(rp, parsed.response.client_data_json, auth_data.rp_id_hash)
        verified = verify_authentication_response(
            credential=parsed, expected_challenge=challenge, expected_rp_id=rp.rp_id,
            expected_origin=list(rp.origins), credential_public_key=base64url_to_bytes(public_key),
            credential_current_sign_count=0)
    except (OriginMismatch, RpIdMismatch):
        raise
    except _MALFORMED:
        raise VerificationFailed() from None
    return Assertion(sign_count=verified.new_sign_count, user_verified=verified.user_verified,
                     backed_up=verified.credential_backed_up, backup_eligible=bool(auth_data.flags.be))


def sign_count_moves_forward(stored: int, new: int) -> bool:
    """Section 7.2 step 21: a counter that is not above the stored one signals a cloned
    authenticator, unless both are 0 (authenticators without a counter: synced passkeys)."""
    return (stored == 0 and new == 0) or new > stored
