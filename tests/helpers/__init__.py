"""Helpers the tests share: builders of real verl dumps, scan-shaped runs, tiny checkpoints, page parsers.

Test modules import these (``from helpers.x import ...``), never each other."""
