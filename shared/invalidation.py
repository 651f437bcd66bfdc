"""Which change kinds make which cached authorization data stale.

The one rule the control plane's check cache (``controlplane/authz/service.py``) and the
decision service's cache (``decision/cache.py``) both apply, so one change drops the same
entries in both (docs/decision-service.md, "Cache": an entry is dropped by a matching
change):

- a user's grants: every user ``affected_users`` names. The control plane computes the
  list and the change stream carries it to decision services as a frame's ``user_ids``;
- an application's ABAC policies: the kinds in ``POLICY_KINDS``. ``changed_policies``
  names the policies such an event changed (the stream carries them as ``policy_ids``), so
  a cache patches just those into the set it holds instead of reading the whole set again;
- an application's API key digests (decision services cache them): ``API_KEY_KINDS``;
- everything cached for an application: ``APPLICATION_KINDS``.

An event that does none of these (``concerns_decisions`` is False: a token's
``connection.refreshed``, a profile edit) changes no cached answer, so the change stream
does not send it as a frame; a heartbeat soon tells the decision service the stream
covered it (docs/authorization.md, "Change stream protocol").

Kinds are those of ``shared.event_types``.
"""
from __future__ import annotations

# Kinds whose subject user's answers may change even if the emitter listed nobody in
# ``user_ids``.
SUBJECT_USER_KINDS = frozenset({
    "role.assigned", "role.removed", "user.created", "user.deleted", "user.suspended", "user.unsuspended",
    "user.claimed", "user.password_reset", "attribute.set", "attribute.deleted",
})
POLICY_KINDS = frozenset({"policy.created", "policy.updated", "policy.deleted", "policies.invalidated"})
API_KEY_KINDS = frozenset({"api_keys.changed"})
APPLICATION_KINDS = frozenset({"application.deleted"})
_CACHE_KINDS = POLICY_KINDS | API_KEY_KINDS | APPLICATION_KINDS


def affected_users(event) -> list[str]:
    """Users of ``event.app_id`` whose authorization answers may have changed, in order,
    without duplicates. ``event``: a change-log event (``type``, ``user_ids``, ``subject``)."""
    ids = list(event.user_ids)
    if event.type in SUBJECT_USER_KINDS and event.subject.get("user_id"):
        ids.append(event.subject["user_id"])
    return list(dict.fromkeys(i for i in ids if isinstance(i, str)))


# More policies than this changed at once: a cache reads the whole set again rather than
# patching (a patch reads the changed policies by id, one query).
MAX_PATCHED_POLICIES = 100


def changed_policies(event) -> list[str] | None:
    """The ids of the policies a ``POLICY_KINDS`` event changed, or None when the event does
    not name them (then the application's whole policy set must be read again)."""
    policy_id = event.subject.get("policy_id")
    return [policy_id] if event.type in POLICY_KINDS and isinstance(policy_id, str) else None


def concerns_decisions(event) -> bool:
    """Whether ``event`` can change an answer a decision service caches: it names users
    (``affected_users``), or is one of the policy, API-key or application kinds."""
    return event.type in _CACHE_KINDS or bool(affected_users(event))
