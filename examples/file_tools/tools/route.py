"""A typed tool: dataclass, Enum and tuple parameters arrive as those types."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from enum import Enum

from agentcore import tool


class Unit(Enum):
    KM = "km"
    MILES = "miles"


@dataclass
class Stop:
    name: str
    at: tuple[float, float]  # (x, y) in km


@tool
def route(stops: list[Stop], unit: Unit = Unit.KM) -> str:
    """Length of a route through the stops, in order.

    Args:
        stops: The stops, in the order they are visited.
        unit: The unit of the answer.
    """
    km = sum(math.dist(a.at, b.at) for a, b in itertools.pairwise(stops))
    length = km if unit is Unit.KM else km / 1.609344
    return f"{' -> '.join(stop.name for stop in stops)}: {length:.1f} {unit.value}"
