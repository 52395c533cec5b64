"""The typed graph IR: nodes, types, ops, text and JSON forms, structural comparison.

>>> from nbyoc import ir
>>> x = ir.Var("x", ir.TensorType((3,), "int32"))
>>> ir.Function([x], x * x).type
fn (Tensor[(3,), int32]) -> Tensor[(3,), int32]
"""

from . import ops
from .dtypes import DTYPES, promote
from .nodes import (
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    IRModule,
    Node,
    Tuple,
    TupleGetItem,
    Var,
)
from .op import Op, get_op, list_ops, register_op
from .parser import parse
from .printer import astext
from .serialize import from_json, to_json
from .structural import structural_equal, structural_hash
from .traversal import operands, post_order
from .types import FuncType, TensorType, TupleType, Type
from .verify import verify

__all__ = [
    "DTYPES", "Call", "Constant", "Expr", "FuncType", "Function", "GlobalVar", "IRModule",
    "Node", "Op", "TensorType", "Tuple", "TupleGetItem", "TupleType", "Type", "Var", "astext",
    "from_json", "get_op", "list_ops", "operands", "ops", "parse", "post_order", "promote",
    "register_op", "structural_equal", "structural_hash", "to_json", "verify",
]  # fmt: skip
