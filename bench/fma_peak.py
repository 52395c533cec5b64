"""This machine's arithmetic limit, measured: fused multiply-adds per second, float32 and
float64, on one thread and on all of them.

    python bench/fma_peak.py [--runs 201] [--seconds 0.001] [--json fma_peak.json] [--asm]

The loop is written in LLVM IR with llvmlite (which Numba already brings) and compiled
for the host CPU: ``ACCUMULATORS`` independent vectors of the widest float vector the
CPU has (``vector_bits``: 512 bits with AVX-512, 256 with AVX2), each updated by one
``llvm.fma`` per iteration, ``acc = fma(acc, x, y)``, with ``x`` and ``y`` held in
registers. Twelve chains cover an FMA's latency times its throughput (4 cycles x 2
per cycle on Intel's and AMD's cores) and leave room in AVX2's 16 registers for ``x``
and ``y``. Nothing is loaded or stored inside the loop: the accumulators' sum is
stored once, after it, so the loop is not dead code.

The loop's machine code, as compiled on this project's VM (AMD EPYC, Zen 4; ``--asm``
prints it for yours), is twelve ``vfmadd213ps %zmm1, %zmm0, %zmmN`` register-only
instructions, a counter decrement and a branch: no memory operand, no spill
(``loop_instructions`` reads it back; a test checks it on the machine it runs on).
With ``x`` slightly below 1 and ``y`` small, each accumulator converges to ``y / (1 - x)``:
no overflow, no subnormal numbers (which would slow some CPUs down).

A thread calls the compiled function through ctypes, which lets go of the GIL during
the call, so ``threads`` Python threads run it at once; the rate is every thread's
FMAs over the wall time from the first start to the last finish. Each figure is the
median of ``--runs`` runs of about ``--seconds`` each: short runs, as most conv
layers' calls are, so that on a machine other processes share the median is the rate
of a core while this process has it. Long runs measure the share of the core it gets
instead: at a load average of 8-9 on the 2-core VM, 7 runs of 0.2 s gave a median of
28-38 GFLOP/s on one thread (float32), runs of 5 ms 24-34, runs of 0.5 to 2 ms 116-118,
as on the idle machine. A flop is one lane of an addition or a multiplication, so one
FMA lane is 2 flops.

>>> rate = measure("float32", threads=1, runs=3, seconds=0.002)
>>> rate > 1.0  # GFLOP/s
True
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import json
import os
import platform
import statistics
import sys
import threading
import time

#: Independent accumulator chains in the loop (see the module docstring).
ACCUMULATORS = 12
#: Bits per lane.
BITS = {"float32": 32, "float64": 64}
#: Each figure is the median of RUNS runs of about SECONDS each (see the module docstring).
RUNS, SECONDS = 201, 0.001
#: x and y: each accumulator tends to y / (1 - x) = 1.
X, Y = 0.999, 0.001


def host_features() -> dict[str, bool]:
    """The host CPU's features as LLVM names them ("avx512f", "avx2", "fma", "neon", ...)."""
    import llvmlite.binding as llvm

    return {name: bool(on) for name, on in llvm.get_host_cpu_features().items()}


def vector_bits(features: dict[str, bool] | None = None) -> int:
    """The widest float vector with a fused multiply-add on this CPU: 512 with AVX-512,
    256 with AVX2's FMA, 128 on ARM (NEON's FMA is part of AArch64).

    >>> vector_bits({"avx512f": True, "fma": True}), vector_bits({"avx2": True, "fma": True})
    (512, 256)
    """
    features = host_features() if features is None else features
    if features.get("avx512f"):
        return 512
    if features.get("fma"):
        return 256 if features.get("avx") or features.get("avx2") else 128
    if features.get("neon") or platform.machine().lower() in ("aarch64", "arm64"):
        return 128
    raise RuntimeError(
        "this CPU has no fused multiply-add that LLVM knows of (no avx512f, fma or neon "
        "feature): llvm.fma would become a library call and measure nothing"
    )


def isa_name(bits: int) -> str:
    """How a vector width is called on this machine: ``isa_name(512) == 'AVX-512'`` on x86."""
    if platform.machine().lower() in ("x86_64", "amd64"):
        return {512: "AVX-512", 256: "AVX2+FMA", 128: "SSE"}[bits]
    return f"{bits}-bit NEON"


