"""What this machine gives nbyoc, in one place: versions, the CPU and its vector
features, threads, the cache and the C compiler (``nbyoc.show_config()``, ``nbyoc info``).

Reading it imports Numba and llvmlite (for their versions and the CPU's features), but
compiles nothing.

>>> sorted(config())
['c_compiler', 'cache', 'cpu', 'platform', 'threads', 'versions']
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
from typing import TextIO

from . import cache
from ._version import __version__

#: The CPU features that decide which kernels llvm makes (vector width, FMA, 16-bit floats).
VECTOR_FEATURES = ("sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vnni",
                   "avx512bf16", "avxvnni", "amx-tile", "neon")  # fmt: skip


def config() -> dict:
    """nbyoc's view of this machine as plain data (what ``show_config`` prints)."""
    import llvmlite
    import llvmlite.binding as llvm
    import numba
    import numpy

    from .runtime.cc import compiler_command
    from .runtime.llvm.target import last_level_cache_bytes, vector_bits
    from .runtime.threads import cpu_vendor, threading_layer

    features = llvm.get_host_cpu_features()
    compiler = compiler_command()
    found = shutil.which(compiler[0]) if compiler else None
    return {
        "versions": {
            "nbyoc": __version__,
            "python": platform.python_version(),
            "numpy": numpy.__version__,
            "numba": numba.__version__,
            "llvmlite": llvmlite.__version__,
        },
        "platform": f"{platform.system()} {platform.machine()}",
        "cpu": {
            "name": llvm.get_host_cpu_name(),
            "vendor": cpu_vendor() or "unknown",
            "vector_bits": vector_bits(),
            "features": [f for f in VECTOR_FEATURES if features.get(f)],
            "last_level_cache_bytes": last_level_cache_bytes(),
        },
        "threads": {
            "cpus": os.cpu_count(),
            "numba": numba.config.NUMBA_NUM_THREADS,
            "threading_layer": threading_layer(),
        },
        "cache": cache.info(),
        "c_compiler": {"command": " ".join(compiler), "found": found},
    }


def show_config(as_json: bool = False, file: TextIO | None = None) -> None:
    """Print what this machine gives nbyoc (``nbyoc info`` prints the same).

    >>> show_config()  # doctest: +ELLIPSIS
    nbyoc ...
    """
    data = config()
    out = file or sys.stdout
    if as_json:
        print(json.dumps(data, indent=1), file=out)
        return
    versions = data["versions"]
    cpu, threads, store, cc = data["cpu"], data["threads"], data["cache"], data["c_compiler"]
    lines = [
        f"nbyoc {versions['nbyoc']} (Python {versions['python']}, NumPy {versions['numpy']}, "
        f"Numba {versions['numba']}, llvmlite {versions['llvmlite']})",
        f"platform      {data['platform']}",
        f"cpu           {cpu['name']} ({cpu['vendor']}), {cpu['vector_bits']}-bit vectors, "
        f"last-level cache {cpu['last_level_cache_bytes'] >> 20} MiB",
        f"features      {' '.join(cpu['features']) or 'none of ' + ', '.join(VECTOR_FEATURES)}",
        f"threads       {threads['numba']} of {threads['cpus']} CPUs "
        f"(NUMBA_NUM_THREADS; threading layer {threads['threading_layer']})",
        f"cache         {store['directory']} ({'on' if store['enabled'] else 'off: NBYOC_CACHE=0'}"
        f", {store['entries']} entries, {store['bytes'] / 2**20:.1f} MiB)",
        f"C compiler    {cc['command']}: {cc['found'] or 'not found (csource needs one; set CC)'}",
    ]
    print("\n".join(lines), file=out)
