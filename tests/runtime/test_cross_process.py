"""A kernel loaded from the disk cache computes the same bits as in the process that
compiled it (issue 36).

Numba compiled each function a kernel calls into a library of its own and linked a
copy into the kernel; the process that compiled the kernel ran the callee's own code,
one that loaded the kernel from the cache the kernel's copy, optimised once more, and
LLVM regroups a reassociable float sum on that second pass: a row normalisation
differed in the last bits between a cold and a warm cache (``nbyoc.runtime.llvm.linking``).

Process 1 compiles into an empty cache directory, process 2 loads every kernel from it
(Numba compiles nothing there; a program's stage modules come from their machine code,
``runtime.llvm.machine_code``, and a third process, with that corrupted or removed,
loads them through Numba) and must get bit-identical outputs: row groups (mean and
variance normalisation, softmax), matmul and gemm with epilogues, conv, a depthwise conv
(stride phases and tap rows), and an
elementwise nest of nbyoc's vectorised exp, tanh, sigmoid and erf, each serial and
parallel, as a compiled kernel and as a program (whose stage modules are what is
cached). Shapes are small, with rows long enough for the vectorised sums (blocks of
``rows.SUM_BLOCK``) to be taken.
"""

import numpy as np
import pytest

from ..helpers import run_fresh

#: Run in a fresh process with NBYOC_CACHE_DIR set: compiles every graph at each
#: parallel threshold, saves the outputs to ``sys.argv[1]`` (an .npz) and prints how
#: many functions Numba compiled, how many stage modules it loaded from their machine
#: code, and how many stage entries it built (``runtime.llvm.entry_code``: not Numba's).
PROGRAM = """
import json, sys
import numpy as np
from numba.core import event
import nbyoc
from nbyoc.codegen.llvm import lower
from nbyoc.runtime.llvm import kernels

default_work = lower.PROGRAM_MIN_WORK
built = []
build_entry = kernels._build_entry
kernels._build_entry = lambda key, text: built.append(key) or build_entry(key, text)

rng = np.random.default_rng(36)

def data(*shape):
    return rng.standard_normal(shape).astype(np.float32)

def row_norm():
    x = nbyoc.var("x", (48, 1024))
    d = x - nbyoc.mean(x, axis=1, keepdims=True)
    var = nbyoc.mean(d * d, axis=1, keepdims=True)
    return [x], d / nbyoc.sqrt(var + 1e-5), [data(48, 1024)]

def softmax():
    x = nbyoc.var("x", (48, 1000))
    return [x], nbyoc.softmax(x, axis=-1), [data(48, 1000)]

def matmul():
    a, b = nbyoc.var("a", (64, 96)), nbyoc.var("b", (96, 80))
    return [a, b], nbyoc.relu(nbyoc.matmul(a, b) + 0.5), [data(64, 96), data(96, 80)]

def gemm():
    a, b, c = nbyoc.var("a", (40, 72)), nbyoc.var("b", (56, 72)), nbyoc.var("c", (56,))
    return [a, b, c], nbyoc.gemm(a, b, c, trans_b=True), [data(40, 72), data(56, 72), data(56)]

def conv():
    x, w, b = nbyoc.var("x", (2, 8, 20, 20)), nbyoc.var("w", (16, 8, 3, 3)), nbyoc.var("b", (16,))
    y = nbyoc.relu(nbyoc.conv(x, w, b, pads=[1, 1, 1, 1]))
    return [x, w, b], y, [data(2, 8, 20, 20), data(16, 8, 3, 3), data(16)]

def depthwise():  # (a direct conv: stride phases and tap rows)
    x, w = nbyoc.var("x", (2, 8, 20, 21)), nbyoc.var("w", (8, 1, 3, 3))
    y = nbyoc.relu(nbyoc.conv(x, w, strides=[2, 2], pads=[1, 1, 1, 1], group=8))
    return [x, w], y, [data(2, 8, 20, 21), data(8, 1, 3, 3)]

def elementwise():
    x, y = nbyoc.var("x", (64, 512)), nbyoc.var("y", (64, 512))
    z = nbyoc.tanh(x) * nbyoc.sigmoid(y) + nbyoc.exp(x * 0.5) - nbyoc.gelu(y)
    return [x, y], z, [data(64, 512), data(64, 512)]

outputs = {}
with event.install_recorder("numba:compile") as compiles:
    modes = (("serial", 1 << 40), ("parallel", 1024), ("serial program", 1 << 40),
             ("parallel program", 1024))
    for mode, threshold in modes:
        # (every kernel a program, as a real model's are: nbyoc.codegen.llvm.program)
        lower.PROGRAM_MIN_WORK = 0 if "program" in mode else default_work
        for graph in (row_norm, softmax, matmul, gemm, conv, depthwise, elementwise):
            params, body, args = graph()
            options = {"llvm": {"parallel_threshold": threshold}}
            fn = nbyoc.compile(nbyoc.function(params, body), backend="llvm", options=options)
            outputs[f"{graph.__name__} {mode}"] = fn(*args)
            (module,) = fn.runtime_modules.values()
            assert (module.lowered.program is not None) == ("program" in mode), mode
            if "program" not in mode:  # (a program has no kernel module: its stages')
                hits = sum(module.kernel.stats.cache_hits.values())
                outputs[f"{graph.__name__} {mode} hits"] = np.array(hits)
np.savez(sys.argv[1], **outputs)
print(json.dumps({"compiled": sum(1 for _, e in compiles.buffer if e.is_start),
                  "machine code": len(kernels._MACHINE) - len(built),
                  "entries built": len(built)}))
"""


