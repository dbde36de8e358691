"""``trajlab scan``: input files → classified tool calls → versioned Parquet tables in OUT.

One concept per module:

* :mod:`~trajlab.scan.options` -- :class:`ScanOptions` and their fingerprint;
* :mod:`~trajlab.scan.plan` -- files → cache keys, byte ranges and units of work;
* :mod:`~trajlab.scan.ids` -- file content hashes and trajectory ids;
* :mod:`~trajlab.scan.worker` -- one unit → part files;
* :mod:`~trajlab.scan.engines` -- the engine seam (``--engine``): :mod:`~trajlab.scan.records` (the reference)
  and :mod:`~trajlab.scan.columnar` (the fast path), and why a range fell back;
* :mod:`~trajlab.scan.parts` -- part files and the merge into one Parquet file per table;
* :mod:`~trajlab.scan.cache` -- the incremental cache (reused files, skipped merges);
* :mod:`~trajlab.scan.summary` -- :class:`ScanSummary` and ``manifest.json``; :mod:`~trajlab.scan.view` renders it;
* :mod:`~trajlab.scan.driver` -- :func:`scan`, which runs all of it.

``trajlab.scan(...)`` and ``trajlab.scan.scan(...)`` both call :func:`scan`.
"""

from __future__ import annotations

from trajlab._callable import make_module_callable
from trajlab.scan.driver import scan
from trajlab.scan.options import ScanOptions
from trajlab.scan.summary import ScanSummary

__all__ = ["ScanOptions", "ScanSummary", "scan"]

make_module_callable(__name__, scan)
