"""The control-token trip's false-trip rate on simulated healthy runs, and its delay on a falling statistic, by
calibration setting (:mod:`trajlab.control_trip`; the defaults are chosen from this table).

Each healthy run is 150 steps of ``control_logprob_mean`` = level + noise, the noise independent per step or AR(1)
(φ = 0.5: a run's steps are not independent); a falling run is the same noise with a linear fall of half a noise
sd per step from step 60. τ is calibrated on each run's own first steps.

    python benchmarks/bench_control_trip.py                 # 2,000 runs per cell
    python benchmarks/bench_control_trip.py --runs 500 --json
"""

from __future__ import annotations

import argparse
import json
import random

from trajlab.control_trip import control_trip


def noise_run(rng: random.Random, phi: float, fall: bool, steps: int = 150) -> list[dict]:
    x, rows = 0.0, []
    for s in range(1, steps + 1):
        x = phi * x + (1 - phi * phi) ** 0.5 * rng.gauss(0, 1)
        rows.append({"step": s, "control_logprob_mean": -0.2 + 0.02 * x - (0.01 * (s - 60) if fall and s >= 60 else 0)})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    cells = []
    for baseline, k, consecutive in ((10, 3, 2), (10, 5, 3), (20, 4, 3), (20, 5, 2), (20, 5, 3), (20, 6, 3)):
        for phi in (0.0, 0.5):
            rng = random.Random(1)
            false = sum(control_trip(noise_run(rng, phi, False), baseline=baseline, k=k, consecutive=consecutive)
                        is not None for _ in range(a.runs))
            delays = sorted(t["step"] - 60 for t in (control_trip(noise_run(rng, phi, True), baseline=baseline, k=k,
                                                                   consecutive=consecutive) for _ in range(a.runs // 4))
                            if t is not None and t["step"] >= 60)
            cells.append({"baseline": baseline, "k": k, "consecutive": consecutive, "phi": phi,
                          "false_trip_rate": false / a.runs,
                          "median_delay": delays[len(delays) // 2] if delays else None})
    if a.json:
        print(json.dumps(cells, indent=2))
        return 0
    print(f"{'baseline':>8} {'K':>3} {'in a row':>8} {'phi':>4} {'false trips':>12} {'median delay':>13}")
    for c in cells:
        print(f"{c['baseline']:>8} {c['k']:>3g} {c['consecutive']:>8} {c['phi']:>4} {c['false_trip_rate']:>12.2%} "
              f"{c['median_delay'] if c['median_delay'] is not None else '-':>13}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
