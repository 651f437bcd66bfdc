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


class InvalidCredentials(Unauthorized):
    """Sign-in with an unknown email or a wrong password (one answer for both, so the
    answer does not tell which accounts exist)."""

    code, message = "AUTH_INVALID_CREDENTIALS", "The email or password is incorrect."


class SignInRequired(Unauthorized):
    """The session names an account that no longer exists: a session outliving its
    account is not a session."""

    message = "Sign in to the dashboard first."


class EmailTaken(Conflict):
    """Registration with an email that already has a dashboard account."""

    code, message = "AUTH_EMAIL_ALREADY_REGISTERED", "A dashboard account with this email already exists."

    def __init__(self):
        super().__init__(details={"field": "email"})


class OrganizationNotFound(NotFound):
    """No such organization, or one the caller is not a member of (404 rather than 403,
    so as not to confirm that someone else's organization exists)."""

    message = "Organization not found."
    detail_names = ("organization_id",)


class NotAMember(Forbidden):
    """The caller names (by ``organization_id``) an organization it does not belong to
    when listing or creating applications."""

    message = "You are not a member of this organization."
    detail_names = ("organization_id",)


class OrganizationIdInvalid(ValidationFailed):
    """``?organization_id=`` is not a UUID.  One field, so always
    VALIDATION_INVALID_FORMAT."""

    def __init__(self):
        super().__init__({"organization_id": "must be a UUID"})

    @classmethod
    def codes(cls) -> tuple[str, ...]:
        return (cls.code,)


class OrganizationRequired(Unprocessable):
    """An application is created without ``organization_id`` by a caller who belongs
    to several organizations, or to none."""

    code = "VALIDATION_ERROR"

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


class OwnerRequired(Forbidden):
    """An admin tries to add, promote to, demote from or remove the owner role: only
    owners touch owners.  Raised with the caller's role and a message saying which rule."""

    detail_names = ("role",)


class ApplicationNotAccessible(ApplicationNotFound):
    """No such application, or one of an organization the caller is not in (404
    rather than 403, so as not to confirm that it exists)."""

    detail_names = ("application_id",)


class MemberNotFound(NotFound):
    """The account named in the path is not a member of the organization."""

    code, message = "USER_NOT_FOUND", "No such dashboard account in this organization."
    detail_names = ("account_id",)


class AccountNotFound(NotFound):
    """A member is added by an email that has no dashboard account."""

    code, message = "USER_NOT_FOUND", "No dashboard account has this email."
    detail_names = ("email",)


class AlreadyMember(Conflict):
    """The account added is a member of the organization already."""

    code, message = "RESOURCE_ALREADY_EXISTS", "This account is already a member of the organization."
    detail_names = ("account_id",)


class LastOwner(Conflict):
    """Demoting or removing the organization's last owner: an organization always
    keeps one."""

    code = "ORGANIZATION_LAST_OWNER"
    message = "An organization must keep at least one owner: make someone else owner first."


class MembershipChanged(Conflict):
    """A concurrent request changed the membership between read and write; the caller
    may reload and retry."""

    message = "The membership changed meanwhile; reload and try again."


class ApplicationLimitReached(Forbidden):
    """The organization holds IAMGATE_MAX_APPLICATIONS_PER_ORGANIZATION applications."""

    code, message = "resource_limit_exceeded", "The organization has reached its limit of {limit} applications."
    detail_names = ("limit",)


class AccountEmailUnverified(Conflict):
    """A member is added by the email of an account that never confirmed it: anyone can
    register any address, so only a proven mailbox may join an organization."""

    code, message = "ACCOUNT_EMAIL_UNVERIFIED", "This dashboard account has not confirmed its email address yet."
    detail_names = ("email",)


class DashboardEmailUnverified(Forbidden):
    """The signed-in account has not confirmed its email address.  Anyone can register
    any address, so until the mailbox is proven the account builds nothing: it cannot
    create organizations or applications, add or change members, change an
    application, or mint API keys (docs/security.md, "Unverified dashboard accounts")."""

    code = "DASHBOARD_EMAIL_UNVERIFIED"
    message = ("Confirm your email address first: open the link mailed to it "
               "(POST /api/dashboard/email/resend sends a new one).")


class VerificationRequestsLimited(RateLimited):
    """IAMGATE_RATE_LIMIT_RESEND per account."""

    code = "AUTH_VERIFICATION_RATE_LIMITED"
    message = "Too many verification emails requested. Try again later."
