"""Reading a comparison's inputs: tier reports and the thresholds, each refusal naming the file."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from bot.config_file import load_config
from bot.core.config import ConfigError, PerformanceConfig
from runners.compare.model import CompareInputError
from runners.report import Report


def read_report(path: Path, *, name: str) -> Report:
    """The report at `path`; CompareInputError naming the file when it is missing or invalid."""
    try:
        return Report.read(path)
    except FileNotFoundError:
        raise CompareInputError(f"{name} report {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise CompareInputError(f"{name} report {path}: cannot read it ({err})") from None
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'the file'}: {e['msg']}" for e in err.errors()[:3]
        )
        more = f" (and {err.error_count() - 3} more)" if err.error_count() > 3 else ""
        raise CompareInputError(
            f"{name} report {path} is not a valid tier report: {problems}{more}",
            "pass a file written by `python -m runners run`",
        ) from None


def load_thresholds(path: Path) -> PerformanceConfig:
    """A thresholds file: the keys of the `performance:` section, at the top level or under `performance:`."""
    data = _yaml_mapping(path)
    return _performance(data["performance"] or {} if set(data) == {"performance"} else data, path)


def load_performance_section(path: Path) -> PerformanceConfig:
    """The `performance:` section of `.github/sluice.yml`, the whole file validated."""
    try:
        return load_config(path).performance
    except ConfigError as err:
        raise CompareInputError(str(err)) from None


def _yaml_mapping(path: Path) -> dict[str, object]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise CompareInputError(f"thresholds {path}: cannot read it ({err})") from None
    except yaml.YAMLError as err:
        raise CompareInputError(f"thresholds {path}: invalid YAML: {err}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CompareInputError(f"thresholds {path}: the top level must be a mapping")
    return data


def _performance(data: object, path: Path) -> PerformanceConfig:
    try:
        return PerformanceConfig.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(
            f"performance.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()
        )
        raise CompareInputError(f"thresholds {path}: {problems}", "see docs/compare.md") from None
