"""Reading a generated HTML report in the tests: a parser that collects its external references, charts and SVG
texts, and a headless Chromium run with the script problems it reported."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class PageScan(HTMLParser):
    """Collects what the tests look at: external references, scripts, charts and their SVG texts."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.tags: list[str] = []
        self.charts: list[str] = []
        self.svg_text: dict[str, list[str]] = {}
        self._chart: str | None = None
        self._in_text = 0
        self.examples: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append(tag)
        for k in ("src", "href", "xlink:href", "action", "data"):
            v = a.get(k)
            if v and not v.startswith(("#", "data:")):
                self.refs.append(f"{tag} {k}={v}")
        if tag == "figure" and "chart" in (a.get("class") or ""):
            self._chart = a.get("data-chart") or "?"
            self.charts.append(self._chart)
            self.svg_text[self._chart] = []
        if tag == "text" and self._chart:
            self._in_text += 1
        if tag == "article" and a.get("data-category"):
            self.examples.append(a["data-category"] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "figure":
            self._chart = None
        if tag == "text" and self._in_text:
            self._in_text -= 1

    def handle_data(self, data: str) -> None:
        if self._in_text and self._chart and data.strip():
            self.svg_text[self._chart].append(data.strip())


def parse_page(path: Path) -> PageScan:
    """Parse the HTML page at ``path``."""
    s = PageScan()
    s.feed(path.read_text(encoding="utf-8"))
    return s


def run_chromium(html: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Load ``html`` in headless Chromium with ``args`` (screenshot, DOM dump...)."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-dev-shm-usage", f"--user-data-dir={tmp / 'profile'}", "--enable-logging=stderr", "--v=0",
           "--virtual-time-budget=5000", *args, html.resolve().as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def js_problems(proc: subprocess.CompletedProcess[str], dom: str) -> list[str]:
    """Console messages and the page's own recorded script errors."""
    found = [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln]
    m = re.search(r'data-js-errors="([^"]*)"', dom)
    if m:
        found.append(m.group(1))
    return found
