"""Training metrics as the trainer logged them, beside trajlab's own numbers.

* :mod:`trajlab.metrics.filelog`: verl's file logger (``trainer.logger=[..., file]``), JSON lines
  ``{"step": N, "data": {...}}``.
* :mod:`trajlab.metrics.tfrecord` and :mod:`trajlab.metrics.tfevents`: TensorBoard event files (TFRecord framing,
  the few protobuf fields of ``Event``/``Summary`` that carry scalars), read and written without TensorBoard.
* :mod:`trajlab.metrics.sources`: where the logs are (beside the dumps or named with ``--metrics``) and which run
  each belongs to.
* :mod:`trajlab.metrics.load`: the ``metrics`` table of a scan.
* :mod:`trajlab.metrics.leadtime`: the step where the reward (or a named metric) breaks down, and how many steps
  earlier trajlab's early warning fired.
* :mod:`trajlab.metrics.tensorboard_out`: trajlab's per-step numbers written as TensorBoard scalars.

Nothing here imports polars, duckdb or TensorBoard at module level.
"""
