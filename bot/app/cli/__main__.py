"""`python -m bot.app.cli`: the `sluice` command."""

import sys

from bot.app.cli import main

if __name__ == "__main__":  # imported (a walk over the package), it runs nothing
    sys.exit(main())
