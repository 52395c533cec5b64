"""ONNX QuantizeLinear and DequantizeLinear: per tensor, per axis and blocked, every
integer type nbyoc has, bit for bit ONNX Runtime's results on the host and on llvm
(ties round to even; the difference is taken in int32 before it becomes a float)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import nbyoc

from .test_onnx_import import make, tensor

ort = pytest.importorskip("onnxruntime")

TYPES = {"uint8": TensorProto.UINT8, "int8": TensorProto.INT8,
         "uint16": TensorProto.UINT16, "int16": TensorProto.INT16}  # fmt: skip


def round_trip_model(x_shape, scale, zero, **attrs):
    """x -> QuantizeLinear -> q -> DequantizeLinear -> y; q and y are outputs."""
    inits = [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(zero, "z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], **attrs),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], **attrs)]  # fmt: skip
    outputs = [tensor("q", None, {**TYPES, **NARROW}[zero.dtype.name]), tensor("y", None)]
    return make(nodes, [tensor("x", list(x_shape))], outputs, inits, opset=21)


def assert_bit_exact(model, x, backends=("host", "llvm")):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {"x": x})
    f = nbyoc.from_onnx(model)
    for backend in backends:
        got = nbyoc.compile(f, backend)(x)
        for k, (g, e) in enumerate(zip(got, expected)):
            assert g.dtype == e.dtype and g.shape == e.shape, (backend, k)
            np.testing.assert_array_equal(g, e, err_msg=f"{backend} output {k}")


def _input(shape, seed=0):
    x = (np.random.default_rng(seed).standard_normal(shape) * 4).astype(np.float32)
    x.reshape(-1)[:6] = [0.5, 1.5, 2.5, -0.5, -1.5, 1e9][: x.size]  # ties, and saturation
    return x


@pytest.mark.parametrize("dtype", sorted(TYPES))
def test_per_tensor_quantisation_is_bit_exact(dtype):
    info = np.iinfo(dtype)
    zero = np.array((int(info.min) + int(info.max)) // 2 + 3, dtype)
    assert_bit_exact(
        round_trip_model((3, 5, 7), np.array(0.03, np.float32), zero), _input((3, 5, 7))
    )


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_per_axis_quantisation_is_bit_exact(axis):
    shape = (4, 6, 5)
    n = shape[axis]
    rng = np.random.default_rng(1)
    scale = rng.uniform(0.01, 0.2, n).astype(np.float32)
    zero = rng.integers(-20, 20, n).astype(np.int8)
    assert_bit_exact(round_trip_model(shape, scale, zero, axis=axis), _input(shape, 2))


@pytest.mark.parametrize("block", [2, 3, 8])
def test_blocked_quantisation_is_bit_exact(block):
    shape = (3, 8, 4)  # blocks along axis 1: 8 positions, the last block short for 3
    blocks = -(-8 // block)
    rng = np.random.default_rng(3)
    scale = rng.uniform(0.01, 0.2, (3, blocks, 4)).astype(np.float32)
    zero = rng.integers(100, 150, (3, blocks, 4)).astype(np.uint8)
    model = round_trip_model(shape, scale, zero, axis=1, block_size=block)
    assert_bit_exact(model, _input(shape, 4))


@settings(max_examples=25, deadline=None)
@given(
    dtype=st.sampled_from(sorted(TYPES)),
    scale=st.floats(2.0**-13, 10, width=32),
    zero_fraction=st.floats(0, 1),
    seed=st.integers(0, 2**16),
)
def test_random_scales_and_zero_points_are_bit_exact(dtype, scale, zero_fraction, seed):
    info = np.iinfo(dtype)
    zero = np.array(int(info.min + zero_fraction * (int(info.max) - int(info.min))), dtype)
    model = round_trip_model((2, 9), np.array(scale, np.float32), zero)
    # (the host only: each example's constants would make llvm compile a new kernel)
    assert_bit_exact(model, _input((2, 9), seed) * np.float32(scale * 50), backends=("host",))


def test_a_dequantised_weight_folds_into_a_constant():
    w = numpy_helper.from_array(np.arange(-6, 6, dtype=np.int8).reshape(3, 4), "w")
    s = numpy_helper.from_array(np.array(0.5, np.float32), "s")
    nodes = [helper.make_node("DequantizeLinear", ["w", "s"], ["wf"]),
             helper.make_node("MatMul", ["x", "wf"], ["y"])]  # fmt: skip
    f = nbyoc.from_onnx(make(nodes, [tensor("x", [2, 3])], [tensor("y", [2, 4])], [w, s], opset=13))
    ops = [n.op.name for n in nbyoc.ir.post_order([f.body]) if isinstance(n, nbyoc.ir.Call)]
    assert ops == ["matmul"]


def test_what_nbyoc_cannot_quantise_to_is_refused_by_name():
    s = numpy_helper.from_array(np.array(0.5, np.float32), "s")
    node = helper.make_node(
        "QuantizeLinear", ["x", "s"], ["q"], output_dtype=TensorProto.FLOAT8E8M0
    )
    model = make(
        [node], [tensor("x", [2])], [tensor("q", None, TensorProto.FLOAT8E8M0)], [s], opset=25
    )
    with pytest.raises(nbyoc.errors.ModelImportError, match="FLOAT8E8M0 is not supported"):
        nbyoc.from_onnx(model)
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["q"], output_dtype=TensorProto.FLOAT16)
    model = make(
        [node], [tensor("x", [2])], [tensor("q", None, TensorProto.FLOAT16)], [s], opset=21
    )
    with pytest.raises(
        nbyoc.errors.ModelImportError, match="quantising to float16 is not supported"
    ):
        nbyoc.from_onnx(model)
    z = numpy_helper.from_array(np.zeros(3, np.uint8), "z")
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=0)
    model = make(
        [node], [tensor("x", [2, 2])], [tensor("q", None, TensorProto.UINT8)], [s, z], opset=21
    )
    with pytest.raises(
        nbyoc.errors.ModelImportError, match="holds 3 values for axis 0 of length 2"
    ):
        nbyoc.from_onnx(model)


def _session_outputs(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _assert_all_bit_exact(model, feeds):
    expected = _session_outputs(model, feeds)
    f = nbyoc.from_onnx(model)
    for backend in ("host", "llvm"):
        got = nbyoc.compile(f, backend)(*feeds.values())
        got = got if isinstance(got, tuple) else (got,)
        for k, (g, e) in enumerate(zip(got, expected)):
            assert g.dtype == e.dtype and g.shape == e.shape, (backend, k, g.dtype, e.dtype)
            np.testing.assert_array_equal(g, e, err_msg=f"{backend} output {k}")


@pytest.mark.parametrize("b_zero", ["scalar", "per column", None])
def test_matmul_integer_is_int32_exact(b_zero):
    rng = np.random.default_rng(7)
    a = rng.integers(0, 256, (2, 5, 9)).astype(np.uint8)
    inits = [numpy_helper.from_array(rng.integers(-128, 128, (9, 4)).astype(np.int8), "b"),
             numpy_helper.from_array(np.array(131, np.uint8), "az")]  # fmt: skip
    names = ["a", "b", "az"]
    if b_zero is not None:
        zero = rng.integers(-9, 9, 4 if b_zero == "per column" else ()).astype(np.int8)
        inits.append(numpy_helper.from_array(zero, "bz"))
        names.append("bz")
    node = helper.make_node("MatMulInteger", names, ["y"])
    model = make([node], [tensor("a", [2, 5, 9], TensorProto.UINT8)],
                 [tensor("y", None, TensorProto.INT32)], inits, opset=13)  # fmt: skip
    _assert_all_bit_exact(model, {"a": a})


@pytest.mark.parametrize("group", [1, 3])
def test_conv_integer_is_int32_exact(group):
    rng = np.random.default_rng(8)
    x = rng.integers(0, 256, (2, 6, 11, 9)).astype(np.uint8)
    w = numpy_helper.from_array(rng.integers(0, 256, (6, 6 // group, 3, 3)).astype(np.uint8), "w")
    zeros = [
        numpy_helper.from_array(np.array(v, np.uint8), n) for n, v in [("xz", 97), ("wz", 130)]
    ]
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], group=group,
                            pads=[1, 0, 1, 2], strides=[2, 1], dilations=[1, 2])  # fmt: skip
    model = make([node], [tensor("x", list(x.shape), TensorProto.UINT8)],
                 [tensor("y", None, TensorProto.INT32)], [w, *zeros], opset=13)  # fmt: skip
    _assert_all_bit_exact(model, {"x": x})


@pytest.mark.parametrize(("channels", "exact"), [(8, "float32"), (128, "float64")])
def test_conv_integer_sums_in_float32_only_where_that_is_exact(channels, exact):
    """Weights 128 to 155 from their zero point against activations up to 255: over 8
    channels x 9 taps each output's terms add up to at most 2.8e6 (float32 holds every
    partial sum), over 128 channels to 4.5e7, past 2**24: summed in float64. Both bit
    for bit Runtime's int32."""
    rng = np.random.default_rng(10)
    x = rng.integers(200, 256, (1, channels, 6, 7)).astype(np.uint8)
    w = numpy_helper.from_array(rng.integers(0, 28, (4, channels, 3, 3)).astype(np.uint8), "w")
    zeros = [numpy_helper.from_array(np.array(v, np.uint8), n) for n, v in [("xz", 0), ("wz", 155)]]
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 1, 1, 1])
    model = make([node], [tensor("x", list(x.shape), TensorProto.UINT8)],
                 [tensor("y", None, TensorProto.INT32)], [w, *zeros], opset=13)  # fmt: skip
    f = nbyoc.from_onnx(model)
    (conv,) = [n for n in nbyoc.ir.post_order([f.body])
               if isinstance(n, nbyoc.ir.Call) and n.op.name == "conv"]  # fmt: skip
    assert conv.type.dtype == exact
    _assert_all_bit_exact(model, {"x": x})


