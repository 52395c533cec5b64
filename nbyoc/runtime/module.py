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
import importlib
import json
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np

from .. import limits
from ..errors import DuplicateRegistrationError, LimitError, LoadError, NbyocError, shown
from ..ir.nodes import Function
from ..ir.types import tensor_types
from .arguments import (
    ArgumentSpec,
    aligned_destinations,
    check_destinations,
    readable_inputs,
)

#: What ``register_loader`` decorates: a ``Module`` subclass, or a function making one.
LoaderT = TypeVar("LoaderT", bound=Callable[..., object])


class Module(abc.ABC):
    """Base class of runtime modules. Subclasses set ``type_key`` and implement
    ``get_function``; the rest is optional.

    ``get_source`` shows the generated code. ``save_to_bytes`` and a
    ``load_from_bytes`` registered with ``nbyoc.register_loader(type_key)``
    make the module savable in an archive (``Executable.save``); without them
    it compiles and runs, and saving says what is missing.
    """

    type_key: str = ""
    #: How a line comment starts in the language of ``get_source()`` (used for the
    #: header ``Executable.get_source`` puts above each function's code).
    source_comment: str = "//"

    @abc.abstractmethod
    def get_function(self, symbol: str) -> Callable[..., None]:
        """The destination-passing callable named ``symbol``: ``fn(*inputs, *outputs)``."""

    def get_source(self) -> str:
        """The generated code, as text (empty if the backend has none to show)."""
        return ""

    def stage_times(
        self, symbol: str, inputs: Sequence[np.ndarray], repeat: int
    ) -> list[tuple[str, float]] | None:
        """Where the time goes inside function ``symbol`` on ``inputs``: for each part it
        runs (a stage, a kernel), what it computes and its median seconds over
        ``repeat`` runs, each part run alone; None (the default) when the backend cannot
        run its parts one by one (``Executable.profile`` then shows the function whole).
        Optional; the llvm backend times each stage of a program."""
        return None

    def save_to_bytes(self) -> bytes:
        """Everything needed to rebuild this module with ``load_from_bytes`` (optional)."""
        raise NbyocError(unsavable_message(self))

    @classmethod
    def load_from_bytes(cls, data: bytes) -> Module:
        """Rebuild a module from ``save_to_bytes`` output; never executes code from ``data``."""
        raise LoadError(f"{cls.__name__} (module type {cls.type_key!r}) cannot be loaded")

    @classmethod
    def savable(cls) -> bool:
        """True if this module type implements ``save_to_bytes``."""
        return cls.save_to_bytes is not Module.save_to_bytes

    def __repr__(self) -> str:
        return f"<{type(self).__name__} type_key={self.type_key!r}>"


def unsavable_message(module: Module) -> str:
    """Why ``module`` cannot be saved, and what its author implements to make it savable."""
    cls = type(module)
    return (
        f"runtime modules of type {module.type_key!r} ({cls.__module__}.{cls.__qualname__}) "
        f"cannot be saved: implement save_to_bytes() returning bytes, and a classmethod "
        f"load_from_bytes(data) registered with @nbyoc.register_loader({module.type_key!r})"
    )


#: The module types nbyoc ships, and the module that registers each one's loader. They
#: are imported when a module of that type is first loaded, so a fresh process loads any
#: archive, and loading a csource or host-only archive never imports Numba.
BUILTIN_LOADERS = {
    "llvm": "nbyoc.codegen.llvm.module",
    "csource": "nbyoc.codegen.csource.module",
    "examplejson": "nbyoc.codegen.examplejson.module",
}
#: The entry-point group through which an installed package names its module types'
#: loaders (``mytype = "mypkg.backend:MyModule"``), found when a type is first loaded.
ENTRY_POINT_GROUP = "nbyoc.loaders"
#: Module type keys, as archives store them (the key only selects a registered loader).
TYPE_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,99}\Z")

_LOADERS: dict[str, Callable[[bytes], Module]] = {}


def register_loader(type_key: str, replace: bool = False) -> Callable[[LoaderT], LoaderT]:
    """Decorator: register how modules of ``type_key`` are rebuilt from bytes.

    Decorate a ``Module`` subclass (its ``load_from_bytes`` is used) or a
    function ``bytes -> Module``. A second registration of one ``type_key`` is
    refused unless ``replace=True`` (e.g. re-running a notebook cell).
    So that a fresh process finds the loader without importing your code
    first, name it in your package's ``nbyoc.loaders`` entry points.

    >>> @register_loader("doc_module", replace=True)
    ... def load_doc_module(data):
    ...     raise LoadError("a doc example")
    >>> get_loader("doc_module") is load_doc_module
    True
    """
    if not isinstance(type_key, str) or not TYPE_KEY.match(type_key):
        raise NbyocError(
            f"a type_key is letters, digits, '_', '.' and '-' (at most 100), got {type_key!r}"
        )

    def register(loader):
        if type_key in _LOADERS and not replace:
            raise DuplicateRegistrationError(
                f"a loader for {type_key!r} is already registered; pass replace=True to replace it"
            )
        if isinstance(loader, type) and issubclass(loader, Module):
            if loader.load_from_bytes.__func__ is Module.load_from_bytes.__func__:
                raise NbyocError(
                    f"{loader.__qualname__} does not implement load_from_bytes, so it cannot "
                    f"be the loader of {type_key!r}"
                )
            _LOADERS[type_key] = loader.load_from_bytes
        elif callable(loader):
            _LOADERS[type_key] = loader
        else:
            raise NbyocError(f"the loader of {type_key!r} must be callable, got {loader!r}")
        return loader

    return register


