"""`python -m gateway.cli`: the command line without the console script."""

import sys

from . import main

sys.exit(main())
