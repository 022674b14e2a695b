"""The documentation cannot drift from the tree (issue 12, Docs).

- docs/architecture.md's diagram and data-path table name only paths that exist, and the diagram names every Python
  package under verification/ and reviewportal/;
- the README's data-path diagram names only paths that exist, and the README stays short;
- every relative link in README.md and docs/*.md resolves to a file (and, with a #fragment, to a heading there);
- every REVIEWPORTAL_ variable the settings read is in docs/configuration.md.
Plain file reads: no Django, no database.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"
README = REPO_ROOT / "README.md"
PACKAGE_ROOTS = ("verification", "reviewportal")
#: A path into the repository as the docs write it: verification/..., reviewportal/..., scripts/...
PATH = re.compile(r"\b((?:verification|reviewportal|scripts|templates|static|bench|tests)/[\w./-]*)")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def section(text: str, heading: str) -> str:
    assert heading in text, f"missing section {heading!r}"
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def fenced(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


def named_paths(text: str) -> set[str]:
    return {match.rstrip(".") for match in PATH.findall(text)}


def packages() -> set[str]:
    return {
        init.parent.relative_to(REPO_ROOT).as_posix() + "/"
        for root in PACKAGE_ROOTS
        for init in (REPO_ROOT / root).rglob("__init__.py")
    }


def missing(paths: set[str]) -> list[str]:
    return sorted(p for p in paths if not (REPO_ROOT / p).exists())


def architecture_diagram() -> str:
    (diagram,) = fenced(ARCHITECTURE.read_text(encoding="utf-8"), "mermaid")
    return diagram


def data_path_table() -> str:
    table = section(ARCHITECTURE.read_text(encoding="utf-8"), "## The data path, step by step")
    rows = [line for line in table.splitlines() if line.startswith("|")]
    assert len(rows) >= 11, "the header, the separator and the nine steps at least"
    return "\n".join(rows)


def test_the_architecture_diagram_names_only_modules_that_exist() -> None:
    paths = named_paths(architecture_diagram())
    assert len(paths) >= 20
    assert missing(paths) == []


def test_the_data_path_table_names_only_modules_that_exist_and_every_step() -> None:
    table = data_path_table()
    assert missing(named_paths(table)) == []
    steps = [line.split("|")[1].strip() for line in table.splitlines()[2:]]
    assert steps[:9] == ["1 API", "2 submit", "3 task", "4 run", "5 kernel", "6 receipt", "7 queue", "8 decision",
                         "9 receipt"]
    # each step names its module in the module column
    for line in table.splitlines()[2:]:
        assert named_paths(line.split("|")[2]), line


def test_the_architecture_diagram_names_every_package() -> None:
    diagram = architecture_diagram()
    found = packages()
    assert {"verification/", "verification/kernel/", "verification/api/", "reviewportal/"} <= found
    assert sorted(p for p in found if p not in diagram) == []


def test_the_readme_diagram_names_only_modules_that_exist_and_the_readme_is_short() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    data_path = section(text, "## The layers and the data path")
    paths = named_paths(data_path)
    assert {"verification/api/views/verifications.py", "verification/runs/services/submit.py",
            "verification/runs/services/run.py", "verification/tasks.py",
            "verification/kernel/evaluation.py", "verification/trust/services/receipts.py",
            "verification/reviews/selectors.py", "verification/reviews/services/claims.py",
            "verification/reviews/services/decisions.py"} <= paths
    assert missing(paths) == []


def markdown_files() -> list[Path]:
    return [README, *sorted((REPO_ROOT / "docs").glob("*.md"))]


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def broken_links(path: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
            continue
        file_part, _, fragment = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        unknown_anchor = bool(fragment) and resolved.suffix == ".md" and fragment not in anchors(resolved)
        if not resolved.exists() or unknown_anchor:
            broken.append(target)
    return broken


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_every_relative_link_resolves(path: Path) -> None:
    assert broken_links(path) == []


def test_the_link_check_can_fail(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A heading\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md) [ok](there.md#a-heading) [web](https://example.org/x) [gone](missing.md) "
        "[no anchor](there.md#nowhere)\n```\n[in code](ignored.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page) == ["missing.md", "there.md#nowhere"]


def test_the_readme_links_every_doc() -> None:
    text = README.read_text(encoding="utf-8")
    linked = {target.partition("#")[0] for target in LINK.findall(text)}
    docs = {f"docs/{p.name}" for p in (REPO_ROOT / "docs").glob("*.md")}
    assert sorted(docs - linked) == []


def test_every_settings_variable_is_documented() -> None:
    documented = (REPO_ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    read = set()
    for name in ("settings.py", "config.py"):
        read |= set(re.findall(r"\bREVIEWPORTAL_[A-Z0-9_]+", (REPO_ROOT / "reviewportal" / name).read_text("utf-8")))
    assert len(read) > 20
    assert sorted(v for v in read if f"`{v}`" not in documented) == []
