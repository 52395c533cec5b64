"""Shape arithmetic on symbolic sizes, folded while importing.

A model with a dynamic dimension computes with its shape: ``Shape`` of a tensor of
type ``(n, 3, h, w)`` gives the size array ``[n, 3, h, w]``, which ``Gather``,
``Concat``, ``Mul`` and friends turn into a ``Reshape`` target or ``Slice`` bounds.
Such a value is a NumPy array of ``dtype=object`` holding Python ints and
``SizeExpr``\\ s (a *size array*); the ops below compute on it with the sizes'
own arithmetic, so a target like ``[n, h*w, 3]`` reaches the op as symbolic sizes
and nothing is fixed. A size array with no symbol left is a plain int64 array again.

An op not listed here, or one needing a value no size has yet (a ``Cast`` to float,
a comparison the sizes cannot settle), raises ``NeedsConstantError`` naming the
symbols: fix them with ``shapes=``.

>>> from nbyoc.ir.symbols import size
>>> dims = size_array([size("n"), 3, size("h"), size("w")])
>>> fold_binary("Mul", dims[2:3], dims[3:4])
array([h*w], dtype=object)
>>> known_ints(fold_binary("Add", np.array([2]), np.array([3])))
(5,)
"""

from __future__ import annotations

import numpy as np

from ...errors import NeedsConstantError, UndecidableSizeError
from ...ir.symbols import SizeExpr, floordiv, maximum, minimum, mod


def size_array(values) -> np.ndarray:
    """``values`` (ints and sizes, nested lists) as a size array; an int64 array when no
    symbol is left."""
    array = np.empty(np.shape(values), dtype=object)
    flat = array.reshape(-1)
    flat[:] = [v if isinstance(v, SizeExpr) else int(v) for v in np.ravel(
        np.asarray(values, dtype=object))]  # fmt: skip
    return settle(array)


def settle(array: np.ndarray) -> np.ndarray:
    """A size array as int64 when every element is an int."""
    if array.dtype == object and not any(isinstance(v, SizeExpr) for v in array.flat):
        return array.astype(np.int64)
    return array


def is_size_array(value) -> bool:
    """True for a known value that holds symbolic sizes."""
    return isinstance(value, np.ndarray) and value.dtype == object


def symbols_of(array: np.ndarray) -> tuple[str, ...]:
    """The symbols a size array depends on, sorted."""
    found: set[str] = set()
    for v in array.flat:
        if isinstance(v, SizeExpr):
            found |= v.symbols
    return tuple(sorted(found))


def known_ints(array: np.ndarray) -> tuple:
    """The elements of a known integer or size array, flattened: ints and sizes."""
    return tuple(v if isinstance(v, SizeExpr) else int(v) for v in array.reshape(-1).tolist())


def _onnx_div(a, b):
    # ONNX's integer Div truncates toward zero: the floor, for a non-negative quotient
    if isinstance(a, int) and isinstance(b, int):
        return abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
    if isinstance(b, int) and b > 0 and a >= 0:
        return floordiv(a, b)
    raise UndecidableSizeError(f"cannot tell the sign of {a} / {b} while importing")


#: ONNX elementwise op -> the function of two sizes it computes.
BINARY = {
    "Add": lambda a, b: a + b,
    "Sub": lambda a, b: a - b,
    "Mul": lambda a, b: a * b,
    "Div": _onnx_div,
    "Mod": lambda a, b: mod(a, b),
    "Max": maximum,
    "Min": minimum,
}


