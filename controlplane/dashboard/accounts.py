"""Dashboard accounts: registration, email verification and the claim of an address,
password reset and change, sign-in and sessions.

docs/dashboard.md ("Accounts", "Email verification and password reset"): register
creates an account and a personal organization it owns; login sets an opaque session
cookie.
"""
from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import NamedTuple, Protocol

from controlplane.dashboard import emails
from controlplane.dashboard.errors import EmailTaken, InvalidCredentials, SignInRequired, VerificationRequestsLimited
from controlplane.dashboard.organizations import OrganizationService
from controlplane.dashboard.sessions import DashboardSessions
from controlplane.dashboard.store import DashboardStore
from controlplane.lockout import PasswordGuard
from controlplane.mail import Mailer
from controlplane.passwords import PasswordHasher, WrongPassword, require_strong
from controlplane.ratelimit import RateLimiter, Unit
from controlplane.users.errors import (
    InvalidResetToken,
    InvalidVerificationToken,
    ResetRequestsLimited,
    ResetTokenExpired,
    VerificationTokenExpired,
)
from shared.config import Rate
from shared.ids import digest, new_id, random_token
from shared.stamps import stamped_since
from shared.timeutil import Clock, aware, isoformat, seconds
from shared.validation import Invalid, normalize_email

# The scope of dashboard accounts in the login lock (``controlplane/lockout.py``); an
# application's end users are scoped by its id, a UUID, so the two never meet.
LOCK_SCOPE = "dashboard"
VERIFICATION, RESET = "verification", "reset"


class SecondFactor(Protocol):
    """The sign-in's second step (``dashboard.mfa.DashboardMfa``)."""

    def login_challenge(self, account: dict) -> dict | None: ...

    def verify(self, *, challenge_token: str, code: str) -> dict: ...

    def on_claim(self, account: dict) -> None: ...


class PasskeySignIn(Protocol):
    """Signing in with a passkey (``dashboard.passkeys.DashboardPasskeys``)."""

    def sign_in_options(self, challenge_token: str | None) -> dict: ...

    def sign_in(self, *, challenge_id: str, credential: dict) -> dict: ...

    def on_claim(self, account: dict) -> None: ...


class SignIn(NamedTuple):
    """What a password sign-in gives: a session, or the challenge of a second factor."""

    account: dict
    session: str | None = None
    challenge: dict | None = None


