"""Several tools in one file: export a list. Tools are found by name, never by position."""

from helpers import check_finite  # a sibling helper module: the tools folder is on sys.path

from agentcore import tool


@tool
def multiply(a: float, b: float) -> float:
    """Multiply two numbers."""
    return check_finite(a * b)


@tool
def power(base: float, exponent: int = 2) -> float:
    """Raise a number to a power.

    Args:
        base: The number.
        exponent: The power (2 by default).
    """
    return check_finite(base**exponent)


TOOLS = [multiply, power]