def fold_binary(op_type: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``op_type`` (``BINARY``) elementwise over two known arrays, broadcasting."""
    fn = np.frompyfunc(BINARY[op_type], 2, 1)
    return settle(np.asarray(fn(_objects(a), _objects(b)), dtype=object))


def _objects(a: np.ndarray) -> np.ndarray:
    if a.dtype == object:
        return a
    if not np.issubdtype(a.dtype, np.integer):
        raise UndecidableSizeError(f"shape arithmetic mixes sizes with {a.dtype} values")
    out = np.empty(a.shape, dtype=object)
    out.reshape(-1)[:] = [int(v) for v in a.reshape(-1).tolist()]
    return out


def needs_values(where: str, array: np.ndarray, why: str) -> NeedsConstantError:
    """The error for a step that needs the values of a size array's symbols."""
    names = symbols_of(array)
    listed = ", ".join(names)
    return NeedsConstantError(
        f"{where}: {why}, which depends on the symbolic size(s) {listed} of the model's "
        f"dynamic dimensions; fix them with from_onnx(..., shapes={{input: (...)}})",
        names,
    )


def _axes(node, index: int, attribute: str = "axes"):
    """An op's axes: from its input ``index`` (later opsets) or its attribute."""
    if node.has(index):
        return [int(a) for a in node.known(index, attribute).reshape(-1)]
    value = node.attr(attribute)
    return None if value is None else [int(a) for a in value]


def _slice(node, data: np.ndarray) -> np.ndarray:
    if node.opset >= 10:
        starts, ends = node.ints(1, "starts"), node.ints(2, "ends")
        axes = _axes(node, 3) or list(range(len(starts)))
        steps = node.ints(4, "steps") if node.has(4) else (1,) * len(starts)
    else:
        starts, ends = node.attr("starts"), node.attr("ends")
        axes = node.attr("axes") or list(range(len(starts)))
        steps = (1,) * len(starts)
    index = [slice(None)] * data.ndim
    for axis, start, end, step in zip(axes, starts, ends, steps):
        index[node.axis(axis, data.ndim)] = slice(start, end, step)  # (Python clamps as ONNX)
    return data[tuple(index)]


def _reshape(node, data: np.ndarray) -> np.ndarray:
    shape = list(node.ints(1, "shape") if node.opset >= 5 else node.attr("shape"))
    if not node.attr("allowzero", 0):
        shape = [data.shape[i] if n == 0 else n for i, n in enumerate(shape)]
    return data.reshape(shape)


def _unsqueeze(node, data: np.ndarray) -> np.ndarray:
    axes = sorted(a % (data.ndim + len(_axes(node, 1))) for a in _axes(node, 1))
    for axis in axes:
        data = np.expand_dims(data, axis)
    return data


def _squeeze(node, data: np.ndarray) -> np.ndarray:
    axes = _axes(node, 1)
    return np.squeeze(data, axis=None if not axes else tuple(axes))


def _cast(node, data: np.ndarray) -> np.ndarray:
    from onnx import TensorProto

    integers = {TensorProto.INT64, TensorProto.INT32, TensorProto.INT16, TensorProto.UINT64,
                TensorProto.UINT32}  # fmt: skip
    if node.attr("to") not in integers:
        raise needs_values(node.where, data, "it casts sizes to a non-integer type")
    return data


def _equal(node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    def equal(x, y):
        difference = x - y
        if isinstance(difference, int):
            return difference == 0
        low, high = difference.bounds()
        if low > 0 or high < 0:
            return False
        raise UndecidableSizeError(f"cannot tell whether {x} == {y} while importing")

    return np.asarray(np.frompyfunc(equal, 2, 1)(_objects(a), _objects(b)), dtype=bool)


def _reduce(node, data: np.ndarray, op) -> np.ndarray:
    axes = _axes(node, 1) if node.opset >= 18 or node.op_type == "ReduceSum" else _axes(node, 9)
    axes = tuple(range(data.ndim)) if not axes else tuple(a % data.ndim for a in axes)
    out = op.reduce(_objects(data), axis=axes, keepdims=bool(node.attr("keepdims", 1)))
    return np.asarray(out, dtype=object)


#: ONNX op -> (known inputs -> its value), for ops that move or combine sizes.
STRUCTURAL = {
    "Identity": lambda node, x: x,
    "Concat": lambda node, *parts: np.concatenate(
        [_objects(p) for p in parts], axis=node.attr("axis")),
    "Gather": lambda node, data, indices: np.take(
        data, indices.astype(np.int64), axis=node.attr("axis", 0)),
    "Slice": lambda node, data, *_: _slice(node, data),
    "Reshape": lambda node, data, *_: _reshape(node, data),
    "Unsqueeze": lambda node, data, *_: _unsqueeze(node, data),
    "Squeeze": lambda node, data, *_: _squeeze(node, data),
    "Cast": lambda node, data: _cast(node, data),
    "Equal": _equal,
    "Where": lambda node, cond, a, b: np.where(cond.astype(bool), _objects(a), _objects(b)),
    "ReduceProd": lambda node, data, *_: _reduce(node, data, np.multiply),
    "ReduceSum": lambda node, data, *_: _reduce(node, data, np.add),
    "Neg": lambda node, x: -_objects(x),
    "Size": lambda node, x: np.array(x.size, np.int64),  # (of a size array: its length)
}  # fmt: skip


def folds(node) -> bool:
    """Whether ``fold`` computes ``node``'s op on sizes (else its converter takes the
    sizes: Expand's target shape, say).

    >>> from types import SimpleNamespace as Node
    >>> folds(Node(op_type="Mul", inputs=[1, 2])), folds(Node(op_type="Expand", inputs=[1, 2]))
    (True, False)
    """
    if node.op_type in BINARY:
        return len(node.inputs) == 2
    return node.op_type in STRUCTURAL


def fold(node) -> list[np.ndarray]:
    """The outputs of ``node``, whose inputs are all known and some hold symbolic sizes
    (``size arrays``), computed on the sizes; ``NeedsConstantError`` for an op that
    needs their values."""
    inputs = [v for v in node.inputs]
    symbolic = next(v for v in inputs if is_size_array(v))
    try:
        if node.op_type in BINARY and len(inputs) == 2:
            out = fold_binary(node.op_type, *inputs)
        elif node.op_type in STRUCTURAL:
            out = STRUCTURAL[node.op_type](node, *[v for v in inputs if v is not None])
        else:
            raise needs_values(node.where, symbolic, "it computes on a shape")
    except UndecidableSizeError as e:
        raise needs_values(node.where, symbolic, f"it needs a value ({e})") from None
    out = np.asarray(out)
    return [settle(out) if out.dtype == object else out]
