"""``python -m corral`` runs the command line."""

import sys

from corral.cli import main

sys.exit(main())