@pytest.fixture
def cache_dir(tmp_path):
    return tmp_path / "cache"


def test_a_kernel_loaded_from_the_cache_gives_the_same_bits(cache_dir, tmp_path):
    env = {"NBYOC_CACHE_DIR": str(cache_dir)}
    cold, warm = tmp_path / "cold.npz", tmp_path / "warm.npz"
    compiled = run_fresh(PROGRAM, tmp_path, str(cold), env=env)
    assert compiled["compiled"] > 0 and compiled["entries built"] > 0, compiled
    # (the programs' stage modules and entries from their machine code, the rest from
    # Numba's cache)
    loaded = run_fresh(PROGRAM, tmp_path, str(warm), env=env)
    assert loaded["compiled"] == 0 and loaded["machine code"] > 0, loaded
    assert loaded["entries built"] == 0, loaded
    assert_same_bits(np.load(cold), np.load(warm))


def test_without_usable_machine_code_numba_loads_the_same_bits(cache_dir, tmp_path):
    """A stage module whose machine code is corrupt (or missing) loads through Numba's
    cache instead, and a stage entry is built again from its text: the same bits,
    nothing compiled again by Numba."""
    env = {"NBYOC_CACHE_DIR": str(cache_dir)}
    cold, warm = tmp_path / "cold.npz", tmp_path / "warm.npz"
    run_fresh(PROGRAM, tmp_path, str(cold), env=env)
    files = sorted((cache_dir / "kernels").glob("*.machine"))
    assert files
    for k, path in enumerate(files):  # (every other one corrupt, the others gone)
        if k % 2:
            path.unlink()
        else:
            data = bytearray(path.read_bytes())
            data[-64] ^= 0xFF
            path.write_bytes(bytes(data))
    loaded = run_fresh(PROGRAM, tmp_path, str(warm), env=env)
    assert loaded["compiled"] == 0 and loaded["machine code"] == 0, loaded
    assert loaded["entries built"] > 0, loaded
    assert_same_bits(np.load(cold), np.load(warm))


def assert_same_bits(cold, warm) -> None:
    assert cold.files == warm.files
    differing = {}
    for name in cold.files:
        if name.endswith(" hits"):
            assert cold[name] == 0 and warm[name] == 1, f"{name}: not loaded from the cache"
            continue
        a, b = cold[name], warm[name]
        assert a.dtype == b.dtype and a.shape == b.shape, name
        bits = f"u{a.itemsize}"  # (bits, not values: -0.0 against 0.0 differs too)
        if (a.view(bits) != b.view(bits)).any():
            differing[name] = f"{int((a.view(bits) != b.view(bits)).sum())} of {a.size}"
    assert not differing, f"values that differ, by graph and mode: {differing}"


