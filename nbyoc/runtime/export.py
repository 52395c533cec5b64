"""Ahead-of-time export: an Executable's external functions as a library that runs
without nbyoc's JIT.

- **csource**: one shared library with every csource function, plus a C header
  (``<name>.h`` beside it) declaring the DLTensor type and each entry point,
  with its inputs and outputs in a comment. A C program links it and calls
  ``csource_0(args, num_args)`` with DLTensor pointers; the entry points check
  their arguments as they do from Python.
- **llvm**: a CPython extension module built with ``numba.pycc`` holding each
  kernel (serial: pycc cannot build parallel code). It imports and runs with
  NumPy alone, without Numba. AOT-compiled functions do not check their
  arguments (a pycc limitation): call them only with C-contiguous arrays of the
  exact shapes and dtypes listed in ``<name>.txt``, written beside it. ``numba.pycc`` has
  been pending deprecation since Numba 0.57; when a Numba without it is
  installed, export raises ``CompileError`` saying so (``Executable.save``
  keeps working).

Only the external functions are exported; when ``main`` also runs ops on the
host, the caller does those (``print(fn.module)`` shows what runs where).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import CompileError
from ..ir.types import tensor_types


def export_library(executable, path) -> Path:
    """Export ``executable``'s external functions to ``path`` (see the module docstring).
    Each backend's module class does its part (``export_modules(modules, path)``, a static method
    importing that backend's codegen), so the runtime imports no codegen."""
    if getattr(executable, "_sizes", None) is not None:  # (a function of symbolic sizes)
        raise CompileError(
            f"cannot export {executable.signature}: its sizes are symbolic, and an exported "
            f"library is built for fixed shapes; export nbyoc.compile(specialize(f, "
            f"{{'n': ...}})) (nbyoc.ir.specialize) for each size it must take"
        )
    kinds = {m.type_key for m in executable.runtime_modules.values()}
    if not kinds:
        raise CompileError("nothing to export: this executable runs everything on the host")
    if len(kinds) > 1:
        raise CompileError(f"export one backend at a time; this executable uses {sorted(kinds)}")
    (kind,) = kinds
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    exporter = getattr(
        type(next(iter(executable.runtime_modules.values()))), "export_modules", None
    )
    if exporter is None:
        raise CompileError(
            f"no ahead-of-time export for {kind!r} modules; csource and llvm have one"
        )
    return exporter(executable.runtime_modules, path)


def describe_signature(func) -> str:
    """One line naming ``func``'s inputs and outputs with their types, for the files written
    beside an exported library."""
    ins = ", ".join(f"{p.name_hint} {p.type!r}" for p in func.params)
    outs = ", ".join(repr(t) for t in tensor_types(func.ret_type))
    return f"inputs: {ins}; outputs: {outs}"
