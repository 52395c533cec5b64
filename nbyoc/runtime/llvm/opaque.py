"""``opaque(n)``: an integer LLVM cannot see the value of, for the bounds of the
outer loops in llvm kernels.

LLVM fully unrolls a loop whose trip count is a small constant. Around an inner
vectorised loop that makes one long basic block, and LLVM's instruction schedulers
take time quadratic in a block's length: a stage function filling a 24 x 96 plane
(``for o0 in range(24): for o1 in range(96): ...``) took 1.6 s to compile, 0.13 s
with the outer bound opaque, and ran no slower. The value passes through an empty
inline-assembly statement: one register move at run time, once per loop.

Generated kernels import it by name (``from nbyoc.runtime.llvm.opaque import opaque``).

>>> int(opaque(24))
24
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic


@intrinsic
def _opaque(typingctx, n):
    if not isinstance(n, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        value = context.cast(builder, args[0], signature.args[0], types.int64)
        function = ir.FunctionType(ir.IntType(64), [ir.IntType(64)])
        return builder.asm(function, "", "=r,0", [value], side_effect=False)

    return types.int64(n), codegen


@njit(inline="always")
def opaque(n):
    """``n`` as an int64 whose value LLVM does not know at compile time."""
    return _opaque(n)