def get_loader(type_key: str) -> Callable[[bytes], Module]:
    """The loader of ``type_key``: registered in this process, shipped with nbyoc
    (imported now), or named by an installed package's ``nbyoc.loaders`` entry
    point (imported now). The error lists every type that can be loaded."""
    loader = _LOADERS.get(type_key)
    if loader is None and isinstance(type_key, str):
        _discover(type_key)
        loader = _LOADERS.get(type_key)
    if loader is None:
        known = ", ".join(sorted({*_LOADERS, *BUILTIN_LOADERS, *_entry_points()})) or "none"
        raise LoadError(
            f"no loader for module type {shown(type_key)}; loadable here: {known}. A backend's "
            f"loader is registered by importing its module (@nbyoc.register_loader) or "
            f"through an {ENTRY_POINT_GROUP!r} entry point of the package that provides it"
        )
    return loader


def builtin_module_class(type_key: str) -> type[Module]:
    """The ``Module`` class of one of nbyoc's own backends (``codegen/<backend>/module.py``),
    imported now: a backend's package imports its module class only when it first builds
    one, so ``import nbyoc`` imports neither Numba nor cffi.

    >>> builtin_module_class("examplejson").__name__
    'ExampleJSONModule'
    """
    if type_key not in BUILTIN_LOADERS:
        raise NbyocError(f"{type_key!r} is not one of nbyoc's own module types")
    module_class = getattr(get_loader(type_key), "__self__", None)
    assert isinstance(module_class, type) and issubclass(module_class, Module), type_key
    return module_class


def _discover(type_key: str) -> None:
    """Import what registers ``type_key``'s loader, if nbyoc or an installed package names it."""
    if type_key in BUILTIN_LOADERS:
        importlib.import_module(BUILTIN_LOADERS[type_key])
        return
    entry = _entry_points().get(type_key)
    if entry is None:
        return
    try:
        loader = entry.load()
    except Exception as e:
        raise LoadError(
            f"the loader of module type {type_key!r} ({ENTRY_POINT_GROUP} entry point "
            f"{entry.value!r}) failed to import: {type(e).__name__}: {e}"
        ) from e
    if type_key not in _LOADERS:  # importing it may have registered it already
        register_loader(type_key)(loader)


def _entry_points() -> dict:
    from importlib.metadata import entry_points

    return {e.name: e for e in entry_points(group=ENTRY_POINT_GROUP)}


def load_module(path: str | os.PathLike[str], type_key: str) -> Module:
    """Build a module of ``type_key`` from the file at ``path`` (works in any process:
    the loader is found by its type key).

    >>> import nbyoc, numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "sub.examplejson")
    >>> _ = open(path, "w").write("subgraph_0\\n  input 0 2\\n  mul 1 inputs: 0 0 shape: 2\\n")
    >>> module = load_module(path, "examplejson")
    >>> out = np.empty(2, np.float32)
    >>> module.get_function("subgraph_0")(np.full(2, 3, np.float32), out)
    >>> out
    array([9., 9.], dtype=float32)
    """
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise LoadError(f"cannot read {path}: {e}") from None
    loader = get_loader(type_key)
    try:
        module = loader(data)
    except LimitError as e:
        raise e.within(str(path)) from None
    except LoadError:
        raise
    except NbyocError as e:  # e.g. a ParseError naming the line of an ExampleJSON file
        raise LoadError(f"{path}: {e}") from e
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
    limits.check_json_nesting(data, what)
    try:
        doc = json.loads(data)
    except (ValueError, TypeError, RecursionError) as e:
        raise LoadError(f"not {what}: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != f"nbyoc-{type_key}":
        raise LoadError(f"not {what} (format tag missing)")
    saved = doc.get("version")
    if not isinstance(saved, int) or isinstance(saved, bool) or not 1 <= saved <= version:
        raise LoadError(
            f"{what} of version {shown(saved)} is not readable here (this reads {version})"
        )
    if not isinstance(doc.get("options"), dict):
        raise LoadError(f"{what}: 'options' must be an object")
    func = from_json(json.dumps(doc.get("function")))
    if not isinstance(func, Function):
        raise LoadError(f"{what}: 'function' must hold one function")
    return func, doc["options"]


def destination_passing(
    func: Function, impl: Callable[[list[np.ndarray], list[np.ndarray]], None]
) -> Callable[..., None]:
    """A checked destination-passing callable for external function ``func``.

    The result takes ``func``'s inputs then its outputs (one array per tensor
    of the result type, flattened). Before ``impl(inputs, outputs)`` runs it
    checks every shape and dtype (``ArgumentSpec``: only real arrays), makes
    inputs C-contiguous and aligned, refuses outputs that are not C-contiguous
    and writeable, or overlap an input or each other, and has a misaligned
    output written through an aligned temporary, so compiled code never sees an
    array it could misuse.
    """
    name = func.attrs.get("global_symbol", "function")
    inputs = ArgumentSpec.of([(p.name_hint, p.type) for p in func.params], f"{name} inputs")
    outputs = ArgumentSpec.of(
        [(f"out{i}", t) for i, t in enumerate(tensor_types(func.ret_type))], f"{name} outputs"
    )
    n_in = len(func.params)

    def run(*arrays, **named):
        if named:
            raise ArgumentSpec.of(
                [*zip(inputs.names, inputs.types), *zip(outputs.names, outputs.types)], name
            ).keywords_refused(named)
        ins = inputs.check(arrays[:n_in])
        outs = outputs.check(arrays[n_in:])
        check_destinations(outputs.where, outs, ins)
        outs, copies = aligned_destinations(outs)
        impl(readable_inputs(ins), outs)
        for out, written in copies:
            np.copyto(out, written)

    run.__name__ = name
    return run
