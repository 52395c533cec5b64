"""np.diff in nbyoc.jit (slices and a subtract, not_equal for bools) against NumPy: orders,
axes, prepend and append (scalars and arrays), on the host and on llvm."""

import numpy as np
import pytest

import nbyoc
from nbyoc.errors import NbyocTypeError


def cases(x, b):
    return (
        np.diff(x),
        np.diff(x, n=2, axis=0),
        np.diff(x, n=0),
        np.diff(x, n=7),  # (more rounds than elements: empty)
        np.diff(x, prepend=0),
        np.diff(x, axis=0, append=x[:1]),
        np.diff(x, prepend=np.float32(1.5), append=x[:, -1:]),
        np.diff(b, prepend=True),
        np.diff(np.cumsum(x, axis=1), axis=1, prepend=0),  # (the inverse of cumsum)
    )


@pytest.mark.parametrize(
    "backend,dtype",
    [("host", "float32"), ("host", "int16"), ("host", "uint8"), ("llvm", "uint8")],  # (wraps)
)
def test_diff_like_numpy(backend, dtype):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 50, (4, 6)).astype(dtype)
    b = rng.integers(0, 2, 7).astype(bool)
    want = cases(x, b)
    got = nbyoc.jit(cases, backend=backend)(x, b)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, k
        np.testing.assert_array_equal(g, w, err_msg=str(k))


def test_diff_refuses_what_numpy_refuses():
    x = nbyoc.var("x", (3,))
    with pytest.raises(NbyocTypeError, match="order must be non-negative"):
        np.diff(x, n=-1)
    with pytest.raises(NbyocTypeError, match="at least one dimensional"):
        np.diff(nbyoc.var("s", ()))
