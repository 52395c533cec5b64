"""Recurrent ops: ``lstm``, ``gru`` and ``rnn``, one layer each, with ONNX's semantics
(directions forward, reverse and bidirectional; activations with their alpha and
beta; ``clip``; per-sequence lengths; initial states; LSTM's peepholes and
``input_forget``; GRU's ``linear_before_reset``).

Operands, as ONNX orders them with ``layout=0`` (the importer transposes
``layout=1``), every one present (the importer fills the optional ones in: zero
biases, zero states, zero peepholes), the sequence lengths last and optional:

- ``lstm(x, w, r, b, initial_h, initial_c, p[, sequence_lens])``
- ``gru(x, w, r, b, initial_h[, sequence_lens])``, ``rnn(...)`` the same

``x`` is (seq, batch, input); ``w`` (directions, gates * hidden, input); ``r``
(directions, gates * hidden, hidden); ``b`` (directions, 2 * gates * hidden); a
state (directions, batch, hidden); ``p`` (directions, 3 * hidden). Gates in ONNX's
order: LSTM i, o, f, c; GRU z, r, h.

An op has one result, so each packs every output ONNX names into one tensor of
shape (seq + k, directions, batch, hidden): rows [0, seq) the hidden state after
each step (ONNX's ``Y``, zero past a sequence's length), row seq the last hidden
state (``Y_h``), and for ``lstm`` row seq + 1 the last cell state (``Y_c``). The
importer slices them out (views), so whichever outputs a model reads, the
recurrence runs once.

>>> import nbyoc, numpy as np
>>> x = nbyoc.var("x", ("t", 2, 3))
>>> w, r = nbyoc.const(np.ones((1, 8, 3), np.float32)), nbyoc.const(np.ones((1, 8, 2), np.float32))
>>> b, h0 = nbyoc.const(np.zeros((1, 16), np.float32)), nbyoc.const(np.zeros((1, 2, 2), np.float32))
>>> c0, p = h0, nbyoc.const(np.zeros((1, 6), np.float32))
>>> nbyoc.lstm(x, w, r, b, h0, c0, p).type
Tensor[(t + 2, 1, 2, 2), float32]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import NbyocTypeError
from ..annotations import Operand
from ..attrs import Attr
from ..builder import call_op
from ..dtypes import dtype_info
from ..nodes import Expr
from ..op import Op, describe, register_op
from ..symbols import require
from ..types import TensorType


@dataclass(frozen=True)
class Activation:
    """An activation function ONNX's recurrent ops name: the function of (x, alpha,
    beta), and the defaults of the alpha and beta it reads (None: it reads none)."""

    name: str
    function: object
    alpha: float | None = None
    beta: float | None = None


def _sigmoid(x, alpha, beta):
    # (split by sign, so that exp never overflows)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


#: Every activation, by its name in lower case. Defaults are those of the ONNX ops of
#: the same name (LeakyRelu's 0.01, HardSigmoid's 0.2 and 0.5, Elu's and
#: ThresholdedRelu's 1.0); Affine and ScaledTanh are ONNX ops no more, and default to
#: 0 as ONNX Runtime's do. (ONNX Runtime defaults ThresholdedRelu's alpha to 0 too.)
ACTIVATIONS = {
    a.name.lower(): a
    for a in [
        Activation("Relu", lambda x, a, b: np.maximum(x, 0)),
        Activation("Tanh", lambda x, a, b: np.tanh(x)),
        Activation("Sigmoid", _sigmoid),
        Activation("Affine", lambda x, a, b: a * x + b, 0.0, 0.0),
        Activation("LeakyRelu", lambda x, a, b: np.where(x >= 0, x, a * x), 0.01),
        Activation("ThresholdedRelu", lambda x, a, b: np.where(x > a, x, 0), 1.0),
        Activation("ScaledTanh", lambda x, a, b: a * np.tanh(b * x), 0.0, 0.0),
        Activation("HardSigmoid", lambda x, a, b: np.clip(a * x + b, 0, 1), 0.2, 0.5),
        Activation("Elu", lambda x, a, b: np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0))), 1.0),
        Activation("Softsign", lambda x, a, b: x / (1 + np.abs(x))),
        Activation("Softplus", lambda x, a, b: np.logaddexp(0, x)),
    ]
}
DIRECTIONS = ("forward", "reverse", "bidirectional")


@dataclass(frozen=True)
class Cell:
    """One recurrent op: its gates, default activations, states and operands."""

    name: str
    gates: int
    activations: tuple[str, ...]
    states: int  # 2: a hidden and a cell state (lstm); 1: a hidden state
    flags: tuple[str, ...] = ()  # its own boolean attributes

    @property
    def operands(self) -> tuple[str, ...]:
        if self.states == 2:
            return ("x", "w", "r", "b", "initial_h", "initial_c", "p")
        return ("x", "w", "r", "b", "initial_h")


CELLS = {
    c.name: c
    for c in [
        Cell("lstm", 4, ("Sigmoid", "Tanh", "Tanh"), 2, ("input_forget",)),
        Cell("gru", 3, ("Sigmoid", "Tanh"), 1, ("linear_before_reset",)),
        Cell("rnn", 1, ("Tanh",), 1),
    ]
}


def normal_activations(cell: Cell, directions: int, names, alphas, betas) -> tuple:
    """(names, alphas, betas) in normal form: a name per activation of every direction,
    spelled as ONNX does, and as ONNX reads the numbers, one alpha (beta) for each
    activation that reads one, in order, defaults filled in where the lists run out. A
    list of one direction's activations serves both of a bidirectional op (as ONNX
    Runtime reads it).

    >>> normal_activations(CELLS["rnn"], 2, ("leakyrelu",), (0.2,), ())
    (('LeakyRelu', 'LeakyRelu'), (0.2, 0.01), ())
    """
    per = len(cell.activations)
    names = tuple(names) if names is not None else cell.activations
    if len(names) == per and directions == 2:
        names = names * 2
    if len(names) != per * directions:
        raise NbyocTypeError(
            f"{cell.name}: activations needs {per * directions} names ({per} per direction), "
            f"got {len(names)}: {names}"
        )
    known = []
    for name in names:
        activation = ACTIVATIONS.get(name.lower())
        if activation is None:
            raise NbyocTypeError(
                f"{cell.name}: unknown activation {name!r}; one of "
                f"{', '.join(a.name for a in ACTIVATIONS.values())}"
            )
        known.append(activation)

    def filled(given, defaults):
        given, defaults = list(given or ()), [d for d in defaults if d is not None]
        if len(given) > len(defaults):
            raise NbyocTypeError(
                f"{cell.name}: {len(given)} values for the {len(defaults)} activation(s) "
                f"of {names} that read one"
            )
        return tuple(float(v) for v in given + defaults[len(given) :])

    alphas = filled(alphas, [a.alpha for a in known])
    return tuple(a.name for a in known), alphas, filled(betas, [a.beta for a in known])


def bound_activations(names, alphas, betas) -> list:
    """Each activation of ``names`` as a function of x alone, with its alpha and beta
    (the normal form's: one for each activation that reads one, in order)."""
    alphas, betas, bound = list(alphas), list(betas), []
    for name in names:
        activation = ACTIVATIONS[name.lower()]
        alpha = alphas.pop(0) if activation.alpha is not None else 0.0
        beta = betas.pop(0) if activation.beta is not None else 0.0
        bound.append(lambda v, f=activation.function, a=alpha, b=beta: f(v, a, b))
    return bound


def _rule(cell: Cell):
    def infer(types, attrs):
        name = cell.name
        given = len(cell.operands)
        if len(types) not in (given, given + 1):
            raise NbyocTypeError(
                f"{name} takes {given} operands ({', '.join(cell.operands)}) and optionally "
                f"sequence_lens, got {len(types)}: ({describe(types)})"
            )
        operands = dict(zip(cell.operands, types))
        x, r = operands["x"], operands["r"]
        if not dtype_info(x.dtype).is_float:
            raise NbyocTypeError(f"{name}: x must be floating point, got {x!r}")
        for k, t in operands.items():
            if t.dtype != x.dtype:
                raise NbyocTypeError(f"{name}: {k} is {t!r}; every operand must be {x.dtype}")
        directions = 2 if attrs["direction"] == "bidirectional" else 1
        if x.ndim != 3 or r.ndim != 3:
            raise NbyocTypeError(f"{name}: x and r must be 3-D, got {x!r} and {r!r}")
        seq, batch, inputs = x.shape
        hidden = r.shape[2]  # (a symbolic size as readily as a number)
        expected = {
            "w": (directions, cell.gates * hidden, inputs),
            "r": (directions, cell.gates * hidden, hidden),
            "b": (directions, 2 * cell.gates * hidden),
            "initial_h": (directions, batch, hidden),
            "initial_c": (directions, batch, hidden),
            "p": (directions, 3 * hidden),
        }
        for k, t in operands.items():
            if k == "x":
                continue
            want = expected[k]
            if t.ndim != len(want) or any(
                isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(t.shape, want)
            ):
                raise NbyocTypeError(
                    f"{name}: {k} must have shape {want} for {attrs['direction']} over x of "
                    f"{x!r} with hidden size {hidden}, got {t!r}"
                )
            for a, b in zip(t.shape, want):
                require("equal", a, b, where=f"{name} {k}")
        if len(types) > given:
            lens = types[given]
            if lens.ndim != 1 or not dtype_info(lens.dtype).is_integer:
                raise NbyocTypeError(f"{name}: sequence_lens must be 1-D integers, got {lens!r}")
            require("equal", lens.shape[0], batch, where=f"{name} sequence_lens")
        if attrs["hidden_size"] is not None:
            require("equal", hidden, attrs["hidden_size"], where=f"{name} hidden_size", error=(
                f"{name}: hidden_size={attrs['hidden_size']} but r holds {hidden} columns"
            ))  # fmt: skip
        names, alphas, betas = normal_activations(
            cell, directions, attrs["activations"], attrs["activation_alpha"],
            attrs["activation_beta"],
        )  # fmt: skip
        if attrs["clip"] is not None and not attrs["clip"] > 0:
            raise NbyocTypeError(f"{name}: clip must be positive, got {attrs['clip']}")
        attrs = dict(attrs, activations=names, activation_alpha=alphas, activation_beta=betas)
        shape = (seq + cell.states, directions, batch, hidden)
        return TensorType(shape, x.dtype), attrs

    return infer


def _reference(cell: Cell):
    def reference(*arrays, direction, activations, activation_alpha, activation_beta, clip,
                  hidden_size, **flags):  # fmt: skip
        operands = dict(zip(cell.operands, arrays))
        x = operands["x"]
        seq, batch, _ = x.shape
        lens = arrays[len(cell.operands)] if len(arrays) > len(cell.operands) else None
        lens = np.full(batch, seq, np.int64) if lens is None else np.asarray(lens, np.int64)
        if np.any((lens < 0) | (lens > seq)):
            raise ValueError(f"{cell.name}: sequence_lens {lens.tolist()} must lie in [0, {seq}]")
        directions = 2 if direction == "bidirectional" else 1
        # (in x's dtype, as ONNX Runtime computes; float16 in float32)
        work = np.result_type(x.dtype, np.float32)
        hidden = operands["r"].shape[2]
        out = np.zeros((seq + cell.states, directions, batch, hidden), x.dtype)
        per = len(cell.activations)
        functions = bound_activations(activations, activation_alpha, activation_beta)
        for d in range(directions):
            reverse = direction == "reverse" or d == 1
            acts = functions[d * per : (d + 1) * per]
            weights = {k: np.asarray(v[d], work) for k, v in operands.items() if k != "x"}
            _run_direction(cell, x, weights, lens, reverse, acts, clip, flags, out[:, d])
        return out

    return reference


def _run_direction(cell, x, weights, lens, reverse, acts, clip, flags, out) -> None:
    """One direction of the recurrence, in the weights' dtype, into ``out`` (seq + states,
    batch, hidden): each sequence of the batch runs its own length, backwards if
    ``reverse``."""
    seq, batch, _ = x.shape
    hidden = weights["r"].shape[1]
    gates = cell.gates
    w, r = weights["w"], weights["r"]
    wb, rb = weights["b"][: gates * hidden], weights["b"][gates * hidden :]
    projected = np.asarray(x, w.dtype) @ w.T + wb  # every step's input projection at once
    # (the state: the hidden one, and the cell's for an lstm)
    state = tuple(weights[k].copy() for k in ("initial_h", "initial_c")[: cell.states])
    clipped = (lambda v: np.clip(v, -clip, clip)) if clip is not None else (lambda v: v)
    step_of = _STEPS[cell.name]
    for step in range(seq):
        # Sequences shorter than this step keep their state, and their output stays
        # zero; a reversed sequence of length L starts at its own step L - 1.
        active = lens > step
        if not active.any():
            break
        t = np.where(active, lens - 1 - step if reverse else step, 0)
        xt = projected[t, np.arange(batch)]
        new = step_of(xt, state, r, rb, weights, acts, clipped, flags)
        state = tuple(np.where(active[:, None], n, s) for n, s in zip(new, state))
        rows = np.nonzero(active)[0]
        out[t[rows], rows] = state[0][rows]
    out[seq:] = state
    out[seq:, lens == 0] = 0  # (ONNX Runtime's final states of an empty sequence)


def _lstm_step(xt, state, r, rb, weights, acts, clipped, flags):
    h, c = state
    f, g, hh = acts
    n = h.shape[1]
    z = xt + h @ r.T + rb
    zi, zo, zf, zc = z[:, :n], z[:, n : 2 * n], z[:, 2 * n : 3 * n], z[:, 3 * n :]
    p = weights["p"]
    pi, po, pf = p[:n], p[n : 2 * n], p[2 * n :]
    i = f(clipped(zi + pi * c))
    forget = 1 - i if flags.get("input_forget") else f(clipped(zf + pf * c))
    c_new = forget * c + i * g(clipped(zc))
    o = f(clipped(zo + po * c_new))
    return o * hh(c_new), c_new


def _gru_step(xt, state, r, rb, weights, acts, clipped, flags):
    (h,) = state
    f, g = acts
    n = h.shape[1]
    rz, rr, rh = r[:n], r[n : 2 * n], r[2 * n :]
    bz, br, bh = rb[:n], rb[n : 2 * n], rb[2 * n :]
    z = f(clipped(xt[:, :n] + h @ rz.T + bz))
    reset = f(clipped(xt[:, n : 2 * n] + h @ rr.T + br))
    if flags.get("linear_before_reset"):
        candidate = g(clipped(xt[:, 2 * n :] + reset * (h @ rh.T + bh)))
    else:
        candidate = g(clipped(xt[:, 2 * n :] + (reset * h) @ rh.T + bh))
    return ((1 - z) * candidate + z * h,)


def _rnn_step(xt, state, r, rb, weights, acts, clipped, flags):
    (h,) = state
    return (acts[0](clipped(xt + h @ r.T + rb)),)


#: Each cell's step: (its input projection at this step, the state, R, R's bias, the
#: direction's weights, activations, clip, flags) -> the new state.
_STEPS = {"lstm": _lstm_step, "gru": _gru_step, "rnn": _rnn_step}


def _attrs(cell: Cell) -> dict:
    attrs = {
        "direction": Attr("str", "forward", choices=DIRECTIONS),
        "activations": Attr("strs", None),
        "activation_alpha": Attr("floats", None),
        "activation_beta": Attr("floats", None),
        "clip": Attr("float", None),
        "hidden_size": Attr("int", None),
    }
    return {**attrs, **{flag: Attr("bool", False) for flag in cell.flags}}


_SUMMARIES = {
    "lstm": "One LSTM layer over a sequence (ONNX LSTM): (seq + 2, directions, batch, "
    "hidden) holding Y, then Y_h, then Y_c",
    "gru": "One GRU layer over a sequence (ONNX GRU): (seq + 1, directions, batch, hidden) "
    "holding Y, then Y_h",
    "rnn": "One simple RNN layer over a sequence (ONNX RNN): (seq + 1, directions, batch, "
    "hidden) holding Y, then Y_h",
}


def lstm(
    x: Operand, w: Operand, r: Operand, b: Operand, initial_h: Operand, initial_c: Operand,
    p: Operand, sequence_lens: Operand | None = None, **attrs: Any,
) -> Expr:  # fmt: skip
    """lstm(x, w, r, b, initial_h, initial_c, p, sequence_lens=None, **attrs): one LSTM
    layer (see the module docstring for the operands and the packed result).

    >>> import nbyoc, numpy as np
    >>> z = lambda *shape: nbyoc.const(np.zeros(shape, np.float32))
    >>> y = lstm(nbyoc.var("x", (5, 1, 3)), z(2, 8, 3), z(2, 8, 2), z(2, 16), z(2, 1, 2),
    ...          z(2, 1, 2), z(2, 6), direction="bidirectional")
    >>> y.type, y.attrs["activations"]
    (Tensor[(7, 2, 1, 2), float32], ('Sigmoid', 'Tanh', 'Tanh', 'Sigmoid', 'Tanh', 'Tanh'))
    """
    lens = () if sequence_lens is None else (sequence_lens,)
    return call_op("lstm", x, w, r, b, initial_h, initial_c, p, *lens, **attrs)


def gru(
    x: Operand, w: Operand, r: Operand, b: Operand, initial_h: Operand,
    sequence_lens: Operand | None = None, **attrs: Any,
) -> Expr:  # fmt: skip
    """gru(x, w, r, b, initial_h, sequence_lens=None, **attrs): one GRU layer (see the
    module docstring).

    >>> import nbyoc, numpy as np
    >>> z = lambda *shape: nbyoc.const(np.zeros(shape, np.float32))
    >>> gru(nbyoc.var("x", (5, 4, 3)), z(1, 6, 3), z(1, 6, 2), z(1, 12), z(1, 4, 2)).type
    Tensor[(6, 1, 4, 2), float32]
    """
    lens = () if sequence_lens is None else (sequence_lens,)
    return call_op("gru", x, w, r, b, initial_h, *lens, **attrs)


def rnn(
    x: Operand, w: Operand, r: Operand, b: Operand, initial_h: Operand,
    sequence_lens: Operand | None = None, **attrs: Any,
) -> Expr:  # fmt: skip
    """rnn(x, w, r, b, initial_h, sequence_lens=None, **attrs): one simple RNN layer (see
    the module docstring).

    >>> import nbyoc, numpy as np
    >>> z = lambda *shape: nbyoc.const(np.zeros(shape, np.float32))
    >>> rnn(nbyoc.var("x", (5, 4, 3)), z(1, 2, 3), z(1, 2, 2), z(1, 4), z(1, 4, 2)).type
    Tensor[(6, 1, 4, 2), float32]
    """
    lens = () if sequence_lens is None else (sequence_lens,)
    return call_op("rnn", x, w, r, b, initial_h, *lens, **attrs)


for _cell in CELLS.values():
    register_op(Op(_cell.name, None, _rule(_cell), _reference(_cell), "matmul",
                   _SUMMARIES[_cell.name], attrs=_attrs(_cell)))  # fmt: skip
