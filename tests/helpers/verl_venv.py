"""The verl 0.9.1 venv the ``verl`` tests run verl's own code in, and the one skip message they give without it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

#: why a verl test skips, and how a contributor makes the venv (the command is in the development page)
SKIP = ("the verl 0.9.1 venv is missing ($VERLSFT_VENV, default /tmp/verlsft-venv): make it with the command under "
        "'The verl venv' in docs/development/index.md")
#: a task reward function as a user writes it (the answer in <answer> tags)
TASK = '''import re
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    m = re.findall(r"<answer>(.*?)</answer>", solution_str, re.S)
    return 1.0 if m and str(ground_truth).strip().lower() in m[-1].lower() else 0.0
'''


def verl_venv() -> Path:
    return Path(os.environ.get("VERLSFT_VENV", os.path.join(os.environ.get("TMPDIR", "/tmp"), "verlsft-venv")))


def verl_python(module: str = "verl.experimental.reward_loop.reward_manager.naive") -> str | None:
    """The verl venv's python when it imports ``module``, else None."""
    py = verl_venv() / "bin" / "python"
    if not py.is_file():
        return None
    probe = subprocess.run([str(py), "-c", f"import {module}"], capture_output=True)
    return str(py) if probe.returncode == 0 else None


def run_helper(py: str, helper: Path, spec: object, work: Path, *, tag: str = "spec",
               env: dict[str, str] | None = None, cwd: Path | None = None) -> dict:
    """Run a ``tests/helpers`` script in the verl venv as ``py helper WORK/TAG.json WORK/TAG_out.json`` (the spec
    written as JSON, the checkout on ``PYTHONPATH`` unless ``env`` says otherwise); returns its JSON output and
    fails the test with the script's stderr when it exits non-zero."""
    import json

    root = Path(__file__).resolve().parents[2]
    (work / f"{tag}.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    p = subprocess.run([py, str(helper), str(work / f"{tag}.json"), str(work / f"{tag}_out.json")],
                       capture_output=True, text=True, timeout=600, cwd=cwd,
                       env=env if env is not None else {**os.environ, "PYTHONPATH": str(root)})
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads((work / f"{tag}_out.json").read_text(encoding="utf-8"))
