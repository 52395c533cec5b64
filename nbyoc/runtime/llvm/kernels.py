"""The JIT kernel cache: generated Numba source -> compiled kernel, in memory and on disk.

Each source is content-addressed: its file under ``<cache>/kernels`` is named
by a hash of the source, the versions of nbyoc, Numba, llvmlite, NumPy and
Python, the CPU it is compiled for (``target.machine_signature``), and the text
of the nbyoc runtime modules it imports (Numba's own cache
checks only the kernel file's time stamp, so a changed helper such as
``vecmath.exp_f32`` would otherwise stay inlined in old machine code) and of
``runtime.llvm.linking``, which shapes every kernel's machine code. It is run as a
module and compiled with ``cache=True``, so Numba keeps the machine code beside
it (``__pycache__``) and a later process loads it instead of compiling; that
machine code calls only its own copies of the functions the kernel uses
(``runtime.llvm.linking``), so the process that compiled it computes the same bits as
one that loads it. Within a process, a kernel is compiled once: later requests
for the same source get the same dispatcher without touching Numba.

Only what nbyoc trusts runs: the module is compiled from the source text nbyoc
generated in this process, never imported through Python's import system, so no
bytecode (``.pyc``) is ever read from the cache; the file on disk is rewritten
when its text differs (Numba hashes it to validate its own cache); and Numba
reads its cache files only as nbyoc recorded them (``runtime.llvm.numba_cache``).

A region's stage modules, which its kernel calls only through their functions'
addresses, are kept as machine code too and loaded from it without Numba
(``machine_code``): a tenth of Numba's time for each. A stage's entry is not Python
at all: its "source" is the entry's text, built as LLVM IR (``entry_code``) and kept
as machine code the same way.

Memory: a kernel module stays loaded while anything uses it (an executable, or
the llvm runtime's list of recently used kernels, ``runtime.llvm``); ``release``
lets the others go. That frees nbyoc's and Numba's Python objects of a kernel,
about a fifth of what it costs: Numba never removes a module from its LLVM JIT
(``numba/core/codegen.py``, ``JITCPUCodegen._add_module``), so the machine code
and LLVM's data, about 1 MiB per distinct kernel (measured over 500 distinct
compiles), stay until the process ends. A process that keeps compiling new
structures grows by that much for each; run such work in processes that end.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import pathlib
import platform
import re
import sys
import threading
import types

from ... import cache
from ..._version import __version__
from ..compiles import count
from . import entry_code, machine_code, target
from .linking import KERNEL_MODULE_PREFIX
from .linking import install as keep_kernels_self_contained
from .numba_cache import NumbaCacheFiles

_KERNELS: dict[str, object] = {}
#: Stage modules loaded from their machine code, which no process can unload: each once.
_MACHINE: dict[str, machine_code.MachineCodeModule] = {}
#: The keys of the stage modules loaded through Numba (``release`` keeps their addresses).
_STAGES: set[str] = set()
_LOCK = threading.RLock()


def _versions() -> str:
    import llvmlite
    import numba
    import numpy

    # (the CPU too: a stage module's machine code is loaded without Numba, which would
    # otherwise have refused code made for another CPU: ``target.machine_signature``)
    return "|".join(
        [__version__, numba.__version__, llvmlite.__version__, numpy.__version__,
         platform.python_version(), platform.machine(), target.machine_signature()]
    )  # fmt: skip


#: ``from nbyoc.runtime.llvm.<module> import ...`` lines of generated sources.
_RUNTIME_IMPORT = re.compile(r"^from nbyoc\.runtime\.llvm\.(\w+) import", re.MULTILINE)


#: ``from .[.]module import ...`` and ``from .. import module`` lines of a library module.
_RELATIVE_IMPORT = re.compile(r"^from (\.+)([\w.]*) import (\w+)", re.MULTILINE)


@functools.cache
def _module_digest(module: str) -> str:
    """A digest of ``nbyoc/runtime/llvm/<module>.py``'s text and of the nbyoc files it
    imports from (``vecmath`` takes its coefficients from ``runtime/vecmath_constants.py``)."""
    here = pathlib.Path(__file__).parent
    text = (here / f"{module}.py").read_bytes()
    digest = hashlib.blake2b(text, digest_size=8)
    for dots, package, name in _RELATIVE_IMPORT.findall(text.decode()):
        base = here.parents[len(dots) - 2] if len(dots) > 1 else here
        base = base.joinpath(*package.split(".")) if package else base
        for candidate in (base / f"{name}.py", base.with_suffix(".py")):
            if candidate.is_file():
                digest.update(candidate.read_bytes())
                break
    return digest.hexdigest()


def source_key(source: str) -> str:
    """The content address of a kernel source (and of the runtime helpers it uses, and of
    how it is linked)."""
    helpers = {*_RUNTIME_IMPORT.findall(source), "linking"}
    if entry_code.is_entry(source):  # (its code is what that module builds)
        helpers.add("entry_code")
    helpers = sorted(helpers)
    stamp = "|".join([_versions(), *(f"{m}:{_module_digest(m)}" for m in helpers)])
    return hashlib.blake2b((stamp + "\n" + source).encode(), digest_size=16).hexdigest()


def load_kernel(source: str, name: str):
    """The compiled function ``name`` defined by ``source`` (compiled at most once per process)."""
    return getattr(load_kernel_module(source), name)


def load_kernel_module(source: str, label: str = "kernel"):
    """The module ``source`` defines, run (and its functions compiled or loaded from
    Numba's cache) at most once per process while it stays loaded. Each function Numba
    compiles counts in the compile's progress (``nbyoc.progress``), which names it
    ``label`` (the region's symbol)."""
    return load_kernel_modules([source], label)[0]


def load_kernel_modules(
    sources: list[str], label: str = "kernel", addressed: bool = False, executor: bool = False
) -> list:
    """The modules ``sources`` define (``load_kernel_module``), as one unit of a
    compile's progress: a region's stage modules and its kernel's. ``addressed``: the
    stage modules (all but the last) are used only through their functions' addresses,
    so each may be a ``machine_code.MachineCodeModule``, loaded without Numba;
    ``executor``: so is the last (a program's executor, called at its C callback's
    address)."""
    with _LOCK:
        keys = [source_key(source) for source in sources]
        missing = {k: s for k, s in zip(keys, sources) if k not in _KERNELS and k not in _MACHINE}
        if missing:
            count("llvm modules", len(missing))
        stages = set(keys[:-1]) if addressed else set()
        if executor:
            stages.add(keys[-1])
        for key in [k for k in missing if k in stages]:
            if _load_machine_code(key):
                del missing[key]
        for key in [k for k in stages if entry_code.is_entry(missing.get(k, ""))]:
            _MACHINE[key] = _build_entry(key, missing.pop(key))
        if missing:
            from .numba_progress import reporting  # (imports Numba, which runs them next)

            keep_kernels_self_contained()  # (the same code, compiled here or loaded: ``linking``)
            names = {k: f"{KERNEL_MODULE_PREFIX}{k}" for k in missing}
            with reporting(list(missing.values()), set(names.values()), label) as advance:
                _compile_missing(missing, names, advance, stages)
        return [_KERNELS.get(key) or _MACHINE[key] for key in keys]


def _load_machine_code(key: str) -> bool:
    """Load the stage module ``key`` from its machine code, if it has some that loads."""
    loaded = machine_code.load(key, module_path(key))
    if loaded is not None:
        _MACHINE[key] = loaded
    return loaded is not None


def _build_entry(key: str, text: str) -> machine_code.MachineCodeModule:
    """The stage entry of ``text`` (``entry_code``) built here, its machine code kept."""
    symbol = f"nbyoc_entry_{key}"
    library = entry_code.build(text, symbol)
    path = module_path(key)
    machine_code.save_library(library, symbol, entry_code.ENTRY_FUNCTION, path)
    address = library.get_pointer_to_function(symbol)
    return machine_code.MachineCodeModule(key, {entry_code.ENTRY_FUNCTION: address})


def _compile_missing(missing: dict[str, str], names: dict[str, str], advance, stages) -> None:
    """Load (compiling as needed) the modules ``missing`` (source by key), named
    ``names``: all but the last (a region's stage modules) in worker processes when
    there are enough (``compile_workers``), the last (its kernel's) here meanwhile, then
    here each one no worker started or finished. ``advance(n)``: n functions compiled
    elsewhere. The keys ``stages`` may load from machine code once a worker made it,
    and their machine code is kept when compiled here."""
    from . import compile_workers
    from .numba_progress import function_count

    items = list(missing.items())
    shared = items[:-1]
    futures = {}
    if shared and compile_workers.worker_count():
        # (the workers may have some already, sent ahead: ``prefetch``)
        futures = compile_workers.submit([t for k, s in shared if (t := _task(k, s))])

    def load(key, source):
        _KERNELS[key] = _load(source, key, names[key], keep_machine_code=key in stages)
        if key in stages:
            _STAGES.add(key)

    if not futures:
        for key, source in items:
            load(key, source)
        return
    # The kernel here while the workers take stage modules from the front of the queue;
    # then the modules none has started yet, here, from its back; then the others.
    load(*items[-1])
    for key, source in reversed(shared):
        future = futures.get(key)
        if future is not None and not future.cancel():
            break  # (the workers are past this one)
        load(key, source)
    for key, source in shared:
        if key in _KERNELS:
            continue
        future = futures.get(key)
        try:
            if future is not None and _wait(future):
                advance(function_count(source))
        except RuntimeError:  # (compiled here next, raising what it raises)
            pass
        if key not in _KERNELS and not (key in stages and _load_machine_code(key)):
            load(key, source)


def _wait(future) -> bool:
    """Wait for a worker's compile, meanwhile compiling here the modules sent ahead for
    later regions that no worker has started (``prefetch``): a model of several regions
    otherwise waited at the end of each for the module a worker was still compiling.
    False when the module waited for was itself taken back (and compiled here)."""
    while not future.done():
        from . import compile_workers

        task = compile_workers.take_back()
        if task is None:
            break
        key = task["key"]
        if key not in _KERNELS and key not in _MACHINE:
            _KERNELS[key] = _load(task["source"], key, task["name"], keep_machine_code=True)
            _STAGES.add(key)
    if future.cancelled():
        return False
    future.result()  # (RuntimeError: the worker failed; compiled here next)
    return True


def _task(key: str, source: str) -> dict | None:
    """What a compile worker needs to compile the stage module ``source`` (content
    address ``key``), its file written first (where Numba caches depends on it); None
    when Numba's cache has it already (loaded here in a moment: nothing to share)."""
    from .numba_cache import numba_cache_path

    path = module_path(key)
    write_source(path, source)
    if NumbaCacheFiles(path).present():
        return None
    return {
        "key": key, "source": source, "name": f"{KERNEL_MODULE_PREFIX}{key}",
        "cache_root": str(cache.cache_dir()), "numba_dir": str(numba_cache_path(path)),
    }  # fmt: skip


def prefetch(sources: list[str]) -> int:
    """Send the stage modules ``sources`` (of a model's regions compiled next) that are
    neither loaded, nor kept as machine code, nor in Numba's cache to the compile
    workers now, so that they compile while this process compiles the regions before;
    return how many were sent (none without workers, or too few to share).

    >>> prefetch([])
    0
    """
    from . import compile_workers

    if not sources or not compile_workers.worker_count():
        return 0
    with _LOCK:
        tasks = []
        for source in dict.fromkeys(sources):
            key = source_key(source)
            if entry_code.is_entry(source) or key in _KERNELS or key in _MACHINE:
                continue
            if machine_code.machine_code_path(module_path(key)).exists():
                continue
            task = _task(key, source)
            if task is not None:
                tasks.append(task)
        return len(compile_workers.submit(tasks)) if tasks else 0


def module_path(key: str) -> pathlib.Path:
    """Where the module of content address ``key`` lives in the cache."""
    return cache.entry_path("kernels", f"k{key}", ".py")


def write_source(path: pathlib.Path, source: str) -> None:
    """Write ``source`` at ``path`` unless it already holds exactly that text (Numba
    validates its cache by the file's time stamp: an unchanged file keeps it valid)."""
    try:
        current = path.read_text()
    except (OSError, UnicodeDecodeError):
        current = None
    if current != source:
        cache.atomic_write(path, source.encode())


def _load(source: str, key: str, name: str, keep_machine_code: bool = False) -> types.ModuleType:
    """The module of ``source`` (content address ``key``) run as ``name``, its file in the
    cache rewritten when it differs, and Numba's cache files admitted and recorded; and,
    if ``keep_machine_code`` (a stage module), its functions' machine code, when they
    were compiled here (``machine_code``)."""
    path = module_path(key)
    write_source(path, source)
    numba_files = NumbaCacheFiles(path)
    numba_files.admit()
    module = _run_module(source, path, name)
    numba_files.record(module)
    if keep_machine_code:
        machine_code.save(module, path)
    module.__nbyoc_key__ = key
    return module


def _run_module(source: str, path, name: str) -> types.ModuleType:
    """A module made by running ``source`` (compiled here, from the text: Python's import
    system would run a matching ``__pycache__/*.pyc`` instead), named ``name`` in
    ``sys.modules`` (Numba's cache looks the module up by name when it loads machine
    code) and saying it comes from ``path`` (where Numba's cache locator looks)."""
    module = types.ModuleType(name)
    module.__file__ = str(path)
    code = compile(source, str(path), "exec")
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


#: References to a kernel module's ``kernel`` function when only the module holds it:
#: the module's namespace, ``release``'s local name and ``sys.getrefcount``'s argument.
_UNHELD_REFS = 3


def release(in_use: set[str]) -> int:
    """Let go of every loaded kernel module whose key is not in ``in_use`` and whose
    kernel nothing outside it holds; return how many.

    Numba makes a module's compiled functions immortal: each dispatcher's finalizer
    (a ``weakref.finalize``, always reachable) holds its compiled overloads, whose
    environments hold the module's namespace, which holds the dispatcher; and the
    target context registers each as a function other compiled code may call. So the
    registrations are removed (nothing calls a kernel module's functions but its
    kernel, already compiled) and the namespace is emptied (the compiled code, all
    nopython, reads nothing from it); a module whose kernel someone still holds is
    kept, so nothing anyone can call is changed. A stage module's functions stay
    where they are (``_MACHINE``): Numba never removes machine code, and loading the
    same code again would define its symbols twice in one JIT."""
    released = 0
    with _LOCK:
        unused = [key for key in _KERNELS if key not in in_use]
        if not unused:
            return 0
        from numba.core.ccallback import CFunc  # (Numba is loaded: a module is)

        for key in unused:
            module = _KERNELS[key]
            kernel = vars(module).get("kernel")
            if kernel is not None and sys.getrefcount(kernel) > _UNHELD_REFS:
                continue
            del kernel, _KERNELS[key]
            sys.modules.pop(module.__name__, None)
            addresses = {}
            for name, value in list(vars(module).items()):
                if isinstance(value, CFunc) and value.__wrapped__.__module__ == module.__name__:
                    addresses[name] = value.address  # (a C callback: the executor's)
                    continue
                if getattr(getattr(value, "py_func", None), "__module__", None) != module.__name__:
                    continue  # (helpers imported from nbyoc.runtime stay registered)
                for compiled in getattr(value, "overloads", {}).values():
                    addresses[name] = compiled.library.get_pointer_to_function(
                        compiled.fndesc.llvm_func_name
                    )
                    with contextlib.suppress(KeyError):  # (already removed)
                        value.targetctx.remove_user_function(compiled.entry_point)
            if key in _STAGES and all(addresses.values()):
                # (its machine code stays in the JIT: a later kernel calls the same code
                # at the same addresses, never a second copy of its symbols)
                _MACHINE[key] = machine_code.MachineCodeModule(key, addresses)
            vars(module).clear()
            released += 1
    return released
