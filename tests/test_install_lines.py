"""Every install line of the README and the manual runs as written on a fresh machine.

trajlab is not published on PyPI, so no line may install it by name; every extra a line names exists; the tour's
bare ``trajlab`` commands come after the sentence that says to activate the venv; the theme's end-of-life notice
is switched off wherever ``mkdocs`` is run; a skipped verl test names a page that holds the command to make its venv.
"""

from __future__ import annotations

import re
from pathlib import Path

import tomllib
from helpers.verl_venv import SKIP

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
EXTRAS = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])


def _lines() -> list[tuple[str, str]]:
    out = []
    for page in PAGES:
        for block in re.findall(r"```(?:bash|sh|console)?\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
            out += [(page.relative_to(ROOT).as_posix(), ln) for ln in block.splitlines()]
        out += [(page.relative_to(ROOT).as_posix(), m) for m in re.findall(r"`([^`\n]*pip install[^`\n]*)`",
                                                                            page.read_text(encoding="utf-8"))]
    return out


def test_no_line_installs_the_unpublished_package_by_name() -> None:
    bad = [(p, ln) for p, ln in _lines()
           if re.search(r"pip install (?:-\S+ )*['\"]?trajlab(?:\[|['\"\s]|$)", ln)]
    assert bad == []
    assert any("pip install -q -e \".[rescore]\"" in ln for _, ln in _lines())


def test_every_extra_named_exists() -> None:
    named = {x.strip() for _, ln in _lines() for m in re.findall(r"\.\[([\w,\s-]+)\]", ln) for x in m.split(",")}
    assert named and named <= EXTRAS, named - EXTRAS


def test_the_tour_says_to_activate_the_venv_before_bare_trajlab() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    tour = readme[readme.index("## A short tour"):]
    assert "source .venv/bin/activate" in tour[:tour.index("```bash")]


def test_mkdocs_is_run_with_the_theme_notice_off() -> None:
    runs = [(p, ln) for p, ln in _lines() if re.search(r"(?:^|\s)\S*mkdocs (?:serve|build)", ln)]
    assert runs and all("NO_MKDOCS_2_WARNING=1" in ln for _, ln in runs), runs
    assert "NO_MKDOCS_2_WARNING=1" in (ROOT / ".ci" / "run").read_text()


def test_verl_skip_names_a_page_with_the_venv_command() -> None:
    page = re.search(r"docs/[\w/-]+\.md", SKIP)
    assert page
    text = (ROOT / page.group(0)).read_text(encoding="utf-8")
    assert "The verl venv" in text and "verl==0.9.1" in text and "/tmp/verlsft-venv/bin/pip install" in text
