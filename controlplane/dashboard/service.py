"""The dashboard's rules: accounts, sessions, organizations, and application
management on behalf of an organization member.

docs/dashboard.md ("Accounts", "Organizations and roles"): register creates an account
and a personal organization it owns; login sets an opaque session cookie; organization
roles are owner, admin, member and viewer, and only owners and admins may write.
"""
from __future__ import annotations

from shared.config import Rate
from shared.ids import digest, is_uuid, new_id, random_token
from shared.timeutil import aware, isoformat, seconds
from shared.validation import Invalid, normalize_email

from controlplane.apikeys.service import ApiKeyService
from controlplane.applications.service import ApplicationService
from controlplane.dashboard.access import WRITE_ROLES, DashboardAccess
from controlplane.dashboard import emails
from controlplane.dashboard.errors import (AccountEmailUnverified, AccountNotFound, ApplicationLimitReached, EmailTaken,
                                           InvalidCredentials, LastOwner, MemberNotFound, MembershipChanged, NotAMember,
                                           OrganizationIdInvalid, OrganizationNotFound, OrganizationRequired,
                                           OwnerRequired, RoleCannotWrite, SignInRequired, VerificationRequestsLimited)
from controlplane.dashboard.sessions import DashboardSessions
from controlplane.dashboard.store import DashboardStore
from controlplane.lockout import PasswordGuard
from controlplane.mail import Mailer
from controlplane.passwords import PasswordHasher, WrongPassword, require_strong
from controlplane.ratelimit import RateLimiter
from controlplane.users.errors import (InvalidResetToken, InvalidVerificationToken, ResetRequestsLimited,
                                       ResetTokenExpired, VerificationTokenExpired)

OWNER = "owner"
# The scope of dashboard accounts in the login lock (``controlplane/lockout.py``); an
# application's end users are scoped by its id, a UUID, so the two never meet.
LOCK_SCOPE = "dashboard"
VERIFICATION, RESET = "verification", "reset"


