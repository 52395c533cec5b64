"""The ops the llvm kernel runs as stages of their own (not elementwise loop nests,
not views), one ``StageRule`` each: its emitter and how the lowering treats it.
Adding a stage op is a row here; ``emit`` and ``schedule`` read only the rule's
fields, never the op's name.

An emitter is ``emit(node, operand arrays, destination array, parallel)`` and
returns the lines writing the node's whole result into the destination; a
*function* stage's returns a ``stages.StageBody`` instead (a stage function of its
own, which may share a parallel loop with the stages around it), and one that takes
an epilogue also gets the elementwise ops after it, run on each block of its result
while it is in cache.

>>> sorted(op for op, rule in STAGE_RULES.items() if rule.epilogue is not None)
['conv', 'matmul']
>>> STAGE_RULES["sum"].blocks, STAGE_RULES["conv"].function
(True, True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...ir.nodes import Call
from ...ir.ops.recurrent import CELLS
from .conv import PARALLEL_MIN_WORK as CONV_PARALLEL_MIN_WORK
from .conv import conv_packs, conv_stage
from .gemm import matmul_packs, matmul_stage, takes_epilogue
from .recurrent import (
    length_checks,
    recurrent_packs,
    recurrent_scratch,
    recurrent_stage,
    recurrent_work,
)
from .reduce import arg_stage, column_reduction, concatenate_stage, reduce_stage
from .reductions import REDUCTIONS
from .scan import SCANS, scan_stage
from .stages import StageBody
from .windows import (
    gather_checks,
    gather_stage,
    gather_tasks,
    pool_stage,
    resize_stage,
    resize_tasks,
)


@dataclass(frozen=True)
class StageRule:
    """How one stage op is lowered.

    - ``emit``: its emitter (see the module docstring).
    - ``function``: the emitter returns a ``StageBody``, a stage function of its own.
    - ``epilogue``: whether a call of it takes the elementwise ops after it as an
      epilogue (None: never). The leading output axes it fixes per block are its batch
      and row axes (matmul) or image and channel (conv).
    - ``row_epilogue`` / ``plane_epilogue``: the flat forms its epilogue may take
      (``epilogue.FlatRows``: a tiled product's short rows as flat blocks;
      ``epilogue.FlatPlanes``: each (image, channel) plane walked flat).
    - ``blocks``: it reads its one operand as (outer, reduced, inner) blocks
      (``reduce``): a strided operand is copied contiguous first, it runs in parallel by
      the operand's size, and its steps come from ``rules``' row helpers.
    - ``layouts``: the emitter also takes each operand's layout (contiguous or not) and
      a name for the module-level tables it defines (concatenate), and returns them.
    - ``tasks``: when it runs in parallel, the node as a stage function of tasks over
      its operand and result (a ``StageBody``, sizes read at run time), or None to
      emit it as loops in the kernel (``reduce.column_reduction``).
    - ``work``: the multiply-adds of a call, for an op doing many per element of its
      result (None: ``call_work``'s elements read or written).
    - ``checks``: with ``tasks`` or ``function``, the kernel lines that run before the
      stage function (given the node and its operands' names): checks that raise, which
      no stage in a driver's parallel loop may do (a gather's of its indices, a
      recurrence's of its sequence lengths).
    - ``scratch``: the (dtype, elements) of each scratch array a function stage takes
      for its own work, after its operands (``buffers.Scratch``: placed by the buffer
      plan, so the stage allocates nothing; a recurrence's projections, per-step sums
      and states).
    - ``by_work``: a function stage runs its tasks in parallel by its ``work``, not by
      its result's size (a recurrence's result is small beside the products it does).
    - ``parallel_work``: a function stage whose ``work`` reaches this many (and the
      kernel's parallel threshold) runs its tasks in parallel whatever its result's size
      (a conv on a small map with many channels: ``conv.PARALLEL_MIN_WORK``); 0: by
      its result's size only.
    - ``packs``: given a function stage's call and an operand's position, the array
      its stage takes in place of that operand when it is a constant, computed once at
      lowering (a recurrence's weights in its tiles' panels), or None.
    """

    emit: Callable
    function: bool = False
    epilogue: Callable[[Call], bool] | None = None
    row_epilogue: bool = False
    plane_epilogue: bool = False
    blocks: bool = False
    layouts: bool = False
    tasks: Callable[[Call], StageBody | None] | None = None
    work: Callable[[Call], int] | None = None
    checks: Callable[[Call, list[str]], list[str]] | None = None
    scratch: Callable[[Call], list[tuple[str, int]]] | None = None
    by_work: bool = False
    packs: Callable[[Call, int], object] | None = None
    parallel_work: int = 0


def _product_work(call: Call) -> int:
    """A matmul's multiply-adds: each result element sums its row's ``k`` products."""
    return call.type.size * call.args[0].type.shape[-1]


def _conv_work(call: Call) -> int:
    """A conv's multiply-adds: each result element sums a window over its group's
    input channels, as many as one filter's weights."""
    weights = call.args[1].type
    return call.type.size * (weights.size // max(weights.shape[0], 1))


STAGE_RULES: dict[str, StageRule] = {
    **{op: StageRule(reduce_stage, blocks=True, tasks=column_reduction) for op in REDUCTIONS},
    "argmax": StageRule(arg_stage, blocks=True),
    "argmin": StageRule(arg_stage, blocks=True),
    **{op: StageRule(scan_stage, blocks=True) for op in SCANS},
    "matmul": StageRule(
        matmul_stage,
        function=True,
        epilogue=takes_epilogue,
        row_epilogue=True,
        work=_product_work,
        packs=matmul_packs,
    ),
    "conv": StageRule(
        conv_stage,
        function=True,
        epilogue=lambda call: True,
        plane_epilogue=True,
        work=_conv_work,
        parallel_work=CONV_PARALLEL_MIN_WORK,
        packs=conv_packs,
    ),
    **{
        cell: StageRule(
            recurrent_stage,
            function=True,
            work=recurrent_work,
            checks=length_checks,
            scratch=recurrent_scratch,
            by_work=True,
            packs=recurrent_packs,
        )
        for cell in CELLS
    },
    "max_pool": StageRule(pool_stage, function=True),
    "avg_pool": StageRule(pool_stage, function=True),
    "concatenate": StageRule(concatenate_stage, layouts=True),
    "gather": StageRule(gather_stage, tasks=gather_tasks, checks=gather_checks),
    "resize": StageRule(resize_stage, tasks=resize_tasks),
}


def runs_epilogue(node: Call) -> bool:
    """Whether ``node`` is a stage op whose emitter takes the nest after it as its
    epilogue."""
    rule = STAGE_RULES.get(node.op.name)
    return rule is not None and rule.epilogue is not None and rule.epilogue(node)


def is_function_op(name: str) -> bool:
    """Whether op ``name`` is emitted as a stage function of its own (``StageRule.function``)."""
    rule = STAGE_RULES.get(name)
    return rule is not None and rule.function


def call_work(node: Call) -> int:
    """The work of one call, in elements: a stage op's multiply-adds where its rule
    counts them (``StageRule.work``), else the elements it reads or writes, whichever
    is more (a reduction reads many for each it writes).

    >>> import nbyoc
    >>> x, w = nbyoc.var("x", (1, 8, 10, 10)), nbyoc.var("w", (4, 8, 3, 3))
    >>> call_work(nbyoc.conv(x, w, pads=[1, 1, 1, 1])), call_work(nbyoc.sum(x, axis=1))
    (28800, 800)
    """
    rule = STAGE_RULES.get(node.op.name)
    if rule is not None and rule.work is not None:
        return rule.work(node)
    return max(node.type.size, sum(getattr(a.type, "size", 0) for a in node.args))
