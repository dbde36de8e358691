"""mypy over the package against a baseline that may only shrink.

Runs ``mypy trajlab`` (settings in pyproject.toml), counts the errors per file and compares them with
``.ci/mypy-baseline.json``. Exit 1 when any file has more errors than its baseline (a new file counts from 0);
the message lists the new errors. ``--update`` rewrites the baseline (do it when errors were fixed, so the
baseline shrinks with them).

    python .ci/mypy_check.py            # CI
    python .ci/mypy_check.py --update   # after fixing type errors
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / ".ci" / "mypy-baseline.json"
LINE = re.compile(r"^(?P<file>[^:\n]+\.py):\d+: error: ")


def run_mypy() -> tuple[Counter[str], list[str]]:
    res = subprocess.run([sys.executable, "-m", "mypy", "trajlab"], cwd=ROOT, capture_output=True, text=True)
    if res.returncode not in (0, 1):
        sys.exit(f"mypy_check: mypy did not run (exit {res.returncode}): {res.stderr.strip()[-500:]}")
    lines = [ln for ln in res.stdout.splitlines() if LINE.match(ln)]
    return Counter(LINE.match(ln).group("file") for ln in lines), lines  # type: ignore[union-attr]


def main() -> int:
    counts, lines = run_mypy()
    if "--update" in sys.argv[1:]:
        BASELINE.write_text(json.dumps(dict(sorted(counts.items())), indent=1) + "\n")
        print(f"mypy_check: baseline written: {sum(counts.values())} errors in {len(counts)} files")
        return 0
    base = json.loads(BASELINE.read_text()) if BASELINE.is_file() else {}
    grown = {f: (n, base.get(f, 0)) for f, n in counts.items() if n > base.get(f, 0)}
    total, total_base = sum(counts.values()), sum(base.values())
    if grown:
        print("mypy_check: type errors grew beyond the baseline (.ci/mypy-baseline.json):")
        for f, (n, b) in sorted(grown.items()):
            print(f"  {f}: {n} errors (baseline {b})")
            for ln in lines:
                if ln.startswith(f + ":"):
                    print("    " + ln)
        return 1
    shrunk = total < total_base
    print(f"mypy_check: {total} errors (baseline {total_base}); no file grew"
          + ("; the baseline can shrink: python .ci/mypy_check.py --update" if shrunk else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