#: A program in a fresh process: prints how many modules Numba loaded (each builds a
#: dispatcher) and how many came from machine code, and the result's bits.
PROGRAM_ONLY = """
import json
import numpy as np
import nbyoc
from nbyoc.codegen.llvm import lower
from nbyoc.runtime.llvm import kernels

lower.PROGRAM_MIN_WORK = 0
x = nbyoc.var("x", (64, 512))
fn = nbyoc.compile(nbyoc.function([x], nbyoc.tanh(x) * 2.0 + 1.0), backend="llvm")
(module,) = fn.runtime_modules.values()
assert module.lowered.program is not None
out = fn(np.linspace(-3, 3, 64 * 512, dtype=np.float32).reshape(64, 512))
print(json.dumps({"numba": len(kernels._KERNELS), "machine code": len(kernels._MACHINE),
                  "bits": out.view(np.uint32).tolist()[:64]}))
"""


def test_a_warm_program_builds_no_numba_dispatcher(cache_dir, tmp_path):
    """A program's stages and its executor (a C callback, ``program.EXECUTOR_MODULE``)
    load from their machine code in a warm process: Numba builds no dispatcher there,
    whose first one costs it 0.1 s of set-up. Same bits."""
    env = {"NBYOC_CACHE_DIR": str(cache_dir)}
    cold = run_fresh(PROGRAM_ONLY, tmp_path, env=env)
    assert cold["numba"] >= 2, cold  # (compiled here: a stage, the executor)
    warm = run_fresh(PROGRAM_ONLY, tmp_path, env=env)
    assert warm["numba"] == 0 and warm["machine code"] >= 2, warm
    assert warm["bits"] == cold["bits"]


#: Builds a small region beside a large one (so a program: ``MODEL_PROGRAM_MIN_WORK``)
#: and saves it to ``sys.argv[1]``, or loads it from there; prints whether it is a
#: program and its result's bits.
SMALL_REGION = """
import json, pathlib, sys
import numpy as np
import nbyoc
from nbyoc.codegen.build import build
from nbyoc.codegen.llvm.module import LLVMModule
from nbyoc.ir import IRModule

path = pathlib.Path(sys.argv[1])
if sys.argv[2] == "save":
    x = nbyoc.var("x", (4, 8))
    small = nbyoc.function([x], nbyoc.exp(x) + 1.0).with_attrs(Compiler="llvm", global_symbol="s")
    a, b = nbyoc.var("a", (512, 512)), nbyoc.var("b", (512, 512))
    large = nbyoc.function([a, b], nbyoc.matmul(a, b)).with_attrs(Compiler="llvm", global_symbol="l")
    module = build(IRModule({"main": nbyoc.function([x], x), "s": small, "l": large}))["s"]
    path.write_bytes(module.save_to_bytes())
else:
    module = LLVMModule.load_from_bytes(path.read_bytes())
out = np.empty((4, 8), np.float32)
module.get_function("s")(np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8), out)
print(json.dumps({"program": module.lowered.program is not None,
                  "bits": out.view(np.uint32).ravel().tolist()}))
"""


def test_a_saved_small_region_stays_a_program_in_another_process(cache_dir, tmp_path):
    """The choice a build made for a small region of a large model (a program) is saved
    with the module, and a fresh process loading it runs it as one, to the same bits."""
    env = {"NBYOC_CACHE_DIR": str(cache_dir)}
    saved = tmp_path / "small.bin"
    made = run_fresh(SMALL_REGION, tmp_path, str(saved), "save", env=env)
    loaded = run_fresh(SMALL_REGION, tmp_path, str(saved), "load", env=env)
    assert made["program"] and loaded["program"]
    assert loaded["bits"] == made["bits"]
