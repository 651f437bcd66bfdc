"""The docs stand alone and stay true: every relative link in the project's Markdown
resolves (file and heading), every repository path named in Markdown, docstrings,
comments and build files exists, and nothing refers to a design document kept outside
the repository. A section cited by name (docs/performance.md, "Logins") is a heading or an
emphasised lead (``**Leases.**``) of that page.

What counts as a repository path: a run of path characters whose first component is a
top-level directory of the repository (``controlplane/oidc/pkce.py``, ``charts/iamgate``,
``tests/e2e/``), not preceded by another path character, so URLs (``https://…/docs/x``),
absolute paths (``/proc/1/stat``) and bare example names (``receiver.py``) are not
checked. One more rule covers the module maps of docs/architecture.md: in a paragraph
that opens with a bold directory (**`decision/`** …), a bare ``name.py`` names a module
of that directory."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKIP_DIRS = {"__pycache__", "node_modules", "build", "dist"}
BUILD_FILES = ("Makefile", "Dockerfile", "setup.cfg", "pyproject.toml")
SCANNED_SUFFIXES = {".md", ".py", ".yaml", ".yml", ".tpl", ".txt", ".cfg", ".toml"}
# Paths the docs name on purpose although they do not exist, each with its reason.
HYPOTHETICAL = {
    "controlplane/labels/": "docs/architecture.md, 'How to add an area': the worked example of a new area",
    "tests/labels/": "the same example's tests",
}
# Spelled in parts so this file does not name what it forbids.
OUTSIDE_DOCUMENTS = re.compile("|".join(["ARCHITECTURE" + r"\.md", "interface" + "-spec", r"\.\./" + "shared/"]))

_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1", re.S | re.M)
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
_MAP_PARAGRAPH = re.compile(r"^\*\*`([a-z_]+/)`\*\*")
_BARE_MODULE = re.compile(r"(?<![\w./-])([a-z_][a-z0-9_]*\.py)\b")
# A page, then a quoted name: after a comma, in brackets, or after "section".
_SECTION_CITATION = re.compile(
    r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.md)(?:\]\([^)\s]*\))?,?[ \t]*\(?(?:section[ \t]+)?"
    r"\"(#*[ \t]*[A-Za-z][^\"\n]*)\"")
_EMPHASIS = re.compile(r"(?<![*\w])\*{1,2}([^*\n]+?)\*{1,2}(?![*\w])")


def top_level_dirs(root: Path = ROOT) -> frozenset[str]:
    return frozenset(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def _path_pattern(dirs) -> re.Pattern:
    names = "|".join(sorted(map(re.escape, dirs), key=len, reverse=True))
    return re.compile(rf"(?<![\w./-])((?:{names})/[\w./-]*)")


def slug(heading: str) -> str:
    """A heading's anchor as GitHub renders it: lower case, punctuation but ``-`` and
    ``_`` dropped, spaces as hyphens."""
    text = re.sub(r"[`*]", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for heading in _HEADING.findall(_FENCE.sub("", text)):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(source: Path, text: str) -> list[str]:
    """Relative Markdown links of ``text`` (the content of ``source``) whose file or
    heading does not exist."""
    problems = []
    for target in _LINK.findall(_FENCE.sub("", text)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        name, _, anchor = target.partition("#")
        linked = (source.parent / name).resolve() if name else source
        if not linked.exists():
            problems.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked.read_text("utf-8")):
            problems.append(f"{target}: no heading with that anchor in {linked.name}")
    return problems


def missing_paths(text: str, root: Path = ROOT) -> list[str]:
    """Repository paths named in ``text`` that do not exist under ``root``."""
    dirs = top_level_dirs(root)
    named = {match.rstrip(".") for match in _path_pattern(dirs).findall(text)}
    for paragraph in re.split(r"\n\s*\n", text):
        opening = _MAP_PARAGRAPH.match(paragraph)
        if opening and opening.group(1).rstrip("/") in dirs:
            named |= {opening.group(1) + module for module in _BARE_MODULE.findall(paragraph)}
    return sorted(path for path in named if path not in HYPOTHETICAL and not (root / path).exists())


def _titles(text: str) -> list[str]:
    """What a page's sections are called: its headings and its emphasised leads."""
    text = _FENCE.sub("", text)
    return [re.sub(r"[`*]", "", title).strip().lower() for title in _HEADING.findall(text) + _EMPHASIS.findall(text)]


def _cited_page(name: str, root: Path) -> Path | None:
    candidates = [root / name] if "/" in name else [root / "docs" / name, root / name]
    return next((path for path in candidates if path.exists()), None)


def missing_sections(text: str, root: Path = ROOT) -> list[str]:
    """Sections cited by name in ``text`` that their page does not have."""
    problems = []
    for name, section in _SECTION_CITATION.findall(text):
        page = _cited_page(name, root)
        if page is None:
            continue  # a page that does not exist is missing_paths' or broken_links' finding
        wanted = section.lstrip("# ").strip().lower()
        if not any(wanted in title for title in _titles(page.read_text("utf-8"))):
            problems.append(f'{name}, "{section}"')
    return problems


