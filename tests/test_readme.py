"""The README's set-up commands name the real entry points: pinned CPU torch, and the test command `.ci/run` runs.

(The table reference moved to the docs site: tests/test_docs_reference.py checks it.)
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_setup_commands_install_pinned_torch_and_run_the_tests():
    assert "pip install -q torch==2.13.0" in README
    assert "python -m pytest -q -n 2" in README
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python -m pytest -q -n 2" in ci and "torch==2.13.0" in ci


def test_readme_stays_a_front_page():
    assert len(README.splitlines()) <= 200
