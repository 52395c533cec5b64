"""A compile worker's process (``python -m nbyoc.runtime.llvm.compile_worker``; see
``compile_workers``): compiles the stage modules it is sent into nbyoc's disk cache.

Each line of its standard input is one JSON object: the module's ``source``, its
content address ``key``, the module ``name`` to run it as, nbyoc's ``cache_root``
and ``numba_dir``, where the sending process's Numba keeps the module's machine
code (a worker that would keep it elsewhere refuses the task). Each answer is one
JSON line: the ``key``, ``ok``, and the ``error`` when not ok. Anything else the
compile prints goes to standard error, never into the answers.
"""

from __future__ import annotations

import json
import os
import sys


def compile_module(task: dict) -> None:
    """Compile ``task``'s module into the cache (``kernels._load``)."""
    os.environ["NBYOC_CACHE_DIR"] = task["cache_root"]
    os.environ["NBYOC_CACHE"] = "1"
    from . import kernels
    from .linking import install
    from .numba_cache import numba_cache_path

    install()  # (the same machine code as the sending process would make: ``linking``)
    key, source = task["key"], task["source"]
    if kernels.source_key(source) != key:
        raise ValueError("the module's text does not have its key")
    path = kernels.module_path(key)
    kernels.write_source(path, source)
    if str(numba_cache_path(path)) != task["numba_dir"]:
        raise ValueError("this worker's Numba caches elsewhere than the sending process's")
    kernels._load(source, key, task["name"], keep_machine_code=True)  # (a stage module)


def main() -> None:
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # (stray prints: not answers)
    for line in sys.stdin:
        task = None
        try:
            task = json.loads(line)
            compile_module(task)
            answer = {"key": task["key"], "ok": True}
        except Exception as error:  # (reported; the sender compiles it itself)
            key = task.get("key") if isinstance(task, dict) else None
            answer = {"key": key, "ok": False, "error": f"{type(error).__name__}: {error}"}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
