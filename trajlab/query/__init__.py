"""SQL over a trajlab output directory: read-only DuckDB views over every table found.

:func:`connect` opens an in-memory DuckDB database whose views are the Parquet tables of one output directory:

* scan tables by name (``trajectories``, ``turns``, ``calls``, ``findings``, ``steps``, ``ingest_errors``);
* rescore tables ``OUT/rescore/<label>/<table>.parquet`` as ``rescore_<table>``, unioned across checkpoints with
  a ``checkpoint`` column (the label), and ``OUT/rescore/<name>.parquet`` (e.g. ``compare``) as ``rescore_<name>``;
* SFT pool files ``OUT/sft_pool/**/<name>.parquet`` as ``sft_<name>``;
* helper views and table macros for the common questions (:data:`HELPERS`).

The tables are handed to DuckDB as Arrow datasets (scanned lazily, with projection and filter pushdown), so
in the default read-only mode DuckDB itself needs no file access at all: the connection is opened with
``enable_external_access = false`` and its configuration locked, which makes ``COPY ... TO``, ``ATTACH``,
``EXPORT DATABASE``, ``read_csv(...)`` and ``INSTALL`` fail. Nothing a query does can write into ``OUT``.
"""

from trajlab.query.export import EXPORT_FORMATS, export
from trajlab.query.helpers import HELPERS, Helper
from trajlab.query.limits import DEFAULT_LIMITS, SqlLimits
from trajlab.query.run import ViewInfo, connect, iter_batches, list_views, preview, sql
from trajlab.query.sources import TableSource, discover

__all__ = [
    "DEFAULT_LIMITS", "EXPORT_FORMATS", "HELPERS", "Helper", "SqlLimits", "TableSource", "ViewInfo", "connect",
    "discover", "export", "iter_batches", "list_views", "preview", "sql",
]  # fmt: skip
