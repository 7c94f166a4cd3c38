"""What a campaign's units test: generated graphs, zoo architectures, or a mix of both (the default), each unit's
source drawn by its seed alone so that a rerun of the seed tests the same thing.

The mix's zoo share was chosen from a measurement (docs/campaign.md#zoo-units-in-the-mix): one worker for 152 s,
graphs only and zoo only side by side on a two-core machine, a graph unit took 5.4 s of test time and a zoo unit 11.6 s
(25 s in an earlier 12-minute zoo campaign, whose draws held more of the heavy Keras applications): about 3.5 times.
One unit in ten from the zoo then gives it about 30% of the worker time, and the graphs the rest.
"""

from __future__ import annotations

import random
from enum import Enum


class SourceKind(Enum):
    """What one unit tests."""

    GRAPHS = "graphs"  # a graph generated from the seed
    ZOO = "zoo"  # a zoo architecture the seed picks (fuzzer/campaign/zoo_unit.py)


MIX = "mix"  # a campaign's units: graphs, and zoo architectures on a share of seeds
SOURCES = (MIX, SourceKind.GRAPHS.value, SourceKind.ZOO.value)
ZOO_SHARE = 0.1


def unit_source(source: str, zoo_share: float, seed: int) -> SourceKind:
    """The source of the unit of `seed` in a campaign of `source` (one of SOURCES): in a mix, a zoo architecture on
    `zoo_share` of seeds (drawn by the seed alone), a graph on the rest."""
    if source == MIX:
        zoo = zoo_share > 0 and random.Random(f"source:{seed}").random() < zoo_share
        return SourceKind.ZOO if zoo else SourceKind.GRAPHS
    return SourceKind(source)
