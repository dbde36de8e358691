"""Shared pytest setup: tests/ on the path so test modules can import the ``helpers`` package (builders shared by
several test modules live there; test modules never import each other), and the fixtures several modules share."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest

sys.path.insert(0, str(Path(__file__).parent))

SAMPLE_XML_RUN = Path(__file__).resolve().parents[1] / "sample_data" / "qwen35_xml_run"


class SampleScan(NamedTuple):
    """A scan of the shipped sample run: its output folder and the scan's summary."""

    out: Path
    summary: Any


@pytest.fixture(scope="session")
def sample_xml_scan(tmp_path_factory: pytest.TempPathFactory) -> SampleScan:
    """``sample_data/qwen35_xml_run`` scanned once per session (per xdist worker) with the default options.

    Read-only: tests read its tables, or copy the folder before writing anything (e.g. a rescore)."""
    from trajlab.scan import scan

    out = tmp_path_factory.mktemp("sample_xml_scan") / "out"
    return SampleScan(out, scan([SAMPLE_XML_RUN], out, progress=False))