@dataclass(eq=False)
class AccountService:
    """``register_rate`` and ``login_rate`` are the per-IP budgets
    (IAMGATE_RATE_LIMIT_REGISTER, IAMGATE_RATE_LIMIT_DASHBOARD_LOGIN); ``forgot_rate``
    (per email) and ``resend_rate`` (per account) are the end users' mail limits."""

    store: DashboardStore
    organizations: OrganizationService
    sessions: DashboardSessions
    hasher: PasswordHasher
    password_guard: PasswordGuard
    second_factor: SecondFactor
    passkeys: PasskeySignIn
    rate_limiter: RateLimiter
    mailer: Mailer
    clock: Clock
    _: KW_ONLY
    register_rate: Rate
    login_rate: Rate
    forgot_rate: Rate
    resend_rate: Rate
    public_url: str
    verification_ttl: int
    reset_ttl: int

    def register(self, values: dict, *, ip: str) -> dict:
        """Create a dashboard account (bcrypt-hashed password) and the personal
        organization it owns, and mail a verification link.  409
        AUTH_EMAIL_ALREADY_REGISTERED for a taken email, 422 VALIDATION_PASSWORD_TOO_WEAK
        for a weak password.

        An address held by an account that never confirmed it is not squatted forever:
        the registration still answers 409 (the same answer as for a confirmed account,
        so it tells nothing new), and the address is mailed a claim link, a password
        reset link; whoever sets a password through it proves the mailbox and owns the
        account (``reset_password``).  docs/security.md, "Unverified dashboard accounts"."""
        self.rate_limiter.hit(f"dashboard-register:{ip}", self.register_rate)
        email, name = values["email"], values["name"]
        require_strong(values["password"], email=email)
        held = self.store.account_by_email(email)
        if held is not None:  # spares a bcrypt hash; the index decides
            if not held.get("email_verified"):
                self._send_reset(held, claim=True)
            raise EmailTaken()
        now = self.clock()
        account = {
            "_id": new_id(), "email": email, "name": name,
            "password_hash": self.hasher.hash(values["password"]),
            "email_verified": False, "created_at": now, "updated_at": now,
        }
        self.store.insert_account(account)  # EmailTaken when a parallel registration won
        try:
            self.organizations.create_owned(account["_id"], _personal_organization_name(name))
        except Exception:
            # No half-registered account: without its organization it could do nothing.
            self.store.delete_account(account["_id"])
            raise
        self._send_verification(account)
        return account

    # ------------------------------------------------------------ email verification and reset

    def verify_email(self, token: str) -> dict:
        """POST /api/dashboard/email/verify: 400 AUTH_INVALID_VERIFICATION_TOKEN
        (unknown, used, or sent to an address the account no longer has), 410
        AUTH_VERIFICATION_TOKEN_EXPIRED.  Returns the verified account; the first
        confirmation is a claim (``_confirm``)."""
        token_digest = digest(token)
        account = self._token_account(token_digest, VERIFICATION, InvalidVerificationToken, VerificationTokenExpired)
        if self.store.consume_token(token_digest, VERIFICATION, self.clock()) is None:
            raise InvalidVerificationToken()
        return self._confirm(account)

    def resend_verification(self, account_id: str) -> None:
        """A new verification link for the signed-in account (IAMGATE_RATE_LIMIT_RESEND,
        429 AUTH_VERIFICATION_RATE_LIMITED); nothing is sent once the address is confirmed."""
        account = self.account(account_id)
        self.rate_limiter.hit(f"dashboard-resend:{account_id}", self.resend_rate, error=VerificationRequestsLimited)
        if not account.get("email_verified"):
            self._send_verification(account)

    def forgot_password(self, email: str) -> None:
        """POST /api/dashboard/password/forgot: mail a reset link if an account has the
        address.  Every request for the email counts toward IAMGATE_RATE_LIMIT_FORGOT
        (429 AUTH_PASSWORD_RESET_RATE_LIMITED), known or not; the answer never tells."""
        email = _lookup_form(email)
        self.rate_limiter.hit(f"dashboard-forgot:{email}", self.forgot_rate, error=ResetRequestsLimited)
        account = self.store.account_by_email(email)
        if account is not None:
            self._send_reset(account, counted=True)

    def reset_password(self, token: str, password: str) -> dict:
        """POST /api/dashboard/password/reset: 400 AUTH_INVALID_RESET_TOKEN, 410
        AUTH_RESET_TOKEN_EXPIRED, 422 VALIDATION_PASSWORD_TOO_WEAK.  The link proves the
        mailbox: every session of the account ends (an earlier squatter's too), a login
        lock is lifted, and the address is confirmed, which for an unconfirmed account is
        a claim that also removes its second factors (``_confirm``).

        The new password is written first, with a new stamp (``DashboardStore.restamp``),
        so an earlier holder can no longer sign in, nor keep a session its sign-in stores
        after this; then the sessions end; the address is confirmed last, so an
        interrupted reset leaves the account unconfirmed, writing nothing, until a new
        link finishes it."""
        token_digest = digest(token)
        account = self._token_account(token_digest, RESET, InvalidResetToken, ResetTokenExpired)
        require_strong(password, email=account["email"])
        password_hash = self.hasher.hash(password)
        # Consumed only now, so a weak password does not burn the token; the atomic
        # consume decides between two racing resets with one token.
        if self.store.consume_token(token_digest, RESET, self.clock()) is None:
            raise InvalidResetToken()
        now = self.clock()
        account = self.store.restamp(account["_id"], {"password_hash": password_hash, "updated_at": now}, now) \
            or account
        self.store.invalidate_tokens(account["_id"], RESET, now)
        self.sessions.revoke_account(account["_id"])
        self.password_guard.lift(LOCK_SCOPE, account["email"])
        return self._confirm(account, mailbox_only=True)

    def _confirm(self, account: dict, *, mailbox_only: bool = False) -> dict:
        """Mark the address confirmed.  For an account that never confirmed it this is a
        claim: whoever held the account until now may have been a stranger who
        registered the address, so what it granted is undone first
        (``OrganizationService.undo_grants``).  With ``mailbox_only`` (the reset link:
        the mailbox proved without the account's own credentials) the holder's second
        factors go too, passkeys, TOTP, backup codes and open challenges, and the
        account is stamped anew and its sessions end again: whatever signed in with one
        of them while they went.  (The verification link confirms the holder's own
        registration, password and all.)
        The flag is written last: until it is, the account writes nothing
        (``DashboardAccess.require_verified``), enrols no factor, and the next link
        claims again."""
        if not account.get("email_verified"):
            self.organizations.undo_grants(account["_id"])
            if mailbox_only:
                self.passkeys.on_claim(account)
                self.second_factor.on_claim(account)
                now = self.clock()
                self.store.restamp(account["_id"], {"updated_at": now}, now)
                self.sessions.revoke_account(account["_id"])
        return self.store.update_account(account["_id"], {"email_verified": True, "updated_at": self.clock()})

    def _token_account(self, token_digest: str, purpose: str, invalid: type, expired: type) -> dict:
        """The account an unused, unexpired emailed token of ``purpose`` was sent to:
        ``invalid`` when the token is unknown, used, or sent to an address the account no
        longer has; ``expired`` once it expired.  The caller consumes it."""
        record = self.store.token(token_digest, purpose)
        if record is None or record.get("used_at") is not None:
            raise invalid()
        if aware(record["expires_at"]) <= self.clock():
            raise expired()
        account = self.store.account(record["account_id"])
        if account is None or account["email"] != record["email"]:
            raise invalid()
        return account

    def _send_verification(self, account: dict) -> None:
        token = self._issue(account, VERIFICATION, self.verification_ttl)
        subject, body = emails.verification(account, emails.link(self.public_url, "verify-email", token),
                                            self.verification_ttl)
        self.mailer.send(account["email"], subject, body)

    def _send_reset(self, account: dict, *, claim: bool = False, counted: bool = False) -> None:
        if not counted:
            # A claim mail is a reset mail: it draws on the same per-email budget, so
            # repeated registrations cannot flood the address.
            try:
                self.rate_limiter.hit(f"dashboard-forgot:{account['email']}", self.forgot_rate,
                                  error=ResetRequestsLimited)
            except ResetRequestsLimited:
                return
        token = self._issue(account, RESET, self.reset_ttl)
        subject, body = emails.password_reset(account, emails.link(self.public_url, "reset-password", token),
                                              self.reset_ttl, claim=claim)
        self.mailer.send(account["email"], subject, body)

    def _issue(self, account: dict, purpose: str, ttl: int) -> str:
        token, now = random_token(), self.clock()
        self.store.insert_token({"_id": digest(token), "account_id": account["_id"], "email": account["email"],
                                 "purpose": purpose, "created_at": now, "expires_at": now + seconds(ttl),
                                 "used_at": None})
        return token

    def sign_in_unit(self, ip: str) -> Unit:
        """One request's unit of the client IP's sign-in budget
        (IAMGATE_RATE_LIMIT_DASHBOARD_LOGIN), which ``login``, ``passkey_options`` (the
        API's) and ``login_with_passkey`` take: what one request does with it costs one unit."""
        return self.rate_limiter.unit(f"dashboard-login:{ip}", self.login_rate)

    def page_unit(self, ip: str) -> Unit:
        """One showing's unit of the client IP's sign-in page budget
        (``dashboard-login-page:<ip>``, at IAMGATE_RATE_LIMIT_DASHBOARD_LOGIN;
        ``RateLimiter.page_unit``): what a console sign-in page storing a passkey
        challenge draws when no sign-in attempt of the request pays for it, so a third
        party that makes a browser load the page never spends the budget of its sign-ins."""
        return self.rate_limiter.page_unit(f"dashboard-login:{ip}", self.login_rate)

    def login(self, email: str, password: str, *, unit: Unit, previous_session: str | None = None) -> SignIn:
        """Check the credentials and open a new session (``SignIn.session``, the raw
        session id), or, for an account with a second factor, answer its challenge
        (``SignIn.challenge``; ``login_second_factor`` then opens the session).  A
        session the browser still presented is ended, so re-signing in never leaves an
        orphan session behind.

        Counted before the password is checked: the per-IP budget (``unit``,
        IAMGATE_RATE_LIMIT_DASHBOARD_LOGIN, 429 RATE_LIMIT_EXCEEDED) and the login lock
        end users have (``PasswordGuard``): IAMGATE_LOCKOUT_THRESHOLD consecutive
        failures for the email lock it for IAMGATE_LOCKOUT_SECONDS (429
        AUTH_ACCOUNT_LOCKED, even for the right password); a successful login forgives
        the failures.  An unknown email costs the same bcrypt time as a wrong password
        and gets the same 401."""
        unit.take()
        email = _lookup_form(email)
        account = self.store.account_by_email(email)
        if not self.password_guard.check(LOCK_SCOPE, email, password, account["password_hash"] if account else None):
            raise InvalidCredentials()
        challenge = self.second_factor.login_challenge(account)
        if challenge is not None:
            return SignIn(account, challenge=challenge)
        return SignIn(account, session=self._open_session(account, previous_session))

    def login_second_factor(self, challenge_token: str, code: str, *, previous_session: str | None = None) -> SignIn:
        """The sign-in's second step: a code answers the password step's challenge, and
        the session opens (``DashboardMfa.verify`` for the errors)."""
        account = self.second_factor.verify(challenge_token=challenge_token, code=code)
        return SignIn(account, session=self._open_session(account, previous_session))

    def passkey_options(self, challenge_token: str | None, *, unit: Unit) -> dict:
        """Options to sign in with a passkey, alone or (``challenge_token``) as the
        second step; counted against ``unit``: the API's options route draws the
        sign-in budget's (``sign_in_unit``), a console page shown by itself the sign-in
        page budget's (``page_unit``)."""
        unit.take()
        return self.passkeys.sign_in_options(challenge_token)

    def login_with_passkey(self, challenge_id: str, credential: dict, *, unit: Unit,
                           previous_session: str | None = None) -> SignIn:
        """Sign in with a passkey's assertion (``DashboardPasskeys.sign_in`` for the
        errors), alone or as the second step; the session opens.  The same per-IP
        budget as the password (``unit``)."""
        unit.take()
        account = self.passkeys.sign_in(challenge_id=challenge_id, credential=credential)
        return SignIn(account, session=self._open_session(account, previous_session))

    def _open_session(self, account: dict, previous_session: str | None) -> str:
        """A session for ``account`` as its sign-in read it before checking the
        credentials (as the password step read it, for a second step).  401 when a change
        that ends the account's sessions (a password reset or change, a second factor
        turned on) came between: its revocation may have run before this session was
        stored, so the session is compared with the account once it is."""
        self.logout(previous_session)
        raw = self.sessions.create(account)
        if stamped_since(account, self.store.account(account["_id"])):
            self.sessions.revoke(raw)
            raise InvalidCredentials("The account's password was changed or reset, or a second factor turned on, "
                                     "during this sign-in.")
        return raw

    def logout(self, raw_session: str | None) -> None:
        if raw_session:
            self.sessions.revoke(raw_session)

    def account(self, account_id: str) -> dict:
        account = self.store.account(account_id)
        if account is None:
            raise SignInRequired()
        return account

    def update_account(self, account_id: str, values: dict) -> dict:
        """Change the account's name (the only editable profile field)."""
        if not values:
            return self.account(account_id)
        updated = self.store.update_account(account_id, {**values, "updated_at": self.clock()})
        if updated is None:
            raise SignInRequired()
        return updated

    def change_password(self, account_id: str, current: str, new: str) -> str:
        """Replace the password after checking the current one (422 INVALID_PASSWORD;
        the check draws on the login lock's budget, 429 AUTH_ACCOUNT_LOCKED), end every
        session of the account and return a fresh one for this browser.  Only over the
        account as its password was checked: a reset, or another change that ends
        sessions, meanwhile is 422 too, and its password is not overwritten."""
        account = self.account(account_id)
        if not self.password_guard.check(LOCK_SCOPE, account["email"], current, account["password_hash"]):
            raise WrongPassword("The current password is incorrect.", details={"field": "current_password"})
        require_strong(new, email=account["email"], field="new_password")
        now = self.clock()
        changed = self.store.restamp(account_id, {"password_hash": self.hasher.hash(new), "updated_at": now}, now,
                                     over=account)
        if changed is None:
            raise WrongPassword("The password was reset, or the account changed, meanwhile; try again.",
                                details={"field": "current_password"})
        # A password change is how a user evicts whoever stole the old one.
        self.sessions.revoke_account(account_id)
        return self._open_session(changed, None)


def _lookup_form(email: str) -> str:
    """The stored form of a typed address (``normalize_email``); one that is not a valid
    address matches no account, and stays as typed so the answer does not change."""
    try:
        return normalize_email(email)
    except Invalid:
        return email.strip().lower()


def _personal_organization_name(account_name: str) -> str:
    suffix = "'s organization"
    return account_name[: 255 - len(suffix)] + suffix


def serialize_account(account: dict) -> dict:
    return {
        "id": account["_id"],
        "email": account["email"],
        "name": account["name"],
        "created_at": isoformat(account["created_at"]),
    }


def serialize_account_status(account: dict) -> dict:
    """The account with ``email_verified`` (GET /me and the verification answer; the
    register and login answers keep the wire details' four fields)."""
    return {**serialize_account(account), "email_verified": bool(account.get("email_verified"))}


