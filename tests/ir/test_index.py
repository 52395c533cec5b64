"""slice, gather, squeeze, unsqueeze, flatten, broadcast_to, expand, tile, pad, identity,
split and Python indexing, against NumPy on the host and on every backend."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.errors import NbyocTypeError
from tests.helpers import reload

X = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6) - 50
Y = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)


def cases(x, y):
    """(graph value, what NumPy gives) pairs over x (4, 5, 6) and y (4, 6)."""
    return [
        (x[1:, ::-2], X[1:, ::-2]), (x[1, ..., ::2], X[1, ..., ::2]), (x[None, -1], X[None, -1]),
        (x[::-1, 3:0:-1], X[::-1, 3:0:-1]), (x[-10:10, 10:-10], X[-10:10, 10:-10]),
        (x[:, [0, 2, -1]], X[:, [0, 2, -1]]), (x[..., 2], X[..., 2]),
        (nbyoc.slice(x, (3,), (-10,), (2,), (-2,)), X[:, :, 3::-2]),
        (nbyoc.gather(y, np.array([[3, 0], [-1, 1]]), 0), np.take(Y, [[3, 0], [-1, 1]], axis=0)),
        (nbyoc.pad(y, (1, 0, 1, 2)), np.pad(Y, ((1, 1), (0, 2)))),
        (nbyoc.pad(y, (1, 0, 1, 2), value=-7.5), np.pad(Y, ((1, 1), (0, 2)), constant_values=-7.5)),
        (nbyoc.pad(y, (2, 1, 3, 2), "reflect"), np.pad(Y, ((2, 3), (1, 2)), "reflect")),
        (nbyoc.pad(y, (2, 0, 3, 1), "wrap"), np.pad(Y, ((2, 3), (0, 1)), "wrap")),
        (nbyoc.pad(y, (2, 1, 0, 2), "edge"), np.pad(Y, ((2, 0), (1, 2)), "edge")),
        (nbyoc.tile(y, (2, 3)), np.tile(Y, (2, 3))), (nbyoc.tile(y, (2, 0)), np.tile(Y, (2, 0))),
        (nbyoc.tile(x, (1, 3, 1)), np.tile(X, (1, 3, 1))), (nbyoc.tile(x, (2, 1, 2)), np.tile(X, (2, 1, 2))),
        (nbyoc.tile(y, (1, 1)), np.tile(Y, (1, 1))), (nbyoc.tile(y[:1, ::-2], (40, 1)), np.tile(Y[:1, ::-2], (40, 1))),
        (nbyoc.pad(x, (30, 0, 2, 0, 40, 1), "edge"), np.pad(X, ((30, 0), (0, 40), (2, 1)), "edge")),
        (nbyoc.pad(x[:, ::2], (0, 5, 0, 3, 0, 0), "edge"), np.pad(X[:, ::2], ((0, 3), (5, 0), (0, 0)), "edge")),
        (nbyoc.pad(x, (0, 30, 1, 2, 0, 40), value=3.25), np.pad(X, ((0, 2), (30, 0), (1, 40)), constant_values=3.25)),
        (nbyoc.squeeze(x[:1]), np.squeeze(X[:1])), (nbyoc.unsqueeze(y, (0, -1)), Y[None, ..., None]),
        (nbyoc.flatten(x, 2), X.reshape(20, 6)), (nbyoc.flatten(x, 0), X.reshape(1, -1)),
        (nbyoc.expand(y[:, :1], (2, 4, 3)), np.broadcast_to(Y[:, :1], (2, 4, 3))),
        (nbyoc.broadcast_to(y[0], (3, 6)), np.broadcast_to(Y[0], (3, 6))),
        (nbyoc.identity(y) * 2.0, Y * 2),
    ]  # fmt: skip


@pytest.mark.parametrize("backend", ["host", "llvm", "csource", "examplejson"])
def test_index_ops_match_numpy(backend):
    x, y = nbyoc.var("x", X.shape), nbyoc.var("y", Y.shape)
    built = cases(x, y)
    fn = reload(nbyoc.compile(nbyoc.function([x, y], [b for b, _ in built]), backend=backend))
    for (node, want), got in zip(built, fn(X, Y)):
        assert got.dtype == want.dtype and got.shape == want.shape, node
        np.testing.assert_array_equal(got, want, err_msg=str(node.op))


def _decomposed(node):
    """The calls and constants ``node``'s op decomposes into."""
    expanded = node.op.decompose(*node.args, **node.attrs)
    assert expanded.type == node.type
    return [n for n in nbyoc.ir.post_order([expanded]) if not isinstance(n, nbyoc.ir.Var)]


