"""Graph passes: which backend runs what.

``fold_batch_norm`` folds constant batch norms into the convs before them,
``merge_composite`` makes each sub-graph a backend's pattern matches one composite call
(``patterns``: the pattern language; ``register_patterns``: each backend's table),
``legalize`` decomposes ops defined by decomposition that no target backend takes,
``legalize_conv_transpose`` makes a transposed convolution ordinary convs (one per
output phase) for a backend that lowers conv,
``annotate_target`` tags each op call with a backend, ``merge_compiler_regions`` joins
neighbouring calls of one backend into regions (never into a cycle),
``partition_graph`` lifts each region into an external function, and
``partition`` runs all seven. ``support`` holds what each backend takes
(``OperatorSupport``: the passes ask it, and it says why a backend refuses a call).
Each pass returns new IR; ``verify`` checks it.
"""

from .annotate import annotate_target
from .composite import merge_composite
from .conv_transpose import legalize_conv_transpose
from .fold import fold_batch_norm
from .legalize import legalize
from .merge import merge_compiler_regions
from .partition import partition_graph
from .pattern_table import register_patterns
from .pipeline import partition
from .regions import Regions
from .support import OperatorSupport, register_op_support

__all__ = [
    "OperatorSupport",
    "Regions",
    "annotate_target",
    "fold_batch_norm",
    "legalize",
    "legalize_conv_transpose",
    "merge_compiler_regions",
    "merge_composite",
    "partition",
    "partition_graph",
    "register_op_support",
    "register_patterns",
]
