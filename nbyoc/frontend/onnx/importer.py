"""Reading an ONNX model into an nbyoc Function (``nbyoc.from_onnx``; see the package
docstring for what becomes what).

Before converting anything the importer checks the whole model, so a user learns
everything that is wrong at once: the default-domain opset must be 7 to 21, and
every op type must have a converter (the error lists each missing one with its
count and domain). Reading a model never runs code from it: ONNX files are data
(protobuf), read by ``onnx`` itself; tensors are read by ``tensors.tensor_array``, which
checks their dims against their data and confines external data to the model's
directory. A model that defines one name twice is refused (ONNX graphs are in SSA
form), and every value computed while importing is checked against the limit
``folded_bytes`` (``nbyoc.limits``) before it is computed.
"""

from __future__ import annotations

import keyword
import os
import re
from collections import ChainMap, Counter

import numpy as np
import onnx
from onnx import helper

from ... import limits
from ...errors import LimitError, ModelImportError, NbyocError, NeedsConstantError
from ...ir.builder import function, var
from ...ir.nodes import Call, Expr, Function
from ...ir.symbols import symbol as size_symbol
from ...ir.traversal import post_order
from ...ir.types import tensor_types
from ...runtime.host import HostFunction
from . import size_values
from .checks import check_single_assignment, check_text
from .control_flow import nested_nodes, run_if, run_loop, run_scan, take_if
from .converters import CONVERTERS, DEFAULT_DOMAINS, converter_for
from .dtypes import onnx_dtype
from .node import Node, Value, as_expr, where_of
from .qdq import integer_products
from .size_values import is_size_array
from .tensors import tensor_array

#: The default-domain opsets the converters cover: 7 to 28 (onnx 1.23's). Versions 22 to
#: 25 of the ops converted here only added element types (bfloat16, float8, float4),
#: 27 and 28 changed Range (stash_type, for float16 sums) and Mod (floats with fmod=0),
#: which the converters follow.
MIN_OPSET, MAX_OPSET = 7, 28
#: Default-domain ops the importer takes itself, not through a converter, because they
#: convert subgraphs (``control_flow``): an ``If`` is replaced by the branch its
#: condition takes when that is known while importing, else it becomes a ``cond``;
#: a ``Loop`` or a ``Scan`` becomes a ``loop``.
IMPORTER_OPS = ("If", "Loop", "Scan")
#: The first opset of each (Scan 8 had a batch axis of its own).
_IMPORTER_SINCE = {"If": 1, "Loop": 1, "Scan": 9}


def load_model(model) -> onnx.ModelProto:
    """``model`` (a path, bytes or a ModelProto) as a ModelProto, its external data left
    unread (``tensors.tensor_array`` reads it, from inside the model's directory)."""
    if isinstance(model, onnx.ModelProto):
        return model
    try:
        if isinstance(model, (bytes, bytearray, memoryview)):
            return onnx.load_from_string(bytes(model))
        if isinstance(model, (str, os.PathLike)):
            return onnx.load(os.fspath(model), load_external_data=False)
    except OSError as e:
        raise ModelImportError(f"cannot read the ONNX model {model!r}: {e}") from None
    except Exception as e:  # protobuf's DecodeError and friends
        raise ModelImportError(f"not an ONNX model: {type(e).__name__}: {e}") from None
    raise ModelImportError(
        f"from_onnx takes a path, bytes or an onnx.ModelProto, got {type(model).__name__}"
    )


def default_opset(model: onnx.ModelProto) -> int:
    """The model's default-domain opset, checked to be one nbyoc converts."""
    versions = [o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS]
    if not versions:
        raise ModelImportError("the model imports no default-domain (ai.onnx) opset")
    opset = max(versions)
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ModelImportError(
            f"the model uses default-domain opset {opset}; nbyoc imports opsets "
            f"{MIN_OPSET} to {MAX_OPSET}"
        )
    return opset


