"""A kernel's machine code calls only its own copies of the functions it uses, so the
process that compiles a kernel runs the same code as every process that loads it from
the disk cache.

Numba compiles each function a kernel calls (a stage function, the body of a
``prange``, a helper) as a library of its own, then links a copy of that library's
optimised IR into the caller's and optimises it again there, with the caller
(``numba.core.codegen.CPUCodeLibrary.finalize``). The copies are ``linkonce_odr``
(a ``prange``'s ``__gufunc__`` wrapper ``weak_odr``), and when the caller's machine
code is loaded, the JIT binds each to a definition of the same name already loaded,
if there is one. In the process that compiled the kernel there always is (the
callee's own library, optimised once), so that is what the kernel ran; a process
loading the kernel from Numba's cache has none and runs the kernel's copy, optimised
twice. LLVM regroups a float sum it may reassociate (``vecmath.add_step``) on the
second pass, so the two processes' results differed in the last bits (issue 36:
90,000 of 512 x 1024 row-normalised values, by up to 4.8e-7).

So in every library defining a function of an nbyoc kernel module, the copies linked
in are made internal before the library is optimised: its machine code defines and
calls its own copies (LLVM inlines those called once), whether the library was just
compiled or loaded from the cache. What Numba compiles for anyone else is left alone.
"""

from __future__ import annotations

import threading

#: Every kernel module's name starts so (``kernels.load_kernel_module``), and so does the
#: module part of the mangled name of every function defined there.
KERNEL_MODULE_PREFIX = "nbyoc_kernel_"

#: The linkages of the copies Numba links in: ``CPUCodeLibrary._get_module_for_linking``
#: makes a library's exported functions ``linkonce_odr``; Numba emits ``weak_odr`` ones.
_LINKED = frozenset({"linkonce_any", "linkonce_odr", "weak_any", "weak_odr"})

_LOCK = threading.Lock()


def install() -> None:
    """From now on, libraries defining functions of a kernel module keep to their own
    copies of what they link in (see the module docstring). Idempotent.

    >>> install(); install()
    """
    from numba.core.codegen import CPUCodeLibrary

    with _LOCK:
        optimize = getattr(CPUCodeLibrary, "_optimize_final_module", None)
        if optimize is None or getattr(optimize, "keeps_kernels_self_contained", False):
            return  # (a Numba without the hook: tests/runtime/test_cross_process.py tells)

        def optimize_self_contained(library):
            if defines_kernel_function(library._final_module):
                internalize_linked_copies(library._final_module)
            optimize(library)

        optimize_self_contained.keeps_kernels_self_contained = True
        CPUCodeLibrary._optimize_final_module = optimize_self_contained


def defines_kernel_function(module) -> bool:
    """Whether the LLVM ``module`` (llvmlite's) exports a function of a kernel module.

    >>> import llvmlite.binding as ll
    >>> kernel = "define void @_ZN15nbyoc_kernel_k1f() {\\n ret void\\n}"
    >>> defines_kernel_function(ll.parse_assembly(kernel))
    True
    """
    return any(
        KERNEL_MODULE_PREFIX in f.name and not f.is_declaration and f.linkage.name == "external"
        for f in module.functions
    )


def internalize_linked_copies(module) -> int:
    """Make the functions linked into the LLVM ``module`` internal; return how many.

    >>> import llvmlite.binding as ll
    >>> m = ll.parse_assembly("define linkonce_odr void @f() {\\n ret void\\n}")
    >>> internalize_linked_copies(m), m.get_function("f").linkage.name
    (1, 'internal')
    """
    count = 0
    for function in module.functions:
        if not function.is_declaration and function.linkage.name in _LINKED:
            function.linkage = "internal"
            count += 1
    return count
