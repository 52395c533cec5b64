"""The ``llvm`` backend (the default): each external function becomes one fused
Numba ``@njit`` kernel (see ``lower`` for the lowering, ``nbyoc.codegen.llvm.module``
for calling and caching).

It takes the ops its lowering has a rule for (``lowerable_ops``: the elementwise
ops of ``rules.SCALAR_RULES``, the stage ops of ``ops.STAGE_RULES`` - reductions, scans,
matmul, conv, pools... - and reshape, transpose and slice as views). Float
matmuls of matrices of any size run as register-blocked tiles in the kernel (``gemm``);
integer ones and those with a 1-D operand only while small (``gemm.matmul_supported``).
conv is taken in float32 and float64 (``conv``); lstm, gru and rnn in every float dtype,
a whole call in one stage (``recurrent``). An op without a rule runs elsewhere.

Codegen options: ``fuse`` (default True; False gives one loop per node) and
``parallel_threshold`` (elements from which a stage runs in parallel).

>>> import nbyoc
>>> a = nbyoc.var("a", (2, 2))
>>> nbyoc.codegen.supports("llvm", a @ a), nbyoc.codegen.supports("llvm", nbyoc.exp(a))
(True, True)
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

from ...errors import NbyocError
from ...ir.nodes import Call, Function
from ...ir.ops.recurrent import CELLS
from ...ir.types import tensor_types
from ...runtime.module import builtin_module_class
from ...transform.support import register_op_support
from ..registry import register_codegen
from .conv import conv_supported
from .gemm import LOOP_MAX_WORK, matmul_supported
from .ops import STAGE_RULES
from .recurrent import recurrent_supported
from .rules import NUMBA_TYPES, SCALAR_RULES, storage_dtype
from .schedule import VIEWS

BACKEND = "llvm"
#: Stages with at least this many elements run their outer loop with prange. Measured
#: (bench/test_llvm_parallel.py, 2 cores): parallel breaks even at 2**14 elements and is
#: 2x faster at 2**16; launching the threads costs about 2 us.
PARALLEL_THRESHOLD = 1 << 15


@register_codegen(BACKEND)
def llvm_codegen(
    func: Function,
    fuse: bool = True,
    parallel_threshold: int | None = None,
    size_generic: bool = False,
):
    """The llvm codegen: a fused Numba kernel, compiled (or loaded from the cache). A
    region of a module being built is weighed against the module's other llvm regions
    (``lower.MODEL_PROGRAM_MIN_WORK``). ``size_generic``: the function is one binding of
    a function with symbolic sizes, built again for each other binding; it is lowered as
    a program (``lower``) whatever its work, so that every binding runs the same stage
    functions and the same executor, and a new size compiles nothing."""
    if not isinstance(size_generic, bool):
        raise NbyocError(f"llvm option size_generic must be True or False, got {size_generic!r}")
    options = {} if parallel_threshold is None else {"parallel_threshold": parallel_threshold}
    work = model_work()
    if size_generic:
        from .lower import MODEL_PROGRAM_MIN_WORK

        work = max(work, MODEL_PROGRAM_MIN_WORK)
    _lower_model_ahead(
        fuse, PARALLEL_THRESHOLD if parallel_threshold is None else parallel_threshold, work
    )
    return builtin_module_class(BACKEND)(func, fuse=fuse, model_work=work, **options)


def _lower_model_ahead(fuse: bool, parallel_threshold, work: int) -> None:
    """At the first llvm region of a module being built with several, lower them all
    and send their stage modules to the compile workers at once (``module.lower_ahead``):
    the workers then never wait for the next region's lowering, and this process
    compiles a later region's modules while a worker finishes one of this region's."""
    from ...runtime.llvm.compile_workers import worker_count
    from ..build import module_being_built

    module = module_being_built()
    global _LOWERED_AHEAD
    if module is None or _LOWERED_AHEAD() is module:
        return
    _LOWERED_AHEAD = weakref.ref(module)
    regions = [f for f in module.functions.values() if f.attrs.get("Compiler") == BACKEND]
    valid = isinstance(parallel_threshold, int) and parallel_threshold >= 1
    if len(regions) > 1 and valid and worker_count():  # (else the module says what is wrong)
        from .module import lower_ahead

        lower_ahead(regions, fuse, parallel_threshold, work)


def _no_module() -> None:
    """What a weak reference to no module gives (before any build)."""
    return None


#: The last module whose regions were lowered ahead (a weak reference).
_LOWERED_AHEAD: Callable[[], object] = _no_module


def model_work() -> int:
    """The work of the llvm regions of the module being built (``build``), 0 outside a
    build.

    >>> model_work()
    0
    """
    from ..build import module_being_built
    from .lower import region_work

    module = module_being_built()
    if module is None:
        return 0
    global _MODEL_WORK
    weighed = _MODEL_WORK  # (one read: another thread may weigh another module meanwhile)
    if weighed[0]() is not module:  # (once per build, not once per region)
        regions = [f for f in module.functions.values() if f.attrs.get("Compiler") == BACKEND]
        weighed = _MODEL_WORK = (weakref.ref(module), sum(region_work(f) for f in regions))
    return weighed[1]


#: The last module ``model_work`` weighed (a weak reference: it holds the model's
#: weights), and its work.
_MODEL_WORK: tuple = (_no_module, 0)


def compiled_kernel(
    func: Function, fuse: bool = True, parallel_threshold: int = PARALLEL_THRESHOLD
):
    """``func``'s llvm kernel, compiled or found in the caches: a ``CompiledKernel``
    (``module.py``) whose ``kernel`` takes the inputs, then the outputs, then the scratch
    buffers and stage addresses of its ``lowered`` plan. For other backends that run
    llvm's kernels (examplejson runs one per node); imports Numba on first use.

    >>> import nbyoc
    >>> x = nbyoc.var("x", (3,))
    >>> compiled_kernel(nbyoc.function([x], x * 2.0)).lowered.kernel
    'kernel'
    """
    from .module import compiled_kernel as compile_or_find

    return compile_or_find(func, fuse, parallel_threshold)


def lowerable_ops() -> list[str]:
    """The ops the llvm lowering has a rule for (its elementwise scalar rules, its stage
    emitters, its views): exactly the ops the backend claims.

    >>> "add" in lowerable_ops() and "matmul" in lowerable_ops()
    True
    """
    return [*SCALAR_RULES, *STAGE_RULES, *VIEWS]


def support_rules() -> dict:
    """op -> the predicate under which llvm takes a call of it: a result with elements
    (``nonempty``), dtypes a kernel holds (``numba_dtypes``: float16 and bfloat16 are
    computed in float32, see ``rules.EMULATED``) and the op's own ``CONDITIONS``. Other
    backends that run llvm's kernels (examplejson) claim ops by this table.

    >>> import nbyoc
    >>> x = nbyoc.var("x", (4, 4))
    >>> support_rules()["matmul"](x @ x), support_rules()["add"](x + 1.0)
    (True, True)
    """
    return {op: _predicate(op) for op in lowerable_ops()}


def _predicate(op: str):
    extra = CONDITIONS.get(op)

    def takes(call: Call) -> bool | str:
        if not nonempty(call):
            return "its result is empty (nothing to compute)"
        unheld = unheld_dtypes(call)
        if unheld:
            return f"dtype {', '.join(unheld)} not supported (a kernel cannot hold it)"
        if extra is not None and not extra(call):
            return CONDITION_REASONS[op]
        return True

    return takes


def unheld_dtypes(call: Call) -> list[str]:
    """The dtypes of ``call``'s operands and result that a kernel cannot hold (see
    ``numba_dtypes``), each once.

    >>> import nbyoc
    >>> unheld_dtypes(nbyoc.cast(nbyoc.var("x", (2,), "float8_e4m3fn"), "float32"))
    ['float8_e4m3fn']
    """
    types = [*(a.type for a in call.args), *tensor_types(call.type)]
    return list(dict.fromkeys(t.dtype for t in types if storage_dtype(t.dtype) not in NUMBA_TYPES))


def numba_dtypes(call: Call) -> bool:
    """True if a kernel can hold every operand and result of ``call``: each dtype Numba
    has, or emulates in float32 (``rules.EMULATED``); not the narrow dtypes, which run
    on the host.

    >>> import nbyoc
    >>> x = nbyoc.var("x", (2,), "float8_e4m3fn")
    >>> numba_dtypes(nbyoc.cast(x, "float32")), numba_dtypes(nbyoc.var("y", (2,), "bfloat16") + 1)
    (False, True)
    """
    return not unheld_dtypes(call)


def nonempty(call: Call) -> bool:
    """True if the call's result has elements. Numba's reshape of an empty array can
    fail ("total size of new array must be unchanged"; found by the random-graph tests,
    (1, 0) -> (0,), and by ONNX's empty-set reduction cases, whose elementwise nests
    over (2, 0, 4) bind empty scratch views), and an empty result has nothing to
    compute, so such calls run elsewhere. A call with an empty operand and a result
    (a sum over an axis of length 0) stays: its kernel only loops zero times. A symbolic
    size is taken to be positive (a binding that empties the call is built from its
    concrete function)."""
    size = call.type.size
    return size > 0 if isinstance(size, int) else True


#: Ops llvm lowers but takes only under a further condition. (A recurrent call with
#: symbolic sizes is taken: its stage reads every size at run time, so each binding's
#: kernel runs the one stage function; ``recurrent``.)
CONDITIONS = {
    "matmul": matmul_supported,
    "conv": conv_supported,
    **{cell: recurrent_supported for cell in CELLS},
}
#: What ``nbyoc.explain`` says when a condition refuses a call.
CONDITION_REASONS = {
    "matmul": "a matmul of integers or with a 1-D operand this large runs elsewhere (llvm "
    "tiles only float products of matrices; others of more than "
    f"{LOOP_MAX_WORK} multiply-adds are not lowered)",
    "conv": "llvm lowers conv in float32 and float64, with every operand of that dtype",
    **{cell: f"llvm lowers {cell} in float dtypes only" for cell in CELLS},
}

for _op, _condition in support_rules().items():
    register_op_support(BACKEND, _op, _condition)
