"""``python -m bistack``: the command line, for processes a command starts itself (a tuner's
trial workers run under the same interpreter as their parent)."""

import sys

from bistack.cli import main

sys.exit(main())
