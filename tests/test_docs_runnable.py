"""The documentation's runnable shell examples work as written, and the site builds strict and offline.

A runnable example is a fenced ``bash`` block right after the line ``<!-- runnable -->`` (invisible on the site).
The blocks of one page run in order, in one temporary directory holding the repository's ``sample_data``, with
this venv's ``trajlab`` first on ``PATH``; each must exit 0. Keep the set small and cheap: the tutorial's are a
scan of the sample run, three queries, ``show`` and the SFT pool (about 15 s on 2 cores).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MARKER = "<!-- runnable -->"
BLOCK = re.compile(r"^" + re.escape(MARKER) + r"\n```bash\n(.*?)```", re.S | re.M)
LONE = re.compile(r"^" + re.escape(MARKER) + r"$", re.M)


def runnable_blocks() -> dict[str, list[str]]:
    """Page (relative to docs/) -> its runnable blocks, in page order."""
    out: dict[str, list[str]] = {}
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        blocks = BLOCK.findall(text)
        assert len(blocks) == len(LONE.findall(text)), f"{page}: a {MARKER} marker is not followed by a ```bash block"
        if blocks:
            out[page.relative_to(DOCS).as_posix()] = blocks
    return out


def test_the_tutorial_has_runnable_examples() -> None:
    blocks = runnable_blocks()
    assert len(blocks.get("tutorial/index.md", [])) >= 4
    assert any("trajlab scan" in b for b in blocks["tutorial/index.md"])


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(runnable_blocks()))
def test_runnable_examples_run(page: str, tmp_path: Path) -> None:
    (tmp_path / "sample_data").symlink_to(ROOT / "sample_data", target_is_directory=True)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "COLUMNS": "120", "NO_COLOR": "1"}
    assert shutil.which("trajlab", path=env["PATH"]), "the trajlab script is not installed in this venv"
    printed = []
    for block in runnable_blocks()[page]:
        res = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, f"{page}: `{block.strip()}` exited {res.returncode}\n{res.stdout}\n{res.stderr}"
        assert "Traceback" not in res.stderr
        printed.append(res.stdout)
    if page == "tutorial/index.md":  # the figures the tutorial's prose quotes
        assert "early warning: train step 88" in " ".join(printed[0].split())
        assert (tmp_path / "out" / "calls.parquet").is_file() and (tmp_path / "pool" / "train.parquet").is_file()
        assert "search_web英文明确" in printed[-2]  # the trajectory `show` prints calls the garbled name


def test_the_site_builds_strict_and_offline(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--config-file",
                          str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "fonts.googleapis.com" not in index and "fonts.gstatic.com" not in index
    for page in ("tutorial/index.html", "reference/cli/index.html", "reference/tables/index.html",
                 "development/code-map/index.html", "guides/reward-plugin/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
