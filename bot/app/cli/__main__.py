"""`python -m bot.app.cli`: the `sluice` command."""

import sys

from bot.app.cli import main

sys.exit(main())