class DashboardService:
    """``register_rate`` and ``login_rate`` are the per-IP budgets
    (IAMGATE_RATE_LIMIT_REGISTER, IAMGATE_RATE_LIMIT_DASHBOARD_LOGIN);
    ``max_applications`` is IAMGATE_MAX_APPLICATIONS_PER_ORGANIZATION; ``forgot_rate``
    (per email) and ``resend_rate`` (per account) are the end users' mail limits;
    ``member_add_rate`` (IAMGATE_RATE_LIMIT_MEMBER_ADD) holds per client IP and per
    calling account."""

    def __init__(self, store: DashboardStore, *, clock, hasher: PasswordHasher, password_guard: PasswordGuard,
                 rate_limiter: RateLimiter, sessions: DashboardSessions, access: DashboardAccess,
                 applications: ApplicationService, api_keys: ApiKeyService, mailer: Mailer, register_rate: Rate,
                 login_rate: Rate, max_applications: int, public_url: str, verification_ttl: int, reset_ttl: int,
                 forgot_rate: Rate, resend_rate: Rate, member_add_rate: Rate):
        self.store = store
        self._clock = clock
        self._hasher = hasher
        self._guard = password_guard
        self._limiter = rate_limiter
        self._sessions = sessions
        self._access = access
        self._applications = applications
        self._api_keys = api_keys
        self._register_rate = register_rate
        self._login_rate = login_rate
        self._max_applications = max_applications
        self._mailer = mailer
        self._public_url = public_url
        self._verification_ttl = verification_ttl
        self._reset_ttl = reset_ttl
        self._forgot_rate = forgot_rate
        self._resend_rate = resend_rate
        self._member_add_rate = member_add_rate

    # ------------------------------------------------------------ accounts and sessions

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
        self._limiter.hit(f"dashboard-register:{ip}", self._register_rate)
        email, name = values["email"], values["name"]
        require_strong(values["password"], email=email)
        held = self.store.account_by_email(email)
        if held is not None:  # spares a bcrypt hash; the index decides
            if not held.get("email_verified"):
                self._send_reset(held, claim=True)
            raise EmailTaken()
        now = self._clock()
        account = {
            "_id": new_id(), "email": email, "name": name,
            "password_hash": self._hasher.hash(values["password"]),
            "email_verified": False, "created_at": now, "updated_at": now,
        }
        self.store.insert_account(account)  # EmailTaken when a parallel registration won
        try:
            self._create_organization(account["_id"], _personal_organization_name(name))
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
        if self.store.consume_token(token_digest, VERIFICATION, self._clock()) is None:
            raise InvalidVerificationToken()
        return self._confirm(account)

    def resend_verification(self, account_id: str) -> None:
        """A new verification link for the signed-in account (IAMGATE_RATE_LIMIT_RESEND,
        429 AUTH_VERIFICATION_RATE_LIMITED); nothing is sent once the address is confirmed."""
        account = self.account(account_id)
        self._limiter.hit(f"dashboard-resend:{account_id}", self._resend_rate, error=VerificationRequestsLimited)
        if not account.get("email_verified"):
            self._send_verification(account)

    def forgot_password(self, email: str) -> None:
        """POST /api/dashboard/password/forgot: mail a reset link if an account has the
        address.  Every request for the email counts toward IAMGATE_RATE_LIMIT_FORGOT
        (429 AUTH_PASSWORD_RESET_RATE_LIMITED), known or not; the answer never tells."""
        email = _lookup_form(email)
        self._limiter.hit(f"dashboard-forgot:{email}", self._forgot_rate, error=ResetRequestsLimited)
        account = self.store.account_by_email(email)
        if account is not None:
            self._send_reset(account, counted=True)

    def reset_password(self, token: str, password: str) -> dict:
        """POST /api/dashboard/password/reset: 400 AUTH_INVALID_RESET_TOKEN, 410
        AUTH_RESET_TOKEN_EXPIRED, 422 VALIDATION_PASSWORD_TOO_WEAK.  The link proves the
        mailbox: every session of the account ends (an earlier squatter's too), a login
        lock is lifted, and the address is confirmed, which for an unconfirmed account is
        a claim (``_confirm``).

        The new password is written first, so an earlier holder can no longer sign in,
        then the sessions end; the address is confirmed last, so an interrupted reset
        leaves the account unconfirmed, writing nothing, until a new link finishes it."""
        token_digest = digest(token)
        account = self._token_account(token_digest, RESET, InvalidResetToken, ResetTokenExpired)
        require_strong(password, email=account["email"])
        password_hash = self._hasher.hash(password)
        # Consumed only now, so a weak password does not burn the token; the atomic
        # consume decides between two racing resets with one token.
        if self.store.consume_token(token_digest, RESET, self._clock()) is None:
            raise InvalidResetToken()
        now = self._clock()
        self.store.update_account(account["_id"], {"password_hash": password_hash, "updated_at": now})
        self.store.invalidate_tokens(account["_id"], RESET, now)
        self._sessions.revoke_account(account["_id"])
        self._guard.lift(LOCK_SCOPE, account["email"])
        return self._confirm(account)

    def _confirm(self, account: dict) -> dict:
        """Mark the address confirmed.  For an account that never confirmed it this is a
        claim: whoever held the account until now may have been a stranger who
        registered the address, so what it granted is undone first (``_undo_grants``).
        The flag is written last: until it is, the account writes nothing
        (``DashboardAccess.require_verified``) and the next link claims again."""
        if not account.get("email_verified"):
            self._undo_grants(account["_id"])
        return self.store.update_account(account["_id"], {"email_verified": True, "updated_at": self._clock()})

    def _undo_grants(self, account_id: str) -> None:
        """Undo what an unconfirmed account granted: every API key it minted, every
        membership it added and, within each of those organizations, whatever the
        members it added granted in turn (their keys and the members they added),
        however deep.  An unconfirmed account can no longer grant anything
        (``require_verified``): these are grants made before that rule, or past it.
        The account's own memberships stay: they are the mailbox owner's now.

        Keys go before memberships, and memberships deepest first, so a claim
        interrupted anywhere leaves every remaining grant reachable for the next one;
        what a member did while it was being removed is caught by the next round."""
        self._api_keys.revoke_created_by([account_id])
        grants = self._grants(account_id, [(None, account_id)])
        while grants:
            self._revoke_keys(grants)
            for organization_id, member_id in reversed(grants):
                removed = self.store.remove_member(organization_id, member_id)
                if removed is not None and removed["role"] == OWNER:
                    self.store.drop_owner_slot(organization_id)
            self._revoke_keys(grants)
            grants = self._grants(account_id, grants)
        # A planted owner may have demoted or removed the holder in an organization it
        # created: the mailbox owner gets it back rather than no one.
        for org in self.store.ownerless_organizations(created_by=account_id):
            self.store.restore_owner(org["_id"], account_id, self._clock())

    def _grants(self, account_id: str, granters: list[tuple[str | None, str]]) -> list[tuple[str, str]]:
        """(organization, member) pairs added by ``granters`` (each an (organization or
        None for any, account) pair) and, in the same organization, by those members
        in turn; parents before children.  ``account_id`` itself is never one."""
        found, queue = [], list(granters)
        while queue:
            organization_id, granter = queue.pop(0)
            for member in self.store.members_added_by(granter, organization_id):
                pair = (member["organization_id"], member["account_id"])
                if member["account_id"] != account_id and pair not in found:
                    found.append(pair)
                    queue.append(pair)
        return found

    def _revoke_keys(self, grants: list[tuple[str, str]]) -> None:
        """Revoke the keys each member minted on its organization's applications."""
        by_organization: dict[str, list[str]] = {}
        for organization_id, member_id in grants:
            by_organization.setdefault(organization_id, []).append(member_id)
        for organization_id, members in by_organization.items():
            apps = [app["_id"] for app in self._applications.list_for_organizations([organization_id])]
            self._api_keys.revoke_created_by(members, apps)

    def _token_account(self, token_digest: str, purpose: str, invalid: type, expired: type) -> dict:
        """The account an unused, unexpired emailed token of ``purpose`` was sent to:
        ``invalid`` when the token is unknown, used, or sent to an address the account no
        longer has; ``expired`` once it expired.  The caller consumes it."""
        record = self.store.token(token_digest, purpose)
        if record is None or record.get("used_at") is not None:
            raise invalid()
        if aware(record["expires_at"]) <= self._clock():
            raise expired()
        account = self.store.account(record["account_id"])
        if account is None or account["email"] != record["email"]:
            raise invalid()
        return account

    def _send_verification(self, account: dict) -> None:
        token = self._issue(account, VERIFICATION, self._verification_ttl)
        subject, body = emails.verification(account, emails.link(self._public_url, "verify-email", token),
                                            self._verification_ttl)
        self._mailer.send(account["email"], subject, body)

    def _send_reset(self, account: dict, *, claim: bool = False, counted: bool = False) -> None:
        if not counted:
            # A claim mail is a reset mail: it draws on the same per-email budget, so
            # repeated registrations cannot flood the address.
            try:
                self._limiter.hit(f"dashboard-forgot:{account['email']}", self._forgot_rate,
                                  error=ResetRequestsLimited)
            except ResetRequestsLimited:
                return
        token = self._issue(account, RESET, self._reset_ttl)
        subject, body = emails.password_reset(account, emails.link(self._public_url, "reset-password", token),
                                              self._reset_ttl, claim=claim)
        self._mailer.send(account["email"], subject, body)

    def _issue(self, account: dict, purpose: str, ttl: int) -> str:
        token, now = random_token(), self._clock()
        self.store.insert_token({"_id": digest(token), "account_id": account["_id"], "email": account["email"],
                                 "purpose": purpose, "created_at": now, "expires_at": now + seconds(ttl),
                                 "used_at": None})
        return token

    def login(self, email: str, password: str, *, ip: str, previous_session: str | None = None) -> tuple[dict, str]:
        """Check the credentials and open a new session; returns (account, raw session
        id).  A session the browser still presented is ended, so re-signing in never
        leaves an orphan session behind.

        Counted before the password is checked: the per-IP budget
        (IAMGATE_RATE_LIMIT_DASHBOARD_LOGIN, 429 RATE_LIMIT_EXCEEDED) and the login lock
        end users have (``PasswordGuard``): IAMGATE_LOCKOUT_THRESHOLD consecutive
        failures for the email lock it for IAMGATE_LOCKOUT_SECONDS (429
        AUTH_ACCOUNT_LOCKED, even for the right password); a successful login forgives
        the failures.  An unknown email costs the same bcrypt time as a wrong password
        and gets the same 401."""
        self._limiter.hit(f"dashboard-login:{ip}", self._login_rate)
        email = _lookup_form(email)
        account = self.store.account_by_email(email)
        if not self._guard.check(LOCK_SCOPE, email, password, account["password_hash"] if account else None):
            raise InvalidCredentials()
        self.logout(previous_session)
        return account, self._sessions.create(account["_id"])

    def logout(self, raw_session: str | None) -> None:
        if raw_session:
            self._sessions.revoke(raw_session)

    def account(self, account_id: str) -> dict:
        account = self.store.account(account_id)
        if account is None:
            raise SignInRequired()
        return account

    def update_account(self, account_id: str, values: dict) -> dict:
        """Change the account's name (the only editable profile field)."""
        if not values:
            return self.account(account_id)
        updated = self.store.update_account(account_id, {**values, "updated_at": self._clock()})
        if updated is None:
            raise SignInRequired()
        return updated

    def change_password(self, account_id: str, current: str, new: str) -> str:
        """Replace the password after checking the current one (422 INVALID_PASSWORD;
        the check draws on the login lock's budget, 429 AUTH_ACCOUNT_LOCKED), end every
        session of the account and return a fresh one for this browser."""
        account = self.account(account_id)
        if not self._guard.check(LOCK_SCOPE, account["email"], current, account["password_hash"]):
            raise WrongPassword("The current password is incorrect.", details={"field": "current_password"})
        require_strong(new, email=account["email"], field="new_password")
        self.store.update_account(account_id, {"password_hash": self._hasher.hash(new),
                                               "updated_at": self._clock()})
        # A password change is how a user evicts whoever stole the old one.
        self._sessions.revoke_account(account_id)
        return self._sessions.create(account_id)

    # ------------------------------------------------------------ organizations

    def organizations(self, account_id: str) -> list[tuple[dict, str]]:
        """Every organization the account belongs to, with its role there."""
        roles = self._access.memberships(account_id)
        return [(org, roles[org["_id"]]) for org in self.store.organizations(roles)]

    def create_organization(self, account_id: str, name: str) -> tuple[dict, str]:
        """403 DASHBOARD_EMAIL_UNVERIFIED for an account that has not confirmed its address."""
        self._access.require_verified(account_id)
        return self._create_organization(account_id, name), OWNER

    def _create_organization(self, account_id: str, name: str) -> dict:
        now = self._clock()
        org = {"_id": new_id(), "name": name, "created_by": account_id, "created_at": now,
               "applications_count": 0, "owners_count": 1}
        self.store.insert_organization(org)
        try:
            self.store.insert_member({"organization_id": org["_id"], "account_id": account_id,
                                      "role": OWNER, "created_at": now, "added_by": account_id})
        except Exception:
            self.store.delete_organization(org["_id"])
            raise
        return org

    def members(self, account_id: str, organization_id: str) -> list[dict]:
        """The organization's members; any member may read them."""
        self._role(account_id, organization_id)
        members = self.store.members(organization_id)
        accounts = self.store.accounts(m["account_id"] for m in members)
        return [serialize_member(m, accounts[m["account_id"]]) for m in members if m["account_id"] in accounts]

    def add_member(self, account_id: str, organization_id: str, email: str, role: str, *, ip: str) -> dict:
        """Add an existing dashboard account: owners and admins only (403 FORBIDDEN),
        only owners may make owners; 404 USER_NOT_FOUND without such an account,
        409 ACCOUNT_EMAIL_UNVERIFIED when it never confirmed its address (anyone can
        register any address), 409 RESOURCE_ALREADY_EXISTS when it is a member already.
        Counted first, per client IP and per calling account
        (IAMGATE_RATE_LIMIT_MEMBER_ADD, 429 RATE_LIMIT_EXCEEDED), so the answers cannot
        be used to probe which addresses have accounts at speed."""
        self._limiter.hit(f"dashboard-member-add:ip:{ip}", self._member_add_rate)
        self._limiter.hit(f"dashboard-member-add:account:{account_id}", self._member_add_rate)
        caller_role = self._role(account_id, organization_id, write=True)
        if role == OWNER and caller_role != OWNER:
            raise OwnerRequired(caller_role, message="Only an owner can add another owner.")
        target = self.store.account_by_email(email)
        if target is None:
            raise AccountNotFound(email)
        if not target.get("email_verified"):
            raise AccountEmailUnverified(email)
        member = {"organization_id": organization_id, "account_id": target["_id"], "role": role,
                  "created_at": self._clock(), "added_by": account_id}
        self.store.insert_member(member)
        if role == OWNER:
            self.store.add_owner_slot(organization_id)
        return serialize_member(member, target)

    def change_member_role(self, account_id: str, organization_id: str, member_id: str, role: str) -> dict:
        """Owners and admins change roles; only owners touch owners; the last owner
        cannot be demoted (409 ORGANIZATION_LAST_OWNER)."""
        caller_role = self._role(account_id, organization_id, write=True)
        member = self._member(organization_id, member_id)
        current = member["role"]
        if role == current:
            return serialize_member(member, self.store.account(member_id) or {})
        if OWNER in (role, current) and caller_role != OWNER:
            raise OwnerRequired(caller_role, message="Only an owner can grant or take away the owner role.")
        if current == OWNER and not self.store.take_owner_slot(organization_id):
            raise LastOwner()
        updated = self.store.set_member_role(organization_id, member_id, expected=current, role=role)
        if updated is None:
            if current == OWNER:
                self.store.add_owner_slot(organization_id)
            raise MembershipChanged()
        if role == OWNER:
            self.store.add_owner_slot(organization_id)
        return serialize_member(updated, self.store.account(member_id) or {})

    def remove_member(self, account_id: str, organization_id: str, member_id: str) -> None:
        """Owners and admins remove members (only owners remove owners); anyone may
        leave; the last owner cannot (409 ORGANIZATION_LAST_OWNER)."""
        leaving = member_id == account_id
        caller_role = self._role(account_id, organization_id, write=not leaving)
        member = self._member(organization_id, member_id)
        if member["role"] == OWNER and caller_role != OWNER:
            raise OwnerRequired(caller_role, message="Only an owner can remove an owner.")
        if member["role"] == OWNER and not self.store.take_owner_slot(organization_id):
            raise LastOwner()
        if not self.store.delete_member(organization_id, member_id, expected=member["role"]):
            if member["role"] == OWNER:
                self.store.add_owner_slot(organization_id)
            raise MembershipChanged()

    def _role(self, account_id: str, organization_id: str, *, write: bool = False) -> str:
        role = self._access.role_in(organization_id, account_id) if is_uuid(organization_id) else None
        if role is None:  # 404, not 403: do not confirm that someone else's organization exists
            raise OrganizationNotFound(organization_id)
        if write:
            if role not in WRITE_ROLES:
                raise RoleCannotWrite(role, "manage members", WRITE_ROLES)
            self._access.require_verified(account_id)
        return role

    def _member(self, organization_id: str, member_id: str) -> dict:
        member = self.store.member(organization_id, member_id) if is_uuid(member_id) else None
        if member is None:
            raise MemberNotFound(member_id)
        return member

    # ------------------------------------------------------------ applications

    def applications(self, account_id: str, organization_id: str | None = None) -> list[tuple[dict, str]]:
        """Applications of every organization the caller belongs to (or of one of them),
        each with the caller's role there."""
        roles = self._access.memberships(account_id)
        if organization_id is not None:
            if not is_uuid(organization_id):
                raise OrganizationIdInvalid()
            if organization_id not in roles:
                raise NotAMember(organization_id)
            roles = {organization_id: roles[organization_id]}
        apps = self._applications.list_for_organizations(roles)
        return [(app, roles[app["organization_id"]]) for app in apps]

    def create_application(self, account_id: str, values: dict) -> tuple[dict, str]:
        """POST /api/dashboard/applications: 422 VALIDATION_ERROR when organization_id
        is needed but missing, 403 FORBIDDEN for an organization the caller is not in or
        cannot write to, 403 DASHBOARD_EMAIL_UNVERIFIED for an unconfirmed caller, 403
        resource_limit_exceeded past the organization's limit."""
        values = dict(values)
        organization_id = values.pop("organization_id", None)
        roles = self._access.memberships(account_id)
        if organization_id is None:
            if len(roles) != 1:
                raise OrganizationRequired(len(roles))
            organization_id = next(iter(roles))
        role = roles.get(organization_id)
        if role is None:
            raise NotAMember(organization_id)
        if role not in WRITE_ROLES:
            raise RoleCannotWrite(role, "create applications", WRITE_ROLES)
        self._access.require_verified(account_id)
        # The organization's limit is counted on the organization, atomically, before
        # the application exists; a failed insert gives the slot back.
        if not self.store.reserve_application_slot(organization_id, self._max_applications):
            raise ApplicationLimitReached(self._max_applications)
        try:
            app = self._applications.create(values, organization_id=organization_id, owner_account_id=account_id)
        except Exception:
            self.store.release_application_slot(organization_id)
            raise
        return app, role

    def delete_application(self, app_id: str) -> None:
        """Irreversible: every user, role, permission, API key and webhook of the
        application goes with it (``ApplicationService.delete``); then its
        organization's slot is given back.  The caller's right to write is checked
        first (``access.member_of_application(write=True)``)."""
        app = self._applications.delete(app_id)
        if app.get("organization_id"):
            self.store.release_application_slot(app["organization_id"])


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


def serialize_organization(org: dict, role: str) -> dict:
    return {"id": org["_id"], "name": org["name"], "role": role, "created_at": isoformat(org["created_at"])}


def serialize_member(member: dict, account: dict) -> dict:
    return {
        "organization_id": member["organization_id"],
        "account_id": member["account_id"],
        "email": account.get("email"),
        "name": account.get("name"),
        "role": member["role"],
        "created_at": isoformat(member["created_at"]),
    }

