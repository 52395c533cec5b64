"""Ahead-of-time export of llvm kernels: a CPython extension built with ``numba.pycc``
(``nbyoc.runtime.export`` describes both backends' forms and their limits)."""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

from ...errors import CompileError
from ...runtime.export import describe_signature


def export_llvm(modules: dict, path: Path) -> Path:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pycc's pending-deprecation warning: documented above
            from numba.pycc import CC
    except ImportError as e:
        import numba

        raise CompileError(
            f"numba.pycc is not available in Numba {numba.__version__} ({e}); it was pending "
            f"deprecation since 0.57. Use Executable.save and nbyoc.load instead."
        ) from None
    from ...runtime.llvm.kernels import load_kernel
    from .lower import lower
    from .rules import STORAGE

    name = path.name.split(".")[0]
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise CompileError(
            f"the extension's file name must start with an identifier, got {path.name!r}"
        )
    cc = CC(name)
    cc.output_dir = str(path.parent)
    cc.output_file = path.name
    signatures = {}
    for symbol, module in modules.items():
        # Serial, and every stage called directly: pycc links what the kernel calls.
        lowered = lower(module.func, module.fuse, sys.maxsize, function_pointers=False)
        emulated = sorted({t.dtype for t in [*lowered.inputs, *lowered.outputs]} & set(STORAGE))
        if emulated:  # the kernel takes their bits, which a caller of the library would not
            raise CompileError(
                f"@{symbol} takes or returns {', '.join(emulated)}, which an exported llvm "
                f"library cannot (Numba has no float16); use Executable.save and nbyoc.load, "
                f"or export for csource"
            )
        if lowered.constants or lowered.scratch:
            raise CompileError(
                f"@{symbol} needs constant or scratch arrays, which an AOT function cannot hold; "
                f"compile with bind_constants=False or export a graph without them"
            )
        kernel = load_kernel(lowered.source, lowered.kernel)
        cc.export(symbol, kernel.signatures[0])(kernel.py_func)
        signatures[symbol] = describe_signature(module.func)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cc.compile()
    except Exception as e:
        raise CompileError(f"numba.pycc failed to build {path}: {type(e).__name__}: {e}") from e
    path.with_suffix(".txt").write_text(
        "".join(f"{s}(inputs..., outputs...): {d}\n" for s, d in signatures.items())
    )
    return path
