"""`python -m gateway.cli`: the command line without the console script."""

import sys

from agent_gateway import main

sys.exit(main())
