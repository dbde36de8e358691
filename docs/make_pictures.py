"""Draw the tutorial's pictures: the report's own charts of the shipped collapsing run, as SVG files.

    python docs/make_pictures.py     # writes docs/tutorial/*.svg (committed; run again after changing the report)

It scans ``sample_data/qwen35_xml_run`` into a temporary directory, writes the HTML report with
:func:`trajlab.report`, and saves each inline chart of the report as a file, so the tutorial shows exactly the
pictures a reader's report will show.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
NAMES = ("overview.svg", "categories.svg")


def main() -> int:
    import trajlab

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        trajlab.scan([DOCS.parent / "sample_data" / "qwen35_xml_run"], out, progress=False)
        html = trajlab.report(out, Path(tmp) / "report.html").read_text(encoding="utf-8")
    charts = re.findall(r"<svg.*?</svg>", html, re.S)
    if len(charts) < len(NAMES):
        print(f"make_pictures: the report has {len(charts)} charts, expected {len(NAMES)}", file=sys.stderr)
        return 1
    for name, svg in zip(NAMES, charts, strict=False):
        svg = svg if "xmlns=" in svg else svg.replace("<svg", '<svg xmlns="http://www.w3.org/2000/svg"', 1)
        (DOCS / "tutorial" / name).write_text(svg + "\n", encoding="utf-8")
        print(f"wrote docs/tutorial/{name} ({len(svg) // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
