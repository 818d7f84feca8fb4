"""`sluice serve`: the GitHub App's webhook service."""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import sys
from typing import TYPE_CHECKING

from bot.app.cli import database
from bot.app.cli.common import open_store
from bot.core.errors import SluiceError

if TYPE_CHECKING:
    from aiohttp import web

    from bot.app.settings import Settings


log = logging.getLogger("sluice.serve")


def run(args: argparse.Namespace) -> int:
    """Run the webhook service; every missing or malformed setting is reported before anything starts."""
    from pydantic import ValidationError

    from bot.app.service import GIL_SWITCH_INTERVAL_S, create_app
    from bot.app.settings import Settings, unknown_variables

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    try:
        settings = Settings()
    except ValidationError as exc:  # a value of the wrong form or out of range: named, never echoed (secrets)
        problems = [
            f"SLUICE_{'_'.join(str(part) for part in error['loc']).upper()}: {error['msg']}"
            for error in exc.errors()
        ]
        # and every other problem, in the same round: the settings with the malformed ones at their defaults
        malformed = {str(error["loc"][0]) for error in exc.errors() if error["loc"]}
        defaults = {
            name: Settings.model_fields[name].default for name in malformed if name in Settings.model_fields
        }
        named = tuple(f"SLUICE_{name.upper()}" for name in malformed)
        with contextlib.suppress(ValidationError):
            problems += [p for p in Settings(**defaults).problems() if not p.startswith(named)]
    else:
        problems = settings.problems()
    if problems:
        for problem in problems:
            print(f"sluice serve: {problem}", file=sys.stderr)
        return 2
    for said, _ in unknown_variables(os.environ):
        log.warning("%s", said)
    store = open_store(settings.database_url, given_by="SLUICE_DATABASE_URL")
    try:
        _serve(create_app(settings, store=store, background=True), settings, args)
    finally:
        store.close()
    return 0


def _serve(app: web.Application, settings: Settings, args: argparse.Namespace) -> None:
    """Run the app until SIGTERM or SIGINT, saying where it listens and with what; a port it cannot take is
    a clear error."""
    from aiohttp import web

    log.info(
        "starting on http://%s:%d; store %s; git mirrors in %s; %d workers; tiers run %s",
        args.host,
        args.port,
        database.shown_url(settings.database_url),
        settings.data_dir.absolute(),
        settings.workers,
        "on this machine" if settings.tier_backend == "local" else "in the fork's GitHub Actions workflows",
    )
    try:
        web.run_app(app, host=args.host, port=args.port, print=None)
    except OSError as exc:
        if exc.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
            raise
        raise SluiceError(
            f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
            "stop what listens there, or give another --port or --host",
        ) from exc
    log.info("stopped")


def add_parser(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser(
        "serve", help="run the GitHub App webhook service (settings from SLUICE_* variables)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080)")
    serve.set_defaults(run=run)
