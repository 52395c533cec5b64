"""A stage module's machine code, kept beside it in the cache and loaded without Numba.

A kernel calls its stage functions only through their native addresses
(``jit_address``), so a process that finds a stage module already compiled needs
nothing of it but its machine code. Numba's own cache gives that too, at about
7 ms a module: it runs the module, builds a dispatcher, unpickles the compile
result, parses the module's whole LLVM bitcode again (kept for inlining into
callers, which nbyoc's kernels never do: ``linking``) and refreshes its typing
registries. A real CNN's warm compile loads 30 to 70 stage modules, and that was
half of it.

So when a stage module's functions are compiled in this process (here or in a
compile worker), each one's object code (the bytes Numba's cache keeps, made by
the same compile) is written to ``kernels/<key>.machine``, with the native
symbol to look up and the external symbols it needs; a later process adds the
object to Numba's own JIT engine (the one that would have loaded Numba's copy) and
reads the addresses. The bits are those of the Numba-loaded copy: the same object
code, linked by the same engine.

A function whose code could need its Numba environment (a pointer Numba fills
when it loads a function, used to box values for an exception raised with
run-time arguments, or by object-mode code) is not recorded, nor one referring to a
symbol of another library; a module with one such function is loaded by Numba.
Loading checks, before LLVM sees any byte, that the file is private to the user
(``nbyoc.cache.check_private``), well formed, that each object has the digest
written with it, and that every symbol it needs is defined in this process; any
failure makes the module load through Numba as before (a correct result, at
Numba's speed).

Machine code stays loaded until the process ends (so does Numba's: it never
removes a module from its JIT), so each module is loaded once per process.
"""

from __future__ import annotations

import functools
import hashlib
import json
import pathlib

from ... import cache

#: The first line of every machine-code file, naming its format.
MAGIC = b"nbyoc machine code 1\n"

#: A symbol whose name starts so is an LLVM intrinsic, not something to look up.
_INTRINSIC_PREFIX = "llvm."

#: What names the environment global of a function (``FunctionDescriptor.env_name``).
_ENVIRONMENT = "NumbaEnv"


class MachineCodeModule:
    """A stage module loaded from its machine code: the native address of each of its
    functions, by name, and its content address (``kernels.source_key``)."""

    __slots__ = ("__nbyoc_key__", "addresses")

    def __init__(self, key: str, addresses: dict[str, int]):
        self.__nbyoc_key__, self.addresses = key, addresses

    def address(self, function: str) -> int:
        """The native address of the function ``function`` (as ``jit_address`` gives it)."""
        return self.addresses[function]


def machine_code_path(module_path: pathlib.Path) -> pathlib.Path:
    """Where the machine code of the module at ``module_path`` (its ``.py``) is kept."""
    return module_path.with_suffix(".machine")


def save(module, module_path: pathlib.Path) -> bool:
    """Write the machine code of every Numba function ``module`` (just run) defines, if
    each was compiled in this process and can be loaded without Numba; return whether it
    was written.

    >>> import types
    >>> save(types.ModuleType("empty"), pathlib.Path("/nonexistent/k0.py"))
    False
    """
    from numba.core.ccallback import CFunc

    found = []
    for name, value in vars(module).items():
        if isinstance(value, CFunc):  # (a C callback: its address is its wrapper's)
            if value.__wrapped__.__module__ != module.__name__:
                continue
            library = getattr(value, "_library", None)
            symbol = value.native_name
            record = None if library is None else _record(library, symbol, {symbol})
        else:
            func = getattr(value, "py_func", None)
            if getattr(func, "__module__", None) != module.__name__:
                continue  # (not a function of this module: a helper imported from the runtime)
            overloads = list(getattr(value, "overloads", {}).values())
            if len(overloads) != 1:
                return False
            compiled, descriptor = overloads[0], overloads[0].fndesc
            wrappers = {descriptor.llvm_cpython_wrapper_name, descriptor.llvm_cfunc_wrapper_name}
            record = _record(compiled.library, descriptor.llvm_func_name, wrappers)
        if record is None:
            return False
        found.append((name, *record))
    return _write(found, module_path)


def save_library(library, symbol: str, name: str, module_path: pathlib.Path) -> bool:
    """Write the machine code of the function ``symbol`` of a code ``library`` built
    here (``entry_code``) as the module at ``module_path`` defining ``name``; return
    whether it was written (as ``save``)."""
    record = _record(library, symbol, {symbol})
    return record is not None and _write([(name, *record)], module_path)


