"""What the documentation shows, read for the tests: the README's example queries."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def doc_queries() -> list[str]:
    """Every `trajlab sql OUT "..."` example in the README."""
    found: list[str] = []
    for p in (REPO / "README.md", REPO / "docs" / "sql_report_show.md"):
        if p.is_file():
            for m in re.finditer(r'^\s*(?:\$ )?trajlab sql \S+ "((?:[^"\\]|\\.)+)"', p.read_text(encoding="utf-8"), re.M):
                q = m.group(1).replace('\\"', '"')
                if q not in found:
                    found.append(q)
    return found
