"""Graph values meet NumPy habits: ufuncs, array functions, methods and attributes
build the same graph as nbyoc's own functions, and everything else is a clear error,
never a silent Python bool or an object array."""

import numpy as np
import pytest

import nbyoc
from nbyoc.errors import NbyocTypeError
from nbyoc.frontend.numpy.ufuncs import ufunc_ops


def same(a, b) -> bool:
    return nbyoc.structural_equal(nbyoc.function([X], a), nbyoc.function([X], b))


X = nbyoc.var("x", (2, 3))


@pytest.mark.parametrize("ufunc", list(ufunc_ops()), ids=lambda u: u.__name__)
def test_every_ufunc_with_an_op_builds_that_op(ufunc):
    op = ufunc_ops()[ufunc]
    operands = [X] * ufunc.nin if op != "matmul" else [X, X.T]
    built = ufunc(*operands)
    assert same(built, nbyoc.call_op(op, *operands))


def test_ufuncs_of_every_op_with_a_numpy_ufunc_are_covered():
    assert {
        "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "negative",
        "abs", "exp", "log", "sqrt", "tanh", "matmul",
    } <= set(ufunc_ops().values())  # fmt: skip


def test_arrays_and_numpy_scalars_on_the_left_are_strong_constants():
    ones = np.ones((2, 3), np.float64)
    y = ones + X
    assert y.op.name == "add" and y.type.dtype == "float64"
    assert (np.float32(2) * X).type.dtype == "float32"
    assert (np.float64(2) * X).type.dtype == "float64"
    assert (2.0 * X).type.dtype == "float32"  # Python scalars stay weak
    assert np.maximum(X, 0.5).type.dtype == "float32"


def test_reductions_functions_and_methods():
    assert same(np.sum(X, axis=1, keepdims=True), nbyoc.sum(X, axis=1, keepdims=True))
    assert same(np.mean(X), nbyoc.mean(X))
    assert same(np.max(X, axis=0), nbyoc.max(X, axis=0))
    assert same(X.sum(axis=-1), nbyoc.sum(X, axis=1))
    assert same(X.mean(axis=(0, 1), keepdims=True), nbyoc.mean(X, axis=None, keepdims=True))
    assert same(X.max(), nbyoc.max(X))
    assert same(np.add.reduce(X), nbyoc.sum(X, axis=0))
    assert same(np.maximum.reduce(X, axis=1), nbyoc.max(X, axis=1))


def test_layout_functions_and_methods():
    assert same(X.T, nbyoc.transpose(X))
    assert same(np.transpose(X, (1, 0)), nbyoc.transpose(X, (1, 0)))
    assert same(X.transpose(1, 0), X.transpose((1, 0)))
    assert same(np.reshape(X, (3, 2)), nbyoc.reshape(X, (3, 2)))
    assert same(np.reshape(X, shape=(6,)), nbyoc.reshape(X, (6,)))
    assert same(X.reshape(3, 2), X.reshape((3, 2)))
    assert same(np.ravel(X), nbyoc.reshape(X, (6,)))
    assert same(np.concatenate([X, X], axis=1), nbyoc.concatenate([X, X], axis=1))
    assert same(np.dot(X, X.T), X @ X.T)
    assert np.expand_dims(X, 0).shape == (1, 2, 3)
    assert np.expand_dims(X, (0, -1)).shape == (1, 2, 3, 1)
    assert np.squeeze(np.expand_dims(X, 1)).shape == (2, 3)
    assert np.shape(X) == (2, 3) and np.ndim(X) == 2 and np.size(X) == 6
    assert X.ndim == 2 and X.size == 6
    v = nbyoc.var("v", (3,))
    assert v.T is v


def test_astype_to_the_own_dtype_is_the_value_itself_and_otherwise_a_cast():
    assert X.astype(np.float32) is X and X.astype("float32") is X
    cast = X.astype("int32")
    assert cast.op.name == "cast" and cast.type.dtype == "int32"
    with pytest.raises(NbyocTypeError, match="casting='unsafe'"):
        X.astype("int32", casting="same_kind")


