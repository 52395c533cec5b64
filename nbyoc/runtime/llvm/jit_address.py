"""Calling a compiled stage function through its address, from a Numba kernel; and
reading arrays the runtime holds (an llvm kernel's constants) through theirs.

Numba compiles a function that calls another by linking the callee's LLVM IR
into the caller's module and optimising and generating machine code for all of
it again; a parallel loop adds one more module around its body. For an llvm
kernel whose stage function holds a hundred fused ops, that meant generating
the same large loop three times. A kernel instead receives the addresses of its
large stage functions and of its parallel loops' bodies (an int64 array
argument) and calls each one by ``call_at``: each is compiled once, in its own
cached library, and only the call is in the kernel. The addresses are data, so
the kernel stays cacheable.

``call_at`` calls the callee's native (Numba calling convention) address, the one
Numba itself uses for a jitted function passed as a value, so exceptions
propagate as usual. Calling a first-class function value instead would also
compile, at every call site, a path for a value with no native address (through
the Python object, boxing each argument), which is never taken: that path was a
third of the compile time of a 53-conv model's loop body. The addresses come
from ``numba.experimental.function_type._get_jit_address``, and the value type
must have a ``jit_addr`` field; ``supported()`` says whether this Numba has both,
and the lowering calls stages directly (the slower compile, same results) when
it has not.

A kernel's constants come the same way: one int64 array of their data addresses
(``data_addresses``), each viewed in the kernel by ``carray(pointer_at(...))``. As
array parameters they cost Numba time superlinear in their number (unboxing each
one adds cleanup for all before it): a kernel of 40 residual blocks, 160 weights,
took 19 s, most of it there.
"""

from __future__ import annotations

import functools

import numpy as np


@functools.cache
def supported() -> bool:
    """True if this Numba lets a kernel call a jitted function by its address."""
    try:
        from numba.core import types
        from numba.core.datamodel import default_manager
        from numba.experimental.function_type import _get_jit_address  # noqa: F401

        model = default_manager.lookup(types.FunctionType(types.void()))
        return "jit_addr" in model._fields
    except (ImportError, AttributeError, KeyError):
        return False


@functools.cache
def _pointer_at():
    from numba.core import types
    from numba.extending import intrinsic

    @intrinsic
    def pointer_at(typingctx, address, dtype):
        """The pointer to ``dtype`` (a NumPy scalar type) at ``address``."""
        pointer = types.CPointer(dtype.dtype)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(pointer))

        return pointer(address, dtype), codegen

    return pointer_at


@functools.cache
def _call_at():
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def call_at(typingctx, address, ftype, arguments):
        """Call the jitted function of type ``ftype`` (a ``FunctionType``) whose code is
        at ``address``, with the tuple ``arguments``: each of the parameter's type, or an
        array that is one as it is (a C-contiguous array for a parameter of any layout,
        a writable one for a read-only parameter: a strided view's layout is Numba's to
        decide, and a stage only needs what its parameter says)."""
        signature = ftype.instance_type.signature
        given = tuple(arguments)
        if len(given) != len(signature.args) or not all(map(_passes, given, signature.args)):
            return None

        def codegen(context, builder, call_signature, args):
            function_type = context.call_conv.get_function_type(
                signature.return_type, signature.args
            ).as_pointer()
            pointer = builder.inttoptr(args[0], function_type)
            values = [
                context.cast(builder, builder.extract_value(args[2], k), given[k], formal)
                for k, formal in enumerate(signature.args)
            ]
            status, result = context.call_conv.call_function(
                builder, pointer, signature.return_type, signature.args, values
            )
            with cgutils.if_unlikely(builder, status.is_error):
                context.call_conv.return_status_propagate(builder, status)
            return result

        return signature.return_type(address, ftype, arguments), codegen

    return call_at


def _passes(given, formal) -> bool:
    """Whether a value of Numba type ``given`` may be passed for a parameter of type
    ``formal`` by ``call_at`` (see there)."""
    from numba.core import types

    if given == formal:
        return True
    return (
        isinstance(given, types.Array)
        and isinstance(formal, types.Array)
        and (given.dtype, given.ndim) == (formal.dtype, formal.ndim)
        and formal.layout in ("A", given.layout)
        and (given.mutable or not formal.mutable)
        and (given.aligned or not formal.aligned)
    )


def __getattr__(name):
    # The intrinsics are built on first use, so importing this module does not import Numba.
    if name == "call_at":
        return _call_at()
    if name == "pointer_at":
        return _pointer_at()
    raise AttributeError(name)


def data_addresses(arrays) -> np.ndarray:
    """The read-only int64 array of the data addresses of ``arrays`` (each C-contiguous;
    the caller keeps them alive while a kernel reads through the addresses).

    >>> a = np.arange(3.0)
    >>> int(data_addresses([a])[0]) == a.ctypes.data
    True
    """
    assert all(a.flags.c_contiguous for a in arrays), "internal: addresses of strided arrays"
    addresses = np.array([a.ctypes.data for a in arrays], np.int64)
    addresses.flags.writeable = False
    return addresses


def stage_addresses(functions) -> np.ndarray:
    """The read-only int64 array of the native addresses of the stage functions
    ``functions``, given as (module, function name, signature name) in the kernel's order
    (a module Numba ran, or one loaded from its machine code)."""
    from numba.experimental.function_type import _get_jit_address

    from .machine_code import MachineCodeModule

    addresses = np.array(
        [m.address(f) if isinstance(m, MachineCodeModule) else
         _get_jit_address(getattr(m, f), getattr(m, s)) for m, f, s in functions],
        np.int64,
    )  # fmt: skip
    addresses.flags.writeable = False
    return addresses
