"""Errors of ABAC policies and user attributes (docs/authorization.md, docs/errors.md)."""
from shared.errors import BadRequest, Conflict, NotFound


class PolicyNotFound(NotFound, code="POLICY_NOT_FOUND", message="ABAC policy not found.", detail_names=("policy_id",)):
    """No policy with this id in the application."""


class PolicyNameTaken(Conflict, code="RESOURCE_ALREADY_EXISTS",
                      message="A policy named {name!r} already exists in this application.", detail_names=("name",)):
    """The policy name is already used in the application."""


class ConditionInvalid(BadRequest, code="VALIDATION_INVALID_FORMAT"):
    """A policy condition outside the condition language or its limits.  Always
    VALIDATION_INVALID_FORMAT, however many problems: ``details.fields`` maps the JSON
    path of each bad node (``condition.all[2].op``) to what is wrong with it, and
    ``details.path`` names the first."""

    def __init__(self, problems: dict[str, str]):
        path, reason = next(iter(problems.items()))
        more = f" (and {len(problems) - 1} more problem(s), see details.fields)" if len(problems) > 1 else ""
        super().__init__(f"{path}: {reason}{more}", details={"path": path, "fields": dict(problems)})


class ConditionTooLarge(BadRequest, code="ABAC_CONDITION_TOO_LARGE"):
    """A condition over IAMGATE_MAX_CONDITION_BYTES bytes of JSON or
    IAMGATE_MAX_CONDITION_NODES nodes: ``details`` has ``path`` and either ``bytes`` and
    ``max_bytes`` or ``nodes`` and ``max_nodes``."""

    def __init__(self, path: str, size: dict):
        what = (f"{size['bytes']} bytes of JSON; at most {size['max_bytes']}" if "bytes" in size
                else f"{size['nodes']} nodes (all, any, not and comparisons); at most {size['max_nodes']}")
        super().__init__(f"{path} is {what} are allowed.", details={"path": path, **size})


class PolicyLimitReached(Conflict, code="ABAC_POLICY_LIMIT_EXCEEDED",
                         message="An application may hold at most {limit} ABAC policies; delete one first.",
                         detail_names=("limit",)):
    """The application already holds IAMGATE_MAX_POLICIES_PER_APPLICATION policies."""


class PermissionPolicyLimitReached(
        Conflict, code="ABAC_POLICIES_PER_PERMISSION_EXCEEDED", detail_names=("permission", "limit"),
        message="At most {limit} ABAC policies may name the permission pattern {permission!r}; delete one first."):
    """IAMGATE_MAX_POLICIES_PER_PERMISSION policies already name this permission pattern."""


class AttributeNotFound(NotFound, code="ATTRIBUTE_NOT_FOUND", message="The user has no attribute with this key.",
                        detail_names=("user_id", "key")):
    """The user has no attribute with this key."""


class AttributeLimitReached(Conflict, code="ATTRIBUTE_LIMIT_EXCEEDED",
                            message="A user may hold at most {limit} attributes; delete one first.",
                            detail_names=("user_id", "limit")):
    """The user already holds the most attribute keys allowed."""


class AttributeKeyConflict(
        Conflict, code="ATTRIBUTE_KEY_CONFLICT", detail_names=("user_id", "key", "conflicts_with"),
        message="The key {key!r} conflicts with the existing key {conflicts_with!r}; delete that one first."):
    """A dotted key and one of its prefixes cannot both be set: ``a.b`` is stored (and read
    by conditions) as ``b`` inside ``a``."""
