"""The error bound of a recurrent op (``lstm``, ``gru``, ``rnn``) for ``tolerance``: its
recurrence replayed in float64 on values that carry their bound, op by op, as the host
reference computes it (``nbyoc.ir.ops.recurrent``).

Each op of a step adds its own rounding (``ULPS_PER_OP`` ulps of the dtype the step
computes in: float32 for float16 and bfloat16) and passes on its operands' bounds
scaled by its local gain: a sum by 1, a product by the other factor, a matrix product
by the other matrix's magnitudes (and K roundings of the size of its terms, summed in
any order), an activation by its derivative at the value (ThresholdedRelu is
uncertain where its operand lies within its bound of alpha), clip by 1. A state kept
by a sequence that has ended keeps its bound; the result is rounded once more to the
op's dtype. So a long recurrence whose weights amplify errors gets a wide bound, a
contracting one a narrow one: the bound follows from the computation.

>>> import numpy as np, nbyoc
>>> z = lambda *shape: nbyoc.const(np.full(shape, 0.5, np.float32))
>>> y = nbyoc.rnn(nbyoc.var("x", (3, 1, 2)), z(1, 1, 2), z(1, 1, 1), z(1, 2), z(1, 1, 1))
>>> bound = recurrent_bound(y, [np.ones((3, 1, 2), np.float32)] + [a.data for a in y.args[1:]],
...                         [np.zeros(a.type.shape) for a in y.args])
>>> bound.shape, bool(0 < bound.max() < 1e-5)
((4, 1, 1, 1), True)
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..ir.dtypes import dtype_info
from ..ir.ops.recurrent import ACTIVATIONS, CELLS

#: ulps an op's own rounding may be off by, with room for both sides (``tolerance``'s).
ULPS_PER_OP = 4


class Bounded:
    """Values (float64) with their error bounds, through the ops of a step: each result
    carries the bound its operands' pass on plus its own rounding (``unit``: the dtype's
    epsilon)."""

    def __init__(self, value, bound, unit: float):
        self.value, self.bound, self.unit = np.asarray(value, np.float64), np.asarray(bound), unit

    def _made(self, value, bound) -> Bounded:
        rounding = ULPS_PER_OP * self.unit * np.abs(value)
        return Bounded(value, bound + rounding, self.unit)

    @staticmethod
    def _of(other, like: Bounded) -> Bounded:
        return other if isinstance(other, Bounded) else Bounded(other, 0.0, like.unit)

    def __add__(self, other) -> Bounded:
        other = self._of(other, self)
        return self._made(self.value + other.value, self.bound + other.bound)

    __radd__ = __add__

    def __rsub__(self, other) -> Bounded:  # (1 - x)
        other = self._of(other, self)
        return self._made(other.value - self.value, self.bound + other.bound)

    def __mul__(self, other) -> Bounded:
        other = self._of(other, self)
        bound = np.abs(other.value) * self.bound + np.abs(self.value) * other.bound
        return self._made(self.value * other.value, bound)

    def times(self, weights: Bounded) -> Bounded:
        """``self @ weights.T`` (weights as R and W are stored: (columns, depth))."""
        w, a = weights.value.T, self.value
        terms = np.abs(a) @ np.abs(w)
        bound = self.bound @ np.abs(w) + np.abs(a) @ weights.bound.T
        return Bounded(a @ w, bound + (a.shape[-1] + ULPS_PER_OP) * self.unit * terms, self.unit)

    def __getitem__(self, index) -> Bounded:
        return Bounded(self.value[index], np.broadcast_to(self.bound, self.value.shape)[index],
                       self.unit)  # fmt: skip

    def clip(self, limit) -> Bounded:
        if limit is None:
            return self
        return Bounded(np.clip(self.value, -limit, limit), self.bound, self.unit)


def _gain(name: str, x, alpha: float, beta: float):
    """How much activation ``name`` may scale an error in its operand ``x``: its
    derivative there where it is smooth, its steepest slope where it is piecewise linear
    (a kink within the bound of ``x`` would otherwise be missed)."""
    if name == "tanh":
        return 1 - np.tanh(x) ** 2
    if name == "sigmoid":
        s = 1 / (1 + np.exp(-np.clip(x, -500, 500)))
        return s * (1 - s)
    if name == "scaledtanh":
        return abs(alpha * beta) * (1 - np.tanh(beta * x) ** 2)
    if name == "softsign":
        return 1 / (1 + np.abs(x)) ** 2
    if name == "softplus":
        return 1 / (1 + np.exp(-np.clip(x, -500, 500)))
    steepest = {"relu": 1.0, "affine": abs(alpha), "hardsigmoid": abs(alpha),
                "thresholdedrelu": 1.0}.get(name, max(1.0, abs(alpha)))  # fmt: skip
    return np.full(x.shape, steepest)  # (leakyrelu, elu: 1 on one side, |alpha| on the other)


def _activation(name: str, alpha: float, beta: float):
    function = ACTIVATIONS[name].function

    def apply(x: Bounded) -> Bounded:
        with np.errstate(all="ignore"):
            value = function(x.value, alpha, beta)
            bound = _gain(name, x.value, alpha, beta) * x.bound
        if name == "thresholdedrelu":  # (the step at alpha: uncertain within the bound)
            bound = np.where(np.abs(x.value - alpha) <= x.bound, np.inf, bound)
        return x._made(value, bound)

    return apply


def _activations(node) -> list:
    """Each activation of ``node`` as a function of a ``Bounded``, as the host reads the
    normal form's alphas and betas."""
    alphas, betas = list(node.attrs["activation_alpha"]), list(node.attrs["activation_beta"])
    bound = []
    for name in node.attrs["activations"]:
        record = ACTIVATIONS[name.lower()]
        alpha = alphas.pop(0) if record.alpha is not None else 0.0
        beta = betas.pop(0) if record.beta is not None else 0.0
        bound.append(_activation(name.lower(), alpha, beta))
    return bound