def check_ops(graph: onnx.GraphProto, opset: int) -> None:
    """Raise one error listing every op type without a converter, with counts, the nodes
    inside subgraphs (an ``If``'s branches, a ``Loop``'s body) included."""
    missing, nested = Counter(), 0
    for n, depth in nested_nodes(graph.node):
        if not converts(n.op_type, n.domain, opset):
            missing[(n.op_type, n.domain or "ai.onnx")] += 1
            nested += depth > 0
    if missing:
        listed = ", ".join(
            f"{op} x{count} ({domain})" for (op, domain), count in sorted(missing.items())
        )
        where = (
            ""
            if not any(op in CONVERTERS or op in _IMPORTER_SINCE for op, _ in missing)
            else (f" (some exist from a later opset than this model's {opset})")
        )
        inside = f", {nested} of them inside subgraphs" if nested else ""
        raise ModelImportError(
            f"the model uses {sum(missing.values())} node(s) of op types nbyoc does not "
            f"import{where}{inside}: {listed}"
        )


def converts(op_type: str, domain: str, opset: int) -> bool:
    """Whether the importer converts nodes of ``op_type`` of ``domain`` in a model of
    default-domain ``opset`` (through a converter, or itself: ``IMPORTER_OPS``).

    >>> converts("Relu", "", 14), converts("Scan", "", 8), converts("NoSuchOp", "", 14)
    (True, False, False)
    """
    own = domain in DEFAULT_DOMAINS and opset >= _IMPORTER_SINCE.get(op_type, 10**6)
    return own or converter_for(op_type, opset, domain) is not None


def identifiers(names: list[str]) -> list[str]:
    """Valid, distinct Python identifiers for ONNX value names (``input.1`` ->
    ``input_1``), in order.

    >>> identifiers(["input.1", "1x", "x", "x", "lambda"])
    ['input_1', '_1x', 'x', 'x_1', 'lambda_']
    """
    taken: set[str] = set()
    out = []
    for name in names:
        base = re.sub(r"\W", "_", name, flags=re.ASCII) or "input"
        if base[0].isdigit():
            base = "_" + base
        if keyword.iskeyword(base):
            base += "_"
        candidate, k = base, 0
        while candidate in taken:
            k += 1
            candidate = f"{base}_{k}"
        taken.add(candidate)
        out.append(candidate)
    return out


def model_directory(model, base_dir) -> str | None:
    """The directory external data is read from: ``base_dir`` if given, else the model
    file's own directory; None for a model given as bytes or a ModelProto."""
    if base_dir is not None:
        return os.fspath(base_dir)
    if isinstance(model, (str, os.PathLike)):
        return os.path.dirname(os.path.abspath(os.fspath(model)))
    return None


def _attributes(proto, base_dir: str | None, where: str) -> dict:
    values = {}
    for attr in proto.attribute:
        value = helper.get_attribute_value(attr)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif isinstance(value, onnx.TensorProto):
            value = tensor_array(value, base_dir, f"{where}: attribute {attr.name!r}")
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode("utf-8", "replace") for v in value]
        values[attr.name] = value
    return values


def _input_shape(value_info, ident: str, shapes: dict, symbols: dict) -> tuple:
    """The shape of a graph input: its numbers, and a symbolic size for each dynamic
    dimension (one symbol per ``dim_param`` name, shared by every input naming it; one
    of its own, ``<input>_<axis>``, for an unnamed one), unless ``shapes`` fixes it
    (``None`` in ``shapes`` keeps a dimension symbolic)."""
    name = value_info.name
    tensor = value_info.type.tensor_type
    if not tensor.HasField("shape"):
        if name in shapes and all(d is not None for d in shapes[name]):
            return tuple(int(n) for n in shapes[name])
        raise ModelImportError(
            f"input {name!r} has no shape in the model: pass shapes={{{name!r}: (...)}}"
        )
    dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else
            (d.dim_param or "?") for d in tensor.shape.dim]  # fmt: skip
    shown = "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"
    if name in shapes:
        given = tuple(None if n is None else int(n) for n in shapes[name])
        if len(given) != len(dims) or any(
            isinstance(d, int) and g is not None and d != g for d, g in zip(dims, given)
        ):
            raise ModelImportError(
                f"shapes[{name!r}] = {given} does not fit the model's input {name!r} of "
                f"shape {shown} (named dims are free, numbers fixed)"
            )
        dims = [d if g is None else g for d, g in zip(dims, given)]
    return tuple(
        d if isinstance(d, int) else _symbol(d, f"{ident}_{axis}", symbols)
        for axis, d in enumerate(dims)
    )


