"""HTTP resources of user self-service (spec "User self-service", all JWT-owner).

V1 = /api/v1/applications/{applicationId}.  The AuthMiddleware lets only the user named
by {userId} through (403 for another user's token and for API keys); rules live in
``SelfService``.  Responses carry personal data, so none of them may be cached.
"""
from __future__ import annotations

from controlplane.auth import OWNER
from controlplane.openapi import op
from controlplane.resource import Resource
from controlplane.selfservice import schemas
from controlplane.selfservice.errors import ExportLimited, SessionNotFound
from controlplane.selfservice.service import SelfService
from controlplane.users.errors import UserNotFound
from shared.errors import Forbidden, ValidationFailed
from shared.http import no_store, respond

_OWNER_ERRORS = [Forbidden, UserNotFound]


class _SelfServiceResource(Resource):
    every_method = OWNER

    def __init__(self, selfservice: SelfService):
        self.selfservice = selfservice


class Profile(_SelfServiceResource):
    docs = {
        "GET": op(response=schemas.PROFILE, errors=_OWNER_ERRORS),
        "PUT": op(body=schemas.UPDATE_PROFILE, response=schemas.PROFILE, errors=[ValidationFailed, *_OWNER_ERRORS]),
    }

    def on_get(self, req, resp, applicationId, userId):
        """Get the user's profile"""
        no_store(resp)
        respond(resp, self.selfservice.profile(applicationId, userId))

    def on_put(self, req, resp, applicationId, userId):
        """Update the user's profile

        Partial: only the fields sent change; unknown fields are ignored. metadata replaces the stored object
        whole (null clears it). Emits user.updated with the names of the fields that changed; a request that
        changes nothing emits nothing."""
        values = self.body(req, partial=True)
        no_store(resp)
        respond(resp, self.selfservice.update_profile(applicationId, userId, values))


class Account(_SelfServiceResource):
    docs = {"DELETE": op(ok=204, errors=_OWNER_ERRORS)}

    def on_delete(self, req, resp, applicationId, userId):
        """Delete the user's account (soft delete)

        The record is kept with status deleted and its email stays taken. Every session and OIDC grant is
        revoked, the user's access tokens stop working at once, login answers AUTH_INVALID_CREDENTIALS, and
        the user no longer counts toward the application's user limit. Emits user.deleted."""
        self.selfservice.delete_account(applicationId, userId)
        resp.status = 204


class DataExport(_SelfServiceResource):
    docs = {"GET": op(response=schemas.EXPORT, errors=[*_OWNER_ERRORS, ExportLimited])}

    def on_get(self, req, resp, applicationId, userId):
        """Export the user's data (GDPR)

        The user record, every stored session (revoked ones with revoked_at), current role assignments, MFA
        methods, OIDC consents and the change-log events about the user. Never a secret: no password hash,
        TOTP secret or token digest. One export per hour per user (IAMGATE_RATE_LIMIT_EXPORT: 60 minutes after
        the last export allowed)."""
        respond(resp, self.selfservice.export(applicationId, userId), cacheable=False)


class Consent(_SelfServiceResource):
    docs = {"DELETE": op(response=schemas.REVOKED, errors=_OWNER_ERRORS)}

    def on_delete(self, req, resp, applicationId, userId):
        """Withdraw every OIDC consent of the user

        Revokes the OIDC refresh tokens issued under the consents; future authorization flows ask for consent
        again. revoked_count is the number of consents withdrawn."""
        count = self.selfservice.withdraw_consent(applicationId, userId)
        message = (f"Consent withdrawn for {count} application(s); their refresh tokens were revoked." if count
                   else "There was no consent to withdraw.")
        respond(resp, {"revoked_count": count, "message": message})


class Sessions(_SelfServiceResource):
    docs = {
        "GET": op(response=schemas.SESSION_LIST, errors=_OWNER_ERRORS),
        "DELETE": op(response=schemas.REVOKED, errors=_OWNER_ERRORS),
    }

    def on_get(self, req, resp, applicationId, userId):
        """List the user's active sessions

        Non-revoked, non-expired refresh tokens, newest first."""
        no_store(resp)
        respond(resp, self.selfservice.sessions(applicationId, userId))

    def on_delete(self, req, resp, applicationId, userId):
        """Revoke every session of the user

        The calling session included: every refresh token stops working; access tokens stay valid until they
        expire. Every OIDC grant of the user is revoked too (its refresh tokens stop, its access tokens at
        userinfo and introspection). revoked_count counts the sessions."""
        count = self.selfservice.revoke_all_sessions(applicationId, userId)
        message = f"{count} session(s) revoked." if count else "There was no active session to revoke."
        respond(resp, {"revoked_count": count, "message": message})


class SessionItem(_SelfServiceResource):
    docs = {"DELETE": op(ok=204, errors=[Forbidden, SessionNotFound])}

    def on_delete(self, req, resp, applicationId, userId, sessionId):
        """Revoke one session

        Its refresh token stops working at once; access tokens issued under it stay valid until they
        expire."""
        self.selfservice.revoke_session(applicationId, userId, sessionId)
        resp.status = 204