def _lstm(xt, state, r, rb, weights, acts, clip, flags):
    h, c = state
    f, g, hh = acts
    n = h.value.shape[1]
    z = xt + h.times(r) + rb
    p = weights["p"]
    i = f((z[:, :n] + p[:n] * c).clip(clip))
    if flags.get("input_forget"):
        forget = 1.0 - i
    else:
        forget = f((z[:, 2 * n : 3 * n] + p[2 * n :] * c).clip(clip))
    c_new = forget * c + i * g(z[:, 3 * n :].clip(clip))
    o = f((z[:, n : 2 * n] + p[n : 2 * n] * c_new).clip(clip))
    return o * hh(c_new), c_new


def _gru(xt, state, r, rb, weights, acts, clip, flags):
    (h,) = state
    f, g = acts
    n = h.value.shape[1]
    z = f((xt[:, :n] + h.times(r[:n]) + rb[:n]).clip(clip))
    reset = f((xt[:, n : 2 * n] + h.times(r[n : 2 * n]) + rb[n : 2 * n]).clip(clip))
    if flags.get("linear_before_reset"):
        candidate = g((xt[:, 2 * n :] + reset * (h.times(r[2 * n :]) + rb[2 * n :])).clip(clip))
    else:
        candidate = g((xt[:, 2 * n :] + (reset * h).times(r[2 * n :]) + rb[2 * n :]).clip(clip))
    return ((1.0 - z) * candidate + z * h,)


def _rnn(xt, state, r, rb, weights, acts, clip, flags):
    (h,) = state
    return (acts[0]((xt + h.times(r) + rb).clip(clip)),)


_STEPS = {"lstm": _lstm, "gru": _gru, "rnn": _rnn}


def _where(active, new: Bounded, old: Bounded) -> Bounded:
    keep = active[:, None]
    return Bounded(np.where(keep, new.value, old.value), np.where(keep, new.bound, old.bound),
                   new.unit)  # fmt: skip


def recurrent_bound(node, operands, errors) -> np.ndarray:
    """The bound of each element of ``node``'s packed result (see the module docstring),
    from its operands' values and bounds."""
    cell = CELLS[node.op.name]
    x = operands[0]
    seq, batch, _ = x.shape
    given = len(cell.operands)
    lens = np.asarray(operands[given], np.int64) if len(operands) > given else np.full(batch, seq)
    work = np.result_type(dtype_info(node.type.dtype).numpy, np.float32)
    unit = float(np.finfo(work).eps)
    out_unit = float(ml_dtypes.finfo(dtype_info(node.type.dtype).numpy).eps)
    directions = 2 if node.attrs["direction"] == "bidirectional" else 1
    hidden = operands[2].shape[2]
    per = len(cell.activations)
    acts = _activations(node)
    flags = {flag: node.attrs[flag] for flag in cell.flags}
    clip = node.attrs["clip"]
    result = np.zeros((seq + cell.states, directions, batch, hidden))
    for d in range(directions):
        reverse = node.attrs["direction"] == "reverse" or d == 1
        weights = {
            k: Bounded(np.asarray(v[d]).astype(np.float64), np.asarray(e[d]), unit)
            for k, v, e in zip(cell.operands[1:], operands[1:given], errors[1:given])
        }
        gates = cell.gates * hidden
        w, r, b = weights["w"], weights["r"], weights["b"]
        wb, rb = b[:gates], b[gates:]
        xs = Bounded(np.asarray(x).astype(np.float64), errors[0], unit)
        projected = xs.times(w) + wb
        state = tuple(weights[k] for k in ("initial_h", "initial_c")[: cell.states])
        for step in range(seq):
            active = lens > step
            if not active.any():
                break
            t = np.where(active, lens - 1 - step if reverse else step, 0)
            xt = projected[t, np.arange(batch)]
            new = _STEPS[cell.name](xt, state, r, rb, weights, acts[d * per : (d + 1) * per],
                                    clip, flags)  # fmt: skip
            state = tuple(_where(active, n, s) for n, s in zip(new, state))
            rows = np.nonzero(active)[0]
            h = state[0]
            stored = h.bound + ULPS_PER_OP * out_unit * np.abs(h.value)
            result[t[rows], d, rows] = stored[rows]
        for k, s in enumerate(state):
            result[seq + k, d] = s.bound + ULPS_PER_OP * out_unit * np.abs(s.value)
        result[seq:, d, lens == 0] = 0
    return result
