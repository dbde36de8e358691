"""One labelled classifier case: a text, the format it is read in, and the finding it must produce.

Shared by the category tests of every call format (``test_toolcalls_categories.py``,
``test_toolcalls_families.py``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Case:
    id: str
    text: str
    fmt: str
    category: str
    variant: str
    span: str | None  # exact text of the finding's span (None: not checked)
    severity: str
    repaired: bool | None  # True: a repair must exist (and re-classify clean); False: none; None: not checked
    forbids_suffix: bool = False  # the tool description forbids suffixes on the name ("NO suffix" rule)
    tools: object = "default"
