"""The layers of docs/architecture.md ("Map"), checked on the source with ``ast``:

- an area uses another area's services, never its store: no module of
  ``controlplane/<area>/`` imports ``controlplane.<other area>.store``;
- ``decision/`` and ``controlplane/`` never import each other, and ``shared/`` imports
  neither;
- a store imports no resource (data flows resource -> service -> store, never back);
- every collection has one owner: one module opens it (``store["name"]``, or a
  ``Collection`` subclass's ``name``), and an area's ``service.py`` opens none.

Violations not fixed yet are listed in ``KNOWN_VIOLATIONS``; the test also fails when one
of them is gone, so the list only ever shrinks.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("controlplane", "decision", "shared")

AREA_STORE, PROCESSES, SHARED, STORE_RESOURCE = "area-store", "processes", "shared", "store-resource"
OWNERS, SERVICE_COLLECTION = "collection-owners", "service-collection"

# (rule, where, what) of each violation that is known and not fixed yet.  Remove an
# entry together with its fix: the test fails while a listed violation no longer exists.
KNOWN_VIOLATIONS: set[tuple[str, str, str]] = set()


# ---------------------------------------------------------------- the checker


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(module: str, tree: ast.AST, *, is_package: bool = False) -> set[str]:
    """Every module ``module`` imports, anywhere in its body; ``from a import b`` counts
    as importing ``a`` and ``a.b`` (``b`` may be a module)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            source = ".".join(base + ([node.module] if node.module else []))
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names)
    return found


def opened_collections(tree: ast.AST) -> set[str]:
    """Collections the module opens: ``<...store>["name"]`` and the ``name`` of a
    ``Collection``/``AppCollection`` subclass (``name, indexes = "x", INDEXES``)."""
    found = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str) and _name_of(node.value).endswith("store")):
            found.add(node.slice.value)
        elif isinstance(node, ast.ClassDef) and any(_name_of(base).endswith("Collection") for base in node.bases):
            for statement in node.body:
                if isinstance(statement, ast.Assign):
                    found.update(_assigned_name(statement))
    return found


