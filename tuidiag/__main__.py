"""``python -m tuidiag`` runs the command line."""

import sys

from tuidiag.cli.main import main

sys.exit(main())
