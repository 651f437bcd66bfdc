"""MongoDB access for dashboard accounts, organizations and their members.

Collections (none carries ``app_id``: they sit above the tenants and survive an
application's deletion, see ``applications.store.GLOBAL_COLLECTIONS``):

- ``dashboard_accounts`` {_id, email (unique, lower case), name, password_hash,
  email_verified (absent: false), created_at, updated_at, tokens_not_before,
  kept_session}: ``tokens_not_before`` is the stamp every change that ends the
  account's other sessions moves (``restamp``; absent until the first one),
  ``kept_session`` the stored id of the one session that change kept, if any
  (``dashboard.sessions``).
- ``dashboard_tokens`` {_id: SHA-256 of the token, account_id, email, purpose
  (verification | reset), created_at, expires_at, used_at}: the single-use links mailed
  for email verification and password reset.
- ``organizations`` {_id, name, created_by, created_at, applications_count,
  owners_count, require_mfa (absent: false), updated_at}; ``applications_count`` is the
  application-limit counter (``reserve_application_slot``), ``owners_count`` guards the
  last owner.
- ``organization_members`` {organization_id, account_id, role, created_at, added_by},
  unique per organization and account; ``added_by`` is
  the account that added the member (the creator itself for an organization's first
  owner; absent on memberships older than the field).
"""
from __future__ import annotations

from pymongo import ASCENDING, IndexModel, ReturnDocument

from controlplane.collection import insert_unique
from controlplane.dashboard.errors import AlreadyMember, EmailTaken
from shared.stamps import next_stamp

# The account's field naming the session its last change of stamp kept.
KEPT_SESSION = "kept_session"

INDEXES = {
    "dashboard_accounts": [IndexModel([("email", ASCENDING)], unique=True)],
    "organization_members": [
        IndexModel([("organization_id", ASCENDING), ("account_id", ASCENDING)], unique=True),
        IndexModel([("account_id", ASCENDING)]),
        # Looked up at every first confirmation of an address (the claim, ``AccountService``).
        IndexModel([("added_by", ASCENDING)]),
    ],
    "organizations": [IndexModel([("created_by", ASCENDING)])],
    "dashboard_tokens": [IndexModel([("account_id", ASCENDING), ("purpose", ASCENDING)]),
                         IndexModel([("expires_at", ASCENDING)], expireAfterSeconds=0)],
}


