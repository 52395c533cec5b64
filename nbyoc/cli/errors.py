"""How every subcommand ends: a known error is one line on stderr with exit status 2
(never a traceback), and output cut short by a closed pipe (``| head``) ends quietly."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from ..errors import NbyocError

#: The exit status of a command that failed on its input (argparse's, for bad usage).
USAGE_ERROR = 2


def run_command(command: Callable[[], int]) -> int:
    """``command()``'s exit status; 2 with one line on stderr for an nbyoc error or a
    missing file; 0 when the reader of its output went away (``| head``)."""
    try:
        return command()
    except (NbyocError, OSError) as e:
        if isinstance(e, BrokenPipeError):
            return _quiet_after_broken_pipe()
        print(f"nbyoc: error: {e}", file=sys.stderr)
        return USAGE_ERROR


def _quiet_after_broken_pipe() -> int:
    # Python flushes stdout again at exit and would report the broken pipe: point it at
    # devnull so that the exit is quiet, as ``head`` expects of a writer.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 0
