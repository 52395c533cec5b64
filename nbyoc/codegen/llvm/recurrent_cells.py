"""The elementwise part of one step of the llvm recurrent stage (``recurrent``): each
cell's gates as Numba source for the loop over a row's hidden units, with ONNX's
activations (their alpha and beta written in as literals), ``clip``, LSTM's peepholes
and ``input_forget``, GRU's ``linear_before_reset``.

A cell's step is one or two *phases*, each a product of a state by R's columns of some
gates (a *segment* of R, packed into panels of its own), then a loop over each active
row's hidden units. GRU without ``linear_before_reset`` needs its reset gate before the
product of its candidate: its first phase writes ``r * h``, the stage multiplies that
by R's candidate rows, and its second phase does the rest.

The loop body reads, by name: ``prow`` (this step's input projection of the row, all
gates, without W's bias), ``zrow`` (the state times R^T, all gates), ``brow`` (the
direction's biases: W's, then R's), ``peep`` (the peepholes: i, o, f), ``hrow`` and
``crow`` (the row's states, updated in place), ``rhrow`` (GRU's ``r * h``), ``yrow``
(the output row of this step); gate ``g``'s values lie at ``j + og{g}``, R's bias of it
at ``j + ob{g}``. Every operation runs in the value dtype, in the host reference's
order (``nbyoc.ir.ops.recurrent``): ``((x W^T + Wb) + h R^T) + Rb``.

>>> step = cell_step("rnn", "float32", [("relu", 0.0, 0.0)], None, {})
>>> step.segments, step.phases[0][-1]
(((0, 1),), 'yrow[j] = np.float32(hn)')
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...ir.ops import recurrent as ops
from . import rules


def _literal(x: float, dtype: str) -> str:
    return rules.literal(x, dtype)


def _tanh(v: str, dtype: str) -> str:
    return rules.scalar_expression("tanh", [v], dtype)


#: Each activation (by its name in lower case) as source of its argument ``v`` (a
#: variable), its alpha ``a`` and beta ``b`` and the value dtype ``t``; the same
#: functions as ``nbyoc.ir.ops.recurrent.ACTIVATIONS``'s. Selects, not branches, where
#: the host's ``np.where`` picks (LLVM vectorises the loop over the hidden units).
SOURCES: dict[str, Callable[[str, float, float, str], str]] = {
    "relu": lambda v, a, b, t: f"np.maximum({v}, {_literal(0, t)})",
    "tanh": lambda v, a, b, t: _tanh(v, t),
    "sigmoid": lambda v, a, b, t: rules.scalar_expression("sigmoid", [v], t),
    "affine": lambda v, a, b, t: f"{_literal(a, t)} * {v} + {_literal(b, t)}",
    "leakyrelu": lambda v, a, b, t: f"({v} if {v} >= {_literal(0, t)} else {_literal(a, t)} * {v})",
    "thresholdedrelu": lambda v, a, b, t: f"({v} if {v} > {_literal(a, t)} else {_literal(0, t)})",
    "scaledtanh": lambda v, a, b, t: f"{_literal(a, t)} * {_tanh(f'{_literal(b, t)} * {v}', t)}",
    "hardsigmoid": lambda v, a, b, t: (
        f"np.minimum(np.maximum({_literal(a, t)} * {v} + {_literal(b, t)}, {_literal(0, t)}), "
        f"{_literal(1, t)})"
    ),
    "elu": lambda v, a, b, t: (
        f"({v} if {v} >= {_literal(0, t)} else {_literal(a, t)} * np.expm1({v}))"
    ),
    "softsign": lambda v, a, b, t: f"{v} / ({_literal(1, t)} + np.abs({v}))",
    "softplus": lambda v, a, b, t: (
        f"np.maximum({v}, {_literal(0, t)}) + np.log1p(np.exp(-np.abs({v})))"
    ),
}
assert set(SOURCES) == set(ops.ACTIVATIONS), "internal: an activation without its source"
#: The ``rules.HELPERS`` each activation may call (by the rules of its ops).
_USES = {"tanh": "tanh", "sigmoid": "sigmoid", "scaledtanh": "tanh"}


@dataclass(frozen=True)
class CellStep:
    """One cell's step: the segments of R's columns, as (first gate, gates), each packed
    into panels of its own; its phases' loop bodies (phase ``k`` runs after the product
    of segment ``k``: of the hidden state, or for GRU's second of ``r * h``); the
    ``rules.HELPERS`` they call."""

    segments: tuple[tuple[int, int], ...]
    phases: tuple[list[str], ...]
    helpers: frozenset[str]


def cell_step(cell: str, storage: str, activations, clip, flags) -> CellStep:
    """The step of one direction of ``cell`` over arrays of dtype ``storage`` (computed
    in its value dtype: float16 in float32), with that direction's ``activations``
    ((name, alpha, beta) each: ``direction_activations``).

    >>> step = cell_step("gru", "float32", [("sigmoid", 0, 0), ("tanh", 0, 0)], None, {})
    >>> step.segments, sorted(step.helpers)
    (((0, 2), (2, 1)), ['sigmoid_f32', 'tanh_f32'])
    """
    dtype = rules.value_dtype(storage)
    acts, helpers = [], set()
    for activation, alpha, beta in activations:
        source = SOURCES[activation]
        acts.append(lambda v, s=source, a=alpha, b=beta: rules.cast(s(v, a, b, dtype), dtype))
        if activation in _USES:
            helpers.update(rules.helpers_for(_USES[activation], dtype))

    def clipped(v: str) -> str:
        if clip is None:
            return v
        return f"np.minimum(np.maximum({v}, {_literal(-clip, dtype)}), {_literal(clip, dtype)})"

    segments, phases = _CELLS[cell](_Gates(storage, dtype, acts, clipped), flags)
    return CellStep(segments, phases, frozenset(helpers))


def direction_activations(cell: str, directions: int, names, alphas, betas) -> list[list]:
    """Each direction's activations as (name in lower case, alpha, beta), from the op's
    normal form (``ops.normal_activations``: a name per activation of every direction,
    one alpha and beta for each activation that reads one, in order), read as
    ``ops.bound_activations`` reads them.

    >>> direction_activations("rnn", 2, ("LeakyRelu", "Tanh"), (0.2,), ())
    [[('leakyrelu', 0.2, 0.0)], [('tanh', 0.0, 0.0)]]
    """
    alphas, betas, bound = list(alphas), list(betas), []
    for name in names:
        activation = ops.ACTIVATIONS[name.lower()]
        alpha = alphas.pop(0) if activation.alpha is not None else 0.0
        beta = betas.pop(0) if activation.beta is not None else 0.0
        bound.append((name.lower(), alpha, beta))
    per = len(ops.CELLS[cell].activations)
    return [bound[d * per : (d + 1) * per] for d in range(directions)]


class _Gates:
    """The source pieces a cell's loop body is written with."""

    def __init__(self, storage: str, dtype: str, acts, clipped):
        self.storage, self.acts, self.clipped = storage, acts, clipped
        self.one = _literal(1, dtype)

    def load(self, array: str, index: str) -> str:
        return rules.load(f"{array}[{index}]", self.storage)

    def projected(self, g: int) -> str:
        """Gate ``g``'s input projection with W's bias: ``x W^T + Wb``."""
        return f"(prow[j + og{g}] + {self.load('brow', f'j + og{g}')})"

    def total(self, g: int) -> str:
        """Gate ``g``'s whole pre-activation sum: ``((x W^T + Wb) + h R^T) + Rb``."""
        return f"({self.projected(g)} + zrow[j + og{g}]) + {self.load('brow', f'j + ob{g}')}"

    def apply(self, target: str, k: int, argument: str) -> list[str]:
        """Lines setting ``target`` to activation ``k`` of ``clip(argument)``."""
        return [f"u = {self.clipped(argument)}", f"{target} = {self.acts[k]('u')}"]

    def output(self, value: str) -> str:
        return f"yrow[j] = {rules.store(rules.cast(value, self.storage), self.storage)}"


