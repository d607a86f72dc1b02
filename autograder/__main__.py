"""``python -m autograder``: the command line (:mod:`autograder.cli`)."""

import sys

from autograder.cli import main

sys.exit(main())
