"""``python -m tuneplane.cli``: the command line, as the ``tuneplane`` script runs it."""

import sys

from tuneplane.cli import main

sys.exit(main())