class DashboardStore:
    def __init__(self, store):
        store.declare_indexes(INDEXES)
        self._accounts = store["dashboard_accounts"]
        self._orgs = store["organizations"]
        self._members = store["organization_members"]
        self._tokens = store["dashboard_tokens"]

    # -- accounts

    def insert_account(self, doc: dict) -> None:
        """EmailTaken when the unique email index refuses it."""
        insert_unique(self._accounts, doc, EmailTaken)

    def update_account(self, account_id: str, changes: dict) -> dict | None:
        return self._accounts.find_one_and_update({"_id": account_id}, {"$set": changes},
                                                  return_document=ReturnDocument.AFTER)

    def restamp(self, account_id: str, changes: dict, now, *, kept_session: str | None = None,
                over: dict | None = None) -> dict | None:
        """Write ``changes`` with a new stamp (``tokens_not_before``, after the account's
        and ``now``) and ``kept_session`` (the stored id of the session the change keeps,
        or None); the account after, None when it is gone.  One compare-and-set on the
        stamp, so every change gets a stamp of its own: over ``over`` (the account as the
        caller read it, its credentials checked) only, None when another change came
        between; without it, over the account as it is, read again until it holds."""
        while True:
            read = over if over is not None else self.account(account_id)
            if read is None:
                return None
            stamp = read.get("tokens_not_before")
            updated = self._accounts.find_one_and_update(
                {"_id": account_id, "tokens_not_before": stamp},
                {"$set": {**changes, "tokens_not_before": next_stamp(stamp, now), KEPT_SESSION: kept_session}},
                return_document=ReturnDocument.AFTER)
            if updated is not None or over is not None:
                return updated

    def delete_account(self, account_id: str) -> None:
        self._accounts.delete_one({"_id": account_id})

    def account(self, account_id: str) -> dict | None:
        return self._accounts.find_one({"_id": account_id})

    def session_gate(self, account_id: str) -> dict | None:
        """``{tokens_not_before, kept_session}`` of the account, what its sessions are
        checked against at every use (``dashboard.sessions``); None when it is gone."""
        return self._accounts.find_one({"_id": account_id}, {"tokens_not_before": 1, KEPT_SESSION: 1})

    def account_by_email(self, email: str) -> dict | None:
        return self._accounts.find_one({"email": email})

    def accounts(self, account_ids) -> dict[str, dict]:
        return {d["_id"]: d for d in self._accounts.find({"_id": {"$in": list(account_ids)}})}

    # -- single-use tokens (verification, reset)

    def insert_token(self, doc: dict) -> None:
        self._tokens.insert_one(doc)

    def token(self, token_digest: str, purpose: str) -> dict | None:
        return self._tokens.find_one({"_id": token_digest, "purpose": purpose})

    def consume_token(self, token_digest: str, purpose: str, now) -> dict | None:
        """Mark the token used if it is unused and unexpired (one winner under races)."""
        return self._tokens.find_one_and_update(
            {"_id": token_digest, "purpose": purpose, "used_at": None, "expires_at": {"$gt": now}},
            {"$set": {"used_at": now}}, return_document=ReturnDocument.AFTER)

    def invalidate_tokens(self, account_id: str, purpose: str, now) -> None:
        self._tokens.update_many({"account_id": account_id, "purpose": purpose, "used_at": None},
                                 {"$set": {"used_at": now}})

    # -- organizations

    def insert_organization(self, doc: dict) -> None:
        self._orgs.insert_one(doc)

    def delete_organization(self, organization_id: str) -> None:
        self._orgs.delete_one({"_id": organization_id})

    def organizations(self, organization_ids) -> list[dict]:
        cursor = self._orgs.find({"_id": {"$in": list(organization_ids)}})
        return list(cursor.sort([("created_at", ASCENDING), ("_id", ASCENDING)]))

    def organization(self, organization_id: str) -> dict | None:
        return self._orgs.find_one({"_id": organization_id})

    def update_organization(self, organization_id: str, changes: dict) -> dict | None:
        """Set ``changes``; the organization as it was before, or None when it is gone."""
        return self._orgs.find_one_and_update({"_id": organization_id}, {"$set": changes},
                                              return_document=ReturnDocument.BEFORE)

    def organizations_requiring_mfa(self, organization_ids) -> list[str]:
        """Those of ``organization_ids`` that require a second factor of their members."""
        return [d["_id"] for d in self._orgs.find({"_id": {"$in": list(organization_ids)}, "require_mfa": True},
                                                  {"_id": 1}).sort("_id", ASCENDING)]

    def ownerless_organizations(self, *, created_by: str) -> list[dict]:
        """Organizations the account created that count no owner (``drop_owner_slot``)."""
        return list(self._orgs.find({"created_by": created_by, "owners_count": {"$lte": 0}}))

    def take_owner_slot(self, organization_id: str) -> bool:
        """Count one owner fewer unless it is the last one (atomic on the organization)."""
        result = self._orgs.update_one({"_id": organization_id, "owners_count": {"$gt": 1}},
                                       {"$inc": {"owners_count": -1}})
        return result.modified_count == 1

    def add_owner_slot(self, organization_id: str) -> None:
        self._orgs.update_one({"_id": organization_id}, {"$inc": {"owners_count": 1}})

    def reserve_application_slot(self, organization_id: str, limit: int) -> bool:
        """Atomically take one of the organization's ``limit`` application slots."""
        result = self._orgs.update_one(
            {"_id": organization_id,
             "$or": [{"applications_count": {"$lt": limit}}, {"applications_count": {"$exists": False}}]},
            {"$inc": {"applications_count": 1}},
        )
        return result.modified_count == 1

    def applications_count(self, organization_id: str) -> int:
        org = self._orgs.find_one({"_id": organization_id}, {"applications_count": 1})
        return (org or {}).get("applications_count") or 0

    def correct_application_slots(self, organization_id: str, counted: int, actual: int) -> bool:
        """Set the counter to ``actual`` if it still holds ``counted`` (read before
        ``actual`` was counted) and that is more: True when slots were given back."""
        if actual >= counted:
            return False
        result = self._orgs.update_one({"_id": organization_id, "applications_count": counted},
                                       {"$set": {"applications_count": actual}})
        return result.modified_count == 1

    def release_application_slot(self, organization_id: str) -> None:
        self._orgs.update_one({"_id": organization_id, "applications_count": {"$gt": 0}},
                              {"$inc": {"applications_count": -1}})

    # -- members

    def insert_member(self, doc: dict) -> None:
        """AlreadyMember when the account is a member of the organization already."""
        insert_unique(self._members, doc, lambda: AlreadyMember(doc["account_id"]))

    def members(self, organization_id: str) -> list[dict]:
        cursor = self._members.find({"organization_id": organization_id})
        return list(cursor.sort([("created_at", ASCENDING), ("account_id", ASCENDING)]))

    def member(self, organization_id: str, account_id: str) -> dict | None:
        return self._members.find_one({"organization_id": organization_id, "account_id": account_id})

    def set_member_role(self, organization_id: str, account_id: str, *, expected: str, role: str) -> dict | None:
        """Change the role only if it is still ``expected`` (so a concurrent change is not
        silently overwritten); the updated member, or None."""
        return self._members.find_one_and_update(
            {"organization_id": organization_id, "account_id": account_id, "role": expected},
            {"$set": {"role": role}}, return_document=ReturnDocument.AFTER,
        )

    def memberships(self, account_id: str) -> list[dict]:
        """Every membership of the account, in any organization."""
        return list(self._members.find({"account_id": account_id}))

    def members_added_by(self, account_id: str, organization_id: str | None = None) -> list[dict]:
        """Memberships the account added (in one organization, when given), other than
        its own."""
        query = {"added_by": account_id, "account_id": {"$ne": account_id}}
        if organization_id is not None:
            query["organization_id"] = organization_id
        return list(self._members.find(query))

    def remove_member(self, organization_id: str, account_id: str) -> dict | None:
        """Delete the membership whatever its role; the deleted document, or None."""
        return self._members.find_one_and_delete({"organization_id": organization_id, "account_id": account_id})

    def restore_owner(self, organization_id: str, account_id: str, now) -> None:
        """Make the account owner of an organization left without one (the claim's
        repair); counted on the organization like any owner."""
        self._members.update_one({"organization_id": organization_id, "account_id": account_id},
                                 {"$set": {"role": "owner"},
                                  "$setOnInsert": {"created_at": now, "added_by": account_id}}, upsert=True)
        self._orgs.update_one({"_id": organization_id, "owners_count": {"$lte": 0}}, {"$set": {"owners_count": 1}})

    def drop_owner_slot(self, organization_id: str) -> None:
        """Count one owner fewer even if it was the last (a claim removing a planted owner)."""
        self._orgs.update_one({"_id": organization_id}, {"$inc": {"owners_count": -1}})

    def delete_member(self, organization_id: str, account_id: str, *, expected: str) -> bool:
        result = self._members.delete_one(
            {"organization_id": organization_id, "account_id": account_id, "role": expected})
        return result.deleted_count == 1
