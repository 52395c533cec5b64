"""A small graph around one call of an op: the call from its generator
(``nbyoc.testing.calls``), some of its operands computed from parameters by an
elementwise step rather than read from them, and its result sometimes passed on to
another step, so that a backend meets the op inside a fused region as well as alone.

>>> import nbyoc
>>> from nbyoc.testing.choices import RandomChoices
>>> print(op_case("add", "int8", RandomChoices(seed=6)).func)
fn (%p0: Tensor[(), int8], %p1: Tensor[(), int8]) -> Tensor[(), int8] {
  %0 = negative(%p1) /* Tensor[(), int8] */;
  %1 = add(%0, %p0) /* Tensor[(), int8] */;
  relu(%1) /* Tensor[(), int8] */
}
>>> case = op_case("matmul", "float32", RandomChoices(seed=3))
>>> nodes = nbyoc.ir.post_order([case.func.body])
>>> case.call.op.name, case.dtype, any(n is case.call for n in nodes)
('matmul', 'float32', True)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import NbyocError, NbyocTypeError
from ..ir.builder import call_op, function, var
from ..ir.dtypes import dtype_info
from ..ir.nodes import Call, Function
from .calls import GENERATORS
from .choices import Choices


class NoGenerator(NbyocError):
    """The test kit has no generator for this op (``nbyoc.testing.calls.GENERATORS``)."""


@dataclass(frozen=True, eq=False)  # (IR nodes refuse ==)
class OpCase:
    """A generated graph ``func`` around ``call``, a call of ``op`` on ``dtype``
    operands; ``seed`` seeds its input arrays (``random_inputs(func, seed)``)."""

    op: str
    dtype: str
    func: Function
    call: Call
    seed: int


#: Elementwise steps that keep a value's dtype and shape, by dtype kind: what computes an
#: operand from a parameter, or passes a result on.
STEPS = {
    "float": ["negative", "abs", "relu"],
    "int": ["negative", "abs", "relu"],
    "uint": ["twice", "relu"],
    "bool": ["logical_not"],
}


def step(c: Choices, value):
    """``value`` through one of ``STEPS`` (``value`` itself where none fits)."""
    name = c.choice(STEPS[dtype_info(value.type.dtype).kind])
    try:
        return call_op("add", value, value) if name == "twice" else call_op(name, value)
    except NbyocTypeError:
        return value


def op_case(op: str, dtype: str, c: Choices, context: bool = True) -> OpCase:
    """A graph around one call of ``op`` on ``dtype`` operands, decided by ``c``; with
    ``context``, operands and result may pass through elementwise steps (``STEPS``).
    Raises ``NbyocTypeError`` where the op's type rule refuses what was drawn (the
    dtype, mostly), ``NoGenerator`` for an op the kit cannot generate."""
    generate = GENERATORS.get(op)
    if generate is None:
        raise NoGenerator(
            f"no case generator for op {op!r} (nbyoc.testing.calls.GENERATORS); its "
            f"calls are tested where a model's cases use it (onnx=True)"
        )
    params = []

    def operand(shape, dtype=dtype):
        p = var(f"p{len(params)}", shape, dtype)
        params.append(p)
        return step(c, p) if context and c.integer(0, 2) == 0 else p

    call = generate(op, c, dtype, operand)
    outputs = [call]
    if context and c.boolean():
        passed_on = step(c, call)
        outputs = [passed_on] if c.boolean() else [call, passed_on]
    func = function(params, outputs[0] if len(outputs) == 1 else outputs)
    return OpCase(op, dtype, func, call, c.integer(0, 2**16))
