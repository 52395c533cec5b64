"""Runtime modules: what a codegen returns, and how saved ones are loaded back.

A ``Module`` holds compiled code for one or more external functions.
``get_function(symbol)`` returns a destination-passing callable: it takes the
inputs, then one preallocated output array per result, and fills the outputs,
as the reference design's functions do. ``save_to_bytes`` /
``load_from_bytes`` mirror each other; ``register_loader(type_key)`` makes a
module type loadable by name.

>>> import numpy as np, nbyoc
>>> x = nbyoc.var("x", (3,))
>>> ext = nbyoc.function([x], x * 2.0)
>>> def double(inputs, outputs):
...     np.multiply(inputs[0], 2, out=outputs[0])
>>> run = destination_passing(ext, double)
>>> out = np.empty(3, np.float32)
>>> run(np.ones(3, np.float32), out)
>>> out
array([2., 2., 2.], dtype=float32)
"""

from __future__ import annotations

import abc
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..errors import ArgumentError, DuplicateRegistrationError, LoadError, NbyocError
from ..ir.nodes import Function
from ..ir.types import tensor_types
from .arguments import ArgumentSpec


class Module(abc.ABC):
    """Base class of runtime modules. Subclasses set ``type_key`` and implement the
    abstract methods; ``get_source`` is optional."""

    type_key: str = ""

    @abc.abstractmethod
    def get_function(self, symbol: str) -> Callable:
        """The destination-passing callable named ``symbol``: ``fn(*inputs, *outputs)``."""

    def get_source(self) -> str:
        """The generated code, as text (empty if the backend has none to show)."""
        return ""

    @abc.abstractmethod
    def save_to_bytes(self) -> bytes:
        """Everything needed to rebuild this module with ``load_from_bytes``."""

    @classmethod
    @abc.abstractmethod
    def load_from_bytes(cls, data: bytes) -> Module:
        """Rebuild a module from ``save_to_bytes`` output; never executes code from ``data``."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} type_key={self.type_key!r}>"


_LOADERS: dict[str, Callable[[bytes], Module]] = {}


def register_loader(type_key: str):
    """Decorator: register how modules of ``type_key`` are rebuilt from bytes.

    Decorate a ``Module`` subclass (its ``load_from_bytes`` is used) or a
    function ``bytes -> Module``.
    """
    if not isinstance(type_key, str) or not type_key:
        raise NbyocError(f"a type_key must be a non-empty string, got {type_key!r}")

    def register(loader):
        if type_key in _LOADERS:
            raise DuplicateRegistrationError(f"a loader for {type_key!r} is already registered")
        is_module_class = isinstance(loader, type) and issubclass(loader, Module)
        _LOADERS[type_key] = loader.load_from_bytes if is_module_class else loader
        return loader

    return register


def get_loader(type_key: str) -> Callable[[bytes], Module]:
    """The loader registered for ``type_key``; the error lists the registered ones."""
    try:
        return _LOADERS[type_key]
    except KeyError:
        known = ", ".join(sorted(_LOADERS)) or "none"
        raise LoadError(f"no loader for module type {type_key!r}; registered: {known}") from None


def load_module(path, type_key: str) -> Module:
    """Build a module of ``type_key`` from the file at ``path``."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise LoadError(f"cannot read {path}: {e}") from None
    module = get_loader(type_key)(data)
    if not isinstance(module, Module):
        raise LoadError(f"the {type_key!r} loader returned {module!r}, not a Module")
    return module


def save_function(type_key: str, version: int, func: Function, options: dict) -> bytes:
    """The saved form of a module built from one function: JSON holding a format
    tag, a version, the codegen options and the function (never code)."""
    from ..ir.serialize import to_json

    doc = {"format": f"nbyoc-{type_key}", "version": version, "options": options,
           "function": json.loads(to_json(func))}  # fmt: skip
    return json.dumps(doc).encode()


def load_function(type_key: str, version: int, data: bytes) -> tuple[Function, dict]:
    """(function, options) from ``save_function`` output; ``LoadError`` if malformed."""
    from ..ir.serialize import from_json

    what = f"a saved {type_key} module"
    try:
        doc = json.loads(data)
    except (ValueError, TypeError, RecursionError) as e:
        raise LoadError(f"not {what}: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != f"nbyoc-{type_key}":
        raise LoadError(f"not {what} (format tag missing)")
    saved = doc.get("version")
    if not isinstance(saved, int) or isinstance(saved, bool) or not 1 <= saved <= version:
        raise LoadError(f"{what} of version {saved!r} is not readable here (this reads {version})")
    if not isinstance(doc.get("options"), dict):
        raise LoadError(f"{what}: 'options' must be an object")
    func = from_json(json.dumps(doc.get("function")))
    if not isinstance(func, Function):
        raise LoadError(f"{what}: 'function' must hold one function")
    return func, doc["options"]


def destination_passing(func: Function, impl: Callable[[list, list], None]) -> Callable:
    """A checked destination-passing callable for external function ``func``.

    The result takes ``func``'s inputs then its outputs (one array per tensor
    of the result type, flattened). Before ``impl(inputs, outputs)`` runs it
    checks every shape and dtype, makes inputs C-contiguous, and refuses
    outputs that are not C-contiguous, not writeable, or overlap an input or
    each other, so compiled code never sees an array it could misuse.
    """
    name = func.attrs.get("global_symbol", "function")
    inputs = ArgumentSpec.of([(p.name_hint, p.type) for p in func.params], f"{name} inputs")
    outputs = ArgumentSpec.of(
        [(f"out{i}", t) for i, t in enumerate(tensor_types(func.ret_type))], f"{name} outputs"
    )
    n_in = len(func.params)

    def run(*arrays):
        ins = inputs.check(arrays[:n_in])
        outs = outputs.check(arrays[n_in:])
        ins = [a if a.flags.c_contiguous else np.ascontiguousarray(a) for a in ins]
        for i, out in enumerate(outs):
            if not (out.flags.c_contiguous and out.flags.writeable):
                raise ArgumentError(f"{outputs.where}: out{i} must be C-contiguous and writeable")
            for other in [*ins, *outs[:i]]:
                if np.may_share_memory(out, other):
                    raise ArgumentError(
                        f"{outputs.where}: out{i} overlaps another argument; pass distinct arrays"
                    )
        impl(ins, outs)

    run.__name__ = name
    return run
