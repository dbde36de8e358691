"""What the documentation shows, read for the tests: the example queries of the docs pages (docs/**/*.md)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def doc_queries() -> list[str]:
    """Every `trajlab sql OUT "..."` example in the documentation (README.md and every page under docs/)."""
    found: list[str] = []
    for p in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        if p.is_file():
            for m in re.finditer(r'^\s*(?:\$ )?trajlab sql \S+ "((?:[^"\\]|\\.)+)"', p.read_text(encoding="utf-8"), re.M):
                q = m.group(1).replace('\\"', '"')
                if q not in found:
                    found.append(q)
    return found
