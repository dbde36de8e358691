"""The circuit breaker end to end: ``trajlab watch`` trips and leaves ``OUT/trip.json``; the verl checkpoint
callback (built by verl 0.9.1's own ``build_checkpoint_callback`` in the verl venv) raises after a save once the
trip is there; ``trajlab handoff`` builds the emergency SFT pool cut at the trip and prints the commands."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers.scan_runs import make_run
from helpers.verl_venv import SKIP, verl_venv

from trajlab.cli import main
from trajlab.errors import InputError
from trajlab.handoff import HandoffOptions, handoff
from trajlab.tripfile import TRIP_FILE, read_trip_file, write_trip_file
from trajlab.verl.breaker import BreakerTripped, TrajlabBreaker

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tripped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run that rots from step 10, watched until it trips (exit 3): the watch's output directory."""
    root = tmp_path_factory.mktemp("breaker")
    run = make_run(root / "runs" / "exp", steps=20, rot_from=10)
    out = root / "out"
    assert main(["watch", str(run), "-o", str(out), "--interval", "0.1"]) == 3
    return out


def test_watch_leaves_a_trip_file(tripped: Path) -> None:
    got = read_trip_file(tripped)
    assert got is not None and got["version"] == 1 and got["out"] == str(tripped.resolve())
    (trip,) = got["trips"]
    assert trip["run"] == "exp" and trip["reason"] == "early_warning" and 10 <= trip["step"] <= 12
    assert trip["step"] <= trip["noticed_step"] and 0 < trip["rate"] <= 1
    assert got["next"] == [f"trajlab handoff {tripped}"]
    assert read_trip_file(tripped / TRIP_FILE) == got  # the file itself or its directory


