"""Shared code for the tools in this folder. It defines no tool, so scanning skips it."""

import math


def check_finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("the result is not a finite number")
    return value