def _ir(dtype: str, lanes: int) -> str:
    """The module's text: ``void fma_loop(i64 n, T x, T y, T* out)``, n >= 1 iterations."""
    from llvmlite import ir

    scalar = ir.FloatType() if dtype == "float32" else ir.DoubleType()
    vector = ir.VectorType(scalar, lanes)
    module = ir.Module(name=f"fma_peak_{dtype}")
    suffix = f"v{lanes}" + ("f32" if dtype == "float32" else "f64")
    fma = ir.Function(module, ir.FunctionType(vector, [vector] * 3), name=f"llvm.fma.{suffix}")
    signature = ir.FunctionType(
        ir.VoidType(), [ir.IntType(64), scalar, scalar, scalar.as_pointer()]
    )
    function = ir.Function(module, signature, name="fma_loop")
    function.attributes.add("nounwind")
    n, x, y, out = function.args
    entry, loop, done = (function.append_basic_block(name) for name in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    zeros = ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes)

    def splat(value):
        one = b.insert_element(
            ir.Constant(vector, ir.Undefined), value, ir.Constant(ir.IntType(32), 0)
        )
        return b.shuffle_vector(one, ir.Constant(vector, ir.Undefined), zeros)

    xs, ys = splat(x), splat(y)
    starts = [ir.Constant(vector, [float(k)] * lanes) for k in range(ACCUMULATORS)]
    b.branch(loop)
    b = ir.IRBuilder(loop)
    counter = b.phi(ir.IntType(64))
    accs = [b.phi(vector) for _ in range(ACCUMULATORS)]
    nexts = [b.call(fma, [acc, xs, ys]) for acc in accs]
    left = b.sub(counter, ir.Constant(ir.IntType(64), 1))
    b.cbranch(b.icmp_signed(">", left, ir.Constant(ir.IntType(64), 0)), loop, done)
    counter.add_incoming(n, entry)
    counter.add_incoming(left, loop)
    for acc, start, nxt in zip(accs, starts, nexts):
        acc.add_incoming(start, entry)
        acc.add_incoming(nxt, loop)
    b = ir.IRBuilder(done)
    total = nexts[0]
    for nxt in nexts[1:]:
        total = b.fadd(total, nxt)
    lane_sum = b.extract_element(total, ir.Constant(ir.IntType(32), 0))
    for k in range(1, lanes):
        lane_sum = b.fadd(lane_sum, b.extract_element(total, ir.Constant(ir.IntType(32), k)))
    b.store(lane_sum, out)
    b.ret_void()
    width = lanes * BITS[dtype]
    # X86 splits vectors wider than a function's min-legal-vector-width when the CPU
    # prefers 256-bit vectors (Intel's AVX-512 cores do): the loop needs the full width
    needs = f') nounwind "min-legal-vector-width"="{width}"\n{{'
    return str(module).replace(") nounwind\n{", needs, 1)


class Compiled:
    """The loop compiled for the host: ``call(n, out)`` runs n iterations."""

    def __init__(self, dtype: str, bits: int):
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self.dtype, self.lanes = dtype, bits // BITS[dtype]
        target = llvm.Target.from_default_triple()
        features = ",".join(f"{'+' if on else '-'}{name}" for name, on in host_features().items())
        self.machine = target.create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=features, opt=3
        )
        self.module = llvm.parse_assembly(_ir(dtype, self.lanes))
        self.module.verify()
        self.engine = llvm.create_mcjit_compiler(self.module, self.machine)
        self.engine.finalize_object()
        scalar = ctypes.c_float if dtype == "float32" else ctypes.c_double
        prototype = ctypes.CFUNCTYPE(None, ctypes.c_int64, scalar, scalar, ctypes.POINTER(scalar))
        self._fn = prototype(self.engine.get_function_address("fma_loop"))
        self._scalar = scalar

    def call(self, n: int) -> float:
        out = self._scalar()
        self._fn(n, X, Y, ctypes.byref(out))
        return out.value

    def flops(self, n: int) -> int:
        return 2 * n * ACCUMULATORS * self.lanes

    def assembly(self) -> str:
        return self.machine.emit_assembly(self.module)