@pytest.mark.parametrize("kind", ["mixed", "positive", "negative", "zeros"])
def test_dynamic_quantize_linear_is_bit_exact(kind):
    rng = np.random.default_rng(9)
    x = {"mixed": rng.standard_normal((3, 40)) * 3, "positive": rng.uniform(1, 5, (3, 40)),
         "negative": -rng.uniform(1, 5, (3, 40)), "zeros": np.zeros((3, 40))}[kind]  # fmt: skip
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    outputs = [tensor("y", None, TensorProto.UINT8), tensor("s", None),
               tensor("z", None, TensorProto.UINT8)]  # fmt: skip
    model = make([node], [tensor("x", [3, 40])], outputs, opset=13)
    _assert_all_bit_exact(model, {"x": x.astype(np.float32)})


NARROW = {"int4": TensorProto.INT4, "uint4": TensorProto.UINT4,
          "float8_e4m3fn": TensorProto.FLOAT8E4M3FN, "float8_e5m2": TensorProto.FLOAT8E5M2}  # fmt: skip


@pytest.mark.parametrize("dtype", sorted(NARROW))
def test_narrow_types_quantise_and_dequantise_bit_exact(dtype):
    """int4/uint4 and float8, per tensor, saturation included: the dequantised value
    against ONNX Runtime, and the narrow q against what Runtime's y says it was (Runtime
    hands no int4 or e5m2 array to NumPy; ONNX's reference overflows int32 at 1e9)."""
    zero = np.zeros((), dtype) if dtype.startswith("float8") else np.array(3, dtype)
    model = round_trip_model((4, 9), np.array(0.25, np.float32), zero)
    x = _input((4, 9))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = session.run(["y"], {"x": x})
    # (y = (q - zero) * 0.25 exactly, so q is y * 4 + zero)
    expected = [(y * 4 + zero.astype(np.float32)).astype(dtype), y]
    f = nbyoc.from_onnx(model)
    for backend in ("host", "llvm"):
        q, y = nbyoc.compile(f, backend)(x)
        assert q.dtype == np.dtype(dtype) and y.dtype == np.float32
        np.testing.assert_array_equal(q.view(np.uint8), expected[0].view(np.uint8))
        np.testing.assert_array_equal(y, expected[1])


