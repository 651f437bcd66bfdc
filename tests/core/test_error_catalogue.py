"""Every error code the code base can raise is defined once (a class in an area's
``errors.py`` or ``shared/errors.py``), documented in docs/errors.md with its status,
and named by the OpenAPI document of the service that raises it."""
from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

from shared.errors import DomainError, catalogue
from shared.http import ERROR_STATUS, STATUS_CODES, status_of

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "controlplane", "decision")
_ROW = re.compile(r"^\|\s*`([A-Za-z_]+)`\s*\|\s*(\d{3})\s*\|")


def _import_everything() -> None:
    for name in PACKAGES:
        package = importlib.import_module(name)
        for module in pkgutil.walk_packages(package.__path__, prefix=f"{name}."):
            if not module.name.endswith(("__main__", ".wsgi", ".launcher", ".gunicorn_conf")):
                importlib.import_module(module.name)


def _kinds_raised_directly() -> set[str]:
    """Names of the error kinds (BadRequest, Forbidden...) some ``raise Kind(...)`` uses."""
    kinds = {klass.__name__ for klass in ERROR_STATUS}
    found = set()
    for name in PACKAGES:
        for path in (ROOT / name).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                    func = node.exc.func
                    called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                    if called in kinds:
                        found.add(called)
    return found


_import_everything()


def raisable() -> dict[tuple[str, int], list[type]]:
    """(code, status) -> the classes that raise it."""
    direct = _kinds_raised_directly()
    codes: dict[tuple[str, int], list[type]] = {}
    for klass in catalogue():
        if klass is DomainError or (klass in ERROR_STATUS and klass.__name__ not in direct):
            continue
        for code in klass.codes():
            codes.setdefault((code, status_of(klass)), []).append(klass)
    return codes


def documented() -> set[tuple[str, int]]:
    text = (ROOT / "docs" / "errors.md").read_text()
    return {(m.group(1), int(m.group(2))) for line in text.splitlines() if (m := _ROW.match(line))}


def test_every_raisable_code_is_in_docs_errors_md():
    missing = {pair: [k.__qualname__ for k in classes] for pair, classes in raisable().items()
               if pair not in documented()}
    assert not missing, f"add these (code, status) rows to docs/errors.md: {missing}"


def test_every_generic_http_code_is_in_docs_errors_md():
    missing = {(code, status) for status, code in STATUS_CODES.items()} - documented()
    assert not missing


def test_docs_errors_md_lists_no_code_the_code_base_cannot_raise():
    known = set(raisable()) | {(code, status) for status, code in STATUS_CODES.items()}
    assert documented() <= known, documented() - known


def test_every_control_plane_code_is_in_the_openapi_document(client):
    document = client.simulate_get("/openapi.json").json
    named = set()
    for item in document["paths"].values():
        for operation in item.values():
            for status, response in operation["responses"].items():
                named.update((code, int(status)) for code in response.get("description", "").split())
    missing = {pair: [k.__qualname__ for k in classes] for pair, classes in raisable().items()
               if pair not in named and not all(k.__module__.startswith("decision.") for k in classes)}
    assert not missing, f"no operation documents: {missing}"


@pytest.mark.parametrize("klass", [k for k in catalogue() if k is not DomainError])
def test_error_classes_carry_no_http_status(klass):
    assert not hasattr(klass, "status") and not hasattr(klass, "headers")