def _write(found: list[tuple[str, bytes, dict]], module_path: pathlib.Path) -> bool:
    """Write the machine-code file of the functions ``found`` (name, object, record)."""
    if not found:
        return False
    found.sort()  # (the objects follow the header in its order)
    header = json.dumps({name: record for name, _, record in found}).encode()
    blobs = b"".join(blob for _, blob, _ in found)
    data = MAGIC + b"%d\n" % len(header) + header + blobs
    cache.atomic_write(machine_code_path(module_path), data)
    return True


def _record(library, symbol: str, wrappers: set[str]) -> tuple[bytes, dict] | None:
    """The object code of one compiled ``library`` and what loading it needs, its address
    to be that of ``symbol``; or None if it was not compiled here (loaded from Numba's
    cache) or could need more than its bytes. ``wrappers``: the functions Numba made for
    callers outside compiled code (Python's, C's), which reach Numba's environment only
    to report an exception the function raised: ``symbol`` is one for a C callback
    (the executor's raises none)."""
    blob = getattr(library, "_compiled_object", None)
    if not isinstance(blob, bytes):
        return None
    llvm_module = library._final_module
    needs = []
    for function in llvm_module.functions:
        if function.is_declaration:
            if not function.name.startswith(_INTRINSIC_PREFIX):
                needs.append(function.name)
        elif function.name not in wrappers and _ENVIRONMENT in str(function):
            return None
    needs += [g.name for g in llvm_module.global_variables if g.is_declaration]
    if llvm_module.get_function(symbol).is_declaration:
        return None
    digest = hashlib.blake2b(blob, digest_size=16).hexdigest()
    return blob, {"symbol": symbol, "size": len(blob), "digest": digest, "needs": sorted(needs)}


def load(key: str, module_path: pathlib.Path) -> MachineCodeModule | None:
    """The module of content address ``key`` (at ``module_path``) from its machine code,
    or None when there is none that can be loaded here (see the module docstring)."""
    path = machine_code_path(module_path)
    if not path.exists():
        return None
    cache.check_private(path)  # (CacheSecurityError: someone else could have written it)
    try:
        data = path.read_bytes()
    except OSError:  # (gone since: Numba's cache is still there)
        return None
    functions = _parse(data)
    if functions is None:
        return None
    import llvmlite.binding as ll

    engine = _numba_engine()
    needs = {n for f in functions.values() for n in f["needs"]} - _DEFINED
    if any(ll.address_of_symbol(n) is None for n in needs):
        return None
    _DEFINED.update(needs)  # (a symbol stays defined: a model's 50 modules need the same 30)
    for function in functions.values():
        engine._ee.add_object_file(ll.ObjectFileRef.from_data(function["blob"]))
    engine.finalize_object()
    addresses = {n: engine.get_function_address(f["symbol"]) for n, f in functions.items()}
    if not all(addresses.values()):
        from ...errors import CompileError

        raise CompileError(
            f"internal: the machine code of kernel module {key} loaded but does not define "
            f"{sorted(n for n, a in addresses.items() if not a)}; please report this"
        )
    return MachineCodeModule(key, addresses)


#: The external symbols found defined in this process so far.
_DEFINED: set[str] = set()


@functools.cache
def _numba_engine():
    """Numba's JIT engine, with the symbols of Numba's runtime (``NRT_*``) defined, as
    Numba defines them before it loads a function."""
    from numba.core.registry import cpu_target
    from numba.core.runtime import nrt

    context = cpu_target.target_context
    nrt.rtsys.initialize(context)
    return context.codegen()._engine


def _parse(data: bytes) -> dict | None:
    """The functions of a machine-code file (each record with its ``blob``), or None
    unless it is well formed and each object has its digest."""
    if not data.startswith(MAGIC):
        return None
    rest = data[len(MAGIC) :]
    length, newline, rest = rest.partition(b"\n")
    if not newline or not length.isdigit() or int(length) > len(rest):
        return None
    try:
        records = json.loads(rest[: int(length)])
    except ValueError:
        return None
    blobs = rest[int(length) :]
    if not isinstance(records, dict) or not records:
        return None
    at = 0
    for record in records.values():
        if not _well_formed(record):
            return None
        blob = blobs[at : at + record["size"]]
        at += record["size"]
        if hashlib.blake2b(blob, digest_size=16).hexdigest() != record["digest"]:
            return None
        record["blob"] = blob
    return records if at == len(blobs) else None


def _well_formed(record) -> bool:
    return (
        isinstance(record, dict)
        and isinstance(record.get("symbol"), str)
        and isinstance(record.get("size"), int)
        and record["size"] > 0
        and isinstance(record.get("digest"), str)
        and isinstance(record.get("needs"), list)
        and all(isinstance(n, str) for n in record["needs"])
    )
