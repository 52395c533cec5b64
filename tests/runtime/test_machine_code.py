"""A stage module's machine code file (``nbyoc.runtime.llvm.machine_code``): what is
written when a stage is compiled, and that a file which is not exactly that never
reaches LLVM (a corrupt object could crash the process that loads it).

Loading a good file in another process, with the same bits as Numba's copy, is
``test_cross_process.py``'s.
"""

import json
import os

import pytest

import nbyoc
from nbyoc.codegen.llvm import lower
from nbyoc.errors import CacheSecurityError
from nbyoc.runtime.llvm import kernels, machine_code
from nbyoc.runtime.llvm.entry_code import ENTRY_HEAD


@pytest.fixture(scope="module")
def compiled_stage(tmp_path_factory):
    """The ``.py`` of a stage module compiled here into an empty cache (a program's
    stages are each one), and its machine code file's bytes as written."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NBYOC_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        patch.setattr(lower, "PROGRAM_MIN_WORK", 0)
        x = nbyoc.var("x", (24, 40))
        loaded = {*kernels._KERNELS, *kernels._MACHINE}
        # (a constant no other test has: a structure compiled here, not found in memory)
        fn = nbyoc.compile(nbyoc.function([x], nbyoc.tanh(x) * 0.4367 + 1.0))
        (module,) = fn.runtime_modules.values()
        # (its stage functions, not the entries a program calls them through: with the
        # product's constant an argument, which of them sorts first is chance)
        stages = {
            kernels.source_key(a.module)
            for a in module.lowered.addressed
            if a.module and not a.module.startswith(ENTRY_HEAD)
        }
        new = sorted(stages - loaded)  # (a driver or entry another test loaded: not these)
        assert new
        path = kernels.module_path(new[0])
    return path, machine_code.machine_code_path(path).read_bytes()


@pytest.fixture
def stage_module(compiled_stage):
    """That module's ``.py``, its machine code file as written again after the test."""
    path, data = compiled_stage
    yield path
    machine = machine_code.machine_code_path(path)
    machine.unlink(missing_ok=True)
    machine.write_bytes(data)
    os.chmod(machine, 0o600)


def test_a_stage_compiled_here_keeps_its_machine_code(stage_module):
    functions = machine_code._parse(machine_code.machine_code_path(stage_module).read_bytes())
    assert functions is not None and set(functions) == {"stage"}
    (stage,) = functions.values()
    assert stage["symbol"].startswith("_ZN") and kernels.KERNEL_MODULE_PREFIX in stage["symbol"]
    assert stage["blob"][:4] == b"\x7fELF" and len(stage["blob"]) == stage["size"]
    # (what its Python wrapper needs, looked up before loading: never an LLVM intrinsic)
    assert not any(n.startswith("llvm.") for n in stage["needs"])


def _corruptions(data: bytes) -> dict[str, bytes]:
    length, _, rest = data[len(machine_code.MAGIC) :].partition(b"\n")
    header_end = len(data) - len(rest) + int(length)
    flipped = bytearray(data)
    flipped[-100] ^= 0x40
    records = json.loads(data[header_end - int(length) : header_end])
    (name,) = records
    longer = dict(records[name], size=records[name]["size"] + 8)
    longer_header = json.dumps({name: longer}).encode()
    return {
        "no magic": data[1:],
        "truncated": data[:-1],
        "a byte of the object flipped": bytes(flipped),
        "a byte appended": data + b"\0",
        "header length not a number": machine_code.MAGIC + b"x" + data[len(machine_code.MAGIC) :],
        "header not JSON": data[:header_end - 1] + b"!" + data[header_end:],
        "a size past the end": (
            machine_code.MAGIC + b"%d\n" % len(longer_header) + longer_header
            + data[header_end:] + b"\0" * 8
        ),
        "empty": b"",
    }  # fmt: skip


def test_a_file_that_is_not_what_was_written_is_never_loaded(stage_module):
    path = machine_code.machine_code_path(stage_module)
    data = path.read_bytes()
    for what, corrupt in _corruptions(data).items():
        assert machine_code._parse(corrupt) is None, what
        path.write_bytes(corrupt)
        assert machine_code.load("k", stage_module) is None, what
    path.unlink()
    assert machine_code.load("k", stage_module) is None  # (none: Numba loads the module)


def test_a_machine_code_file_others_may_write_is_refused_loudly(stage_module):
    path = machine_code.machine_code_path(stage_module)
    os.chmod(path, 0o664)
    with pytest.raises(CacheSecurityError):
        machine_code.load("k", stage_module)


def test_a_module_with_no_numba_functions_saves_nothing(tmp_path):
    import types

    assert not machine_code.save(types.ModuleType("m"), tmp_path / "k.py")
    assert not (tmp_path / "k.machine").exists()
