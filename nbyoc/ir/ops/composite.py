"""``composite``: a function applied as one op, for a backend's fused kernel.

``composite(*operands, Composite="vendor.conv_bias_relu", body=f)`` is ``f(*operands)``:
the ``body`` is what the composite means, ``Composite`` names the kernel a backend maps
it to. ``nbyoc.transform.merge_composite`` makes these from a backend's pattern table
(``nbyoc.register_patterns``), so that the backend's codegen sees one call where the
graph had several. The host (and so every backend that does not take it) runs the body
with the NumPy references; the text form, JSON and archives carry it in full.

>>> import nbyoc, numpy as np
>>> x, b, p, q = (nbyoc.var(n, (3,)) for n in "xbpq")
>>> body = nbyoc.function([p, q], nbyoc.relu(p + q))
>>> y = nbyoc.composite(x, b, Composite="doc.bias_relu", body=body)
>>> y.type, y.attrs["Composite"]
(Tensor[(3,), float32], 'doc.bias_relu')
>>> run = nbyoc.compile(nbyoc.function([x, b], y), backend="host")
>>> run(np.array([-1, 0, 1], np.float32), np.ones(3, np.float32)).tolist()
[0.0, 1.0, 2.0]
"""

from __future__ import annotations

from ...errors import NbyocTypeError
from ..annotations import Operand
from ..attrs import Attr
from ..builder import call_op
from ..nodes import Expr, Function
from ..op import Op, describe, register_op
from .control import _runner


def _composite_rule(types, attrs):
    body = attrs["body"]
    want = [p.type for p in body.params]
    if list(types) != want:
        raise NbyocTypeError(
            f"composite {attrs['Composite']}: its body takes ({describe(want)}), but is given "
            f"({describe(types)})"
        )
    return body.ret_type, attrs


def _composite_reference(*operands, Composite, body):
    # (the host gives the body ready to run, made once per plan; a bare Function is run
    # by a host function made here)
    return _runner(body)[1](*operands)


# The body checks its own operands' dtypes, op by op: the composite only passes values
# in, so it takes the narrow dtypes as a layout op does (moves_only).
register_op(Op("composite", None, _composite_rule, _composite_reference, "composite",
               "``body(*operands)`` as one op, named ``Composite`` for the backend whose "
               "fused kernel it is (``nbyoc.register_patterns``)",
               attrs={"Composite": Attr("str"), "body": Attr("function")},
               moves_only=True))  # fmt: skip


def composite(*operands: Operand, Composite: str, body: Function) -> Expr:
    """``body(*operands)`` as one call named ``Composite`` (see the module docstring);
    the body takes the operands' types."""
    return call_op("composite", *operands, Composite=Composite, body=body)