@pytest.mark.parametrize(
    "build, op, shape",
    [
        (lambda x: np.minimum.reduce(x), "min", (3,)),
        (lambda x: np.min(x, axis=1), "min", (2,)),
        (lambda x: x.min(), "min", ()),
        (lambda x: np.prod(x, axis=0), "prod", (3,)),
        (lambda x: x.argmax(axis=1), "argmax", (2,)),
        (lambda x: np.square(x), "multiply", (2, 3)),
        (lambda x: np.stack([x, x], axis=1), "concatenate", (2, 2, 3)),
        (lambda x: np.broadcast_to(x, (4, 2, 3)), "broadcast_to", (4, 2, 3)),
        (lambda x: x.std(axis=0, ddof=1), "sqrt", (3,)),
        (lambda x: np.zeros_like(x), "broadcast_to", (2, 3)),
        (lambda x: np.clip(x, x * 0, 1.0), "minimum", (2, 3)),
    ],
)
def test_numpy_functions_with_a_graph_of_ops_build_it(build, op, shape):
    y = build(X)
    assert y.op.name == op and y.shape == shape


def test_a_numpy_built_graph_computes_what_numpy_computes():
    a = nbyoc.var("a", (4, 3))
    body = np.tanh(a @ np.ones((3, 3), np.float32)) + np.sum(np.exp(a), axis=1, keepdims=True)
    fn = nbyoc.compile(nbyoc.function([a], np.sqrt(np.abs(body)).T))
    data = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    want = np.sqrt(
        np.abs(np.tanh(data @ np.ones((3, 3), np.float32)) + np.exp(data).sum(1)[:, None])
    ).T
    np.testing.assert_allclose(fn(data), want, rtol=1e-6)


@pytest.mark.parametrize(
    "compare, op",
    [
        (lambda x: x < x, "less"), (lambda x: x <= 0, "less_equal"), (lambda x: 0 < x, "greater"),  # noqa: SIM300 - the reflected form
        (lambda x: x >= np.float32(1), "greater_equal"), (lambda x: np.greater(x, 0), "greater"),
        (lambda x: np.equal(x, x), "equal"), (lambda x: np.not_equal(x, 1.0), "not_equal"),
    ],
)  # fmt: skip
def test_comparisons_build_bool_graph_values(compare, op):
    y = compare(X)
    assert y.op.name == op and y.type.dtype == "bool"


@pytest.mark.parametrize("compare", [lambda x: x == x, lambda x: x != 1.0])
def test_equality_operators_raise_instead_of_answering_a_python_bool(compare):
    with pytest.raises(
        NbyocTypeError, match=r"are not compared with [=!]=: write nbyoc\.(not_)?equal"
    ):
        compare(X)


def test_nodes_still_hash_and_compare_by_identity_in_containers():
    y = X + 1.0
    assert len({X, y, X}) == 2 and {X: 1}[X] == 1
    assert X in [X]  # identity comes before ==, but any other node in a list is compared:
    with pytest.raises(NbyocTypeError, match="are not compared with =="):
        y in [X, y]  # noqa: B015 - test with `any(n is y for n in ...)` instead


def test_the_truth_value_error_suggests_functions_that_work():
    import re

    with pytest.raises(NbyocTypeError) as info:
        bool(X > 0)
    suggested = re.findall(r"np\.(\w+)\(", str(info.value)) + re.findall(
        r"np\.(\w+)[,)]", str(info.value)
    )
    assert {"where", "logical_and", "logical_or", "logical_not"} <= set(suggested)
    for name in suggested:
        operands = (X > 0, X, X) if name == "where" else (X > 0, X < 1)[: getattr(np, name).nin]
        assert getattr(np, name)(*operands).type.dtype in ("bool", "float32")


def test_no_truth_value_and_no_silent_array():
    with pytest.raises(NbyocTypeError, match="no truth value"):
        bool(X)
    with pytest.raises(NbyocTypeError, match="no truth value"):
        X and X  # noqa: B018 - the truth test is the point
    with pytest.raises(NbyocTypeError, match="no truth value"):
        if X.sum() > 0:  # data-dependent control flow fails at the truth test
            pass
    with pytest.raises(NbyocTypeError, match="holds no data"):
        np.asarray(X)


