"""Sudo mode: the dashboard's sensitive actions need a recent proof of who is acting.

A stolen session cookie must not buy lasting access.  With an owner's or admin's cookie
alone, a thief could otherwise mint what outlives the session: an API key, a member
account of their own, an OIDC client or a webhook with its secret, an upstream
connection deciding who signs users in, an end user holding a role that opens the V1
API (``opens_the_api``); or destroy an application.  So the routes and
console pages doing these declare them ``sensitive`` (``controlplane.resource``), and a
session may do them only within IAMGATE_DASHBOARD_SUDO_SECONDS of the last time its
holder proved who they are: the sign-in (password, passkey, the second step) or a
re-authentication, with the password (``reauthenticate``) or with one of the account's
passkeys verifying the user (``reauthenticate_with_passkey``).  Otherwise 403
DASHBOARD_REAUTH_REQUIRED, naming the route that re-authenticates.

The password is checked under the account's login lock, as for a change of its second
factors, so a stolen cookie cannot be used to guess it; a passkey's challenge is one of
its own kind (``PROOF``), bound to the account, so no sign-in takes it.  API
keys are no session: the routes they reach are not sensitive to them.
docs/dashboard.md, "Sensitive actions".
"""
from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from datetime import datetime

from controlplane.apikeys.service import V1_PERMISSIONS
from controlplane.audit.context import failure, success
from controlplane.dashboard.errors import DashboardReauthRequired
from controlplane.dashboard.mfa import FACTOR_SCOPE, AccountFactorService
from controlplane.dashboard.passkeys import DashboardPasskeys
from controlplane.lockout import AccountLocked
from controlplane.passkeys.credentials import PROOF
from controlplane.passkeys.errors import ChallengeInvalid
from controlplane.passkeys.service import WEBAUTHN
from controlplane.passwords import WrongPassword
from shared.errors import DomainError
from shared.rbac import matches
from shared.timeutil import seconds

# How far ahead of this process's clock a proof may be dated (another replica's clock).
CLOCK_SKEW = seconds(5)


def recently_authenticated(authenticated_at: datetime | None, now: datetime, window: int) -> bool:
    """Whether a session whose holder last proved who they are at ``authenticated_at``
    may act sensitively at ``now``: within ``window`` seconds.  A session stored before
    sessions recorded it (None) may not, nor one dated further ahead than CLOCK_SKEW (a
    replica whose clock runs fast would otherwise lengthen the window by its lead)."""
    return authenticated_at is not None and -CLOCK_SKEW <= now - authenticated_at < seconds(window)


def opens_the_api(permissions) -> bool:
    """Whether role ``permissions`` cover any of the V1 API's own permissions (wildcards
    included).  An end user's roles open the V1 routes as an API key's permissions do,
    so giving such a role to a user (a thief's own, registered through the public route)
    is minting a lasting credential: creating or changing such a role, and assigning
    one, are sensitive."""
    return any(matches(pattern, permission) for pattern in permissions for permission in V1_PERMISSIONS)


@dataclass(eq=False)
class DashboardSudo(AccountFactorService):
    """``window``: IAMGATE_DASHBOARD_SUDO_SECONDS."""

    passkeys: DashboardPasskeys
    _: KW_ONLY
    window: int

    def require(self, authenticated_at: datetime | None) -> None:
        """403 DASHBOARD_REAUTH_REQUIRED unless the session's holder proved who they are
        within the window (``recently_authenticated``)."""
        if not recently_authenticated(authenticated_at, self.clock(), self.window):
            raise DashboardReauthRequired()

    def reauthenticate(self, account: dict, password: str, session: str | None) -> None:
        """The account's password proves its holder again: the calling session (``session``,
        its raw id) may act sensitively for another window.  Checked under the login lock
        (422 INVALID_PASSWORD, 429 AUTH_ACCOUNT_LOCKED); each attempt is an audit record of
        the account's organizations, a failure with its reason."""
        data = {"method": "password"}
        try:
            self._check_password(account, password)
        except (WrongPassword, AccountLocked) as error:
            self._record("dashboard_account.reauthenticated", account, failure(
                "locked" if isinstance(error, AccountLocked) else "invalid_password"), data)
            raise
        self.sessions.reauthenticate(session)
        self._record("dashboard_account.reauthenticated", account, success(), data)

    def passkey_options(self, account: dict) -> dict:
        """{challenge_id, options} for ``reauthenticate_with_passkey``: the account's
        passkeys, user verification required, single use, 5 minutes; 503
        PASSKEY_UNAVAILABLE without a relying party."""
        return self.passkeys.credentials.request_options(FACTOR_SCOPE, subject_id=account["_id"],
                                                         kind=PROOF)

    def reauthenticate_with_passkey(self, account: dict, *, challenge_id: str, credential: dict,
                                    session: str | None) -> None:
        """One of the account's passkeys, verifying the user, proves its holder again, as
        the password does (``reauthenticate``).  The challenge must be this account's
        re-authentication challenge (400 PASSKEY_CHALLENGE_INVALID: unknown, used,
        expired, a sign-in's, another account's), the credential one of its passkeys (400
        PASSKEY_CREDENTIAL_UNKNOWN), the assertion verified with the UV flag (400
        PASSKEY_USER_VERIFICATION_REQUIRED, PASSKEY_*).  Each attempt with a known
        passkey is an audit record, as a password's is."""
        credentials = self.passkeys.credentials
        challenge = credentials.take(FACTOR_SCOPE, challenge_id, PROOF)
        if challenge["user_id"] != account["_id"]:
            raise ChallengeInvalid()
        passkey = credentials.asserted_passkey(FACTOR_SCOPE, challenge, credential)
        data = {"method": WEBAUTHN, "passkey_id": passkey["_id"]}
        try:
            credentials.verify_use(FACTOR_SCOPE, challenge, passkey, credential)
        except DomainError as error:
            self._record("dashboard_account.reauthenticated", account,
                         failure(error.code.removeprefix("PASSKEY_").lower()), data)
            raise
        self.sessions.reauthenticate(session)
        self._record("dashboard_account.reauthenticated", account, success(), data)
