"""The control-token trip (trajlab.control_trip): τ calibrated on a run's own first steps, its false-trip rate on
simulated healthy noise, its lead on a falling statistic, and ``trajlab watch`` tripping on the verl reward's
record files while the malformed-call rate is still flat."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from helpers.scan_runs import make_run

from trajlab.control_trip import BASELINE_STEPS, calibrate, control_trip, describe, series
from trajlab.tripfile import read_trip_file
from trajlab.verl.records import RecordLog, record_row
from trajlab.watch import WatchOptions, watch


def noise_run(rng: random.Random, steps: int = 150, phi: float = 0.0, level: float = -0.2, sd: float = 0.02,
              fall_from: int | None = None, fall_per_step: float = 0.0) -> list[dict]:
    """Per-step control_logprob_mean: ``level`` plus AR(1) noise (``phi``), falling linearly from ``fall_from``."""
    x, rows = 0.0, []
    for s in range(1, steps + 1):
        x = phi * x + (1 - phi * phi) ** 0.5 * rng.gauss(0, 1)
        drop = fall_per_step * (s - fall_from) if fall_from is not None and s >= fall_from else 0.0
        rows.append({"step": s, "control_logprob_mean": level + sd * x - drop})
    return rows


@pytest.mark.parametrize(("phi", "at_most"), [(0.0, 0.005), (0.5, 0.015)])
def test_false_trips_on_simulated_healthy_runs(phi: float, at_most: float) -> None:
    rng = random.Random(11)
    runs = 1500
    false = sum(control_trip(noise_run(rng, phi=phi)) is not None for _ in range(runs))
    assert false / runs <= at_most, (phi, false)
    # the level does not matter (calibrated per run): the same noise around another family's level
    rng = random.Random(11)
    assert sum(control_trip(noise_run(rng, phi=phi, level=-1.3, sd=0.15)) is not None for _ in range(runs)) == false


def test_a_falling_statistic_trips_soon_after_it_starts_to_fall() -> None:
    rng = random.Random(5)
    leads = []
    for _ in range(200):
        trip = control_trip(noise_run(rng, fall_from=60, fall_per_step=0.01))  # half a noise sd per step
        assert trip is not None and trip["step"] >= 60
        leads.append(trip["step"] - 60)
    assert max(leads) <= 20 and sorted(leads)[100] <= 12  # 10 steps: the fall reaches 5 sd


def test_calibration_fixed_tau_and_the_words() -> None:
    rows = [{"step": s, "control_logprob_mean": -0.1} for s in range(1, 31)]
    assert calibrate(series(rows[:BASELINE_STEPS - 1], "control_logprob_mean")) is None  # not calibrated yet
    th = calibrate(series(rows, "control_logprob_mean"))
    assert th is not None and th.method == "calibrated" and th.baseline_steps == (1, 20)
    assert th.scale == pytest.approx(1e-3) and th.tau == pytest.approx(-0.105)  # floored scale, K = 5
    rows[25:28] = [{"step": s, "control_logprob_mean": -0.2} for s in (26, 27, 28)]
    trip = control_trip(rows)
    assert trip is not None and (trip["step"], trip["noticed_step"]) == (26, 28)
    assert describe(trip) == ("control_logprob_mean -0.2000 below tau -0.1050 (calibrated on steps 1..20: median "
                              "-0.1000 - 5 x 0.0010) from step 26")
    fixed = control_trip(rows, tau=-0.15)
    assert fixed is not None and fixed["threshold"]["method"] == "fixed" and fixed["step"] == 26
    share = [{"step": s, "control_low_prob_share": 0.02 + (0.3 if s >= 30 else 0)} for s in range(1, 40)]
    up = control_trip(share, "control_low_prob_share")
    assert up is not None and up["step"] == 30 and up["threshold"]["direction"] == "up"
    with pytest.raises(ValueError, match="unknown control-token statistic"):
        control_trip(rows, "score")


def _records(run: Path, fall_from: int | None, steps: int) -> None:
    rng = random.Random(3)
    log = RecordLog(run)
    x = -0.2
    for s in range(1, steps + 1):
        x = -0.2 + 0.02 * rng.gauss(0, 1) - (0.03 * (s - fall_from) if fall_from and s >= fall_from else 0.0)
        log.append(record_row({"score": 1.0, "tool_calls": 1.0, "malformed_calls": 0.0, "exact_tokens": 1.0,
                               "generated_tokens": 100.0, "control_tokens": 10.0, "control_logprob_mean": x,
                               "control_logprob_min": x - 0.5, "control_low_prob_share": 0.0},
                              step=s, uid=f"u{s}", stripped_text=f"out {s}")
                   for _ in range(2))
    log.close()


@pytest.mark.parametrize("falls", [True, False])
def test_watch_trips_on_control_tokens_while_the_malformed_rate_is_flat(tmp_path: Path, falls: bool) -> None:
    run = make_run(tmp_path / "runs" / "exp", steps=40, rot_from=1000)  # no malformed call at all
    _records(run, 30 if falls else None, 40)
    trips: list = []
    res = watch(WatchOptions(paths=[run], out=tmp_path / "out", interval=0.05, idle_exit=0.3, publish_every=30),
                on_trip=trips.append)
    if not falls:  # the healthy records: no trip of any kind
        assert res.stopped == "idle" and trips == [] and read_trip_file(tmp_path / "out") is None
        return
    assert res.stopped == "trip" and [(t.run, t.reason) for t in trips] == [("exp", "control_tokens")]
    (t,) = trips
    assert 30 <= t.step <= 36 and t.noticed_step == t.step + 2 and t.rate < -0.2  # τ is ~4 steps of fall away
    assert t.detail is not None and "calibrated on steps 1..20" in t.detail
    assert all(s["malformed_calls"] == 0 for s in res.summary.steps)  # the rate said nothing
    got = read_trip_file(tmp_path / "out")
    assert got is not None and got["trips"][0]["reason"] == "control_tokens" and got["trips"][0]["detail"] == t.detail


def test_watch_trips_on_the_sampled_control_tokens_of_exact_token_dumps(tmp_path: Path) -> None:
    """NeMo-RL dumps carry the sampler's log-probs: watch trips on their control tokens with no record file."""
    from trajlab.ingest import token_text

    tok = token_text.load("qwen3.5")
    prompt = ("<|im_start|>user\nWho wrote Hamlet?<|im_end|>\n<|im_start|>assistant\n")
    call = "<tool_call>\n<function=search>\n<parameter=query>\nHamlet\n</parameter>\n</function>\n</tool_call>"
    rng = random.Random(2)
    run = tmp_path / "runs" / "nemo"
    run.mkdir(parents=True)
    for step in range(1, 31):
        lp = -0.2 + 0.01 * rng.gauss(0, 1) - (0.05 * (step - 24) if step >= 24 else 0.0)
        p_ids = tok.encode(prompt, add_special_tokens=False)
        g_ids = tok.encode(call + "<|im_end|>", add_special_tokens=False)
        ids, mask = p_ids + g_ids, [0] * len(p_ids) + [1] * len(g_ids)
        row = {"content": [[prompt, call + "<|im_end|>"]], "rewards": [1.0], "input_lengths": [len(ids)],
               "token_ids": [ids], "token_loss_mask": [mask], "sample_loss_mask": [1.0],
               "advantages": [[0.0] * len(ids)], "generation_logprobs": [[lp if m else 0.0 for m in mask]],
               "prev_logprobs": [[0.0] * len(ids)], "idx": 0}
        (run / f"train_data_step{step}.jsonl").write_text(json.dumps(row) + "\n")
    trips: list = []
    res = watch(WatchOptions(paths=[run], out=tmp_path / "out", interval=0.05, idle_exit=0.3, publish_every=30),
                on_trip=trips.append)
    assert res.stopped == "trip" and [(t.reason, t.run) for t in trips] == [("control_tokens", "nemo")]
    assert 24 <= trips[0].step <= 27 and all(s["malformed_calls"] == 0 for s in res.summary.steps)
