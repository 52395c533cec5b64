"""``vector_width(bits)``: let LLVM vectorise the loops of the function calling it
``bits`` wide.

On Intel CPUs with AVX-512 (Skylake-X to Emerald Rapids) LLVM's tuning prefers
256-bit vectors for the loops it vectorises, lest 512-bit instructions lower the
clock; llvm kernels are whole loops of arithmetic, where the wider vectors win:
on the Xeon (Emerald Rapids) a GELU loop ran 73 -> 42 us per 64k float32, an
exp pass 1.31 -> 0.94 ms per 4M. The function attribute ``prefer-vector-width``
is how clang's ``-mprefer-vector-width=512`` says it, per function; Numba has no
option for it, so this intrinsic adds it to the function being compiled (the
one whose body calls it: a stage function, a kernel, the body of a ``prange``,
which Numba compiles as a function of its own). It emits no instruction.

Generated kernels import it by name (``from nbyoc.runtime.llvm.vector_width import
vector_width``) and call it with ``runtime.llvm.target.vector_bits()``.

>>> from numba import njit
>>> @njit
... def double(a):
...     vector_width(512)
...     for i in range(a.size):
...         a[i] *= 2
>>> import numpy as np
>>> a = np.ones(4, np.float32); double(a); a.tolist()
[2.0, 2.0, 2.0, 2.0]
"""

from __future__ import annotations

from numba import types
from numba.extending import intrinsic


@intrinsic
def vector_width(typingctx, bits):
    if not isinstance(bits, types.IntegerLiteral):
        return None
    attribute = f'"prefer-vector-width"="{bits.literal_value}"'

    def codegen(context, builder, signature, args):
        # llvmlite's FunctionAttributes.add knows only keyword attributes; a string
        # attribute goes into the set it renders from (sorted, as written).
        set.add(builder.function.attributes, attribute)
        return context.get_dummy_value()

    return types.void(bits), codegen
