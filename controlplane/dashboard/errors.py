"""Errors of the dashboard: accounts, sessions, organizations, members, and access to
applications (docs/dashboard.md, "Errors of the dashboard").

The emailed tokens of dashboard accounts fail as end users' do, with the same codes and
messages: those errors (``InvalidResetToken``...) are the users area's."""
from shared.errors import (
    ApplicationNotFound,
    Conflict,
    Forbidden,
    NotFound,
    RateLimited,
    Unauthorized,
    Unprocessable,
    ValidationFailed,
)


class InvalidCredentials(Unauthorized, code="AUTH_INVALID_CREDENTIALS", message="The email or password is incorrect."):
    """Sign-in with an unknown email or a wrong password (one answer for both, so the
    answer does not tell which accounts exist)."""


class SignInRequired(Unauthorized, message="Sign in to the dashboard first."):
    """The session names an account that no longer exists: a session outliving its
    account is not a session."""


class EmailTaken(Conflict, code="AUTH_EMAIL_ALREADY_REGISTERED",
                 message="A dashboard account with this email already exists."):
    """Registration with an email that already has a dashboard account."""

    def __init__(self):
        super().__init__(details={"field": "email"})


class OrganizationNotFound(NotFound, message="Organization not found.", detail_names=("organization_id",)):
    """No such organization, or one the caller is not a member of (404 rather than 403,
    so as not to confirm that someone else's organization exists)."""


class NotAMember(Forbidden, message="You are not a member of this organization.", detail_names=("organization_id",)):
    """The caller names (by ``organization_id``) an organization it does not belong to
    when listing or creating applications."""


class OrganizationIdInvalid(ValidationFailed):
    """``?organization_id=`` is not a UUID.  One field, so always
    VALIDATION_INVALID_FORMAT."""

    def __init__(self):
        super().__init__({"organization_id": "must be a UUID"})

    @classmethod
    def codes(cls) -> tuple[str, ...]:
        return (cls.code,)


class OrganizationRequired(Unprocessable, code="VALIDATION_ERROR"):
    """An application is created without ``organization_id`` by a caller who belongs
    to several organizations, or to none."""

    def __init__(self, organizations: int):
        super().__init__(
            "organization_id is required: you belong to several organizations." if organizations
            else "organization_id is required: create an organization first.",
            details={"fields": {"organization_id": "is required"}, "organizations": organizations},
        )


class RoleCannotWrite(Forbidden):
    """The caller's organization role (member or viewer) only reads: it cannot create
    or change applications, API keys or memberships."""

    def __init__(self, role: str, action: str, required_roles):
        super().__init__(f"Your organization role ({role}) cannot {action}.",
                         details={"role": role, "required_role": list(required_roles)})


class OwnerRequired(Forbidden, detail_names=("role",)):
    """An admin tries to add, promote to, demote from or remove the owner role: only
    owners touch owners.  Raised with the caller's role and a message saying which rule."""


class ApplicationNotAccessible(ApplicationNotFound, detail_names=("application_id",)):
    """No such application, or one of an organization the caller is not in (404
    rather than 403, so as not to confirm that it exists)."""


class MemberNotFound(NotFound, code="USER_NOT_FOUND", message="No such dashboard account in this organization.",
                     detail_names=("account_id",)):
    """The account named in the path is not a member of the organization."""


class AccountNotFound(NotFound, code="USER_NOT_FOUND", message="No dashboard account has this email.",
                      detail_names=("email",)):
    """A member is added by an email that has no dashboard account."""


class AlreadyMember(Conflict, code="RESOURCE_ALREADY_EXISTS",
                    message="This account is already a member of the organization.", detail_names=("account_id",)):
    """The account added is a member of the organization already."""


class LastOwner(Conflict, code="ORGANIZATION_LAST_OWNER",
                message="An organization must keep at least one owner: make someone else owner first."):
    """Demoting or removing the organization's last owner: an organization always
    keeps one."""


class MembershipChanged(Conflict, message="The membership changed meanwhile; reload and try again."):
    """A concurrent request changed the membership between read and write; the caller
    may reload and retry."""


class ApplicationLimitReached(Forbidden, code="resource_limit_exceeded",
                              message="The organization has reached its limit of {limit} applications.",
                              detail_names=("limit",)):
    """The organization holds IAMGATE_MAX_APPLICATIONS_PER_ORGANIZATION applications."""


class AccountEmailUnverified(Conflict, code="ACCOUNT_EMAIL_UNVERIFIED",
                             message="This dashboard account has not confirmed its email address yet.",
                             detail_names=("email",)):
    """A member is added by the email of an account that never confirmed it: anyone can
    register any address, so only a proven mailbox may join an organization."""


class DashboardEmailUnverified(Forbidden, code="DASHBOARD_EMAIL_UNVERIFIED",
                               message="Confirm your email address first: open the link mailed to it "
                                       "(POST /api/dashboard/email/resend sends a new one)."):
    """The signed-in account has not confirmed its email address.  Anyone can register
    any address, so until the mailbox is proven the account builds nothing: it cannot
    create organizations or applications, add or change members, change an
    application, or mint API keys (docs/security.md, "Unverified dashboard accounts")."""


class VerificationRequestsLimited(RateLimited, code="AUTH_VERIFICATION_RATE_LIMITED",
                                  message="Too many verification emails requested. Try again later."):
    """IAMGATE_RATE_LIMIT_RESEND per account."""


# Where a member sent to enrol a second factor starts (``DashboardMfaRequired``).
ENROL_ROUTE = "/api/dashboard/me/mfa/totp/setup"


class DashboardMfaRequired(Forbidden, code="DASHBOARD_MFA_REQUIRED",
                           message="This organization requires a second factor of its members: set one up first "
                                   "(an authenticator app: POST /api/dashboard/me/mfa/totp/setup, or a passkey: "
                                   "POST /api/dashboard/me/passkeys/registration/options).",
                           detail_names=("organization_id", "enrol")):
    """The organization requires MFA (``require_mfa``) and the signed-in account has no
    second factor: nothing of the organization or its applications is reachable until
    the account enrols (docs/dashboard.md, "Two-step verification")."""

    def __init__(self, organization_id: str):
        super().__init__(organization_id, ENROL_ROUTE)


# Where a session asked to prove its holder again does so (``DashboardReauthRequired``).
REAUTHENTICATE_ROUTE = "/api/dashboard/me/reauthenticate"


class DashboardReauthRequired(Forbidden, code="DASHBOARD_REAUTH_REQUIRED",
                              message="This action needs a recent sign-in: confirm your password (or use a passkey), "
                                      "then try again.",
                              detail_names=("reauthenticate", "reauthenticate_passkey")):
    """A sensitive action (``Resource.sensitive``) by a session whose holder last proved
    who they are longer ago than IAMGATE_DASHBOARD_SUDO_SECONDS: a stolen session cookie
    alone buys no lasting access (docs/dashboard.md, "Sensitive actions")."""

    def __init__(self):
        super().__init__(REAUTHENTICATE_ROUTE, f"{REAUTHENTICATE_ROUTE}/passkey/options")


class OwnerMfaMissing(Conflict, code="ORGANIZATION_OWNER_MFA_REQUIRED",
                      message="Set up your own second factor before requiring one of every member."):
    """An owner without a second factor tries to turn ``require_mfa`` on, which would
    shut them out of their own organization."""
