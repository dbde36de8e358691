#!/usr/bin/env python3
"""The fixed cost of each ``trajlab`` command on small work, beside the floor of a Python CLI (issue 24).

    python benchmarks/bench_startup.py                 # 5 rounds, pinned to one core
    python benchmarks/bench_startup.py --runs 9 --cpu 1 --json figures.json
    python benchmarks/bench_startup.py --only rules_check show --no-check

Every case runs as its own fresh interpreter (``python -m trajlab ...`` or ``python -c ...``), the way a user
or a script starts it, pinned to one core with ``taskset`` when the machine has it (``--no-pin`` to let it
float). The cases:

* ``pass`` -- ``python -c pass``: the interpreter alone, the floor of any Python CLI;
* ``import_polars`` -- ``python -c "import polars"``: the yardstick every target is a ratio to;
* ``help`` -- ``trajlab --help``;
* ``rules_check`` -- ``trajlab rules check FILE`` on a file holding one Qwen3-Coder call;
* ``show`` -- ``trajlab show OUT ID`` of one trajectory of the sample scan (``sample_data/qwen35_xml_run``,
  scanned once into the work directory before timing);
* ``sql`` -- ``trajlab sql OUT "SELECT count(*) FROM calls"`` on the same scan;
* ``scan_1_line`` -- ``trajlab scan`` of a one-line verl JSONL file (the first line of the sample run) into a
  fresh directory;
* ``scan_<family>`` -- ``trajlab scan`` of each 0.3-0.4 MB family sample run (GLM-4.5, Kimi-K2, DeepSeek-V3.1,
  gpt-oss) into a fresh directory;
* ``import_toolcalls`` -- ``python -c "import trajlab.toolcalls"``: what the verl reward plugin loads;
* ``classify_1_call`` -- the import plus one :func:`trajlab.toolcalls.check_text` call (rule packs loaded).

The cases run round-robin, one round at a time, so a burst of load from elsewhere spreads over all of them;
each figure is the median over ``--runs`` rounds after one untimed warm-up round (which also fills the
bytecode cache: the runs use ``PYTHONPYCACHEPREFIX`` under the work directory, so a ``PYTHONDONTWRITEBYTECODE``
environment does not make every run compile trajlab from source, and nothing is written into the source
tree). Wall time is measured around the child process; CPU time (user + system) is the child's own, from
``wait4``. The ratio columns are the case's median over the median of ``import_polars`` measured in the same
run, in wall time and in CPU time. On an idle core the two agree; on a shared machine the wall time of a pinned
process includes the time other processes held its core, so the targets of issue 24 are checked on the CPU
ratio by default (``--ratio wall`` to check the wall ratio); the exit status is 1 when one is missed
(``--no-check`` to only report). Timings on a shared machine are noisy: compare ratios from one run, not
seconds from different runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("glm45_run", "kimi_k2_run", "deepseek_v31_run", "gpt_oss_run")
ONE_CALL = "<tool_call>\n<function=search_web>\n<parameter=query>\nweather in Paris\n</parameter>\n</function>\n</tool_call>"
#: ratio to ``import polars`` (wall, one core, median) that each case must stay at or under (issue 24)
TARGETS = {"rules_check": 1.0, "show": 2.0, "sql": 2.0, "scan_1_line": 2.5, "import_toolcalls": 0.5}


@dataclass
class Case:
    name: str
    argv: list[str]
    fresh_out: Path | None = None  # removed before every run (scan writes here)
    ok_codes: tuple[int, ...] = (0,)
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def _setup(work: Path, py: str, env: dict[str, str]) -> dict[str, Path | str]:
    """Inputs of the cases: the one-call file, the one-line dump and the sample scan (made once, not timed)."""
    work.mkdir(parents=True, exist_ok=True)
    one_call = work / "one_call.txt"
    one_call.write_text(ONE_CALL + "\n", encoding="utf-8")
    one_line = work / "one_line" / "rollout" / "1.jsonl"
    one_line.parent.mkdir(parents=True, exist_ok=True)
    with open(ROOT / "sample_data" / "qwen35_xml_run" / "rollout" / "1.jsonl", "rb") as f:
        one_line.write_bytes(f.readline())
    scan_out = work / "sample_scan"
    if not (scan_out / "manifest.json").exists():
        subprocess.run([py, "-m", "trajlab", "scan", str(ROOT / "sample_data" / "qwen35_xml_run"), "-o", str(scan_out),
                        "--no-progress"], check=True, env=env, stdout=subprocess.DEVNULL)
    got = subprocess.run([py, "-m", "trajlab", "sql", str(scan_out), "SELECT trajectory_id FROM trajectories "
                          "WHERE step = 120 ORDER BY trajectory_id LIMIT 1", "--format", "csv"],
                         check=True, env=env, capture_output=True, text=True)
    traj_id = got.stdout.splitlines()[1].strip()
    return {"one_call": one_call, "one_line": one_line, "scan_out": scan_out, "traj_id": traj_id}


def _cases(py: str, work: Path, inputs: dict[str, Path | str]) -> list[Case]:
    tl = [py, "-m", "trajlab"]
    out = inputs["scan_out"]
    cases = [
        Case("pass", [py, "-c", "pass"]),
        Case("import_polars", [py, "-c", "import polars"]),
        Case("help", [*tl, "--help"]),
        Case("rules_check", [*tl, "rules", "check", str(inputs["one_call"])], ok_codes=(0, 1)),
        Case("show", [*tl, "show", str(out), str(inputs["traj_id"])]),
        Case("sql", [*tl, "sql", str(out), "SELECT count(*) FROM calls"]),
        Case("scan_1_line", [*tl, "scan", str(inputs["one_line"]), "-o", str(work / "o_one"), "--no-progress"],
             fresh_out=work / "o_one"),
    ]
    for fam in FAMILIES:
        o = work / f"o_{fam}"
        cases.append(Case(f"scan_{fam.removesuffix('_run')}", [*tl, "scan", str(ROOT / "sample_data" / fam), "-o", str(o),
                                                               "--no-progress"], fresh_out=o, ok_codes=(0, 3)))
    cases.append(Case("import_toolcalls", [py, "-c", "import trajlab.toolcalls"]))
    cases.append(Case("classify_1_call", [py, "-c", f"from trajlab.toolcalls import check_text; check_text({ONE_CALL!r})"]))
    return cases


def _run_once(case: Case, pin: list[str], env: dict[str, str]) -> tuple[float, float]:
    if case.fresh_out is not None:
        shutil.rmtree(case.fresh_out, ignore_errors=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen([*pin, *case.argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode not in case.ok_codes:
        raise SystemExit(f"{case.name}: exit {proc.returncode}: {' '.join(case.argv)}\n{err[-2000:]}")
    return wall, ru.ru_utime + ru.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="Timed rounds (the median is reported).")
    ap.add_argument("--python", default=sys.executable, help="Interpreter that runs trajlab.")
    ap.add_argument("--cpu", type=int, default=None, help="Core to pin to (default: the last one this process may use).")
    ap.add_argument("--no-pin", action="store_true", help="Do not pin the runs to one core.")
    ap.add_argument("--only", nargs="*", default=None, help="Only these cases (pass and import_polars always run).")
    ap.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "trajlab_bench_startup")
    ap.add_argument("--json", type=Path, default=None, help="Also write every figure (and every run) to this file.")
    ap.add_argument("--ratio", choices=("cpu", "wall"), default="cpu", help="Which ratio the targets are checked on.")
    ap.add_argument("--no-check", action="store_true", help="Report only; exit 0 even when a target is missed.")
    args = ap.parse_args(argv)

    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(args.work_dir / "pycache")
    env.setdefault("COLUMNS", "100")
    pin: list[str] = []
    cpu = None
    if not args.no_pin and shutil.which("taskset") and hasattr(os, "sched_getaffinity"):
        cpu = args.cpu if args.cpu is not None else max(os.sched_getaffinity(0))
        pin = ["taskset", "-c", str(cpu)]

    inputs = _setup(args.work_dir, args.python, env)
    cases = _cases(args.python, args.work_dir, inputs)
    if args.only:
        unknown = set(args.only) - {c.name for c in cases}
        if unknown:
            raise SystemExit(f"unknown case(s) {sorted(unknown)}; cases: {', '.join(c.name for c in cases)}")
        cases = [c for c in cases if c.name in ("pass", "import_polars", *args.only)]

    for c in cases:  # warm-up round: fills the bytecode cache and the page cache; not counted
        _run_once(c, pin, env)
    for r in range(args.runs):
        for c in cases:
            w, u = _run_once(c, pin, env)
            c.wall.append(w)
            c.cpu.append(u)
        print(f"round {r + 1}/{args.runs} done", file=sys.stderr)

    med = {c.name: (statistics.median(c.wall), statistics.median(c.cpu)) for c in cases}
    polars_wall, polars_cpu = med["import_polars"]
    missed = []
    where = f"pinned to CPU {cpu}" if pin else "not pinned"
    print(f"\ntrajlab start-up cost: median of {args.runs} runs, {where}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f} at the end; targets checked on the {args.ratio} ratio")
    print(f"{'case':<20} {'wall s':>8} {'CPU s':>8} {'wall/pl':>8} {'CPU/pl':>8} {'target':>7}")
    for c in cases:
        w, u = med[c.name]
        ratios = {"wall": w / polars_wall, "cpu": u / polars_cpu}
        target = TARGETS.get(c.name)
        verdict = ""
        if target is not None:
            verdict = "ok" if ratios[args.ratio] <= target else "MISSED"
            if verdict != "ok":
                missed.append(c.name)
        tcol = f"<={target:g}x" if target is not None else ""
        print(f"{c.name:<20} {w:8.3f} {u:8.3f} {ratios['wall']:7.2f}x {ratios['cpu']:7.2f}x {tcol:>7}  {verdict}")
    if args.json:
        args.json.write_text(json.dumps({
            "runs": args.runs, "cpu": cpu, "python": args.python, "targets": TARGETS,
            "cases": {c.name: {"argv": c.argv, "wall": c.wall, "cpu": c.cpu, "wall_median": med[c.name][0],
                               "cpu_median": med[c.name][1], "wall_ratio_to_polars": med[c.name][0] / polars_wall,
                               "cpu_ratio_to_polars": med[c.name][1] / polars_cpu}
                      for c in cases}}, indent=2))
    if missed and not args.no_check:
        print(f"targets missed: {', '.join(missed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
