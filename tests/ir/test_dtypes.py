"""The written-down promotion rules agree with what NumPy actually does."""

import itertools

import numpy as np
import pytest

import nbyoc
from nbyoc.errors import NbyocTypeError, UnsupportedDTypeError
from nbyoc.ir.dtypes import accumulate, normalize_dtype, promote, scalar_dtype, to_float

DTYPES = nbyoc.DTYPES


NATIVE = [d for d in DTYPES if d != "bfloat16"]


@pytest.mark.parametrize("a,b", list(itertools.product(NATIVE, NATIVE)))
def test_promotion_table_is_numpys(a, b):
    assert promote(a, b) == np.result_type(np.dtype(a), np.dtype(b)).name
    assert promote(a, b) == promote(b, a)


@pytest.mark.parametrize("other", DTYPES)
def test_bfloat16_promotes_as_float16_and_agrees_with_ml_dtypes_where_it_has_a_rule(other):
    got = promote("bfloat16", other)
    assert got == promote(other, "bfloat16")
    if other == "float16":
        assert got == "float32"  # neither holds the other
    else:
        as_half = promote("float16", "float16" if other == "bfloat16" else other)
        assert got == ("bfloat16" if as_half == "float16" else as_half)
    try:
        ml = np.result_type(np.dtype("bfloat16"), np.dtype(other)).name
    except TypeError:
        return
    assert got == ml


@pytest.mark.parametrize("narrow", nbyoc.ir.dtypes.NARROW_DTYPES)
def test_narrow_dtypes_are_moved_and_cast_but_not_computed_in(narrow):
    x = nbyoc.var("x", (2, 3), narrow)
    assert nbyoc.cast(x, "float32").type.dtype == "float32"
    assert nbyoc.transpose(x).type == nbyoc.ir.TensorType((3, 2), narrow)
    with pytest.raises(NbyocTypeError, match=f"{narrow} is a storage dtype .* cast it first"):
        nbyoc.exp(x)
    with pytest.raises(NbyocTypeError, match=f"{narrow} is a storage dtype"):
        x + x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("value", [2, -7, 2.5, -0.0, True])
def test_python_scalars_are_weak_like_numpy(dtype, value):
    if dtype == "bfloat16":  # as float16 (ml_dtypes widens to float32 next to a Python
        # float; JAX and PyTorch keep bfloat16, as NEP 50 keeps float16)
        expected = (np.zeros(3, "float16") + value).dtype.name.replace("float16", "bfloat16")
        assert scalar_dtype(value, dtype) == expected
        assert (nbyoc.var("a", (3,), dtype) + value).type.dtype == expected
        return
    try:
        expected = (np.zeros(3, dtype) + value).dtype.name
    except OverflowError:  # -7 next to an unsigned tensor: NumPy 2 refuses, so does nbyoc
        with pytest.raises(NbyocTypeError, match=f"out of bounds for {dtype}"):
            nbyoc.var("a", (3,), dtype) + value
        return
    assert scalar_dtype(value, dtype) == expected
    a = nbyoc.var("a", (3,), dtype)
    assert (a + value).type.dtype == expected
    assert (value * a).type.dtype == expected


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_scalars_are_strong_like_numpy(dtype):
    a = nbyoc.var("a", (3,), "float32")
    expected = (np.zeros(3, np.float32) + np.dtype(dtype).type(1)).dtype.name
    assert (a + np.dtype(dtype).type(1)).type.dtype == expected


@pytest.mark.parametrize("dtype", DTYPES)
def test_float_valued_and_accumulating_rules(dtype):
    x = np.ones(3, dtype)
    assert to_float(dtype) == np.mean(x).dtype.name
    assert nbyoc.exp(nbyoc.var("x", (3,), dtype)).dtype == np.exp(x).dtype.name
    assert accumulate(dtype) == np.sum(x).dtype.name


def test_out_of_range_python_int_is_refused_like_numpy():
    with pytest.raises(OverflowError):
        np.zeros(3, np.int32) + 2**40
    with pytest.raises(NbyocTypeError, match="out of bounds for int32"):
        nbyoc.var("a", (3,), "int32") + 2**40


@pytest.mark.parametrize(
    "bad", ["complex64", np.complex128, "longdouble", "U3", object, "datetime64[s]", "V4",
            "banana", ",", "f4,", "(f4, 2", "f4, i4"]
)  # fmt: skip
def test_unsupported_dtypes_are_named_with_the_supported_ones(bad):
    with pytest.raises(UnsupportedDTypeError, match="float32, float64, int32, int64, bool"):
        normalize_dtype(bad)


def test_dtype_spellings():
    assert normalize_dtype(np.float64) == normalize_dtype("f8") == "float64"
    assert normalize_dtype(np.dtype(">i4")) == "int32"


def test_non_numbers_are_refused_as_scalars():
    with pytest.raises(NbyocTypeError, match="cannot use 'x'"):
        nbyoc.var("a", (3,), "int32") + "x"
    with pytest.raises(NbyocTypeError, match="cannot use 1j"):
        nbyoc.var("a", (3,), "int32") + 1j


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtype_records_come_from_numpy(dtype):
    from nbyoc.ir.dtypes import dtype_info

    info, np_dtype = dtype_info(dtype), np.dtype(dtype)
    assert info.numpy == np_dtype and info.itemsize == np_dtype.itemsize
    assert dtype_info(np_dtype) is info
    if not info.native:  # (ml_dtypes' types: NumPy's kind for them is "V")
        return
    assert info.bits == 8 * np_dtype.itemsize
    assert info.is_float == (np_dtype.kind == "f") and info.is_integer == (np_dtype.kind in "iu")
    if info.is_integer:
        assert (info.min, info.max) == (np.iinfo(np_dtype).min, np.iinfo(np_dtype).max)


@pytest.mark.parametrize("dtype", ["bfloat16", *nbyoc.ir.dtypes.NARROW_DTYPES])
def test_ml_dtypes_records_come_from_ml_dtypes(dtype):
    import ml_dtypes

    from nbyoc.ir.dtypes import dtype_info

    info, np_dtype = dtype_info(dtype), np.dtype(getattr(ml_dtypes, dtype))
    assert info.numpy == np_dtype and not info.native
    if info.is_integer:
        limits = ml_dtypes.iinfo(np_dtype)
        assert (info.min, info.max, info.bits) == (limits.min, limits.max, limits.bits)
        assert info.kind == ("int" if limits.min < 0 else "uint")
    else:
        limits = ml_dtypes.finfo(np_dtype)
        assert info.is_float and (info.finite_max, info.bits) == (float(limits.max), limits.bits)
    assert info.computed == (dtype == "bfloat16")


def test_no_code_reads_a_dtype_by_its_spelling():
    """Facts about a dtype come from its record (dtype_info), so a new dtype is one entry
    in DTYPES: nothing may test a name's prefix or slice its bit width off the end."""
    import re
    from pathlib import Path

    package = Path(nbyoc.__file__).parent
    spelling = re.compile(r"""startswith\(\s*["'](u?int|float|bool)|dtype\w*\[-\d+:""")
    offenders = [
        f"{path.relative_to(package)}:{number}: {line.strip()}"
        for path in sorted(package.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if spelling.search(line)
    ]
    assert offenders == []
