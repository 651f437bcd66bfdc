"""Errors of ABAC policies and user attributes (docs/authorization.md, docs/errors.md)."""
from shared.errors import BadRequest, Conflict, NotFound


class PolicyNotFound(NotFound):
    """No policy with this id in the application."""

    code, message = "POLICY_NOT_FOUND", "ABAC policy not found."
    detail_names = ("policy_id",)


class PolicyNameTaken(Conflict):
    """The policy name is already used in the application."""

    code, message = "RESOURCE_ALREADY_EXISTS", "A policy named {name!r} already exists in this application."
    detail_names = ("name",)


class ConditionInvalid(BadRequest):
    """A policy condition outside the condition language or its limits.  Always
    VALIDATION_INVALID_FORMAT, however many problems: ``details.fields`` maps the JSON
    path of each bad node (``condition.all[2].op``) to what is wrong with it, and
    ``details.path`` names the first."""

    code = "VALIDATION_INVALID_FORMAT"

    def __init__(self, problems: dict[str, str]):
        path, reason = next(iter(problems.items()))
        more = f" (and {len(problems) - 1} more problem(s), see details.fields)" if len(problems) > 1 else ""
        super().__init__(f"{path}: {reason}{more}", details={"path": path, "fields": dict(problems)})


class ConditionTooLarge(BadRequest):
    """A condition over IAMGATE_MAX_CONDITION_BYTES bytes of JSON or
    IAMGATE_MAX_CONDITION_NODES nodes: ``details`` has ``path`` and either ``bytes`` and
    ``max_bytes`` or ``nodes`` and ``max_nodes``."""

    code = "ABAC_CONDITION_TOO_LARGE"

    def __init__(self, path: str, size: dict):
        what = (f"{size['bytes']} bytes of JSON; at most {size['max_bytes']}" if "bytes" in size
                else f"{size['nodes']} nodes (all, any, not and comparisons); at most {size['max_nodes']}")
        super().__init__(f"{path} is {what} are allowed.", details={"path": path, **size})


class PolicyLimitReached(Conflict):
    """The application already holds IAMGATE_MAX_POLICIES_PER_APPLICATION policies."""

    code = "ABAC_POLICY_LIMIT_EXCEEDED"
    message = "An application may hold at most {limit} ABAC policies; delete one first."
    detail_names = ("limit",)


class PermissionPolicyLimitReached(Conflict):
    """IAMGATE_MAX_POLICIES_PER_PERMISSION policies already name this permission pattern."""

    code = "ABAC_POLICIES_PER_PERMISSION_EXCEEDED"
    message = "At most {limit} ABAC policies may name the permission pattern {permission!r}; delete one first."
    detail_names = ("permission", "limit")


class AttributeNotFound(NotFound):
    """The user has no attribute with this key."""

    code, message = "ATTRIBUTE_NOT_FOUND", "The user has no attribute with this key."
    detail_names = ("user_id", "key")


class AttributeLimitReached(Conflict):
    """The user already holds the most attribute keys allowed."""

    code, message = "ATTRIBUTE_LIMIT_EXCEEDED", "A user may hold at most {limit} attributes; delete one first."
    detail_names = ("user_id", "limit")


class AttributeKeyConflict(Conflict):
    """A dotted key and one of its prefixes cannot both be set: ``a.b`` is stored (and read
    by conditions) as ``b`` inside ``a``."""

    code = "ATTRIBUTE_KEY_CONFLICT"
    message = "The key {key!r} conflicts with the existing key {conflicts_with!r}; delete that one first."
    detail_names = ("user_id", "key", "conflicts_with")
