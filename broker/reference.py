"""Markdown for the reference pages generated from the catalogues (docs/*.md, written by `make docs`).

Each catalogue renders its own page beside its declaration (`render_reference()` in broker/faults.py,
broker/metrics.py, drill/scenarios/); these helpers make their tables read alike and stay valid Markdown
whatever a doc string holds. A leaf: imports nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_CODE_SPAN = re.compile(r"(`[^`]*`)")


def cell(text: str) -> str:
    """`text` as one table cell: `|` escaped (inside code spans too, as GitHub's tables need), `<` outside code
    spans written as an entity (so that `<api>` is not read as an HTML tag), on one line."""
    parts = _CODE_SPAN.split(" ".join(text.split()))
    return "".join(part if part.startswith("`") else part.replace("<", "&lt;") for part in parts).replace("|", r"\|")


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table; each row's cells go through `cell`."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(text) for text in row) + " |" for row in rows]
    return "\n".join(lines)


def anchor(heading: str) -> str:
    """The `#...` link GitHub gives a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    return "#" + re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
