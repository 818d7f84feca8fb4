"""`python -m runners`."""

import signal

from runners.cli import main
from runners.commands import stop_running

signal.signal(signal.SIGTERM, stop_running)  # a stopped runner stops the commands it started
raise SystemExit(main())