def test_breaker_raises_after_a_save_only_for_a_trip_of_this_attempt(tripped: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    cb = TrajlabBreaker(config={"trainer": {"trajlab_trip": str(tripped)}}, started=0.0)
    with pytest.raises(BreakerTripped) as e:
        cb.on_save(trainer=None, global_step=12, checkpoint_dir="/ckpt/global_step_12", async_save=False)
    msg = str(e.value)
    assert "\n" not in msg and "run 'exp' tripped (early warning at step" in msg
    assert "/ckpt/global_step_12" in msg and f"next: trajlab handoff {tripped}" in msg
    later = TrajlabBreaker(config={"trainer": {"trajlab_trip": str(tripped)}})  # started after the trip was written
    later.on_save(global_step=14, checkpoint_dir="/ckpt/global_step_14")  # an earlier attempt's trip: no stop
    monkeypatch.setenv("TRAJLAB_TRIP", str(tripped / TRIP_FILE))
    with pytest.raises(BreakerTripped):
        TrajlabBreaker(started=0.0).on_save(global_step=12)
    monkeypatch.delenv("TRAJLAB_TRIP")
    with pytest.warns(UserWarning, match="never stop this run"):
        TrajlabBreaker(config={"trainer": {}}).on_save(global_step=1)  # nothing named: a warning, never a stop


def test_a_foreign_or_newer_trip_file_is_one_line(tmp_path: Path) -> None:
    assert read_trip_file(tmp_path) is None
    (tmp_path / TRIP_FILE).write_text('{"stop": true}\n')
    with pytest.raises(InputError, match="is not a trip file written by trajlab watch"):
        TrajlabBreaker(trip=tmp_path, started=0.0)  # when verl builds it, before training
    (tmp_path / TRIP_FILE).unlink()
    cb = TrajlabBreaker(trip=tmp_path, started=0.0)
    (tmp_path / TRIP_FILE).write_text("not json")  # replaced while training: warned once, the run goes on
    with pytest.warns(UserWarning, match="is not a trip file written by trajlab watch; the run goes on"):
        cb.on_save(global_step=2)
    cb.on_save(global_step=3)
    write_trip_file(tmp_path, [{"run": "r", "step": 3, "rate": 0.5, "reason": "fail_above", "noticed_step": 3}])
    raw = json.loads((tmp_path / TRIP_FILE).read_text())
    (tmp_path / TRIP_FILE).write_text(json.dumps({**raw, "version": 99}))
    with pytest.raises(InputError, match="newer than this trajlab reads"):
        read_trip_file(tmp_path)


def test_handoff_cuts_the_pool_at_the_trip_and_prints_runnable_commands(tripped: Path, tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    ckpts = tmp_path / "checkpoints"
    for s in (5, 10):
        (ckpts / f"global_step_{s}" / "actor").mkdir(parents=True)
    (ckpts / "latest_checkpointed_iteration.txt").write_text("10")
    assert main(["handoff", str(tripped), "--checkpoints", str(ckpts), "--json", "-o", str(tmp_path / "pool")]) == 0
    got = json.loads(capsys.readouterr().out)
    step = read_trip_file(tripped)["trips"][0]["step"]  # type: ignore[index]
    assert got["run"] == "exp" and got["split_step"] == step and got["checkpoint"] == str(ckpts / "global_step_10")
    assert got["samples"]["positive"] > 0 and got["samples"]["error_demo"] > 0
    pool = tmp_path / "pool"
    assert json.loads((pool / "manifest.json").read_text())["options"]["split_step"] == step
    ids = {k: set(pq.read_table(pool / f"{k}.parquet").column("trajectory_id").to_pylist())
           for k in ("positive", "error_demo")}
    steps = dict(zip(*pq.read_table(tripped / "trajectories.parquet", columns=["trajectory_id", "step"])
                     .to_pydict().values(), strict=True))
    assert ids["positive"] and max(steps[t] for t in ids["positive"]) < step  # the healthy run only
    assert ids["error_demo"] and min(steps[t] for t in ids["error_demo"]) >= step  # what broke
    merge, sft, resume = got["commands"]
    assert merge.startswith("python -m verl.model_merger merge --backend fsdp --local_dir "
                            f"{ckpts / 'global_step_10'}/actor")
    assert "-m verl.trainer.sft_trainer" in sft and f"data.train_files={pool.resolve() / 'train.parquet'}" in sft
    assert "actor_rollout_ref.model.path=" in resume and "trainer.resume_mode=disable" in resume
    # library: a cut outside the run is one line naming the steps
    with pytest.raises(Exception, match=r"leaves one side empty \(the candidates' steps are 1\.\.20\)"):
        handoff(tripped, HandoffOptions(split_step=50, pool=tmp_path / "p2"))


@pytest.mark.verl
def test_verl_builds_the_breaker_and_it_stops_the_run(tripped: Path, tmp_path: Path) -> None:
    py = verl_venv() / "bin" / "python"
    if not py.is_file():
        pytest.skip(SKIP)
    # the trip in ``tripped`` was written before this trainer started (a resumed run must not stop on it); the one
    # in ``fresh`` is written while it trains (it stops after the save, through verl's exception path)
    fresh = tmp_path / "w"
    write_trip_file(fresh, read_trip_file(tripped)["trips"], now=4e9)  # type: ignore[index]
    script = textwrap.dedent("""
        import json, sys
        from omegaconf import OmegaConf
        from verl.trainer.ppo.checkpoint_callback import build_checkpoint_callback
        res = []
        for trip in sys.argv[1:]:
            cfg = OmegaConf.create({"trainer": {"checkpoint_callback_class": "trajlab.verl.breaker.TrajlabBreaker"}})
            cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist([f"trainer.trajlab_trip={trip}"]))
            cb = build_checkpoint_callback(cfg)
            got = {"class": type(cb).__module__ + "." + type(cb).__name__, "raised": None}
            try:
                cb.on_save(trainer=object(), global_step=12, checkpoint_dir="/c/global_step_12", async_save=False)
            except Exception as e:
                got["raised"] = [type(e).__name__, str(e)]
            res.append(got)
        json.dump(res, sys.stdout)
    """)
    p = subprocess.run([str(py), "-c", script, str(tripped), str(fresh)], capture_output=True, text=True,
                       timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    if p.returncode and "No module named 'verl" in p.stderr:
        pytest.skip(SKIP)
    assert p.returncode == 0, p.stderr[-2000:]
    earlier, during = json.loads(p.stdout)
    assert earlier == {"class": "trajlab.verl.breaker.TrajlabBreaker", "raised": None}
    name, msg = during["raised"]
    assert name == "BreakerTripped" and "stopped after the checkpoint /c/global_step_12 (global step 12)" in msg
