"""``python -m evalreg`` runs the command line."""

from evalreg.cli import entry

entry()