def _name_of(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _assigned_name(statement: ast.Assign) -> list[str]:
    target, value = statement.targets[0], statement.value
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
        pairs = zip(target.elts, value.elts, strict=False)  # a starred target takes several
    else:
        pairs = [(target, value)]
    return [v.value for t, v in pairs
            if isinstance(t, ast.Name) and t.id == "name" and isinstance(v, ast.Constant) and isinstance(v.value, str)]


def area_of(module: str) -> str | None:
    """``roles`` for ``controlplane.roles.service``; None outside an area."""
    parts = module.split(".")
    return parts[1] if parts[0] == "controlplane" and len(parts) > 2 else None


def import_violations(module: str, imports: set[str]) -> set[tuple[str, str, str]]:
    found = set()
    top, area = module.split(".")[0], area_of(module)
    for target in imports:
        parts = target.split(".")
        if area and area_of(target) not in (None, area) and parts[2] == "store":
            found.add((AREA_STORE, module, ".".join(parts[:3])))
        if {top, parts[0]} == {"controlplane", "decision"}:
            found.add((PROCESSES, module, parts[0]))
        if top == "shared" and parts[0] in ("controlplane", "decision"):
            found.add((SHARED, module, parts[0]))
        if (module.endswith(".store") and parts[0] in PACKAGES
                and any(part in ("resource", "resources") for part in parts[1:])):
            found.add((STORE_RESOURCE, module, target))
    return found


def collection_violations(opened: dict[str, set[str]]) -> set[tuple[str, str, str]]:
    """``opened``: module -> the collections it opens."""
    owners: dict[str, list[str]] = {}
    found = set()
    for module, collections in opened.items():
        for collection in collections:
            owners.setdefault(collection, []).append(module)
            if area_of(module) and module.endswith(".service"):
                found.add((SERVICE_COLLECTION, module, collection))
    for collection, modules in owners.items():
        if len(modules) > 1:
            found.add((OWNERS, " + ".join(sorted(modules)), collection))
    return found


def violations(sources: dict[str, tuple[str, bool]]) -> set[tuple[str, str, str]]:
    """``sources``: module -> (its source text, whether it is a package's ``__init__``)."""
    found, opened = set(), {}
    for module, (text, is_package) in sources.items():
        tree = ast.parse(text, module)
        found |= import_violations(module, imported(module, tree, is_package=is_package))
        opened[module] = opened_collections(tree)
    return found | collection_violations(opened)


def compare(found: set, known: set) -> tuple[set, set]:
    """(violations not in the allow-list, allow-listed ones that are gone)."""
    return found - known, known - found


def repository_sources() -> dict[str, tuple[str, bool]]:
    return {module_name(path): (path.read_text(), path.name == "__init__.py")
            for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def repository_violations() -> set:
    return violations(repository_sources())


# ---------------------------------------------------------------- the layers hold


def test_the_code_keeps_its_layers():
    unexpected, gone = compare(repository_violations(), KNOWN_VIOLATIONS)
    assert not unexpected, f"layer violations: {sorted(unexpected)}"
    assert not gone, f"fixed, remove them from KNOWN_VIOLATIONS: {sorted(gone)}"


# ---------------------------------------------------------------- the checker catches them


PLANTED = {
    "from controlplane.users.store import UserStore": (AREA_STORE, "controlplane.users.store"),
    "from controlplane.users import store": (AREA_STORE, "controlplane.users.store"),
    "import controlplane.users.store": (AREA_STORE, "controlplane.users.store"),
    "from ..users.store import UserStore": (AREA_STORE, "controlplane.users.store"),
    "def later():\n    from controlplane.oidc.store import GrantStore": (AREA_STORE, "controlplane.oidc.store"),
    "from decision.cache import GrantCache": (PROCESSES, "decision"),
}


@pytest.mark.parametrize("source", PLANTED)
def test_a_planted_import_is_caught(source):
    rule, target = PLANTED[source]
    found = violations({"controlplane.mfa.planted": (source, False)})
    assert found == {(rule, "controlplane.mfa.planted", target)}
    unexpected, _ = compare(KNOWN_VIOLATIONS | found, KNOWN_VIOLATIONS)
    assert unexpected == found


def test_an_area_may_import_its_own_store_and_other_areas_services():
    source = ("from controlplane.mfa.store import MethodStore\nfrom .store import ChallengeStore\n"
              "from controlplane.users.directory import UserDirectory\nfrom controlplane.store import Store")
    assert violations({"controlplane.mfa.service": (source, False)}) == set()


@pytest.mark.parametrize("module, source, expected", [
    ("shared.planted", "import controlplane.events", (SHARED, "shared.planted", "controlplane")),
    ("shared.planted", "from decision import cache", (SHARED, "shared.planted", "decision")),
    ("decision.planted", "from controlplane.tokens import TokenService",
     (PROCESSES, "decision.planted", "controlplane")),
    ("controlplane.roles.store", "from controlplane.roles.resources import RoleItem",
     (STORE_RESOURCE, "controlplane.roles.store", "controlplane.roles.resources")),
    ("controlplane.roles.store", "from controlplane import resource",
     (STORE_RESOURCE, "controlplane.roles.store", "controlplane.resource")),
    ("controlplane.roles.service", "class Roles:\n    def __init__(self, store):\n"
     "        self._roles = store['roles']", (SERVICE_COLLECTION, "controlplane.roles.service", "roles")),
])
def test_each_rule_is_enforced(module, source, expected):
    assert expected in violations({module: (source, False)})


def test_a_collection_opened_by_two_modules_is_caught():
    owner = "class RoleStore:\n    def __init__(self, store):\n        self._roles = store['roles']"
    other = "class Lookup(Collection):\n    name, indexes = 'roles', INDEXES"
    found = violations({"controlplane.roles.store": (owner, False), "controlplane.webhooks.store": (other, False)})
    assert found == {(OWNERS, "controlplane.roles.store + controlplane.webhooks.store", "roles")}


def test_a_fixed_violation_left_on_the_list_fails():
    still, fixed = (AREA_STORE, "controlplane.mfa.service", "controlplane.users.store"), (OWNERS, "a + b", "users")
    unexpected, gone = compare({still}, {still, fixed})
    assert unexpected == set() and gone == {fixed}

