"""``python -m symdiff FILE ...``: the command line, as the ``symdiff`` command (symdiff.cli)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