def test_a_blocked_int4_weight_dequantises_into_a_matmul_as_ort_computes_it():
    """The weight-only int4 quantisation of language models: an int4 weight in blocks of
    16 along its input axis, each with its own scale."""
    rng = np.random.default_rng(5)
    w = rng.integers(-8, 8, (32, 6)).astype("int4")
    scale = (rng.random((2, 6)) * 0.1 + 0.01).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(scale, "s")]
    nodes = [helper.make_node("DequantizeLinear", ["w", "s"], ["wf"], axis=0, block_size=16),
             helper.make_node("MatMul", ["x", "wf"], ["y"])]  # fmt: skip
    model = make(nodes, [tensor("x", [3, 32])], [tensor("y", None)], inits, opset=21)
    assert len(model.graph.initializer[0].raw_data) == 32 * 6 // 2  # packed
    x = rng.standard_normal((3, 32)).astype(np.float32)
    # (optimisations off: Runtime would fuse the pair into its MatMulNBits, which
    # computes in lower precision, 0.03 off here)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])
    (expected,) = session.run(None, {"x": x})
    f = nbyoc.from_onnx(model)
    for backend in ("host", "llvm"):
        np.testing.assert_allclose(nbyoc.compile(f, backend)(x), expected, rtol=1e-5, atol=1e-5)


