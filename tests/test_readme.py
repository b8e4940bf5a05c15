"""The README is a front door (issue 30 item 3), and the docs tree behind it holds together.

- README.md is under 250 lines and opens, after its title, with exactly the two set-up commands.
- Every relative link and image in README.md and docs/*.md names a file that exists, and an anchor (`#...`) names
  a heading of the page it points to, slugged as GitHub slugs headings. Code blocks and code spans hold no links.
- Every page of docs/ is reachable from the README: linked from it or from docs/README.md, the index.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`+[^`]*`+")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, code spans blanked (a `# comment` in a block is not a heading)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def anchors(page: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped (hyphens and underscores kept), spaces to hyphens, and
    -1, -2, ... after repeats."""
    seen: dict[str, int] = {}
    ids = set()
    for line in prose_lines(page.read_text()):
        heading = HEADING.match(line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(2).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        ids.add(slug if count == 0 else f"{slug}-{count}")
    return ids


def relative_links(page: Path) -> list[str]:
    return [target for line in prose_lines(page.read_text()) for target in LINK.findall(CODE_SPAN.sub("", line))
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]


def test_the_readme_is_a_front_door_under_250_lines() -> None:
    assert len(README.read_text().splitlines()) < 250


def test_the_readme_opens_with_the_two_set_up_commands() -> None:
    lines = README.read_text().splitlines()
    assert lines[0] == "# epoch-broker"
    fence = next(i for i in range(1, len(lines)) if lines[i].strip())  # the first line after the title
    assert lines[fence] == "```sh", "the README's first block after its title is the set-up commands"
    end = lines.index("```", fence + 1)
    commands = [line.split("#")[0].strip() for line in lines[fence + 1:end]]
    assert commands == ["make run", "make test"]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file.relative_to(ROOT) if file.is_relative_to(ROOT) else file}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert broken == []


def test_every_docs_page_is_reachable_from_the_readme() -> None:
    linked = {(page.parent / target.partition("#")[0]).resolve()
              for page in (README, DOCS / "README.md") for target in relative_links(page)}
    assert [page.name for page in sorted(DOCS.glob("*.md")) if page.resolve() not in linked] == []
