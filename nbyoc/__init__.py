"""nbyoc: Bring Your Own Codegen for Python.

Build a typed tensor graph, compile it, call it with NumPy arrays:

>>> import numpy as np, nbyoc
>>> a, b, c, d = (nbyoc.var(n, (10, 10), "float32") for n in "abcd")
>>> f = nbyoc.function([a, b, c, d], ((a + b) - c) * d)
>>> fn = nbyoc.compile(f)
>>> x = np.ones((10, 10), np.float32)
>>> float(fn(x, x, x, x).sum())
100.0

This module only re-exports the public API.
"""

from . import cache, codegen, dask, errors, ir, limits, runtime, transform
from ._version import __version__
from .codegen import csource as _csource_backend  # noqa: F401 - registers the backend
from .codegen import examplejson as _examplejson_backend  # noqa: F401 - registers the backend
from .codegen import llvm as _llvm_backend  # noqa: F401 - registers the backend
from .codegen.registry import register_codegen
from .compiler import compile
from .config import show_config
from .errors import NbyocError
from .explanation import explain
from .frontend.numpy import jit
from .frontend.onnx import from_onnx
from .ir.builder import call_op, const, function, tuple, var
from .ir.dtypes import DTYPES
from .ir.einsum import einsum
from .ir.ops import *  # noqa: F403 - a builder per op (nbyoc.ir.ops.BUILDERS)
from .ir.ops.index import split
from .ir.ops.linalg import norm
from .ir.ops.sort import top_k
from .ir.parser import parse
from .ir.serialize import from_json, to_json
from .ir.structural import structural_equal, structural_hash
from .ir.verify import verify
from .runtime.archive import load_executable as load
from .runtime.executable import Executable
from .runtime.module import load_module, register_loader
from .transform.pattern_table import register_patterns
from .transform.pipeline import partition
from .transform.support import register_op_support

__all__ = [
    "DTYPES",
    "Executable",
    "NbyocError",
    "__version__",
    "cache",
    "call_op",
    "codegen",
    "compile",
    "const",
    "dask",
    "einsum",
    "errors",
    "explain",
    "from_json",
    "from_onnx",
    "jit",
    "function",
    "ir",
    "limits",
    "load",
    "load_module",
    "norm",
    "parse",
    "partition",
    "register_codegen",
    "register_loader",
    "register_op_support",
    "show_config",
    "register_patterns",
    "split",
    "top_k",
    "runtime",
    "structural_equal",
    "structural_hash",
    "to_json",
    "transform",
    "tuple",
    "var",
    "verify",
    *ir.ops.__all__,
]  # fmt: skip


def __getattr__(name):
    # nbyoc.testing (the backend test kit) is imported when first used: a program that
    # only runs models never pays for it.
    if name == "testing":
        import importlib

        return importlib.import_module(".testing", __name__)
    raise AttributeError(f"module 'nbyoc' has no attribute {name!r}")
