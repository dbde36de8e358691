"""Shared pytest setup: make tests/ importable for helper modules (verl_lines, rescore_fixtures)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