def _lstm(gates: _Gates, flags) -> tuple:
    """i, o, f, c (ONNX's order); peepholes i, o, f."""
    lines = ["c = crow[j]"]
    lines += gates.apply("i", 0, f"{gates.total(0)} + {gates.load('peep', 'j')} * c")
    if flags.get("input_forget"):
        lines.append(f"fg = {gates.one} - i")
    else:
        lines += gates.apply("fg", 0, f"{gates.total(2)} + {gates.load('peep', 'j + og2')} * c")
    lines += gates.apply("cc", 1, gates.total(3))
    lines.append("cn = fg * c + i * cc")
    lines += gates.apply("o", 0, f"{gates.total(1)} + {gates.load('peep', 'j + og1')} * cn")
    lines += [
        f"hn = o * {gates.acts[2]('cn')}",
        "crow[j] = cn",
        "hrow[j] = hn",
        gates.output("hn"),
    ]
    return ((0, 4),), (lines,)


def _gru(gates: _Gates, flags) -> tuple:
    """z, r, h (ONNX's order)."""
    lines = [*gates.apply("zg", 0, gates.total(0)), *gates.apply("rg", 0, gates.total(1))]
    new = [
        f"hn = ({gates.one} - zg) * hc + zg * hrow[j]",
        "hrow[j] = hn",
        gates.output("hn"),
    ]
    if flags.get("linear_before_reset"):
        recurrent = f"rg * (zrow[j + og2] + {gates.load('brow', 'j + ob2')})"
        lines += gates.apply("hc", 1, f"{gates.projected(2)} + {recurrent}")
        return ((0, 3),), (lines + new,)
    lines += ["zrow[j] = zg", "rhrow[j] = rg * hrow[j]"]
    second = [*gates.apply("hc", 1, gates.total(2)), "zg = zrow[j]", *new]
    return ((0, 2), (2, 1)), (lines, second)


def _rnn(gates: _Gates, flags) -> tuple:
    lines = [*gates.apply("hn", 0, gates.total(0)), "hrow[j] = hn", gates.output("hn")]
    return ((0, 1),), (lines,)


#: Each cell's step: (gates, flags) -> (segments, phases' loop bodies).
_CELLS = {"lstm": _lstm, "gru": _gru, "rnn": _rnn}
assert set(_CELLS) == set(ops.CELLS), "internal: a cell without its step"
