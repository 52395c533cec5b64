"""The error of nbyoc's vectorised float32 functions (``nbyoc.runtime.llvm.vecmath``) over
every float32 input, against float64 libm rounded to float32.

    python bench/vecmath_accuracy.py            # all seven, every finite input
    python bench/vecmath_accuracy.py exp tanh   # some of them
    python bench/vecmath_accuracy.py --csource  # the C versions csource compiles

For each function: the largest error in ulps (of the correctly rounded result, the
subnormal ulp 2**-149 at the bottom), the input where it occurs, and how many
inputs disagree on being inf or NaN (must be 0). Takes about a minute per function
on 2 cores.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np
from numba import njit, prange

from nbyoc.runtime.llvm import vecmath


@njit
def _sigmoid64(x):
    return 1.0 / (1.0 + math.exp(-x))


REFERENCES = {
    "exp": njit(lambda x: math.exp(x)),
    "log": njit(lambda x: math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)),
    "tanh": njit(lambda x: math.tanh(x)),
    "sigmoid": _sigmoid64,
    "erf": njit(lambda x: math.erf(x)),
    "log1p": njit(lambda x: math.log1p(x) if x > -1 else (-math.inf if x == -1 else math.nan)),
    "expm1": njit(lambda x: math.expm1(x)),
}


def _checker(fn, ref):
    @njit(parallel=True)
    def check(start, count, computed):
        """(worst ulp error, its input's bits, special-value mismatches) over the float32
        with bits start .. start + count - 1; their results are ``fn``'s, or ``computed``
        when it is not empty."""
        chunks = 64
        worst = np.zeros(chunks)
        where = np.zeros(chunks, np.uint32)
        bad = np.zeros(chunks, np.int64)
        for c in prange(chunks):
            lo = start + c * count // chunks
            hi = start + (c + 1) * count // chunks
            for b in range(lo, hi):
                x = vecmath.bits_float(np.int32(np.uint32(b)))
                got = fn(x) if computed.size == 0 else computed[b - start]
                want = ref(np.float64(x))
                rounded = np.float32(want)
                if math.isinf(rounded) or math.isnan(rounded) or math.isnan(got):
                    same = (math.isnan(got) and math.isnan(rounded)) or got == rounded
                    if not same:
                        bad[c] += 1
                    continue
                if math.isinf(got):
                    bad[c] += 1
                    continue
                ulp = max(np.spacing(np.float32(abs(rounded))), np.float32(2.0**-149))
                error = abs(np.float64(got) - want) / np.float64(ulp)
                if error > worst[c]:
                    worst[c] = error
                    where[c] = np.uint32(b)
        k = np.argmax(worst)
        return worst[k], where[k], bad.sum()

    return check


def _csource_function(name: str, count: int):
    """``name`` over ``count`` float32 as csource compiles it (nbyoc's C version)."""
    import nbyoc

    x = nbyoc.var("x", (count,))
    return nbyoc.compile(nbyoc.function([x], nbyoc.call_op(name, x)), backend="csource")


def measure(name: str, csource: bool = False, step: int = 1 << 26) -> tuple[float, float, int]:
    """(worst ulp, its input, mismatched specials) of ``name`` over all 2**32 bit patterns,
    of the llvm version or (``csource``) the C version."""
    check = _checker(vecmath.FUNCTIONS[name], REFERENCES[name])
    compiled = _csource_function(name, step) if csource else None
    nothing = np.empty(0, np.float32)
    worst, where, bad = 0.0, 0.0, 0
    for start in range(0, 1 << 32, step):
        if compiled is None:
            w, at, b = check(start, step, nothing)
        else:
            inputs = np.arange(start, start + step, dtype=np.uint64).astype(np.uint32)
            w, at, b = check(start, step, compiled(inputs.view(np.float32)))
        bad += int(b)
        if w > worst:
            worst, where = float(w), float(np.uint32(at).view(np.float32))
    return worst, where, bad


def main(arguments) -> int:
    csource = "--csource" in arguments
    names = [a for a in arguments if a != "--csource"]
    failed = 0
    for name in names or list(vecmath.FUNCTIONS):
        started = time.perf_counter()
        worst, where, bad = measure(name, csource)
        ok = worst <= vecmath.MAX_ULP and bad == 0
        failed += not ok
        print(
            f"{'csource ' if csource else ''}{name:8s} max error {worst:.3f} ulp at "
            f"x = {where!r}, special-value mismatches {bad}  "
            f"({time.perf_counter() - started:.0f} s)  {'ok' if ok else 'FAIL'}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
