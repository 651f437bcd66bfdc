"""The README and docs/configuration.md document every IAMGATE_ variable with its real
default, so the tables cannot drift from shared/config.py."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from shared.config import variable_names

ROOT = Path(__file__).resolve().parents[2]
_ROW = re.compile(r"^\|\s*`(IAMGATE_[A-Z_]+)`\s*\|\s*([^|]*?)\s*\|", re.M)


def documented_defaults(path: Path) -> dict[str, str]:
    return {name: default for name, default in _ROW.findall(path.read_text("utf-8"))}


@pytest.mark.parametrize("doc", ["README.md", "docs/configuration.md"])
def test_every_variable_is_documented_with_its_default(doc):
    documented = documented_defaults(ROOT / doc)
    variables = variable_names()

    assert set(documented) == set(variables), doc
    for name, default in variables.items():
        if default == "":
            continue  # empty defaults are described in words ("empty", "generated")
        assert documented[name] == f"`{default}`", (doc, name)


def test_readme_opens_with_make_run_and_make_test():
    text = (ROOT / "README.md").read_text("utf-8")
    first_block = text.split("```sh", 1)[1].split("```", 1)[0]
    assert first_block.lstrip().startswith("make run") and "make test" in first_block