def _symbol(dim_param: str, fallback: str, symbols: dict):
    """The symbolic size of a dynamic dimension named ``dim_param`` ("?" when unnamed):
    the same ONNX name gives the same symbol, made an identifier (``batch size`` ->
    ``batch_size``) distinct from every other name's."""
    key = dim_param if dim_param != "?" else f"?{fallback}"
    if key not in symbols:
        taken = set(symbols.values())
        base = fallback if dim_param == "?" else dim_param
        candidate = identifiers([base])[0]
        if candidate in ("min", "max", "floordiv", "fn", "Tensor"):
            candidate += "_"
        k = 0
        while candidate in taken:
            k += 1
            candidate = f"{identifiers([base])[0]}_{k}"
        symbols[key] = candidate
    return size_symbol(symbols[key])


def import_model(model, shapes: dict, constants: dict, base_dir=None, qdq="integer") -> Function:
    """The nbyoc Function of ``model`` (see ``nbyoc.from_onnx``)."""
    proto = load_model(model)
    base_dir = model_directory(model, base_dir)
    graph = proto.graph
    check_text(proto)
    opset = default_opset(proto)
    check_ops(graph, opset)
    check_single_assignment(graph)
    unknown = sorted((set(shapes) | set(constants)) - {i.name for i in graph.input})
    if unknown:
        raise ModelImportError(
            f"shapes/constants name {unknown}, which are not graph inputs "
            f"({[i.name for i in graph.input]})"
        )
    values: dict[str, Value] = {}
    for tensor in graph.initializer:
        values[tensor.name] = tensor_array(tensor, base_dir, f"initializer {tensor.name!r}")
    params, symbols = [], {}
    inputs = [i for i in graph.input if i.name not in values]
    for info, ident in zip(inputs, identifiers([i.name for i in inputs])):
        if info.name in constants:
            values[info.name] = np.asarray(constants[info.name])
            continue
        if not info.type.HasField("tensor_type"):
            raise ModelImportError(f"input {info.name!r} is not a tensor")
        dtype = onnx_dtype(info.type.tensor_type.elem_type, f"input {info.name!r}")
        p = var(ident, _input_shape(info, ident, shapes, symbols), dtype)
        params.append(p)
        values[info.name] = p
    if qdq == "integer":
        graph = integer_products(graph, lambda name: _known_array(values.get(name)))
    for proto_node in graph.node:
        _convert(proto_node, values, opset, base_dir)
    outputs = []
    for out in graph.output:
        if out.name not in values:
            raise ModelImportError(f"graph output {out.name!r} is computed by no node")
        outputs.append(as_expr(values[out.name]))
    return function(params, outputs[0] if len(outputs) == 1 else outputs)


def _known_array(value):
    return value if isinstance(value, np.ndarray) and value.dtype != object else None


