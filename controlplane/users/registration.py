"""Registration: the spec's "User authentication" register (POST V1/users/register) and
the application's user limit (IAMGATE_MAX_USERS_PER_APPLICATION, 403
tier_limit_exceeded).

The limit is held by one counter document per application (``user_counters``): a
registration reserves a slot atomically before the user is inserted and confirms it
after, so parallel registrations cannot exceed the limit.  A reservation whose
registration died is given back after ``STALE_RESERVATION_SECONDS``; a slot whose
release was lost to a crash is recounted when the limit is next reached.
"""
from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

from pymongo.errors import DuplicateKeyError

from controlplane.events import EventLog
from controlplane.passwords import PasswordHasher, require_strong
from controlplane.ratelimit import RateLimiter
from controlplane.users.errors import EmailAlreadyRegistered, RegistrationsLimited, UserLimitReached
from controlplane.users.store import UserStore
from controlplane.users.verification import EmailVerificationService
from shared.config import Rate
from shared.ids import new_id
from shared.timeutil import Clock, seconds

# A tier-limit reservation older than this belongs to a registration that died between
# reserving the slot and inserting the user; its slot is given back.
STALE_RESERVATION_SECONDS = 60


@dataclass(eq=False)
class RegistrationService:
    users: UserStore
    verification: EmailVerificationService
    events: EventLog
    clock: Clock
    hasher: PasswordHasher
    rate_limiter: RateLimiter
    _: KW_ONLY
    max_users_per_application: int
    rate_limit_register: Rate
    registration_rate_limit_max: int

    def throttle(self, app: dict, ip: str) -> None:
        """Registrations per client IP per application: the application's
        ``registration_rate_limit`` per minute or IAMGATE_RATE_LIMIT_REGISTER.  An
        application cannot lift the limit past the service's maximum
        (IAMGATE_REGISTRATION_RATE_LIMIT_MAX per minute): 0 ("unlimited") and anything
        above it mean that maximum, so a tenant cannot buy unbounded bcrypt work."""
        per_minute = app.get("registration_rate_limit")
        ceiling = self.registration_rate_limit_max
        if per_minute is None:
            rate = self.rate_limit_register
        else:
            rate = Rate(ceiling if per_minute == 0 else min(per_minute, ceiling), 60)
        self.rate_limiter.hit(f"register:{app['_id']}:{ip}", rate, error=RegistrationsLimited)

    def register(self, app: dict, *, email: str, password: str, name: str, metadata: dict | None = None) -> dict:
        """Create an unverified user, send the verification email, emit user.created.

        409 AUTH_EMAIL_ALREADY_REGISTERED for a taken email (a soft-deleted user keeps its
        email), 422 VALIDATION_PASSWORD_TOO_WEAK, 403 tier_limit_exceeded."""
        require_strong(password, email=email)
        if self.users.by_email(app["_id"], email) is not None:
            raise EmailAlreadyRegistered(email)
        user = self._create(app, email=email, name=name, metadata=metadata, email_verified=False, avatar_url=None,
                            password=password)
        self.verification.send(app, user)
        self._emit_created(app["_id"], user)
        return user

    def create_external(self, app: dict, *, email: str, name: str, email_verified: bool,
                        avatar_url: str | None) -> dict:
        """A user signed in by an upstream identity provider for the first time (JIT):
        no password, counted against the tier limit like a registration, user.created.
        ``email_verified`` is the caller's judgement of the upstream's word.  409
        AUTH_EMAIL_ALREADY_REGISTERED, 403 tier_limit_exceeded."""
        user = self._create(app, email=email, name=name, metadata=None, email_verified=email_verified,
                            avatar_url=avatar_url, password=None)
        self._emit_created(app["_id"], user)
        return user

    def _create(self, app: dict, *, email: str, name: str, metadata, email_verified: bool, avatar_url,
                password: str | None) -> dict:
        app_id, now = app["_id"], self.clock()
        user = {
            "_id": new_id(), "app_id": app_id, "email": email, "name": name, "password_hash": None,
            "email_verified": email_verified, "metadata": metadata, "avatar_url": avatar_url, "status": "active",
            "created_at": now, "updated_at": now, "deleted_at": None, "suspended_at": None, "last_login_at": None,
        }
        # The tier slot first: a full application costs no bcrypt work.
        self._reserve_slot(app_id, user["_id"], now)
        try:
            if password is not None:
                user["password_hash"] = self.hasher.hash(password)
            self.users.insert(user)
        except DuplicateKeyError:
            self.users.cancel_reservation(app_id, user["_id"])
            raise EmailAlreadyRegistered(email) from None
        except BaseException:
            self.users.cancel_reservation(app_id, user["_id"])
            raise
        self.users.confirm_slot(app_id, user["_id"])
        return user

    def _emit_created(self, app_id: str, user: dict) -> None:
        self.events.emit(app_id, "user.created", {"user_id": user["_id"], "email": user["email"], "name": user["name"]},
                         subject={"user_id": user["_id"]})

    def _reserve_slot(self, app_id: str, user_id: str, now) -> None:
        limit = self.max_users_per_application
        if self.users.reserve_slot(app_id, user_id, limit, now):
            return
        if self._reclaim_stale_reservations(app_id, now) and self.users.reserve_slot(app_id, user_id, limit, now):
            return
        if self.users.reconcile_slots(app_id) and self.users.reserve_slot(app_id, user_id, limit, now):
            return
        raise UserLimitReached(limit)

    def _reclaim_stale_reservations(self, app_id: str, now) -> bool:
        reclaimed = False
        for user_id in self.users.stale_reservations(app_id, now - seconds(STALE_RESERVATION_SECONDS)):
            if self.users.get(app_id, user_id) is not None:
                self.users.confirm_slot(app_id, user_id)  # inserted; only the confirmation was lost
            elif self.users.cancel_reservation(app_id, user_id):
                reclaimed = True
        return reclaimed

    def release_user_slot(self, app_id: str) -> None:
        """Give back the tier-limit slot of a user who was soft-deleted.

        Call it exactly once per user, after the conditional status transition to
        ``deleted`` succeeded (a double call would let the application exceed its limit).
        A call lost to a crash is repaired when the limit is next reached
        (``UserStore.reconcile_slots``)."""
        self.users.release_slot(app_id)
