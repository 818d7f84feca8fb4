"""The words of a benchmark comparison: exit codes, verdicts, metrics and the two ways it fails."""

from __future__ import annotations

import enum
from collections.abc import Mapping

from bot.core.errors import SluiceError

EXIT_OK = 0
EXIT_CRITICAL_REGRESSION = 1
EXIT_BAD_INPUT = 2
EXIT_REFUSED = 3


class Verdict(enum.StrEnum):
    REGRESSED = "regressed"
    IMPROVED = "improved"
    SAME = "same"
    INCONCLUSIVE = "inconclusive"
    NOT_COMPARABLE = "not_comparable"


class Metric(enum.StrEnum):
    MEDIAN = "median"
    P90 = "p90"
    P99 = "p99"
    COMPILE_COLD = "compile_cold"
    COMPILE_WARM = "compile_warm"


class CompareInputError(SluiceError):
    """A report, thresholds file or A/B run that cannot be used as given (exit 2)."""

    def __init__(
        self, message: str, remedy: str = "fix the file or command named; see docs/compare.md"
    ) -> None:
        super().__init__(message, remedy)


class ContextRefused(Exception):
    """The two sides ran in different contexts: timings from them are not comparable (exit 3)."""

    def __init__(
        self,
        differences: Mapping[str, tuple[object, object]],
        *,
        where: str,
        labels: tuple[str, str] = ("baseline", "candidate"),
    ) -> None:
        super().__init__(f"{where}: {', '.join(differences)} differ")
        self.differences = dict(differences)
        self.where = where
        self.labels = labels


def pct(fraction: float, decimals: int = 1) -> str:
    """A fraction as a percentage, as the verdicts' reasons and the summary write it: `2.5 %`."""
    return f"{fraction * 100:.{decimals}f} %"
