"""The JIT kernel cache: generated Numba source -> compiled kernel, in memory and on disk.

Each source is content-addressed: its file under ``<cache>/kernels`` is named
by a hash of the source, the versions of nbyoc, Numba, llvmlite, NumPy and
Python, and the text of the nbyoc runtime modules it imports (Numba's own cache
checks only the kernel file's time stamp, so a changed helper such as
``vecmath.exp_f32`` would otherwise stay inlined in old machine code). It is
imported as a module and compiled with ``cache=True``, so Numba keeps the
machine code beside it (``__pycache__``) and a later process loads it instead
of compiling. Within a process, a kernel is compiled once: later requests for
the same source get the same dispatcher without touching Numba.

Only source that nbyoc generated in this process is ever imported: a cache
file whose text differs from the source it should hold is rewritten first.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import pathlib
import platform
import re
import sys
import threading

from .. import cache
from .._version import __version__

_KERNELS: dict[str, object] = {}
_LOCK = threading.RLock()


def _versions() -> str:
    import llvmlite
    import numba
    import numpy

    return "|".join(
        [__version__, numba.__version__, llvmlite.__version__, numpy.__version__,
         platform.python_version(), platform.machine()]
    )  # fmt: skip


#: ``from nbyoc.runtime.<module> import ...`` lines of generated sources.
_RUNTIME_IMPORT = re.compile(r"^from nbyoc\.runtime\.(\w+) import", re.MULTILINE)


#: ``from ..package[.module] import name[, ...]`` lines of a runtime module.
_RELATIVE_IMPORT = re.compile(r"^from \.\.([\w.]+) import (\w+)", re.MULTILINE)


@functools.cache
def _module_digest(module: str) -> str:
    """A digest of ``nbyoc/runtime/<module>.py``'s text and of the nbyoc files it imports
    from (``vecmath`` takes its coefficients from ``codegen/vecmath_constants.py``)."""
    root = pathlib.Path(__file__).parent.parent
    path = root / "runtime" / f"{module}.py"
    text = path.read_bytes()
    digest = hashlib.blake2b(text, digest_size=8)
    for package, name in _RELATIVE_IMPORT.findall(text.decode()):
        base = root.joinpath(*package.split("."))
        for candidate in (base / f"{name}.py", base.with_suffix(".py")):
            if candidate.is_file():
                digest.update(candidate.read_bytes())
                break
    return digest.hexdigest()


def source_key(source: str) -> str:
    """The content address of a kernel source (and of the runtime helpers it uses)."""
    helpers = sorted(set(_RUNTIME_IMPORT.findall(source)))
    stamp = "|".join([_versions(), *(f"{m}:{_module_digest(m)}" for m in helpers)])
    return hashlib.blake2b((stamp + "\n" + source).encode(), digest_size=16).hexdigest()


def load_kernel(source: str, name: str):
    """The compiled function ``name`` defined by ``source`` (compiled at most once per process)."""
    return getattr(load_kernel_module(source), name)


def load_kernel_module(source: str):
    """The module ``source`` defines, imported (and its functions compiled or loaded from
    Numba's cache) at most once per process."""
    key = source_key(source)
    with _LOCK:
        module = _KERNELS.get(key)
        if module is not None:
            return module
        path = cache.entry_path("kernels", f"k{key}", ".py")
        try:
            current = path.read_text()
        except OSError:
            current = None
        if current != source:
            cache.atomic_write(path, source.encode())
        module_name = f"nbyoc_kernel_{key}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        # Numba's cache re-imports the module by name when it loads machine code.
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(module_name, None)
            raise
        _KERNELS[key] = module
        return module