def test_where_and_clip_build_their_ops():
    assert np.where(X > 0, X, 0.0).op.name == "where"
    clipped = np.clip(X, 0, 1)
    assert clipped.op.name == "clip" and dict(clipped.attrs) == {"min": 0.0, "max": 1.0}


@pytest.mark.parametrize(
    "call,needle",
    [
        (
            lambda: np.arctan(X),
            r"numpy.arctan has no nbyoc op yet; the closest it supports: "
            r"numpy.tan",
        ),
        (lambda: np.exp2(X), "write np.exp\\(x \\* np.log\\(2\\)\\)"),
        (lambda: np.subtract.accumulate(X), "numpy.subtract.accumulate has no nbyoc op yet"),
        (
            lambda: np.exp(X, out=np.empty((2, 3))),
            "writes into an array, which a graph value is only within",
        ),
        (lambda: np.add(X, X, dtype=np.float64), "takes no dtype="),
        (lambda: np.sum(X, dtype=np.float64), "numpy.sum: takes no dtype="),
        (
            lambda: np.nancumsum(X),
            r"numpy.nancumsum is not supported by nbyoc.jit; the "
            r"closest it supports: numpy.nansum, numpy.cumsum, ",
        ),
        (lambda: np.lexsort(X), r"numpy.lexsort is not supported .*: numpy.sort, numpy.argsort"),
        (lambda: np.linalg.svd(X), r"^numpy.linalg.svd is not supported .*numpy.linalg.svdvals"),
        (lambda: np.dot(nbyoc.var("t", (2, 2, 2)), X), "only for 1-D and 2-D"),
        (lambda: np.reshape(X, (6,), order="F"), "C order only"),
        (lambda: np.squeeze(X, axis=0), "whose length is not 1"),
    ],
)
def test_unsupported_numpy_says_what_to_use_instead(call, needle):
    with pytest.raises(NbyocTypeError, match=needle):
        call()


def test_an_unsupported_function_error_is_one_sentence_and_short():
    with pytest.raises(NbyocTypeError) as info:
        np.nancumsum(X)
    message = str(info.value)
    assert len(message) < 200 and "supported() lists them all" in message


def test_supported_lists_functions_ufuncs_methods_attributes_and_operators():
    from nbyoc.frontend.numpy import supported

    listing = supported()
    assert {"numpy.cumsum", "numpy.einsum", "numpy.linalg.norm"} <= set(listing["functions"])
    assert {"exp", "log1p", "add.reduce", "add.accumulate", "square"} <= set(listing["ufuncs"])
    assert {"sum", "astype", "cumsum", "argsort"} <= set(listing["methods"])
    assert {"shape", "dtype", "ndim", "T"} <= set(listing["attributes"])
    assert {"+", "@", "<", "x[...]"} <= set(listing["operators"])


def test_in_place_updates_and_boolean_masks_say_why_and_what_to_write():
    y = nbyoc.var("y", (3,))
    with pytest.raises(NbyocTypeError, match=r"cannot be updated in place .*np\.where"):
        y[0] = 0.0
    with pytest.raises(NbyocTypeError, match=r"depends on the data.*np\.where\(mask, x, 0\)"):
        _ = y[y > 0.0].shape  # (only a reduction takes a selection: test_jit_masks.py)


def test_every_operator_supported_lists_builds_a_graph():
    from nbyoc.frontend.numpy.methods import elementwise_equality
    from nbyoc.frontend.numpy.support import OPERATORS, supported

    x, b = nbyoc.var("x", (2, 2)), nbyoc.var("b", (2, 2), "bool")
    symbols = {symbol: method for method, symbol in OPERATORS.items()}
    for symbol in supported()["operators"]:
        method = symbols[symbol]
        if method == "__getitem__":
            assert x[0].shape == (2,)
            continue
        unary = symbol.startswith("unary") or symbol.endswith("()") or symbol == "~"
        operands = [b if symbol in "&|^~" else x] * (1 if unary else 2)
        with elementwise_equality():
            assert getattr(operands[0], method)(*operands[1:]).shape == (2, 2), symbol
