"""``nbyoc.partition``: annotate, merge and partition in one call.

>>> import nbyoc
>>> nbyoc.register_op_support("doc_pipeline", "add")
>>> nbyoc.register_op_support("doc_pipeline", "subtract")
>>> nbyoc.register_op_support("doc_pipeline", "multiply")
>>> a, b, c, d = (nbyoc.var(n, (10, 10)) for n in "abcd")
>>> f = nbyoc.function([a, b, c, d], ((a + b) - c) * d)
>>> list(nbyoc.partition(f, "doc_pipeline").functions)
['main', 'doc_pipeline_0']
>>> list(nbyoc.partition(f, "doc_pipeline", merge=False).functions)
['main', 'doc_pipeline_0', 'doc_pipeline_1', 'doc_pipeline_2']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import NbyocError
from ..ir.nodes import Function, IRModule
from .annotate import annotate_target
from .composite import merge_composite
from .constants import fold_constant_layout
from .conv_transpose import legalize_conv_transpose
from .fold import fold_batch_norm
from .legalize import legalize
from .merge import merge_compiler_regions
from .partition import partition_graph
from .regions import Regions
from .support import OperatorSupport

#: The default ``max_size`` of a region, in calls. A region is compiled as one unit, and
#: compilers take longer than linear in a unit's size (llvm's kernel for 200 residual MLP
#: blocks, 1200 calls in one region, took 36 s against 11 s for half of it); capped, a
#: graph of any size compiles in time linear in its size, and repeated pieces of equal
#: structure share one compiled kernel. Each cut costs a value passed between regions.
MAX_REGION_CALLS = 256


def partition(
    func: Function,
    backends: str | Sequence[str],
    merge: bool = True,
    min_size: int = 1,
    bind_constants: bool = True,
    max_size: int | None = MAX_REGION_CALLS,
) -> IRModule:
    """Partition ``func`` for ``backends`` (one name, or several in priority order).

    Batch norms with constant statistics are first folded into the convs before them
    (``fold_batch_norm``), the sub-graphs the backends' patterns match become composite
    calls (``merge_composite``, ``nbyoc.register_patterns``), transposed convolutions
    no backend takes become ordinary convs where one takes those
    (``legalize_conv_transpose``), ops defined by decomposition that no backend takes are
    decomposed (``legalize``), and layout ops of constants are laid out once
    (``fold_constant_layout``).
    ``merge=False`` keeps every supported call in its own external function;
    regions with fewer than ``min_size`` calls stay on the host; merged regions hold
    at most ``max_size`` calls (``None``: no cap; see ``MAX_REGION_CALLS``);
    ``bind_constants=False`` passes constants to external functions as
    parameters instead of binding them inside.
    """
    stages = partition_stages(func, backends, merge, min_size, max_size)
    return partition_graph(stages.regions, bind_constants)


@dataclass(frozen=True, eq=False)
class Stages:
    """What ``partition`` decides before it cuts: the ``support`` it asked, the function
    the regions are over (batch norms folded, composites made, ops legalised), the
    regions as annotated (each call alone) and as kept (merged, small ones dropped)."""

    support: OperatorSupport
    annotated: Regions
    regions: Regions


def partition_stages(
    func: Function,
    backends: str | Sequence[str],
    merge: bool = True,
    min_size: int = 1,
    max_size: int | None = MAX_REGION_CALLS,
) -> Stages:
    """The steps of ``partition`` up to its regions (``nbyoc.explain`` reports them), with
    the same options."""
    support = OperatorSupport(backends)  # (refuses a backend it does not know)
    if not _positive_int(min_size):
        raise NbyocError(f"min_size must be a positive int, got {min_size!r}")
    if max_size is not None and not _positive_int(max_size):
        raise NbyocError(f"max_size must be a positive int or None, got {max_size!r}")
    # (composites before legalize: a pattern may take an op legalize would decompose)
    func = merge_composite(fold_batch_norm(func), support)
    # (layout of constants folded after legalize, which makes some: Gemm's transposed
    # weight, conv_transpose's phase sub-kernels)
    func = legalize(legalize_conv_transpose(func, support), support)
    annotated = regions = annotate_target(fold_constant_layout(func), support)
    if merge:
        regions = merge_compiler_regions(regions, max_size)
    if min_size > 1:
        regions = regions.without_small(min_size)
    return Stages(support, annotated, regions)


def _positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
