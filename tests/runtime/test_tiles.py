"""The indirect tiles (``runtime.llvm.tiles``: row k of B at ``offsets[k]`` of a flat
array) against NumPy on the same rows gathered into a matrix: every valid column
computed, nothing outside them written."""

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbyoc.runtime.llvm import tiles
from nbyoc.runtime.llvm.target import tile_name, tile_shape


def _caller(name: str):
    tile = getattr(tiles, name)

    @numba.njit
    def call(a, a_row, flat, offsets, b_col, k, c, c_row, valid):
        tile(a, a_row, flat, offsets, b_col, k, c, c_row, valid)

    return call


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("rows", ["tile", 3])
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_indirect_tiles_read_b_rows_at_their_offsets(dtype, accumulate, rows, data):
    rows = tile_shape(dtype)[0] if rows == "tile" else rows
    cols = tile_shape(dtype)[1]
    call = _caller(tile_name(dtype, rows, cols, accumulate, indirect=True))
    k = data.draw(st.integers(1, 40), label="k")
    valid = data.draw(st.integers(1, cols), label="valid")
    b_col = data.draw(st.integers(0, 5), label="b_col")
    rng = np.random.default_rng(data.draw(st.integers(0, 99), label="seed"))
    flat = rng.standard_normal(300).astype(dtype)
    offsets = rng.integers(0, flat.size - b_col - valid + 1, k).astype(np.int64)
    a = rng.standard_normal((rows + 2, k)).astype(dtype)
    c = rng.standard_normal((rows + 3, b_col + cols + 4)).astype(dtype)
    before = c.copy()
    call(a, 1, flat, offsets, b_col, k, c, 2, valid)
    b = np.stack([flat[o + b_col : o + b_col + valid] for o in offsets])
    want = a[1 : 1 + rows] @ b + (before[2 : 2 + rows, b_col : b_col + valid] if accumulate else 0)
    tolerance = np.finfo(dtype).eps * 4 * k * (1 + np.abs(a[1 : 1 + rows]) @ np.abs(b)).max()
    np.testing.assert_allclose(c[2 : 2 + rows, b_col : b_col + valid], want, atol=tolerance)
    outside = np.ones(c.shape, bool)
    outside[2 : 2 + rows, b_col : b_col + valid] = False
    np.testing.assert_array_equal(c[outside], before[outside])


@pytest.mark.parametrize(
    "wrong,message",
    [
        ("offsets32", "offsets must be a 1-D int64 array, got array(int32"),
        ("b64", "B must be an array of float32, got array(float64"),
    ],
)
def test_a_tile_refuses_operands_of_another_type_when_typed(wrong, message):
    """The tile reads raw bytes: an int32 offsets array or a float64 B would be read
    as the wrong elements, so Numba's typing refuses them with the reason."""
    rows, cols = tile_shape("float32")
    call = _caller(tile_name("float32", rows, cols, False, indirect=True))
    flat = np.zeros(64, np.float64 if wrong == "b64" else np.float32)
    offsets = np.zeros(2, np.int32 if wrong == "offsets32" else np.int64)
    a, c = np.zeros((rows, 2), np.float32), np.zeros((rows, cols), np.float32)
    with pytest.raises(numba.core.errors.TypingError, match=message.replace("(", r"\(")):
        call(a, 0, flat, offsets, 0, 2, c, 0, 1)


def _plain_caller(name: str):
    tile = getattr(tiles, name)

    @numba.njit
    def call(a, a_row, b, b_col, k, c, c_row, valid):
        tile(a, a_row, b, b_col, k, c, c_row, valid)

    return call


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("accumulate", [False, True])
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_streaming_tiles_compute_the_plain_tiles_product(dtype, accumulate, data):
    """A streaming tile (``_stream``: it prefetches B's rows ahead) computes what the
    plain one does, bit for bit, up to B's last row: a prefetch past the end of B
    reads nothing and faults on nothing."""
    rows, cols = tile_shape(dtype)
    rows = data.draw(st.sampled_from([rows, 4, 1]), label="rows")
    k = data.draw(st.integers(1, 40), label="k")
    valid = data.draw(st.integers(1, cols), label="valid")
    rng = np.random.default_rng(data.draw(st.integers(0, 99), label="seed"))
    a = rng.standard_normal((rows, k)).astype(dtype)
    b = rng.standard_normal((k, cols)).astype(dtype)  # (its own allocation: ends at row k)
    results = []
    for stream in (False, True):
        call = _plain_caller(tile_name(dtype, rows, cols, accumulate, stream=stream))
        c = np.full((rows, cols), 0.5, dtype)
        call(a, 0, b, 0, k, c, 0, valid)
        results.append(c)
    np.testing.assert_array_equal(results[1], results[0])
    want = a @ b[:, :valid] + (0.5 if accumulate else 0.0)
    tolerance = np.finfo(dtype).eps * 4 * k * (1 + np.abs(a) @ np.abs(b[:, :valid])).max()
    np.testing.assert_allclose(results[1][:, :valid], want, atol=tolerance)
