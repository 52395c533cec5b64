"""The ops the llvm kernel runs as stages of their own (not elementwise loop nests,
not views), each with its emitter: ``emitter(node, operand arrays, destination
array, parallel)`` returns the lines writing the node's whole result into the
destination. Emitters in ``EPILOGUES`` also take ``epilogue=``: the elementwise
ops after them run on each block of their result while it is in cache.

>>> sorted(EPILOGUES)
['conv', 'matmul']
"""

from __future__ import annotations

from .conv import conv_stage
from .gemm import matmul_stage, takes_epilogue
from .reduce import arg_stage, concatenate_stage, reduce_stage
from .windows import gather_stage, pool_stage, resize_stage

#: op -> emitter: with rules.SCALAR_RULES and the views, what the backend supports.
#: (concatenate's also takes its operands' layouts and a name for its tables.)
STAGES = {
    "sum": reduce_stage,
    "mean": reduce_stage,
    "max": reduce_stage,
    "min": reduce_stage,
    "prod": reduce_stage,
    "argmax": arg_stage,
    "argmin": arg_stage,
    "matmul": matmul_stage,
    "conv": conv_stage,
    "concatenate": concatenate_stage,
    "gather": gather_stage,
    "max_pool": pool_stage,
    "avg_pool": pool_stage,
    "resize": resize_stage,
}

#: op -> predicate: whether a call's emitter takes an epilogue; the leading output
#: axes it fixes per block are its batch and row axes (matmul) or image and channel
#: (conv).
EPILOGUES = {"matmul": takes_epilogue, "conv": lambda call: True}
#: Ops whose emitter returns a ``stages.StageBody``: a stage function of their own, which
#: may share a parallel loop with the stages around it.
FUNCTION_STAGES = (*EPILOGUES, "max_pool", "avg_pool")
