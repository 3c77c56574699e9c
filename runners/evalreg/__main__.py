"""``python -m evalreg`` runs the command line."""

import sys

from evalreg.cli import main

sys.exit(main())
