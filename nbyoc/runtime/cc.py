"""Building shared libraries with the system C compiler, cached on disk.

The compiler is ``$CC`` or ``cc``; optimisation flags come from ``$CFLAGS``
(default ``-O3``). Flags that results depend on are always added:
``-fwrapv`` (integer overflow wraps, as in NumPy) and ``-ffp-contract=off``
(no fused multiply-add, so float results match NumPy's); ``-fno-trapping-math``
lets the compiler vectorise a loop that selects between float values (it only
gives up exact floating-point exception flags, which nothing here reads), and
``-fopenmp`` parallelises the loops that ask for it, when the compiler has
OpenMP (without it they run serially). ``native=True`` adds ``-march=native``:
code for this machine's CPU (wider vectors), which may not run on another.
The library is cached under a hash of the source, the compiler's identity and
the flags, so compiling the same source again runs no compiler; it is reused
only if its bytes have the digest recorded when it was built
(``nbyoc.cache.recorded``), else built again.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

from .. import cache
from .._version import __version__
from ..errors import CompileError
from ..progress import progress
from .compiles import count

DEFAULT_CFLAGS = ("-O3",)
REQUIRED_FLAGS = (
    "-std=c11", "-shared", "-fPIC", "-pthread", "-fwrapv", "-ffp-contract=off", "-fno-math-errno",
    "-fno-trapping-math",
)  # fmt: skip
OPENMP_FLAG = "-fopenmp"
NATIVE_FLAG = "-march=native"


def compiler_command() -> list[str]:
    """The C compiler, as a command (``$CC`` may hold several words, e.g. "ccache gcc")."""
    return shlex.split(os.environ.get("CC") or "cc")


def compile_flags(native: bool = False) -> list[str]:
    """The flags a library is built with (see the module docstring).

    >>> "-fwrapv" in compile_flags(), "-march=native" in compile_flags(native=True)
    (True, True)
    """
    flags = os.environ.get("CFLAGS")
    chosen = shlex.split(flags) if flags is not None else list(DEFAULT_CFLAGS)
    openmp = [OPENMP_FLAG] if has_openmp(tuple(compiler_command())) else []
    return [*chosen, *REQUIRED_FLAGS, *openmp, *([NATIVE_FLAG] if native else [])]


@lru_cache(maxsize=8)
def has_openmp(command: tuple[str, ...]) -> bool:
    """Can ``command`` build a shared library with ``-fopenmp``? (Apple's clang, for
    one, cannot without libomp; csource's loops then run on one thread.)"""
    if shutil.which(command[0]) is None:
        return False
    with tempfile.TemporaryDirectory(prefix="nbyoc-openmp-") as tmp:
        source = Path(tmp) / "probe.c"
        source.write_text(
            "#include <omp.h>\nint nbyoc_probe(void) { return omp_get_max_threads(); }\n"
        )
        try:
            result = subprocess.run(
                [*command, "-shared", "-fPIC", OPENMP_FLAG, str(source), "-o", str(source) + ".so"],
                capture_output=True,
                timeout=60,
            )
        except (OSError, subprocess.SubprocessError):
            return False
        return result.returncode == 0


@lru_cache(maxsize=8)
def _compiler_identity(command: tuple[str, ...]) -> str:
    """The compiler's resolved path and version banner, part of every cache key."""
    executable = shutil.which(command[0])
    if executable is None:
        raise CompileError(
            f"C compiler {command[0]!r} not found; install gcc (or clang) or point $CC at one"
        )
    try:
        banner = subprocess.run(
            [*command, "--version"], capture_output=True, text=True, timeout=60
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError) as e:
        raise CompileError(f"C compiler {command[0]!r} cannot be run: {e}") from None
    return f"{executable}\n{banner[0] if banner else ''}"


@lru_cache(maxsize=8)
def _native_target(command: tuple[str, ...]) -> str:
    """What ``-march=native`` means on this machine, as the compiler's driver expands it."""
    try:
        result = subprocess.run(
            [*command, NATIVE_FLAG, "-###", "-E", "-x", "c", os.devnull],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as e:
        raise CompileError(f"C compiler {command[0]!r} cannot be run: {e}") from None
    # the compiler proper's command line (gcc's cc1, clang's -cc1): the CPU and its features
    lines = [line for line in result.stderr.splitlines() if "cc1" in line]
    return "\n".join(lines) or result.stderr


def build_shared_library(source: str, name: str, native: bool = False) -> Path:
    """The path of a shared library built from ``source`` (from the cache when possible),
    for this machine's CPU if ``native``.

    Raises ``CompileError`` with the compiler's message and the source path
    when the compiler is missing or the compile fails.
    """
    command = compiler_command()
    identity = _compiler_identity(tuple(command))
    flags = compile_flags(native)
    if native:  # the same flag means other code on another CPU
        identity += "\n" + _native_target(tuple(command))
    key_text = "\n".join([__version__, identity, *flags, source])
    key = f"{name}-{hashlib.blake2b(key_text.encode(), digest_size=16).hexdigest()}"
    library = cache.entry_path("csource", key, ".so")
    # A library is loaded (and so runs) only if it holds the bytes nbyoc built: any
    # other file of that name, or one without a record, is built again.
    if cache.recorded(library):
        return library
    source_path = library.with_suffix(".c")
    cache.atomic_write(source_path, source.encode())
    fd, tmp = tempfile.mkstemp(dir=library.parent, prefix=f".{library.name}.", suffix=".tmp")
    os.close(fd)
    notice = f"the C code of {name!r} ({' '.join(command)})"
    try:
        with progress(1, name, notice=notice) as bar:
            bar.working()
            result = subprocess.run(
                [*command, *flags, str(source_path), "-o", tmp, "-lm"],
                capture_output=True,
                text=True,
                timeout=600,
            )
        if result.returncode != 0:
            raise CompileError(
                f"the C compiler failed on {source_path} "
                f"({' '.join(command + flags)}):\n{result.stderr.strip()}"
            )
        count("c libraries")
        digest = cache.file_digest(Path(tmp))
        os.replace(tmp, library)
        cache.record(library, digest)
    except (OSError, subprocess.SubprocessError) as e:
        raise CompileError(f"could not run the C compiler on {source_path}: {e}") from None
    finally:
        Path(tmp).unlink(missing_ok=True)
    return library
