"""One generated call of each op: ``GENERATORS`` maps an op to a function that builds a
small, well-typed call of it on operands of one dtype, its shapes and attributes
decided by a ``Choices`` (``nbyoc.testing.choices``).

A generator is ``gen(op, c, dtype, operand) -> Expr``: ``operand(shape, dtype=...)``
gives a value of that shape and dtype (the case builder decides whether it is a
parameter or a value computed from one, ``nbyoc.testing.cases``). Constants (indices)
are made in the generator. Ops nbyoc defines by decomposition (``gelu``,
``layer_norm``, ...) have generators too, for a backend that claims them itself.
An op with no generator here (``cond``, ``loop``: their bodies are functions) is
reported as skipped by the test kit.

>>> from nbyoc.testing.choices import FirstChoices
>>> import nbyoc
>>> counter = iter(range(99))
>>> def operand(shape, dtype="float32"):
...     return nbyoc.var(f"p{next(counter)}", shape, dtype)
>>> GENERATORS["conv"]("conv", FirstChoices(), "float32", operand).type
Tensor[(1, 1, 4), float32]
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..ir.attrs import REQUIRED
from ..ir.builder import call_op, const
from ..ir.dtypes import DTYPES, dtype_info
from ..ir.op import get_op, list_ops
from ..ir.ops.conv import COORDINATE_MODES, NEAREST_MODES
from .choices import Choices

#: Bounds ``clip`` draws: none, fractional, beyond every integer dtype, ordinary.
CLIP_BOUNDS = [None, None, -3, -0.5, 0, 1, 2.5, 300, -300, 2**70]
#: The data operand of an op, whose dtype a case is filed under (else operand 0).
DATA_OPERAND = {"where": 1}


def data_dtype(call) -> str:
    """The dtype a call of an op is filed under: its data operand's.

    >>> import nbyoc
    >>> c = nbyoc.var("c", (2,), "bool")
    >>> data_dtype(nbyoc.where(c, nbyoc.var("x", (2,), "int8"), nbyoc.var("y", (2,), "int8")))
    'int8'
    """
    return call.args[DATA_OPERAND.get(call.op.name, 0)].type.dtype


#: The sizes of an axis of a generated shape: mostly small, sometimes past a vector's width
#: (so that a loop's remainder runs too).
SIDES = (1, 2, 3, 4, 1, 2, 3, 4, 5, 9, 17)


def shape(c: Choices, min_rank: int = 0, max_rank: int = 3) -> tuple:
    return tuple(c.choice(SIDES) for _ in range(c.integer(min_rank, max_rank)))


def broadcasting(c: Choices, base: tuple) -> tuple:
    """A shape that broadcasts to ``base``: leading axes dropped, some set to 1."""
    rank = c.integer(0, len(base))
    return tuple(d if c.boolean() else 1 for d in base[len(base) - rank :])


def _unary(op, c, dtype, operand):
    return call_op(op, operand(shape(c), dtype))


def _binary(op, c, dtype, operand):
    base = shape(c)
    a, b = operand(base, dtype), operand(broadcasting(c, base), dtype)
    a, b = (a, b) if c.boolean() else (b, a)
    if op == "power" and dtype_info(dtype).kind == "int":
        b = call_op("abs", b)  # (NumPy refuses integers to negative powers)
    return call_op(op, a, b)


def _where(op, c, dtype, operand):
    base = shape(c)
    condition = operand(broadcasting(c, base), c.choice(["bool", "bool", dtype]))
    return call_op(op, condition, operand(broadcasting(c, base), dtype), operand(base, dtype))


def _cast(op, c, dtype, operand):
    kind = dtype_info(dtype).kind
    # A float out of an integer's range converts to anything (C leaves it undefined): the
    # small values of the inputs fit every signed integer, but negatives no unsigned one.
    targets = [d for d in DTYPES if kind != "float" or dtype_info(d).kind != "uint"]
    return call_op(op, operand(shape(c), dtype), to=c.choice(targets))


def _clip(op, c, dtype, operand):
    low, high = c.choice(CLIP_BOUNDS), c.choice(CLIP_BOUNDS)
    return call_op(op, operand(shape(c), dtype), min=low, max=high)


def _to_shape(op, c, dtype, operand):  # broadcast_to, expand
    base = shape(c, min_rank=1)
    target = (c.integer(1, 3), *base) if c.boolean() else base
    return call_op(op, operand(broadcasting(c, base), dtype), shape=target)


def _reduce(op, c, dtype, operand):
    x = operand(shape(c), dtype)
    rank = x.type.ndim
    one_axis = get_op(op).attrs["axis"].kind == "int"
    if rank == 0 or c.boolean():
        axis = None
    elif one_axis or c.boolean():
        axis = c.integer(-rank, rank - 1)
    else:
        axis = tuple(c.subset(range(rank))) or (0,)
    return call_op(op, x, axis=axis, keepdims=c.boolean())


def _softmax(op, c, dtype, operand):
    x = operand(shape(c, min_rank=1), dtype)
    return call_op(op, x, axis=c.integer(-x.type.ndim, x.type.ndim - 1))


def _matmul(op, c, dtype, operand):
    m, k, n = c.integer(1, 5), c.integer(1, 5), c.integer(1, 5)
    batch = c.choice([(), (), (2,), (3, 1)])
    left = c.choice([(*batch, m, k), (k,)])
    right = c.choice([(*batch, k, n), (k, n), (k,)] if len(left) > 1 else [(k, n), (*batch, k, n)])
    return call_op(op, operand(left, dtype), operand(right, dtype))


def _gemm(op, c, dtype, operand):
    m, k, n = c.integer(1, 5), c.integer(1, 5), c.integer(1, 5)
    trans_a, trans_b = c.boolean(), c.boolean()
    a = operand((k, m) if trans_a else (m, k), dtype)
    b = operand((n, k) if trans_b else (k, n), dtype)
    bias = operand(c.choice([(n,), (m, n), (1, n), ()]), dtype)
    alpha, beta = c.choice([1.0, 0.5, 2.0]), c.choice([1.0, 0.5, 0.0])
    return call_op(op, a, b, bias, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b)


def _window(c: Choices, spatial: int, dilate: bool = True) -> dict:
    """A window over ``spatial`` axes of 4 to 6 elements: kernel, strides, dilations
    and pads (each below its kernel's extent, so every window sees an element)."""
    kernel = [c.integer(1, 3) for _ in range(spatial)]
    dilations = [c.integer(1, 2) if dilate else 1 for _ in range(spatial)]
    pads = [c.integer(0, k - 1) for k in kernel for _ in range(2)]
    pads = pads[0::2] + pads[1::2]
    sizes = [c.integer(4, 6) for _ in range(spatial)]
    return {"sizes": sizes, "kernel": kernel, "strides": [c.integer(1, 2) for _ in kernel],
            "dilations": dilations, "pads": pads}  # fmt: skip


def _conv(op, c, dtype, operand):
    spatial, group = c.integer(1, 2), c.choice([1, 1, 2])
    w = _window(c, spatial)
    cin, cout = group * c.integer(1, 2), group * c.integer(1, 2)
    x = operand((c.integer(1, 2), cin, *w["sizes"]), dtype)
    if op == "conv":
        weights = operand((cout, cin // group, *w["kernel"]), dtype)
        extra = {}
    else:  # conv_transpose: the weights are (C, M / group, ...)
        weights = operand((cin, cout // group, *w["kernel"]), dtype)
        extra = {"output_padding": [c.integer(0, s - 1) for s in w["strides"]]}
    bias = [operand((cout,), dtype)] if c.boolean() else []
    return call_op(op, x, weights, *bias, strides=w["strides"], pads=w["pads"],
                   dilations=w["dilations"], group=group, **extra)  # fmt: skip


def _pool(op, c, dtype, operand):
    w = _window(c, c.integer(1, 2), dilate=op == "max_pool")
    x = operand((c.integer(1, 2), c.integer(1, 3), *w["sizes"]), dtype)
    extra = {"count_include_pad": c.boolean()} if op == "avg_pool" else {}
    return call_op(op, x, kernel_shape=w["kernel"], strides=w["strides"], pads=w["pads"],
                   dilations=w["dilations"], **extra)  # fmt: skip


def _global_pool(op, c, dtype, operand):
    return call_op(op, operand((c.integer(1, 2), c.integer(1, 3), *shape(c, 1, 2)), dtype))


def _resize(op, c, dtype, operand):
    x = operand((1, c.integer(1, 2), c.integer(1, 4), c.integer(1, 4)), dtype)
    mode = c.choice(["nearest", "linear"])
    attrs = {"mode": mode, "coordinate_transformation_mode": c.choice(COORDINATE_MODES)}
    if mode == "nearest":
        attrs["nearest_mode"] = c.choice(NEAREST_MODES)
    if c.boolean():
        attrs["scales"] = (1.0, 1.0, c.choice([0.5, 1.5, 2.0]), c.choice([0.75, 2.0, 3.0]))
    else:
        attrs["sizes"] = (*x.type.shape[:2], c.integer(1, 6), c.integer(1, 6))
    return call_op(op, x, **attrs)


def _concatenate(op, c, dtype, operand):
    base = shape(c, min_rank=1)
    axis = c.integer(0, len(base) - 1)
    parts = []
    for _ in range(c.integer(2, 4)):
        part = list(base)
        part[axis] = c.integer(1, 3)
        parts.append(operand(tuple(part), dtype))
    return call_op(op, *parts, axis=axis)


def _gather(op, c, dtype, operand):
    x = operand(shape(c, min_rank=1), dtype)
    axis = c.integer(0, x.type.ndim - 1)
    size = x.type.shape[axis]
    index_shape = shape(c, 0, 2)
    picks = [c.integer(-size, size - 1) for _ in range(math.prod(index_shape))]
    return call_op(op, x, const(np.array(picks, np.int64).reshape(index_shape)), axis=axis)


def _reshape(op, c, dtype, operand):
    x = operand(shape(c), dtype)
    size, dims = x.type.size, x.type.shape
    newshape = c.choice([(-1,), (size,), tuple(reversed(dims)), (1, size), (size, 1, -1)])
    return call_op(op, x, newshape=newshape)


def _transpose(op, c, dtype, operand):
    x = operand(shape(c), dtype)
    axes = list(range(x.type.ndim))
    order = []
    while axes:
        order.append(axes.pop(c.integer(0, len(axes) - 1)))
    return call_op(op, x, axes=None if c.boolean() else tuple(order))


def _slice(op, c, dtype, operand):
    x = operand(shape(c, min_rank=1), dtype)
    axes = c.subset(range(x.type.ndim)) or [0]
    starts, ends, steps = [], [], []
    for axis in axes:
        size = x.type.shape[axis]
        starts.append(c.integer(-size - 1, size + 1))
        ends.append(c.integer(-size - 1, size + 1))
        steps.append(c.choice([1, 1, -1, 2, -2]))
    return call_op(op, x, starts=starts, ends=ends, axes=axes, steps=steps)


def _squeeze(op, c, dtype, operand):
    x = operand(tuple(c.choice([1, 1, 3]) for _ in range(c.integer(1, 3))), dtype)
    ones = [k for k, d in enumerate(x.type.shape) if d == 1]
    return call_op(op, x, axes=None if not ones or c.boolean() else tuple(c.subset(ones)))


def _unsqueeze(op, c, dtype, operand):
    x = operand(shape(c), dtype)
    return call_op(op, x, axes=(c.integer(-x.type.ndim - 1, x.type.ndim),))


def _flatten(op, c, dtype, operand):
    x = operand(shape(c, min_rank=1), dtype)
    return call_op(op, x, axis=c.integer(0, x.type.ndim))


def _tile(op, c, dtype, operand):
    x = operand(shape(c, min_rank=1), dtype)
    return call_op(op, x, repeats=[c.integer(1, 3) for _ in x.type.shape])


def _pad(op, c, dtype, operand):
    x = operand(shape(c, min_rank=1), dtype)
    mode = c.choice(["constant", "constant", "edge", "reflect", "wrap"])
    # (reflect pads at most the size less one, wrap at most the size)
    most = {"reflect": min(x.type.shape) - 1, "wrap": min(x.type.shape)}.get(mode, 2)
    pads = [c.integer(0, most) for _ in range(2 * x.type.ndim)]
    return call_op(op, x, pads=pads, mode=mode, value=c.choice([0.0, 1.5, -2.0]))


def _prelu(op, c, dtype, operand):
    base = shape(c, min_rank=1)
    return call_op(op, operand(base, dtype), operand(broadcasting(c, base), dtype))


def _batch_norm(op, c, dtype, operand):
    channels = c.integer(1, 3)
    x = operand((c.integer(1, 2), channels, *shape(c, 0, 2)), dtype)
    scale, bias, mean = (operand((channels,), dtype) for _ in range(3))
    variance = call_op("abs", operand((channels,), dtype))
    return call_op(op, x, scale, bias, mean, variance, epsilon=c.choice([1e-5, 0.1]))


def _layer_norm(op, c, dtype, operand):
    x = operand(shape(c, min_rank=1), dtype)
    axis = c.integer(-x.type.ndim, x.type.ndim - 1)
    normalised = x.type.shape[axis:]
    return call_op(op, x, operand(normalised, dtype), operand(normalised, dtype), axis=axis)


#: op -> (gates, whether it has a cell state and peepholes)
_CELLS = {"lstm": (4, True), "gru": (3, False), "rnn": (1, False)}


def _recurrent(op, c, dtype, operand):
    gates, cell = _CELLS[op]
    seq, batch, inputs, hidden = (c.integer(1, 3) for _ in range(4))
    direction = c.choice(["forward", "reverse", "bidirectional"])
    d = 2 if direction == "bidirectional" else 1
    operands = [
        operand((seq, batch, inputs), dtype),
        operand((d, gates * hidden, inputs), dtype),
        operand((d, gates * hidden, hidden), dtype),
        operand((d, 2 * gates * hidden), dtype),
        operand((d, batch, hidden), dtype),
    ]
    if cell:
        operands += [operand((d, batch, hidden), dtype), operand((d, 3 * hidden), dtype)]
    if c.boolean():
        operands.append(const(np.array([c.integer(1, seq) for _ in range(batch)], np.int32)))
    attrs = {"direction": direction, "clip": c.choice([None, 2.0])}
    if op == "gru":
        attrs["linear_before_reset"] = c.boolean()
    return call_op(op, *operands, **attrs)


def _scatter_elements(op, c, dtype, operand):
    data = operand(shape(c, min_rank=1), dtype)
    axis = c.integer(0, data.type.ndim - 1)
    # each position along the axis written once, so that the order of writes is moot
    taken = [c.integer(1, d) if k != axis else None for k, d in enumerate(data.type.shape)]
    size = data.type.shape[axis]
    rows = c.integer(1, size)
    index_shape = tuple(rows if t is None else t for t in taken)
    order = np.argsort([c.integer(0, 99) for _ in range(size)])[:rows]
    indices = np.broadcast_to(
        order.reshape([-1 if k == axis else 1 for k in range(len(index_shape))]), index_shape
    )
    reduction = c.choice(["none", "add", "mul", "max", "min"])
    return call_op(op, data, const(np.ascontiguousarray(indices, np.int64)),
                   operand(index_shape, dtype), axis=axis, reduction=reduction)  # fmt: skip


def _scatter_nd(op, c, dtype, operand):
    data = operand(shape(c, min_rank=1), dtype)
    depth = c.integer(1, data.type.ndim)
    cells = list(np.ndindex(*data.type.shape[:depth]))
    count = c.integer(1, len(cells))
    picked = [cells.pop(c.integer(0, len(cells) - 1)) for _ in range(count)]  # (distinct)
    updates = operand((count, *data.type.shape[depth:]), dtype)
    reduction = c.choice(["none", "add", "mul", "max", "min"])
    return call_op(op, data, const(np.array(picked, np.int64)), updates, reduction=reduction)


def _scan(op, c, dtype, operand):
    x = operand(shape(c, min_rank=1), dtype)
    axis = c.integer(-x.type.ndim, x.type.ndim - 1)
    return call_op(op, x, axis=axis, reverse=c.boolean(), exclusive=c.boolean())


Generator = Callable[..., object]
_BY_NAME: dict[str, Generator] = {
    "where": _where, "cast": _cast, "clip": _clip, "broadcast_to": _to_shape,
    "expand": _to_shape, "softmax": _softmax, "log_softmax": _softmax, "matmul": _matmul,
    "gemm": _gemm, "conv": _conv, "conv_transpose": _conv, "max_pool": _pool,
    "avg_pool": _pool, "global_avg_pool": _global_pool, "global_max_pool": _global_pool,
    "resize": _resize, "concatenate": _concatenate, "gather": _gather, "reshape": _reshape,
    "transpose": _transpose, "slice": _slice, "squeeze": _squeeze, "unsqueeze": _unsqueeze,
    "flatten": _flatten, "tile": _tile, "pad": _pad, "prelu": _prelu,
    "batch_norm": _batch_norm, "layer_norm": _layer_norm, "lstm": _recurrent,
    "gru": _recurrent, "rnn": _recurrent, "scatter_elements": _scatter_elements,
    "scatter_nd": _scatter_nd, "cumsum": _scan, "cumprod": _scan, "cummax": _scan,
    "cummin": _scan, "logcumsumexp": _scan,
}  # fmt: skip


def _generic(name: str) -> Generator | None:
    """The generator of an op by its kind: an elementwise op of one or two operands with
    no required attribute, or a reduction over ``axis`` with ``keepdims``."""
    op = get_op(name)
    if any(spec.default is REQUIRED for spec in op.attrs.values()):
        return None
    if op.kind == "elementwise" and op.arity in (1, 2):
        return _unary if op.arity == 1 else _binary
    if op.kind == "reduce" and set(op.attrs) == {"axis", "keepdims"}:
        return _reduce
    return None


def _table() -> dict[str, Generator]:
    table = {}
    for name in list_ops():
        gen = _BY_NAME.get(name) or _generic(name)
        if gen is not None:
            table[name] = gen
    return table


#: Every registered op with a generator: op -> ``gen(op, c, dtype, operand)``.
GENERATORS: dict[str, Generator] = _table()
