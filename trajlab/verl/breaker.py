"""The circuit breaker inside verl: a ``trainer.checkpoint_callback_class`` that stops the run after a checkpoint
is written, once ``trajlab watch`` has tripped.

verl 0.9.1's V1 trainer builds the class named by ``trainer.checkpoint_callback_class`` on the driver with
``cls(config=config)`` and calls ``on_save(trainer=..., global_step=..., checkpoint_dir=..., async_save=...)``
after every checkpoint save; an exception raised there propagates and ends training with that checkpoint complete
(``verl/trainer/ppo/checkpoint_callback.py``; called from ``verl/trainer/ppo/v1/trainer_base.py`` after the
tracker file is written). :class:`TrajlabBreaker` reads the trip file ``trajlab watch -o OUT`` writes
(:mod:`trajlab.tripfile`) and raises :class:`BreakerTripped` when it holds a trip written after this trainer
started (a trip of an earlier attempt, before the run was resumed, does not stop the new one). A path that holds
something other than a trip file fails when verl builds the callback, before training; a trip file that becomes
unreadable later is warned about and never aborts training by itself.

Where the trip file is: ``+trainer.trajlab_trip=OUT`` (the watch's output directory or its ``trip.json``), else
the environment variable ``TRAJLAB_TRIP`` of the driver process. Steps that save nothing cannot stop here; the
supervisor route (``trajlab watch`` exits 3 on a trip, and its ``--on-trip`` command can stop the trainer) covers
them (docs/guides/when-the-breaker-trips.md).

Importing this module loads no verl: the class duck-types verl's ``CheckpointCallback`` (verl's loader takes any
class; only ``__init__(config=...)`` and ``on_save(**kwargs)`` are called).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from trajlab.errors import InputError
from trajlab.tripfile import read_trip_file

#: the driver's environment variable naming the trip file (or the watch's output directory)
TRIP_ENV_VAR = "TRAJLAB_TRIP"
#: the trainer config key naming it (``+trainer.trajlab_trip=OUT`` on verl's command line)
TRIP_CONFIG_KEY = "trajlab_trip"


class BreakerTripped(RuntimeError):
    """``trajlab watch`` tripped: the run stops here, after its checkpoint was written."""


def _config_trip(config: Any) -> str | None:
    trainer = None
    try:
        trainer = config["trainer"] if config is not None else None
    except (KeyError, TypeError, AttributeError):
        trainer = getattr(config, "trainer", None)
    if trainer is None:
        return None
    try:
        value = trainer.get(TRIP_CONFIG_KEY)
    except AttributeError:
        value = getattr(trainer, TRIP_CONFIG_KEY, None)
    return str(value) if value else None


class TrajlabBreaker:
    """verl's checkpoint callback that raises :class:`BreakerTripped` after a save once ``trajlab watch`` tripped.

    ``trip``: the trip file or the watch's output directory (default: ``trainer.trajlab_trip`` of the config, then
    ``$TRAJLAB_TRIP``); ``started``: trips written before this time are an earlier attempt's (default: now)."""

    def __init__(self, config: Any = None, *, trip: str | Path | None = None, started: float | None = None) -> None:
        self.config = config
        where = trip or _config_trip(config) or os.environ.get(TRIP_ENV_VAR)
        self.trip_path = Path(where) if where else None
        self.started = time.time() if started is None else started
        self._warned = False
        if self.trip_path is None:
            import warnings

            warnings.warn("trajlab breaker: no trip file named (set +trainer.trajlab_trip=OUT, the -o directory of "
                          "`trajlab watch`, or $TRAJLAB_TRIP); the breaker will never stop this run", stacklevel=2)
        else:
            read_trip_file(self.trip_path)  # a path that holds something else fails here, before training starts

    def tripped(self) -> dict[str, Any] | None:
        """The trip file's first trip when it was written after this trainer started, else None. A trip file that
        cannot be read during training (replaced by something else, a disk error) is warned about once and does
        not stop the run: the breaker never aborts training on its own failure."""
        if self.trip_path is None:
            return None
        try:
            got = read_trip_file(self.trip_path)
        except InputError as e:
            if not self._warned:
                import warnings

                warnings.warn(f"trajlab breaker: {e.args[0] if e.args else e}; the run goes on", stacklevel=2)
                self._warned = True
            return None
        if not got or not got["trips"] or float(got.get("written_at") or 0) < self.started:
            return None
        return dict(got["trips"][0], next=got.get("next") or [], out=got.get("out"))

    def on_save(self, trainer: Any = None, global_step: int | None = None, checkpoint_dir: str | None = None,
                async_save: bool = False, **kwargs: Any) -> None:
        """After verl wrote a checkpoint: raise :class:`BreakerTripped` (which ends training) when watch tripped."""
        t = self.tripped()
        if t is None:
            return
        why = (f"early warning at step {t.get('step')}" if t.get("reason") == "early_warning"
               else f"{t.get('reason')} at step {t.get('step')}")
        nxt = "; next: " + t["next"][0] if t.get("next") else ""
        saved = f"{checkpoint_dir} (global step {global_step})" if checkpoint_dir else f"global step {global_step}"
        pending = " (written asynchronously: wait for latest_checkpointed_iteration.txt)" if async_save else ""
        raise BreakerTripped(f"trajlab breaker: run {t.get('run')!r} tripped ({why}); stopped after the checkpoint "
                             f"{saved}{pending}{nxt}")
