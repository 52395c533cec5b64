"""The ``examplejson`` backend's codegen: ExampleJSON text, the BYOC guide's graph format.

The guide's form, which stays valid and means the same::

    subgraph_0
      input 0 10 10
      add 4 inputs: 0 1 shape: 10 10

A line holding one name starts a subgraph; ``input <id> <dims>`` declares an
input; ``<op> <id> inputs: <ids> shape: <dims>`` a computation. The guide's op
names ``add``, ``sub``, ``mul`` are used for those three; every other op uses
its nbyoc name. Extensions, all optional keywords after the guide's fields:

- ``dtype: <dtype>`` on inputs and ops (default float32, the guide's type);
- op attributes as ``<name>: <values>``, written by the attribute's kind
  (``nbyoc.ir.attrs``): ``axis: 1 keepdims: 0``, ``newshape: 4 25``,
  ``alpha: 0.01``, ``mode: reflect``, ``to: float16``, ``none`` for None; an
  attribute named like a node key is prefixed (``attr.shape: 3 6``);
- ``const <id> shape: <dims> dtype: <dtype> data: <base64>`` (little-endian);
- ``output <ids>``: the subgraph's results, when they are not just its last node.

>>> import nbyoc
>>> a, b = nbyoc.var("a", (2, 2)), nbyoc.var("b", (2, 2))
>>> ext = nbyoc.function([a, b], a - b).with_attrs(global_symbol="examplejson_0")
>>> print(to_examplejson(ext))
examplejson_0
  input 0 2 2
  input 1 2 2
  sub 2 inputs: 0 1 shape: 2 2
"""

from __future__ import annotations

import base64

from ...errors import CompileError
from ...ir.nodes import Call, Constant, Expr, Function, Tuple, Var
from ...ir.op import Op
from ...ir.traversal import post_order

#: The guide's names for three ops; the others keep their nbyoc names.
GUIDE_NAMES = {"add": "add", "subtract": "sub", "multiply": "mul"}
FROM_GUIDE = {v: k for k, v in GUIDE_NAMES.items()}


def _dims(shape) -> str:
    """`` 10 10`` for (10, 10), nothing for a 0-d shape."""
    return "".join(f" {d}" for d in shape)


#: The keys of a node line; an op attribute of one of these names is written "attr.<name>:".
NODE_KEYS = ("inputs", "shape", "dtype")
ATTR_PREFIX = "attr."


def _attrs(call: Call) -> str:
    """`` key: tokens`` per attribute, each written by its kind (``nbyoc.ir.attrs``)."""
    parts = []
    for key, value in call.attrs.items():
        tokens = call.op.attrs[key].to_tokens(value)
        written = ATTR_PREFIX + key if key in NODE_KEYS else key
        parts.append(" ".join([f"{written}:", *tokens]))
    return (" " + " ".join(parts)) if parts else ""


def to_examplejson(func: Function) -> str:
    """The ExampleJSON text of one external function (its ``global_symbol`` names it)."""
    name = func.attrs.get("global_symbol", "subgraph_0")  # its grammar: nbyoc.ir.names
    outputs = list(func.body.fields) if isinstance(func.body, Tuple) else [func.body]
    ids: dict[Expr, int] = {}
    lines = [name]
    for p in func.params:
        ids[p] = len(ids)
        dtype = "" if p.type.dtype == "float32" else f" dtype: {p.type.dtype}"
        lines.append(f"  input {ids[p]}{_dims(p.type.shape)}{dtype}")
    for node in post_order(outputs):
        if node in ids:
            continue
        if isinstance(node, Var):
            raise CompileError(f"free variable %{node.name_hint} in @{name}")
        ids[node] = len(ids)
        t = node.type
        if isinstance(node, Constant):
            data = base64.b64encode(node.data.astype(node.data.dtype.newbyteorder("<")).tobytes())
            lines.append(
                f"  const {ids[node]} shape:{_dims(t.shape)} dtype: {t.dtype} data: {data.decode()}"
            )
            continue
        if not isinstance(node, Call) or not isinstance(node.op, Op):
            raise CompileError(f"ExampleJSON cannot express {node!r} in @{name}")
        op = GUIDE_NAMES.get(node.op.name, node.op.name)
        dtype = "" if t.dtype == "float32" else f" dtype: {t.dtype}"
        inputs = " ".join(str(ids[a]) for a in node.args)
        lines.append(
            f"  {op} {ids[node]} inputs: {inputs} shape:{_dims(t.shape)}{dtype}{_attrs(node)}"
        )
    if len(ids) == len(func.params):
        # The format names a subgraph's outputs among its nodes; inputs alone are none.
        raise CompileError(f"@{name} computes nothing: ExampleJSON needs at least one node")
    last = max(ids.values())
    if [ids[o] for o in outputs] != [last]:
        lines.append(f"  output {' '.join(str(ids[o]) for o in outputs)}")
    return "\n".join(lines)
