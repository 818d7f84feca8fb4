"""The people who author and commit the sandbox's history, and when they do."""

from __future__ import annotations

import random
from dataclasses import dataclass

from bot.demo.vocabulary import FIRST_NAMES, LAST_NAMES


@dataclass(frozen=True)
class Person:
    name: str
    email: str
    tz: str

    def ident(self, when: int) -> str:
        return f"{self.name} <{self.email}> {when} {self.tz}"


GITHUB = Person("GitHub", "noreply@github.com", "+0000")
SLUICE_BOT = Person("sluice[bot]", "sluice[bot]@users.noreply.github.com", "+0000")
_TZS = ("-0700", "-0800", "-0400", "+0000", "+0100", "+0200", "+0530", "+0800", "+0900")


def people(rng: random.Random, count: int, *, offset: int) -> list[Person]:
    out: list[Person] = []
    for i in range(count):
        first, last = (
            FIRST_NAMES[(i * 7 + offset) % len(FIRST_NAMES)],
            LAST_NAMES[(i * 11 + offset * 3) % len(LAST_NAMES)],
        )
        handle = f"{first[0].lower()}{last.lower()}"
        out.append(
            Person(
                f"{first} {last}",
                f"{rng.randint(1_000_000, 99_999_999)}+{handle}@users.noreply.github.com",
                rng.choice(_TZS),
            )
        )
    return out


_START = 1725260400  # 2024-09-02 07:00 UTC, a Monday


def stream_times(count: int, rng: random.Random) -> list[int]:
    """Committer times of the upstream stream: 14-40 merges a weekday, a few at weekends, increasing."""
    out: list[int] = []
    day = 0
    while len(out) < count:
        weekend = day % 7 >= 5
        n = rng.randint(3, 9) if weekend else rng.randint(14, 40)
        start = _START + day * 86400
        out.extend(start + s for s in sorted(rng.sample(range(0, 17 * 3600), n)))
        day += 1
    return out[:count]
