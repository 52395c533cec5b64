"""einsum against np.einsum: a list of subscripts (matrix products, batches, traces,
diagonals, ellipses, broadcasting, implicit outputs, NumPy's interleaved form), random
subscripts drawn by hypothesis, integer and bool dtypes, errors, and the graph on llvm."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbyoc
from nbyoc.errors import NbyocTypeError
from tests.helpers import reload

from ..codegen.test_log1p_expm1 import offloaded_ops

SUBSCRIPTS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("ii->i", [(4, 4)]),
    ("ii->", [(4, 4)]), ("ii", [(4, 4)]), ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]),
    ("i,i", [(3,), (3,)]), ("i,j->ij", [(3,), (4,)]), ("...ij->...ji", [(5, 2, 3)]),
    ("...ij,...jk->...ik", [(5, 2, 3), (1, 3, 4)]), ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]),
    ("ij,ij->ij", [(3, 1), (3, 4)]), ("ij,jk", [(2, 1), (3, 4)]), ("iij->ji", [(2, 2, 3)]),
    ("iii->i", [(3, 3, 3)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("i,->i", [(3,), ()]),
    (",", [(), ()]), ("...", [(3,)]), ("i...->...", [(2, 3)]), ("...a,b", [(5, 2, 3), (4,)]),
    ("abc,cd,bd->a", [(2, 3, 4), (4, 5), (3, 5)]), ("ijk,ikl->jl", [(2, 3, 4), (2, 4, 5)]),
    ("ij,ji->", [(3, 4), (4, 3)]), ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("i,i,i->i", [(3,), (3,), (3,)]), ("ab,ab,ab->", [(2, 3), (2, 3), (2, 3)]),
    ("ij,kl->ijkl", [(2, 3), (4, 5)]), ("Ab,bC->CA", [(2, 3), (3, 4)]), ("bA,Ac", [(2, 3), (3, 4)]),
    (" ij , jk -> ik ", [(2, 3), (3, 4)]), ("i...i->...", [(3, 2, 3)]), ("jii->ij", [(2, 3, 3)]),
    ("...ii->...i", [(2, 3, 3)]), ("ij...,jk...->ik...", [(2, 3, 4), (3, 5, 1)]),
]  # fmt: skip


def host(build, arrays):
    params = [nbyoc.var(f"x{k}", a.shape, a.dtype) for k, a in enumerate(arrays)]
    return nbyoc.compile(nbyoc.function(params, build(*params)), backend="host")(*arrays)


def check(got, want, rtol=1e-12):
    assert np.shape(got) == np.shape(want) and got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("subscripts,shapes", SUBSCRIPTS)
def test_subscripts_like_numpy(subscripts, shapes):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in shapes]
    check(host(lambda *xs: nbyoc.einsum(subscripts, *xs), arrays), np.einsum(subscripts, *arrays))


def test_numpys_interleaved_form():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))
    got = host(lambda x, y: nbyoc.einsum(x, [Ellipsis, 0, 1], y, [1, 2], [Ellipsis, 2, 0]), [a, b])
    check(got, np.einsum(a, [Ellipsis, 0, 1], b, [1, 2], [Ellipsis, 2, 0]))


@pytest.mark.parametrize("dtype", ["int8", "int32", "bool", "float32", "uint8"])
def test_dtypes_and_wrapping_like_numpy(dtype):
    rng = np.random.default_rng(2)
    a = rng.integers(0, 90, (3, 4)).astype(dtype)
    b = rng.integers(0, 90, (4, 5)).astype(dtype)
    for sub in ("ij,jk->ik", "ij,ij->", "ij->j", "ij,jk->"):
        operands = (
            [a, b] if sub.count(",") and sub.startswith("ij,jk") else [a, a][: sub.count(",") + 1]
        )
        got = host(lambda *xs, s=sub: nbyoc.einsum(s, *xs), operands)
        check(got, np.einsum(sub, *operands), rtol=1e-6)


@st.composite
def einsum_cases(draw):
    """Random subscripts over labels a-d with repeats, size-1 broadcasting and '...'."""
    sizes = {label: draw(st.integers(1, 3)) for label in "abcd"}
    dots = draw(st.lists(st.integers(1, 3), max_size=2))
    terms, shapes = [], []
    for _ in range(draw(st.integers(1, 3))):
        labels = draw(st.lists(st.sampled_from("abcd"), max_size=3))
        ones = {label for label in labels if draw(st.integers(0, 4)) == 0}
        shape = [1 if label in ones else sizes[label] for label in labels]
        term = "".join(labels)
        if dots and draw(st.booleans()):
            own = dots[len(dots) - draw(st.integers(0, len(dots))) :]
            at = draw(st.integers(0, len(labels)))
            term = term[:at] + "..." + term[at:]
            shape = shape[:at] + own + shape[at:]
        terms.append(term)
        shapes.append(tuple(shape))
    subscripts = ",".join(terms)
    if draw(st.booleans()):
        used = sorted({c for t in terms for c in t if c.isalpha()})
        out = draw(st.permutations(used)).__iter__()
        out = "".join(list(out)[: draw(st.integers(0, len(used)))])
        if any("..." in t for t in terms):
            out = "..." + out
        subscripts += "->" + out
    return subscripts, shapes


@settings(max_examples=150, deadline=None)
@given(case=einsum_cases(), seed=st.integers(0, 3))
def test_random_subscripts_like_numpy(case, seed):
    subscripts, shapes = case
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in shapes]
    try:
        want = np.einsum(subscripts, *arrays)
    except ValueError:
        with pytest.raises(NbyocTypeError):
            nbyoc.einsum(subscripts, *(nbyoc.var(f"x{k}", s, "float64")
                                       for k, s in enumerate(shapes)))  # fmt: skip
        return
    check(host(lambda *xs: nbyoc.einsum(subscripts, *xs), arrays), np.asarray(want))


@pytest.mark.parametrize(
    "subscripts,shapes,needle",
    [
        ("ij,jk->ik", [(2, 3), (4, 5)], "label 'j' has sizes 3 and 4"),
        ("ij,jk", [(2, 3)], "2 input term(s) for 1 operand(s)"),
        ("ijk", [(2, 3)], "does not fit an operand of 2 dimension(s)"),
        ("ii->i", [(1, 3)], "repeated label 'i'"),
        ("ij->iz", [(2, 3)], "output label(s) z appear in no input"),
        ("ij->ii", [(2, 3)], "repeats a label"),
        ("...ij->ij", [(4, 2, 3)], "need a '...' in the output"),
        ("i2,j", [(2, 3), (3,)], "is not letters"),
    ],
)
def test_errors_say_what_is_wrong(subscripts, shapes, needle):
    values = [nbyoc.var(f"x{k}", s, "float64") for k, s in enumerate(shapes)]
    with pytest.raises(NbyocTypeError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        nbyoc.einsum(subscripts, *values)


def test_on_llvm_the_products_run_as_matmuls():
    """Attention scores and a chain of products: matmuls and transposes llvm runs."""
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((2, 3, 8, 16)), rng.standard_normal((2, 3, 10, 16))
    a, b, c = rng.standard_normal((6, 7)), rng.standard_normal((7, 5)), rng.standard_normal((5, 4))
    vq, vk, va, vb, vc = (nbyoc.var(n, x.shape, "float64") for n, x in
                          zip("qkabc", (q, k, a, b, c)))  # fmt: skip
    outs = [nbyoc.einsum("bhqd,bhkd->bhqk", vq, vk), nbyoc.einsum("ij,jk,kl->il", va, vb, vc),
            nbyoc.einsum("ii->", va[:, :6])]  # fmt: skip
    fn = reload(nbyoc.compile(nbyoc.function([vq, vk, va, vb, vc], outs), backend="llvm"))
    assert "matmul" in offloaded_ops(fn)
    got = fn(q, k, a, b, c)
    for g, w in zip(got, [np.einsum("bhqd,bhkd->bhqk", q, k), a @ b @ c, np.trace(a[:, :6])]):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_jit_runs_numpy_einsum():
    @nbyoc.jit
    def f(x, y):
        return np.einsum("ij,jk->ik", x, y) + np.einsum("ii->i", x @ y)[:, None]

    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((4, 3))
    np.testing.assert_allclose(f(x, y), x @ y + np.diag(x @ y)[:, None], rtol=1e-12)
