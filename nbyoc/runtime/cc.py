"""Building shared libraries with the system C compiler, cached on disk.

The compiler is ``$CC`` or ``cc``; optimisation flags come from ``$CFLAGS``
(default ``-O3``). Flags that results depend on are always added:
``-fwrapv`` (integer overflow wraps, as in NumPy) and ``-ffp-contract=off``
(no fused multiply-add, so float results match NumPy's). The library is
cached under a hash of the source, the compiler's identity and the flags, so
compiling the same source again runs no compiler.
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

DEFAULT_CFLAGS = ("-O3",)
REQUIRED_FLAGS = (
    "-std=c11", "-shared", "-fPIC", "-pthread", "-fwrapv", "-ffp-contract=off", "-fno-math-errno"
)  # fmt: skip


def compiler_command() -> list[str]:
    """The C compiler, as a command (``$CC`` may hold several words, e.g. "ccache gcc")."""
    return shlex.split(os.environ.get("CC") or "cc")


def compile_flags() -> list[str]:
    flags = os.environ.get("CFLAGS")
    return [*(shlex.split(flags) if flags is not None else DEFAULT_CFLAGS), *REQUIRED_FLAGS]


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


def build_shared_library(source: str, name: str) -> Path:
    """The path of a shared library built from ``source`` (from the cache when possible).

    Raises ``CompileError`` with the compiler's message and the source path
    when the compiler is missing or the compile fails.
    """
    command = compiler_command()
    flags = compile_flags()
    identity = _compiler_identity(tuple(command))
    key_text = "\n".join([__version__, identity, *flags, source])
    key = f"{name}-{hashlib.blake2b(key_text.encode(), digest_size=16).hexdigest()}"
    library = cache.entry_path("csource", key, ".so")
    if library.exists():
        return library
    source_path = library.with_suffix(".c")
    cache.atomic_write(source_path, source.encode())
    fd, tmp = tempfile.mkstemp(dir=library.parent, prefix=f".{library.name}.", suffix=".tmp")
    os.close(fd)
    try:
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
        os.replace(tmp, library)
    except (OSError, subprocess.SubprocessError) as e:
        raise CompileError(f"could not run the C compiler on {source_path}: {e}") from None
    finally:
        Path(tmp).unlink(missing_ok=True)
    return library