@functools.cache
def compiled(dtype: str) -> Compiled:
    return Compiled(dtype, vector_bits())


def loop_instructions(asm: str) -> list[str]:
    """The instructions of the innermost loop of ``fma_loop``'s assembly: from its loop
    label to the jump back to it."""
    lines = [line.strip() for line in asm.splitlines()]
    # (directives start with a dot; so do labels, which end with a colon)
    lines = [line.split("#")[0].strip() for line in lines
             if line and (line.endswith(":") or not line.startswith("."))]  # fmt: skip
    for i, line in enumerate(lines):
        if line.endswith(":"):
            label = line[:-1]
            for j in range(i + 1, len(lines)):
                if lines[j].split()[-1:] == [label] and lines[j].startswith("j"):
                    return [text for text in lines[i + 1 : j + 1] if text]
    raise ValueError("no loop found in the assembly")


def _times(fn: Compiled, n: int, threads: int, runs: int) -> list[float]:
    """Seconds, wall, of each of ``runs`` runs in which ``threads`` threads each run
    ``n`` iterations at once (the same threads every run, started once)."""
    if threads == 1:
        times = []
        for _ in range(runs):
            began = time.perf_counter()
            fn.call(n)
            times.append(time.perf_counter() - began)
        return times
    start, finish = threading.Barrier(threads + 1), threading.Barrier(threads + 1)

    def work():
        for _ in range(runs):
            start.wait()
            fn.call(n)
            finish.wait()

    workers = [threading.Thread(target=work, daemon=True) for _ in range(threads)]
    for w in workers:
        w.start()
    times = []
    for _ in range(runs):
        start.wait()
        began = time.perf_counter()
        finish.wait()
        times.append(time.perf_counter() - began)
    for w in workers:
        w.join()
    return times


def measure(dtype: str, threads: int = 1, runs: int = RUNS, seconds: float = SECONDS) -> float:
    """GFLOP/s of ``threads`` threads running the loop at once: the median of ``runs``
    runs of about ``seconds`` each."""
    fn = compiled(dtype)
    n = 1 << 12
    # (the fastest of a few: a run that another process interrupted says nothing)
    while (spent := min(_times(fn, n, 1, 3))) < 1e-3 and n < 1 << 40:
        n *= 4
    n = max(1, int(n * seconds / spent))
    return fn.flops(n) * threads / statistics.median(_times(fn, n, threads, runs)) / 1e9


def all_threads() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def peaks(thread_counts=None, runs: int = RUNS, seconds: float = SECONDS) -> dict:
    """{"isa", "vector_bits", "accumulators", "gflops": {dtype: {threads: GFLOP/s}}}."""
    thread_counts = thread_counts or sorted({1, all_threads()})
    bits = vector_bits()
    rates = {d: {str(t): measure(d, t, runs, seconds) for t in thread_counts} for d in BITS}
    return {"isa": isa_name(bits), "vector_bits": bits, "accumulators": ACCUMULATORS,
            "runs": runs, "gflops": rates}  # fmt: skip


def markdown(result: dict) -> str:
    threads = list(next(iter(result["gflops"].values())))
    head = ["dtype", *(f"{t} thread{'s' if t != '1' else ''}, GFLOP/s" for t in threads)]
    rows = [[d, *(f"{by[t]:.1f}" for t in threads)] for d, by in result["gflops"].items()]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    title = (
        f"FMA peak, {result['isa']} ({result['vector_bits']}-bit vectors, "
        f"{result['accumulators']} accumulators), median of {result['runs']} runs:"
    )
    return "\n".join([title, "", *lines])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--seconds", type=float, default=SECONDS, help="length of one run")
    parser.add_argument("--threads", default="", help="comma-separated (default: 1 and all)")
    parser.add_argument("--json", help="write the result here")
    parser.add_argument("--asm", action="store_true", help="print the float32 loop's assembly")
    args = parser.parse_args(argv)
    if args.asm:
        print("\n".join(loop_instructions(compiled("float32").assembly())))
    counts = [int(t) for t in args.threads.split(",")] if args.threads else None
    result = peaks(counts, args.runs, args.seconds)
    print(markdown(result))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
