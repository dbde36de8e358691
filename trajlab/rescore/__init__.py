"""Teacher-force logged trajectories through checkpoints and find control-token probability spikes.

:func:`rescore` is the library function behind ``trajlab rescore`` and :class:`RescoreOptions` holds its options;
this package's ``__init__`` only re-exports the public API. The driver (:mod:`~trajlab.rescore.driver`) reads a
scan's tables, rebuilds each selected trajectory's token stream (:mod:`~trajlab.rescore.stream`), runs every
checkpoint over it (:mod:`~trajlab.rescore.checkpoint_run`, :mod:`~trajlab.rescore.scoring`: body once per batch,
LM head in chunks at assistant positions only), and writes per token / spike / trajectory / malformation /
control-token / position / token-mass tables under ``OUT/rescore/<label>/`` plus ``OUT/rescore/compare.parquet``
(:mod:`~trajlab.rescore.outputs`). Then every checkpoint is compared with the reference
(:mod:`~trajlab.rescore.drift`: calibrated spikes, paired drift, discovered tokens); the result is a
:class:`RescoreSummary` (:mod:`~trajlab.rescore.summary`). Under ``torchrun`` each rank scores its shard and
rank 0 merges and compares (:mod:`~trajlab.rescore.distributed`).

Heavy modules (torch, transformers) are imported inside the functions.
"""

from __future__ import annotations

from trajlab.rescore.driver import rescore
from trajlab.rescore.options import TOKENS_MODES, RescoreOptions
from trajlab.rescore.summary import CheckpointSummary, RescoreSummary

__all__ = ["rescore", "RescoreOptions", "RescoreSummary", "CheckpointSummary", "TOKENS_MODES"]

from trajlab._callable import make_module_callable  # noqa: E402

make_module_callable(__name__, rescore)