def project_files(root: Path = ROOT):
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if any(part.startswith(".") or part in SKIP_DIRS or part.endswith(".egg-info") for part in relative.parts):
            continue
        if path.is_file() and (path.suffix in SCANNED_SUFFIXES or path.name in BUILD_FILES):
            yield path


FILES = list(project_files())
MARKDOWN = [path for path in FILES if path.suffix == ".md"]


def _ids(paths):
    return [str(path.relative_to(ROOT)) for path in paths]


def test_the_scan_covers_the_docs_and_the_code():
    names = set(_ids(FILES))
    assert {"README.md", "docs/architecture.md", "docs/performance.md", "controlplane/app.py"} <= names
    assert not any(name.startswith(".venv") for name in names)


@pytest.mark.parametrize("path", MARKDOWN, ids=_ids(MARKDOWN))
def test_relative_links_resolve(path):
    assert broken_links(path, path.read_text("utf-8")) == []


@pytest.mark.parametrize("path", FILES, ids=_ids(FILES))
def test_named_repository_paths_exist(path):
    assert missing_paths(path.read_text("utf-8")) == []


@pytest.mark.parametrize("path", FILES, ids=_ids(FILES))
def test_sections_cited_by_name_exist(path):
    assert missing_sections(path.read_text("utf-8")) == []


@pytest.mark.parametrize("path", FILES, ids=_ids(FILES))
def test_no_reference_to_design_documents_outside_the_project(path):
    assert OUTSIDE_DOCUMENTS.findall(path.read_text("utf-8")) == []


# The checks themselves, on planted mistakes: a check that cannot fail protects nothing.

def test_a_broken_link_is_found():
    page = ROOT / "docs" / "architecture.md"
    text = ("See [errors](errors.md), [the map](#map), [moved](nowhere.md), [gone](#no-such-heading),\n"
            "[a heading elsewhere](oidc.md#no-such-heading), [the site](https://example.com/x.md)\n"
            "and [mail](mailto:security@example.com).\n\n## Map\n")
    assert broken_links(page, text) == [
        "nowhere.md: no such file",
        "#no-such-heading: no heading with that anchor in architecture.md",
        "oidc.md#no-such-heading: no heading with that anchor in oidc.md",
    ]


def test_a_link_inside_a_code_block_is_not_a_link():
    text = "```\n[x](nowhere.md)\n```\n"
    assert broken_links(ROOT / "README.md", text) == []


def test_a_missing_repository_path_is_found():
    gone = "controlplane/oidc/" + "nowhere.py"
    text = (f"The flow is in `{gone}`, the PKCE check in controlplane/oidc/pkce.py, the chart in\n"
            "charts/iamgate/, the tests in tests/core/test_hotpath.py and tests/e2e/.\n")
    assert missing_paths(text) == [gone]


def test_what_is_not_a_repository_path_is_not_checked():
    text = ("A receiver in `receiver.py`, /proc/1/stat, https://example.com/docs/nowhere.md,\n"
            "/work/tests/nowhere.py, `.venv/cerbos`, shared.httpserver.Connection, V1/abac/policies.\n")
    assert missing_paths(text) == []


def test_a_bare_module_in_a_map_paragraph_names_a_file_of_that_directory():
    text = ("**`decision/`** is the sidecar: `app.py` builds it, `" + "nowhere" + ".py` is its loop.\n\n"
            "Elsewhere `nowhere.py` is only an example.\n")
    assert missing_paths(text) == ["decision/" + "nowhere.py"]


def test_a_section_cited_by_a_name_its_page_lacks_is_found(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "performance.md").write_text("# Performance\n\n## Logins\n", "utf-8")
    (tmp_path / "docs" / "webhooks.md").write_text("# Webhooks\n\n- **Leases.** A worker claims...\n", "utf-8")
    (tmp_path / "docs" / "security.md").write_text("- *Unverified dashboard accounts* do not...\n", "utf-8")
    (tmp_path / "README.md").write_text("# iamgate\n", "utf-8")
    # Q stands for a double quote, so this file cites nothing itself.
    text = ("Figures: docs/performance.md, QLoginsQ; the lease (docs/webhooks.md, QLeasesQ);\n"
            "see [security.md](security.md), section QUnverified dashboard accountsQ, and\n"
            "an unknown page (elsewhere.md, QAnythingQ), but docs/performance.md, QLogin loadQ, was renamed\n"
            "and README.md, QNo such sectionQ never was.\n").replace("Q", chr(34))
    assert missing_sections(text, tmp_path) == [f"docs/performance.md, {chr(34)}Login load{chr(34)}",
                                                f"README.md, {chr(34)}No such section{chr(34)}"]


def test_headings_become_github_anchors():
    text = "# Performance\n## Saturation fairness: latest run\n## The `c16` share, 2nd round\n## Map\n## Map\n"
    assert anchors(text) == {"performance", "saturation-fairness-latest-run", "the-c16-share-2nd-round",
                             "map", "map-1"}


def test_a_reference_to_an_outside_design_document_is_found():
    assert OUTSIDE_DOCUMENTS.findall("as " + "ARCHITECTURE" + ".md decides") == ["ARCHITECTURE" + ".md"]
    assert OUTSIDE_DOCUMENTS.findall("see ../" + "shared" + "/spec/" + "interface" + "-spec.md")