def _convert(proto_node, values: dict, opset: int, base_dir: str | None) -> None:
    names = list(proto_node.input)
    missing = [n for n in names if n and n not in values]
    if missing:
        raise ModelImportError(
            f"{proto_node.op_type} node {proto_node.name!r} reads {missing}, which no earlier "
            f"node, input or initializer defines (the graph must be in topological order)"
        )
    where = where_of(proto_node.op_type, proto_node.name)
    node = Node(
        proto_node.op_type, proto_node.name, [values[n] if n else None for n in names], names,
        _attributes(proto_node, base_dir, where), opset, len(proto_node.output),
        proto_node.domain,
    )  # fmt: skip

    def convert(graph, bound: dict, scope: dict) -> list[Value]:
        """A run-time body: its inputs ``bound``, what it reads from outside ``scope``."""
        return _convert_graph(graph, ChainMap(dict(bound), scope), opset, base_dir)

    try:
        if proto_node.domain not in DEFAULT_DOMAINS or node.op_type not in IMPORTER_OPS:
            produced = _produce(node)
        elif node.op_type == "If" and isinstance(node.inputs[0], np.ndarray):
            produced = take_if(
                node, lambda graph: _convert_graph(graph, ChainMap({}, values), opset, base_dir)
            )
        else:
            run = {"If": run_if, "Loop": run_loop, "Scan": run_scan}[node.op_type]
            produced = run(node, convert, values)
    except (ModelImportError, NeedsConstantError):
        raise
    except LimitError as e:
        raise e.within(node.where) from None
    except NbyocError as e:
        raise ModelImportError(f"{node.where}: {e}") from e
    for name, value in zip(proto_node.output, produced):
        if name:
            values[name] = value


def _produce(node: Node) -> list[Value]:
    """The values of ``node``'s outputs: converted, or folded when every input is known."""
    known = [v for v in node.inputs if v is not None]
    every_known = all(isinstance(v, np.ndarray) for v in known)
    if any(is_size_array(v) for v in known) and every_known and size_values.folds(node):
        produced = size_values.fold(node)  # shape arithmetic on symbolic sizes
    else:  # (an op taking sizes as its shape, Expand, builds a tensor of symbolic shape)
        produced = converter_for(node.op_type, node.opset, node.domain)(node)
        produced = list(produced) if isinstance(produced, (list, tuple)) else [produced]
    if known and every_known:
        produced = _fold(produced)  # every input known: so is every output
    return produced


def _convert_graph(graph: onnx.GraphProto, scope: ChainMap, opset: int, base_dir) -> list[Value]:
    """The outputs of subgraph ``graph`` (a branch, a loop's body), its nodes converted
    in ``scope``: a scope of its own over the values it can read (a subgraph reads the
    values around it by name; a body run by a loop reads them as its parameters)."""
    for tensor in graph.initializer:
        scope[tensor.name] = tensor_array(tensor, base_dir, f"initializer {tensor.name!r}")
    for proto_node in graph.node:
        _convert(proto_node, scope, opset, base_dir)
    missing = [o.name for o in graph.output if o.name not in scope]
    if missing:
        raise ModelImportError(
            f"subgraph {graph.name!r}: its output(s) {missing} are computed by no node"
        )
    return [scope[o.name] for o in graph.output]


def _fold(produced: list[Value]) -> list[Value]:
    """The outputs' values, computed now (on the host) where they are expressions. Every
    value the computation makes is checked against the limit ``folded_bytes`` first."""
    # (of a symbolic shape, a value is computed when the sizes are known: at the call)
    exprs = [v for v in produced if isinstance(v, Expr) and not _symbolic(v)]
    if not exprs:
        return produced
    for call in post_order(exprs):
        if isinstance(call, Call):
            nbytes = sum(t.size * t.itemsize for t in tensor_types(call.type))
            limits.check("folded_bytes", nbytes, f"folding {call.op.name} of known values")
    results = HostFunction(function([], exprs[0] if len(exprs) == 1 else exprs))()
    results = iter(results if isinstance(results, tuple) else (results,))
    return [next(results) if isinstance(v, Expr) and not _symbolic(v) else v for v in produced]


def _symbolic(expr: Expr) -> bool:
    return any(t.symbols for t in tensor_types(expr.type))
