"""``python -m trajlab`` (also what ``torchrun -m trajlab rescore ...`` runs)."""

import sys

from trajlab.cli import main

sys.exit(main())
