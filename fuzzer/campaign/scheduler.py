"""Which unit runs next: units given back (a lost worker's) first, then new ones, seeds being seed_base + index.

It knows the database and the spec, not who runs a unit: a local worker process or anything else."""

from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass

from fuzzer.campaign.db import CampaignDB
from fuzzer.campaign.spec import CampaignSpec


@dataclass
class Unit:
    """One graph (the seed's) and the converters whose tests of it are not recorded yet."""

    idx: int
    seed: int
    remaining: list[str]


class Scheduler:
    """Hands out units: those given back or left unfinished by an earlier session, then new ones up to max_tests."""

    def __init__(self, spec: CampaignSpec, db: CampaignDB) -> None:
        self.spec = spec
        self.db = db
        self.queue: collections.deque[Unit] = collections.deque()

    def resume(self) -> None:
        """Queue the units an earlier session left unfinished, with the tests they still lack."""
        self.queue.extend(Unit(i, s, [c for c in r if c in self.spec.converters_for(s)])
                          for i, s, r in self.db.unfinished(self.spec.converters))

    def more_work(self) -> bool:
        return bool(self.queue) or self.spec.max_tests is None or self.db.next_index() < self.spec.max_tests

    def next_unit(self) -> Unit | None:
        """The next unit with tests to run; None when the campaign's max_tests are all handed out."""
        while self.queue:
            unit = self.queue.popleft()
            if unit.remaining:
                return unit
        if self.spec.max_tests is not None and self.db.next_index() >= self.spec.max_tests:
            return None
        idx = self.db.next_index()
        seed = self.spec.seed_base + idx
        self.db.add_unit(idx, seed)
        return Unit(idx, seed, self.spec.converters_for(seed))

    def give_back(self, units: Iterable[Unit]) -> None:
        """Units handed out but not finished (a lost worker's): they run next, in the order given."""
        self.queue.extendleft(reversed(list(units)))