def test_a_truncated_packed_int4_initializer_is_refused_before_it_is_read():
    w = numpy_helper.from_array(np.zeros((5, 3), "int4"), "w")
    w.raw_data = w.raw_data[:-1]  # 8 bytes hold 16 int4s at most; 15 need 8
    nodes = [helper.make_node("DequantizeLinear", ["w", "s"], ["y"])]
    scale = numpy_helper.from_array(np.array(0.5, np.float32), "s")
    model = make(nodes, [], [tensor("y", None)], [w, scale], opset=21)
    with pytest.raises(nbyoc.errors.ModelImportError, match=r"declares dims \[5, 3\]"):
        nbyoc.from_onnx(model)


def _ort_unoptimised(model, feeds, optimised: bool = False):
    """Runtime's outputs, its graph optimisations off (or on: ``_ort_optimised``)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimised
        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )  # fmt: skip
    session = ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])
    return session.run(None, feeds)


def _assert_matches_ort(model, feeds):
    expected = _ort_unoptimised(model, feeds)
    f = nbyoc.from_onnx(model)
    for backend in ("host", "llvm"):
        got = nbyoc.compile(f, backend)(*feeds.values())
        np.testing.assert_array_equal(got, expected[0], err_msg=backend)


def _scalars(**values):
    return [numpy_helper.from_array(np.asarray(v), k) for k, v in values.items()]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("signed", [False, True])
def test_qlinear_matmul_is_bit_exact(seed, signed):
    rng = np.random.default_rng(seed)
    dtype, code = (np.int8, TensorProto.INT8) if signed else (np.uint8, TensorProto.UINT8)
    low, high = (-128, 128) if signed else (0, 256)
    inits = _scalars(a_s=np.float32(0.02 + seed * 0.01), a_z=dtype(low + 100),
                     b=rng.integers(-127, 128, (7, 6)).astype(np.int8),
                     b_s=(rng.random(6) * 0.02 + 0.001).astype(np.float32), b_z=np.int8(0),
                     y_s=np.float32(0.11), y_z=dtype(low + 120))  # fmt: skip
    node = helper.make_node("QLinearMatMul", ["a", "a_s", "a_z", "b", "b_s", "b_z", "y_s", "y_z"],
                            ["y"])  # fmt: skip
    model = make([node], [tensor("a", [2, 5, 7], code)], [tensor("y", None, code)], inits, opset=21)
    _assert_matches_ort(model, {"a": rng.integers(low, high, (2, 5, 7)).astype(dtype)})


def test_a_product_too_long_for_exact_float32_sums_is_summed_in_float64():
    # 16384 products of about 230 * 113: their sum, in float32 one after the other, is
    # hundreds off (the partial sums pass 2**24); in float64 it is exact.
    rng = np.random.default_rng(0)
    k, half = 16384, 8192
    b = np.concatenate([rng.integers(100, 128, (half, 16)), -rng.integers(100, 128, (half, 16))])
    inits = _scalars(a_s=np.float32(0.01), a_z=np.uint8(0), b=b.astype(np.int8),
                     b_s=np.float32(0.01), b_z=np.int8(0), y_s=np.float32(0.55),
                     y_z=np.uint8(128))  # fmt: skip
    node = helper.make_node("QLinearMatMul", ["a", "a_s", "a_z", "b", "b_s", "b_z", "y_s", "y_z"],
                            ["y"])  # fmt: skip
    model = make([node], [tensor("a", [16, k], TensorProto.UINT8)],
                 [tensor("y", None, TensorProto.UINT8)], inits, opset=13)  # fmt: skip
    f = nbyoc.from_onnx(model)
    product = next(n for n in nbyoc.ir.post_order([f.body])
                   if isinstance(n, nbyoc.ir.Call) and n.op.name == "matmul")  # fmt: skip
    assert product.type.dtype == "float64"
    _assert_matches_ort(model, {"a": rng.integers(200, 256, (16, k)).astype(np.uint8)})


@pytest.mark.parametrize("seed", [0, 1])
def test_qlinear_conv_per_channel_with_bias_is_bit_exact(seed):
    rng = np.random.default_rng(seed)
    inits = _scalars(x_s=np.float32(0.02), x_z=np.uint8(100),
                     w=rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8),
                     w_s=(rng.random(4) * 0.02 + 0.001).astype(np.float32),
                     w_z=np.zeros(4, np.int8), y_s=np.float32(0.07), y_z=np.uint8(110),
                     B=rng.integers(-500, 500, 4).astype(np.int32))  # fmt: skip
    node = helper.make_node("QLinearConv", ["x", "x_s", "x_z", "w", "w_s", "w_z", "y_s", "y_z", "B"],
                            ["y"], pads=[1, 1, 1, 1], strides=[2, 1])  # fmt: skip
    model = make([node], [tensor("x", [1, 3, 9, 8], TensorProto.UINT8)],
                 [tensor("y", None, TensorProto.UINT8)], inits, opset=13)  # fmt: skip
    _assert_matches_ort(model, {"x": rng.integers(0, 256, (1, 3, 9, 8)).astype(np.uint8)})


@pytest.mark.parametrize(("trans_a", "per_column", "quantised"),
                         [(0, False, True), (1, True, True), (0, True, False)])  # fmt: skip
def test_runtime_contrib_qgemm_is_bit_exact(trans_a, per_column, quantised):
    # A (uint8) @ B.T (int8, a scale and zero point per column, or one) + C (int32),
    # requantised to uint8, or (no y_scale, y_zero_point) scaled to float32; alpha 1.5
    rng = np.random.default_rng(trans_a)
    n = 6
    b_s = (rng.random(n) * 0.02 + 0.001).astype(np.float32) if per_column else np.float32(0.01)
    inits = _scalars(a_s=np.float32(0.02), a_z=np.uint8(100),
                     b=rng.integers(-127, 128, (n, 40)).astype(np.int8), b_s=b_s,
                     b_z=rng.integers(-3, 4, np.shape(b_s)).astype(np.int8),
                     c=rng.integers(-500, 500, n).astype(np.int32), y_s=np.float32(0.4),
                     y_z=np.uint8(120))  # fmt: skip
    inputs = ["a", "a_s", "a_z", "b", "b_s", "b_z", "c"] + (["y_s", "y_z"] if quantised else [])
    node = helper.make_node("QGemm", inputs, ["y"], domain="com.microsoft", transA=trans_a,
                            transB=1, alpha=1.5)  # fmt: skip
    shape = [40, 5] if trans_a else [5, 40]
    out = TensorProto.UINT8 if quantised else TensorProto.FLOAT
    model = make([node], [tensor("a", shape, TensorProto.UINT8)], [tensor("y", None, out)],
                 inits, opset=13)  # fmt: skip
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    _assert_matches_ort(model, {"a": rng.integers(0, 256, shape).astype(np.uint8)})


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_runtime_contrib_qlinear_add_and_mul_are_bit_exact(op, seed):
    rng = np.random.default_rng(seed)
    inits = _scalars(a_s=np.float32(0.02), a_z=np.uint8(128), b_s=np.float32(0.03),
                     b_z=np.uint8(120), c_s=np.float32(0.05 if op == "QLinearAdd" else 0.9),
                     c_z=np.uint8(125))  # fmt: skip
    node = helper.make_node(op, ["a", "a_s", "a_z", "b", "b_s", "b_z", "c_s", "c_z"], ["y"],
                            domain="com.microsoft")  # fmt: skip
    inputs = [tensor("a", [4, 1000], TensorProto.UINT8), tensor("b", [1000], TensorProto.UINT8)]
    model = make([node], inputs, [tensor("y", None, TensorProto.UINT8)], inits, opset=13)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    feeds = {"a": rng.integers(0, 256, (4, 1000)).astype(np.uint8),
             "b": rng.integers(0, 256, 1000).astype(np.uint8)}  # fmt: skip
    _assert_matches_ort(model, feeds)


def test_other_contrib_ops_are_listed_with_their_domain():
    node = helper.make_node("FusedConv", ["x", "w"], ["y"], domain="com.microsoft")
    model = make([node], [tensor("x", [1, 1, 3, 3]), tensor("w", [1, 1, 1, 1])],
                 [tensor("y", None)], [], opset=13)  # fmt: skip
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    with pytest.raises(nbyoc.errors.ModelImportError, match=r"FusedConv x1 \(com.microsoft\)"):
        nbyoc.from_onnx(model)


def _ort_optimised(model, feeds):
    return _ort_unoptimised(model, feeds, optimised=True)


def _qdq_model(op: str, per_channel: bool, seed: int = 0, y_scale: float = 0.3):
    """x (float) -> Q -> DQ -> op (with a DQ'd int8 weight, per tensor or per channel;
    Conv and Gemm: and an int32 bias) -> Q -> DQ -> y, as static quantisers export (a
    Gemm as a linear layer: its weight transposed)."""
    rng = np.random.default_rng(seed)
    if op == "MatMul":
        w = rng.integers(-127, 128, (256, 32)).astype(np.int8)
        axis, channels, x_shape = 1, 32, [64, 256]
    elif op == "Gemm":
        w = rng.integers(-127, 128, (32, 256)).astype(np.int8)
        axis, channels, x_shape = 0, 32, [64, 256]
    else:
        w = rng.integers(-127, 128, (6, 16, 3, 3)).astype(np.int8)
        axis, channels, x_shape = 0, 6, [1, 16, 12, 12]
    w_scale = ((rng.random(channels) * 0.002 + 0.0005).astype(np.float32) if per_channel
               else np.float32(0.001))  # fmt: skip
    inits = _scalars(x_s=np.float32(0.05), x_z=np.uint8(120), w=w, w_s=w_scale,
                     w_z=np.zeros(np.shape(w_scale), np.int8), y_s=np.float32(y_scale),
                     y_z=np.uint8(110 if y_scale > 0.1 else 128))  # fmt: skip
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_s", "x_z"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "x_s", "x_z"], ["xf"]),
        helper.make_node("DequantizeLinear", ["w", "w_s", "w_z"], ["wf"], axis=axis),
    ]
    inputs = ["xf", "wf"]
    if op in ("Conv", "Gemm"):
        bias_scale = (np.float32(0.05) * w_scale).astype(np.float32)
        inits += _scalars(b=rng.integers(-300, 300, channels).astype(np.int32), b_s=bias_scale,
                          b_z=np.zeros(np.shape(bias_scale), np.int32))  # fmt: skip
        nodes.append(helper.make_node("DequantizeLinear", ["b", "b_s", "b_z"], ["bf"], axis=0))
        inputs.append("bf")
    attrs = {"Conv": {"pads": [1, 1, 1, 1]}, "Gemm": {"transB": 1}}.get(op, {})
    nodes += [
        helper.make_node(op, inputs, ["p"], **attrs),
        helper.make_node("QuantizeLinear", ["p", "y_s", "y_z"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "y_s", "y_z"], ["y"]),
    ]
    model = make(nodes, [tensor("x", x_shape)], [tensor("y", None)], inits, opset=13)
    x = (rng.standard_normal(x_shape) * 3).astype(np.float32)
    return model, {"x": x}


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("op", ["MatMul", "Conv", "Gemm"])
def test_qdq_products_match_runtime_optimised_with_integers_and_as_written_without(op, per_channel):
    model, feeds = _qdq_model(op, per_channel)
    integer = nbyoc.from_onnx(model)  # (the default reading)
    calls = [n.op.name for n in nbyoc.ir.post_order([integer.body])
             if isinstance(n, nbyoc.ir.Call)]  # fmt: skip
    # (the product's operands are the integers less their zero points)
    product = next(n for n in nbyoc.ir.post_order([integer.body])
                   if isinstance(n, nbyoc.ir.Call) and n.op.name in ("matmul", "conv"))  # fmt: skip
    # (in float32: the sums are short enough to be exact there)
    assert product.type.dtype == "float32" and calls.count("round") >= 2
    # (on a model this small the two ways round alike; Smart Turn's differ: its test)
    on, off = _ort_optimised(model, feeds), _ort_unoptimised(model, feeds)
    for backend in ("host", "llvm"):
        np.testing.assert_array_equal(nbyoc.compile(integer, backend)(feeds["x"]), on[0])
        written = nbyoc.from_onnx(model, qdq="float")
        np.testing.assert_array_equal(nbyoc.compile(written, backend)(feeds["x"]), off[0])


@pytest.mark.parametrize(("op", "seed"), [("MatMul", 1), ("Conv", 1), ("Gemm", 0)])
def test_where_runtime_s_two_readings_differ_the_integer_one_is_the_optimised(op, seed):
    """Models (a finer output scale, chosen seeds) on which Runtime's two sessions
    disagree: the integer reading is the optimised session's, on host and llvm. (The
    float reading, a float sum in another order than Runtime's, is not always the
    unoptimised session's: on the Conv here it is the optimised one's.)"""
    model, feeds = _qdq_model(op, False, seed, y_scale=0.03)
    on, off = _ort_optimised(model, feeds)[0], _ort_unoptimised(model, feeds)[0]
    assert not np.array_equal(on, off)
    integer = nbyoc.from_onnx(model, qdq="integer")
    for backend in ("host", "llvm"):
        np.testing.assert_array_equal(nbyoc.compile(integer, backend)(feeds["x"]), on)


def test_gemm_fuses_on_runtime_s_conditions():
    """A Gemm with a bias and alpha other than 1 (QGemm would scale the bias too), or
    with beta other than 1, stays as written; so does a product whose output is of
    another type than its activation (Runtime fuses neither)."""

    def products(model):  # (QGemm's product is a matmul of the integers; Gemm's a gemm)
        f = nbyoc.from_onnx(model, qdq="integer")
        return [n.op.name for n in nbyoc.ir.post_order([f.body])
                if isinstance(n, nbyoc.ir.Call) and n.op.name in ("matmul", "gemm")]  # fmt: skip

    model, _ = _qdq_model("Gemm", False)
    assert products(model) == ["matmul"]
    for name, value in (("alpha", 0.5), ("beta", 2.0)):
        changed = onnx.ModelProto()
        changed.CopyFrom(model)
        gemm = next(n for n in changed.graph.node if n.op_type == "Gemm")
        gemm.attribute.append(helper.make_attribute(name, value))
        assert products(changed) == ["gemm"], name
    signed = onnx.ModelProto()
    signed.CopyFrom(model)
    zero = next(t for t in signed.graph.initializer if t.name == "y_z")
    zero.CopyFrom(numpy_helper.from_array(np.int8(0), "y_z"))
    assert products(signed) == ["gemm"]


def test_a_qdq_product_read_by_more_than_its_quantizer_stays_as_written():
    model, _ = _qdq_model("MatMul", False)
    model.graph.node.append(helper.make_node("Relu", ["p"], ["also"]))
    model.graph.output.append(tensor("also", None))
    f = nbyoc.from_onnx(model, qdq="integer")
    product = next(n for n in nbyoc.ir.post_order([f.body])
                   if isinstance(n, nbyoc.ir.Call) and n.op.name == "matmul")  # fmt: skip
    assert product.type.dtype == "float32"
    with pytest.raises(nbyoc.errors.NbyocError, match="qdq must be 'float' or 'integer'"):
        nbyoc.from_onnx(model, qdq="int8")
