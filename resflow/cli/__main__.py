"""``python -m resflow.cli`` runs the command line (as the ``resflow`` script does)."""

from . import main

main()
