"""Reading a config file from disk, for the CLI and the runners; parsing and checks are the core's."""

from __future__ import annotations

from pathlib import Path

from bot.core.config import ConfigError, ConfigProblem, SluiceConfig, parse_config_bytes


def load_config(path: Path | None) -> SluiceConfig:
    """The configuration at `path`, or the defaults when `path` is None; raises ConfigError."""
    if path is None:
        return SluiceConfig()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError((ConfigProblem("", None, "no such file"),), filename=str(path)) from None
    except OSError as err:
        raise ConfigError(
            (ConfigProblem("", None, f"cannot read: {err.strerror}"),), filename=str(path)
        ) from None
    return parse_config_bytes(raw, filename=str(path))
