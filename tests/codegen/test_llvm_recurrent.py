"""lstm, gru and rnn in the llvm kernel (codegen/llvm/recurrent.py, recurrent_cells.py):
a whole call in one stage function, against the host reference (itself tested against
ONNX Runtime: tests/frontend/test_onnx_recurrent.py) within the error bound of the
computation (tests/tolerance_recurrent.py), after a save -> load round trip."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.codegen.llvm.buffers import Scratch
from nbyoc.codegen.llvm.recurrent import recurrent_packs
from nbyoc.codegen.llvm.schedule import schedule as plan_schedule
from nbyoc.ir.ops.recurrent import ACTIVATIONS, CELLS, DIRECTIONS
from nbyoc.ir.specialize import specialize
from nbyoc.runtime.compiles import compile_counts

from ..buffer_plan import BufferPlanError, check_buffer_plan
from ..helpers import examples, reload
from ..tolerance import assert_within, error_bounds
from .test_llvm_gemm import host_ops


@dataclasses.dataclass
class Case:
    """One recurrent call to build: its cell, sizes, direction and attributes."""

    cell: str
    seq: int
    batch: int
    inputs: int
    hidden: int
    direction: str = "forward"
    dtype: str = "float32"
    lens: list[int] | None = None
    attrs: dict = dataclasses.field(default_factory=dict)
    constant_weights: bool = True  # (False: the stage packs them per call)
    scale: float = 1.0  # of the weights, times 1 / sqrt(hidden)
    seed: int = 0

    @property
    def directions(self) -> int:
        return 2 if self.direction == "bidirectional" else 1

    def build(self):
        """The function (x, then any non-constant operands) and its inputs."""
        rng = np.random.default_rng(self.seed)
        cell = CELLS[self.cell]
        d, g, n = self.directions, cell.gates, self.hidden
        shapes = {
            "w": (d, g * n, self.inputs), "r": (d, g * n, n), "b": (d, 2 * g * n),
            "initial_h": (d, self.batch, n), "initial_c": (d, self.batch, n), "p": (d, 3 * n),
        }  # fmt: skip
        x = nbyoc.var("x", (self.seq, self.batch, self.inputs), self.dtype)
        params, inputs = [x], [rng.standard_normal(x.type.shape).astype(self.dtype)]
        operands = [x]
        for name in cell.operands[1:]:
            data = rng.uniform(-1, 1, shapes[name]) * self.scale / np.sqrt(n)
            data = data.astype(self.dtype)
            if name in ("w", "r") and not self.constant_weights:
                operand = nbyoc.var(name, shapes[name], self.dtype)
                params.append(operand)
                inputs.append(data)
            else:
                operand = nbyoc.const(data)
            operands.append(operand)
        if self.lens is not None:
            lens = nbyoc.var("lens", (self.batch,), "int32")
            params.append(lens)
            inputs.append(np.array(self.lens, np.int32))
            operands.append(lens)
        y = nbyoc.call_op(self.cell, *operands, direction=self.direction, **self.attrs)
        return nbyoc.function(params, y), inputs


def check(case: Case) -> None:
    """The case on llvm (after a save and load) equals the host's result within the
    bound of the computation, element by element."""
    f, inputs = case.build()
    assert host_ops(f) == [], "the recurrent call should run on llvm"
    fn = reload(nbyoc.compile(f, "llvm"))
    with np.errstate(all="ignore"):
        expected = nbyoc.compile(f, "host")(*inputs)
        got = fn(*inputs)
    (bound,) = error_bounds(f, inputs)
    assert_within(got, expected, bound, f"{case}")


# -- every cell, direction and option ---------------------------------------------------


@st.composite
def activations(draw, cell: str, directions: int):
    """A name per activation of every direction, with alphas and betas for some of
    those that read them (the rest take their defaults)."""
    per = len(CELLS[cell].activations)
    names = draw(st.lists(st.sampled_from(sorted(ACTIVATIONS)), min_size=per * directions,
                          max_size=per * directions))  # fmt: skip
    reads_alpha = sum(ACTIVATIONS[n].alpha is not None for n in names)
    reads_beta = sum(ACTIVATIONS[n].beta is not None for n in names)
    number = st.floats(-2, 2, allow_nan=False).map(lambda v: round(v, 3))
    alphas = draw(st.lists(number, max_size=reads_alpha))
    betas = draw(st.lists(number, max_size=reads_beta))
    return {"activations": names, "activation_alpha": alphas, "activation_beta": betas}


@st.composite
def cases(draw):
    cell = draw(st.sampled_from(sorted(CELLS)))
    direction = draw(st.sampled_from(DIRECTIONS))
    seq, batch = draw(st.integers(0, 6)), draw(st.sampled_from([1, 1, 2, 3, 7, 9]))
    case = Case(
        cell, seq, batch, draw(st.integers(1, 9)), draw(st.integers(1, 64)), direction,
        draw(st.sampled_from(["float32", "float64"])),
        constant_weights=draw(st.booleans()), scale=draw(st.sampled_from([0.5, 1.0, 3.0])),
        seed=draw(st.integers(0, 2**16)),
    )  # fmt: skip
    if draw(st.booleans()):  # lengths, zeros among them
        case.lens = draw(st.lists(st.integers(0, seq), min_size=batch, max_size=batch))
    if draw(st.booleans()):
        case.attrs.update(draw(activations(cell, case.directions)))
    if draw(st.booleans()):
        case.attrs["clip"] = draw(st.sampled_from([0.25, 1.0, 3.0]))
    for flag in CELLS[cell].flags:
        case.attrs[flag] = draw(st.booleans())
    return case


# (each example compiles a recurrent kernel of its own: the default run takes a quarter)
@settings(max_examples=examples(40, default=5), deadline=None)
@given(cases())
def test_every_cell_direction_and_option_matches_the_host(case):
    check(case)


@pytest.mark.parametrize("cell", sorted(CELLS))
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_lengths_with_zeros_and_a_batch_over_several_tiles(cell, direction):
    # (14 rows: two full tiles of 6 and a tail, in two blocks of the batch; a GRU's two
    # products per step; rows of every length, 0 and the whole sequence among them)
    lens = [5, 0, 1, 5, 3, 0, 2, 4, 5, 1, 0, 3, 2, 5]
    check(Case(cell, 5, 14, 7, 40, direction, lens=lens, attrs={"clip": 2.0}))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("cell", sorted(CELLS))
def test_float16_and_bfloat16_compute_in_float32_as_the_host_does(cell, dtype):
    check(Case(cell, 4, 3, 5, 9, "bidirectional", dtype, lens=[4, 0, 2]))


@pytest.mark.parametrize("cell", sorted(CELLS))
def test_empty_sequences_and_inputs(cell):
    check(Case(cell, 0, 2, 3, 4))  # no steps: the final states are zeros
    check(Case(cell, 3, 2, 0, 4, "reverse"))  # no inputs: the projection is zero


def test_a_long_sequence_of_a_contracting_lstm_stays_close():
    # (the bound grows with the steps only as fast as the recurrence amplifies errors)
    check(Case("lstm", 60, 4, 16, 32, "bidirectional", scale=0.5))


def test_weights_are_packed_at_lowering_when_constant():
    for batch in (2, 9):  # (rows of one and of five a block: R in wide panels, then not)
        case = Case("gru", 3, batch, 5, 40)
        f, _ = case.build()
        panels = recurrent_packs(f.body, 2)  # R: (directions, panels, hidden, columns)
        r = f.body.args[2].data
        cols = panels.shape[-1]
        # z and r (80 rows of R) share panels; the candidate's start a panel of their own
        first = -(-80 // cols)
        np.testing.assert_array_equal(panels[0, 0, :, : min(cols, 80)], r[0, :80][:cols].T)
        np.testing.assert_array_equal(panels[0, first, :, : min(cols, 40)], r[0, 80:][:cols].T)
        assert panels.shape[1] == first + -(-40 // cols)
        source = nbyoc.compile(f, "llvm").get_source()
        assert "r_panels_" not in source and "w_panels_" not in source
        f, _ = dataclasses.replace(case, constant_weights=False).build()
        assert "r_panels_" in nbyoc.compile(f, "llvm").get_source()


def test_one_stage_function_serves_every_size_and_allocates_nothing():
    # (a batch of one or two rows a block multiplies by R in wider panels: another
    # structure, ``recurrent.WIDE_MAX_ROWS``)
    sources = []
    for seq, batch in [(3, 6), (7, 11)]:
        f, _ = Case("lstm", seq, batch, 6, 10, "bidirectional", lens=[seq] * batch).build()
        source = nbyoc.compile(f, "llvm").get_source()
        (stage,) = [m for m in source.split("# ---- ") if "projected_ =" in m]
        sources.append(stage.split("\n", 1)[1].strip())  # (less its header: a number)
        assert "np.empty" not in sources[-1] and "np.zeros" not in sources[-1]
    assert sources[0] == sources[1]


def test_a_symbolic_sequence_and_batch_run_on_one_executable():
    x = nbyoc.var("x", ("t", "n", 3))
    h0 = nbyoc.var("h0", (1, "n", 5))
    rng = np.random.default_rng(1)
    c = lambda *shape: nbyoc.const(rng.uniform(-0.5, 0.5, shape).astype(np.float32))  # noqa: E731
    f = nbyoc.function([x, h0], nbyoc.gru(x, c(1, 15, 3), c(1, 15, 5), c(1, 30), h0))
    assert host_ops(f) == []
    fn = nbyoc.compile(f, "llvm")
    for k, (seq, batch) in enumerate([(4, 2), (9, 3), (1, 1)]):
        args = [rng.standard_normal((seq, batch, 3)).astype(np.float32),
                rng.standard_normal((1, batch, 5)).astype(np.float32)]  # fmt: skip
        modules = compile_counts().get("llvm modules", 0)
        got = fn(*args)
        if k:  # (every binding runs the first one's stage function: nothing new)
            assert compile_counts().get("llvm modules", 0) == modules
        concrete = specialize(f, {"t": seq, "n": batch})
        expected = nbyoc.compile(concrete, "host")(*args)
        (bound,) = error_bounds(concrete, args)
        assert_within(got, expected, bound, f"seq {seq}, batch {batch}")


def test_sequence_lengths_outside_the_sequence_raise():
    f, inputs = Case("rnn", 3, 2, 2, 3, lens=[3, 1]).build()
    fn = nbyoc.compile(f, "llvm")
    for bad in ([4, 1], [-1, 2]):
        with pytest.raises(nbyoc.errors.ExecutionError, match=r"sequence_lens .* in \[0, 3\]"):
            fn(inputs[0], np.array(bad, np.int32))


def test_the_scratch_is_in_the_buffer_plan_and_checked():
    f, _ = Case("lstm", 4, 3, 5, 6, lens=[4, 1, 0]).build()
    ext = nbyoc.partition(f, "llvm").functions["llvm_0"]
    schedule = plan_schedule(ext, True, 1 << 15)
    scratch = [k for k in schedule.plan.home if isinstance(k, Scratch)]
    assert [s.index for s in scratch] == [0, 1, 2, 3]  # projections, products, h, c
    check_buffer_plan(ext, schedule)
    # one scratch array moved onto another: the checker refuses the plan
    home = dict(schedule.plan.home)
    home[scratch[1]] = home[scratch[0]]
    bad = dataclasses.replace(schedule.plan, home=home)
    with pytest.raises(BufferPlanError):
        check_buffer_plan(ext, dataclasses.replace(schedule, plan=bad))


def test_bfloat16_weights_pack_through_float32():
    case = Case("rnn", 2, 1, 3, 2, dtype="bfloat16")
    f, _ = case.build()
    panels = recurrent_packs(f.body, 1)
    assert panels.dtype == np.float32
    w = f.body.args[1].data
    assert w.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(panels[0, 0, :, :2], w[0].astype(np.float32).T)
