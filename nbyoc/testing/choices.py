"""Where a generated case's decisions come from: a hypothesis ``draw`` (the strategies
of ``nbyoc.testing.strategies``), a seeded ``random.Random`` (when hypothesis is not
installed), or always the first option (the smallest case, to ask whether an op takes
a dtype at all). Case generators (``nbyoc.testing.calls``) are written once against
this interface and run under any of the three.

>>> c = RandomChoices(seed=1)
>>> 0 <= c.integer(0, 9) <= 9, c.choice(["a", "b"]) in "ab"
(True, True)
>>> first = FirstChoices()
>>> first.integer(2, 9), first.choice(["a", "b"]), first.boolean()
(2, 'a', False)
"""

from __future__ import annotations

import random
from collections.abc import Sequence


class Choices:
    """Random decisions: an int in ``[low, high]``, one of ``options``, a bool."""

    def integer(self, low: int, high: int) -> int:
        raise NotImplementedError

    def choice(self, options: Sequence):
        return options[self.integer(0, len(options) - 1)]

    def boolean(self) -> bool:
        return self.integer(0, 1) == 1

    def subset(self, options: Sequence) -> list:
        """Some of ``options``, in their order."""
        return [o for o in options if self.boolean()]


class RandomChoices(Choices):
    """Decisions from ``random.Random(seed)``: the same seed, the same case."""

    def __init__(self, seed: int = 0):
        self.random = random.Random(seed)

    def integer(self, low: int, high: int) -> int:
        return self.random.randint(low, high)


class FirstChoices(Choices):
    """Always the first option and the lowest int: the smallest case."""

    def integer(self, low: int, high: int) -> int:
        return low


class DrawnChoices(Choices):
    """Decisions drawn by hypothesis (``draw`` of an ``st.composite`` or ``st.data()``),
    so that it can explore and shrink them."""

    def __init__(self, draw):
        from hypothesis import strategies as st

        self.draw, self.st = draw, st

    def integer(self, low: int, high: int) -> int:
        return self.draw(self.st.integers(low, high))

    def choice(self, options: Sequence):
        return self.draw(self.st.sampled_from(list(options)))

    def boolean(self) -> bool:
        return self.draw(self.st.booleans())
