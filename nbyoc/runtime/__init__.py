"""Running compiled graphs: runtime modules and their loaders, the NumPy host
executor, argument checking and ``Executable``."""

from .arguments import ArgumentSpec
from .executable import Executable
from .host import HostFunction
from .module import Module, destination_passing, get_loader, load_module, register_loader

__all__ = [
    "ArgumentSpec", "Executable", "HostFunction", "Module", "destination_passing", "get_loader",
    "load_module", "register_loader",
]  # fmt: skip