@pytest.mark.parametrize("count", [3, 3000])
@pytest.mark.parametrize(
    "build",
    [
        lambda x, n: nbyoc.tile(x, (n, 1)),
        lambda x, n: nbyoc.tile(x, (n, n)),
        lambda x, n: nbyoc.pad(x, (n, n, n, n), "edge"),
        lambda x, n: nbyoc.pad(x, (n, 0, 0, n), "constant", 1.5),
    ],
    ids=["tile rows", "tile both", "edge", "constant"],
)
def test_tile_and_pad_decompose_into_as_many_nodes_whatever_the_counts(build, count):
    """A repeat count is a broadcast, never that many concatenate operands (Tile (300, 1)
    on 3x3 took 33 s to compile, edge Pad of 1000 ran out of memory) nor a constant the
    padding's size made at compile time."""
    x = nbyoc.var("x", (3, 3), "int16")
    nodes = _decomposed(build(x, count))
    few = _decomposed(build(x, 3))
    assert len(nodes) == len(few)
    calls = [n for n in nodes if isinstance(n, nbyoc.ir.Call)]
    assert all(len(c.args) <= 3 for c in calls if c.op.name == "concatenate")
    assert all(n.type.size <= 1 for n in nodes if isinstance(n, nbyoc.ir.Constant))


def test_split_gives_slices():
    x = nbyoc.var("x", (2, 7))
    parts = nbyoc.split(x, [3, 4], axis=1)
    assert [p.op.name for p in parts] == ["slice", "slice"]
    got = nbyoc.compile(nbyoc.function([x], list(parts)), backend="host")(np.ones((2, 7), "f4"))
    assert [g.shape for g in got] == [(2, 3), (2, 4)]
    assert [p.shape for p in nbyoc.split(nbyoc.var("z", (6,)), 3)] == [(2,), (2,), (2,)]


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(0, 5), min_size=1, max_size=3),
    data=st.data(),
)
def test_any_basic_slice_is_numpys(shape, data):
    keys = tuple(
        slice(data.draw(st.none() | st.integers(-7, 7)), data.draw(st.none() | st.integers(-7, 7)),
              data.draw(st.sampled_from([None, 1, 2, -1, -3])))
        for _ in shape
    )  # fmt: skip
    array = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    x = nbyoc.var("x", tuple(shape), "int32")
    view = x[keys]
    again = nbyoc.parse(str(nbyoc.function([x], view))).body  # the normal form survives
    assert nbyoc.structural_equal(again, view)
    got = nbyoc.compile(nbyoc.function([x], view), backend="host")(array)
    np.testing.assert_array_equal(got, array[keys])


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda x: x[1, 2, 3, 4], "too many indices"),
        (lambda x: x[9], "out of range"),
        (lambda x: x["a"], "cannot index a graph value with 'a'"),
        (lambda x: x[[0], 1:], "combine only with ':'"),
        (lambda x: nbyoc.slice(x, (0,), (1,), steps=(0,)), "step of 0"),
        (lambda x: nbyoc.squeeze(x, 0), "do not have length 1"),
        (lambda x: nbyoc.pad(x, (1, 1)), "begins then the 3 ends"),
        (lambda x: nbyoc.pad(x, (0, 0, 6, 0, 0, 0), "reflect"), "reflect pads axis 2"),
        (lambda x: nbyoc.pad(x, (0, 0, 7, 0, 0, 0), "wrap"), "wrap pads axis 2"),
        (lambda x: nbyoc.tile(x, (2,)), "one non-negative count per axis"),
        (lambda x: nbyoc.broadcast_to(x, (4, 1, 6)), "cannot broadcast"),
        (lambda x: nbyoc.gather(x, np.array([0.5]), 0), "indices must be integers"),
        (lambda x: nbyoc.split(x, 3, axis=1), "no 3 equal parts"),
    ],
)
def test_index_errors_say_what_is_wrong(build, message):
    with pytest.raises(NbyocTypeError, match=message):
        build(nbyoc.var("x", (4, 5, 6)))


@pytest.mark.parametrize("backend", ["host", "llvm", "examplejson"])
@pytest.mark.parametrize("dtype", ["int64", "uint64", "int8"])
def test_gather_out_of_range_is_an_error_when_it_runs(backend, dtype):
    """Every index is checked before anything is read: past the end, before the start,
    and a uint64 that would wrap to -1 as an int64."""
    x, i = nbyoc.var("x", (4, 3)), nbyoc.var("i", (2,), dtype)
    fn = nbyoc.compile(nbyoc.function([x, i], nbyoc.gather(x, i) * 2.0), backend=backend)
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    ok = np.array([3, 0] if dtype == "uint64" else [-1, 2], dtype)
    np.testing.assert_array_equal(fn(data, ok), np.take(data, ok.astype(np.int64), axis=0) * 2)
    bad = [[0, 4], [2**64 - 1, 0]] if dtype == "uint64" else [[0, 4], [-5, 0]]
    for indices in bad:
        with pytest.raises(Exception, match="out of range"):
            fn(data, np.array(indices, dtype))
