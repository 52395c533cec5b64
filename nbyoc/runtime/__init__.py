"""Running compiled graphs: the NumPy host executor, argument checking and ``Executable``."""

from .arguments import ArgumentSpec
from .executable import Executable
from .host import HostFunction

__all__ = ["ArgumentSpec", "Executable", "HostFunction"]
