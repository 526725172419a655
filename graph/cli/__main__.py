"""`python -m graph.cli`: the `ferry` command."""

import sys

from graph.cli import main

sys.exit(main())
