"""``from_onnx`` on models nobody checked (issue 35): values computed while importing are
bounded by the limit ``folded_bytes`` before they are allocated; tensors' dims must agree
with their data; external data is read only from inside the model's directory; invalid
graphs and attributes are ``NbyocError``\\ s naming the node, never IndexError,
ValueError, ZeroDivisionError or OverflowError."""

from __future__ import annotations

import os
import tracemalloc

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import nbyoc
from nbyoc import limits
from nbyoc.errors import LimitError, ModelImportError

from .onnx_mutations import floats, ints, onnx_model

F = TensorProto.FLOAT
Y = helper.make_tensor_value_info("y", F, None)


def model(nodes, inputs=(), initializers=(), outputs=(Y,), opset=18) -> bytes:
    return onnx_model(nodes, inputs, outputs, initializers, opset)


def redimensioned(tensor, dims):
    tensor.dims[:] = dims  # onnx's helpers refuse to write this: a crafted file would not
    return tensor


def x_input(shape):
    return helper.make_tensor_value_info("x", F, list(shape))


def peak_of(fn) -> tuple[BaseException, int]:
    tracemalloc.start()
    try:
        fn()
    except nbyoc.NbyocError as e:
        error = e
    else:
        raise AssertionError("no error")
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return error, peak


# -- values computed while importing (item 8) ----------------------------------------------

BOMBS = {
    "ConstantOfShape": model([helper.make_node("ConstantOfShape", ["s"], ["y"])],
                             initializers=[ints("s", [2**28])]),
    "Range": model([helper.make_node("Range", ["a", "b", "c"], ["y"])],
                   initializers=[ints("a", 0), ints("b", 2**40), ints("c", 1)]),
    "Expand": model([helper.make_node("Expand", ["k", "s"], ["y"])],
                    initializers=[floats("k", [1.0]), ints("s", [2**16, 2**16])]),
    "Tile": model([helper.make_node("Tile", ["k", "r"], ["y"])],
                  initializers=[floats("k", [[1.0]]), ints("r", [2**15, 2**15])]),
    "Dropout": model([helper.make_node("Dropout", ["x"], ["y", "mask"])],
                     inputs=[x_input([2**20, 2**20])]),
    "ReduceMax": model([helper.make_node("ReduceMax", ["e"], ["y"], axes=[0])],
                       initializers=[redimensioned(floats("e", []), [0, 2**40])], opset=13),
}  # fmt: skip


@pytest.mark.parametrize("op", BOMBS)
def test_a_value_too_large_to_compute_while_importing_is_refused_before_it_is_allocated(op):
    # issue 35: a 95-byte ConstantOfShape([2**28]) model took 2 GiB.
    error, peak = peak_of(lambda: nbyoc.from_onnx(BOMBS[op]))
    assert isinstance(error, LimitError) and error.limit == "folded_bytes"
    assert str(error).startswith(f"{op} node")
    assert "more than the limit folded_bytes = 268,435,456" in str(error)
    assert "NBYOC_LIMIT_FOLDED_BYTES=<n>" in str(error)
    assert peak < 16 << 20


def test_raising_the_limit_lets_a_trusted_model_fold_a_larger_value():
    shape = model([helper.make_node("ConstantOfShape", ["s"], ["y"])],
                  initializers=[ints("s", [4096])])  # fmt: skip
    with limits.override(folded_bytes=16_383), pytest.raises(LimitError, match="16,384 bytes"):
        nbyoc.from_onnx(shape)
    with limits.override(folded_bytes=16_384):
        f = nbyoc.from_onnx(shape)
    assert f.body.data.shape == (4096,)


# -- invalid models and attributes (items 11 and 12) ----------------------------------------

INVALID = {
    "Reshape shape [1, 0] on 1-D": (
        model([helper.make_node("Reshape", ["x", "s"], ["y"])], [x_input([4])], [ints("s", [1, 0])]),
        "Reshape node: shape (1, 0) copies (0) a dim at a position the 1-D input does not have"),
    "ConstantOfShape [-5]": (
        model([helper.make_node("ConstantOfShape", ["s"], ["y"])], initializers=[ints("s", [-5])]),
        "ConstantOfShape node: cannot make a value of shape (-5,) (negative size)"),
    "Range to NaN": (
        model([helper.make_node("Range", ["a", "b", "c"], ["y"])],
              initializers=[floats("a", 0), floats("b", np.nan), floats("c", 1)]),
        "Range node: start, limit and delta must be finite, got 0.0, nan, 1.0"),
    "Split num_outputs=0": (
        model([helper.make_node("Split", ["x"], ["y"], num_outputs=0)], [x_input([4])]),
        "Split node: num_outputs is 0; a split makes at least one part"),
    "Split axis 3 of 1-D": (
        model([helper.make_node("Split", ["x"], ["y"], axis=3, num_outputs=1)], [x_input([4])]),
        "Split node: axis 3 is out of range for a 1-D input"),
    "Sum of nothing": (model([helper.make_node("Sum", [], ["y"])]), "Sum node: needs at least one input"),
    "Conv on 1-D": (
        model([helper.make_node("Conv", ["x", "w"], ["y"])], [x_input([4])],
              [floats("w", np.ones(4))]),
        "Conv node: conv(Tensor[(4,), float32]): needs (N, C, spatial...) input"),
    "Resize by inf": (
        model([helper.make_node("Resize", ["x", "", "r"], ["y"])], [x_input([1, 1, 2, 2])],
              [floats("r", [1, 1, np.inf, 1])]),
        "scales needs 4 positive, finite values"),
    "Pad axes=[7] on 2-D": (
        model([helper.make_node("Pad", ["x", "p", "", "a"], ["y"])], [x_input([2, 3])],
              [ints("p", [1, 1]), ints("a", [7])]),
        "Pad node: axes entry 7 is out of range for a 2-D input"),
    "Slice bounds as floats": (
        model([helper.make_node("Slice", ["x", "b", "e"], ["y"])], [x_input([4])],
              [floats("b", [0.5]), floats("e", [np.inf])]),
        "Slice node: input 1 (starts) must hold integers, got float32"),
    "initializer dims disagree with its data": (
        model([helper.make_node("Add", ["x", "w"], ["y"])], [x_input([4])],
              [redimensioned(floats("w", np.ones(4)), [1000])]),
        "initializer 'w': declares dims [1000] (1,000 elements) but holds 4"),
    "initializer with negative dims": (
        model([helper.make_node("Add", ["x", "w"], ["y"])], [x_input([4])],
              [redimensioned(floats("w", np.ones(4)), [-4])]),
        "initializer 'w': declares negative dims [-4]"),
    "Split num_outputs=2**40": (
        model([helper.make_node("Split", ["x"], ["y", "z"], num_outputs=2**40)], [x_input([4])]),
        "Split node: num_outputs is 1099511627776, but the node has 2 outputs"),
    "MaxPool without kernel_shape": (
        model([helper.make_node("MaxPool", ["x"], ["y"])], [x_input([1, 1, 4, 4])]),
        "MaxPool node: kernel_shape is required"),
    "ReduceMax of a 0-D input over axis 0": (
        model([helper.make_node("ReduceMax", ["x"], ["y"], axes=[0])], [x_input([])], opset=13),
        "ReduceMax node: axes entry 0 is out of range for a 0-D input"),
    "ArgMax of a 0-D input, last index": (
        model([helper.make_node("ArgMax", ["x"], ["y"], select_last_index=1)], [x_input([])]),
        "ArgMax node: axis 0 is out of range for a 0-D input"),
    "LayerNormalization axis 5 of 2-D": (
        model([helper.make_node("LayerNormalization", ["x", "g"], ["y"], axis=5, stash_type=11)],
              [x_input([2, 3])], [floats("g", [1, 1, 1])]),
        "LayerNormalization node: axis 5 is out of range for a 2-D input"),
    "Resize keeping the aspect ratio of an empty axis": (
        model([helper.make_node("Resize", ["e", "", "", "n"], ["y"],
                                keep_aspect_ratio_policy="not_larger")],
              initializers=[redimensioned(floats("e", []), [1, 0, 2]), ints("n", [1, 4, 4])]),
        "keep_aspect_ratio_policy='not_larger' on an empty axis"),
    "Resize with an unknown policy": (
        model([helper.make_node("Resize", ["x", "", "", "n"], ["y"],
                                keep_aspect_ratio_policy="sideways")],
              [x_input([1, 1, 2])], [ints("n", [1, 4, 4])]),
        "keep_aspect_ratio_policy='sideways' is not one of"),
    "Upsample without scales": (
        model([helper.make_node("Upsample", ["x"], ["y"])], [x_input([1, 1, 2, 2])], opset=7),
        "Upsample node: scales is required"),
    "two nodes define one name": (
        model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])],
              [x_input([4])]),
        "'y' is defined twice, by a Relu node and by a Neg node"),
    "a node redefines a graph input": (
        model([helper.make_node("Relu", ["x"], ["x"])], [x_input([4])],
              outputs=[helper.make_tensor_value_info("x", F, [4])]),
        "'x' is defined twice, by graph input 'x' and by a Relu node"),
    "two initializers of one name": (
        model([helper.make_node("Add", ["w", "w"], ["y"])],
              initializers=[floats("w", [1.0]), floats("w", [2.0])]),
        "'w' is defined twice, by initializer 'w' and by initializer 'w'"),
}  # fmt: skip


@pytest.mark.parametrize("case", INVALID)
def test_invalid_models_are_model_import_errors_naming_what_is_wrong(case):
    data, message = INVALID[case]
    with pytest.raises(ModelImportError) as caught:
        nbyoc.from_onnx(data)
    assert message in str(caught.value)


def test_an_initializer_listed_as_a_graph_input_is_not_defined_twice():
    # Before IR version 4, initializers were also graph inputs (their default values).
    data = model([helper.make_node("Add", ["x", "w"], ["y"])],
                 [x_input([2]), helper.make_tensor_value_info("w", F, [2])], [floats("w", [1, 2])])  # fmt: skip
    f = nbyoc.from_onnx(data)
    assert [p.name_hint for p in f.params] == ["x"]


# -- external data (item 9) -------------------------------------------------------------------


def external_model(location: str, offset=None, length=None) -> onnx.ModelProto:
    """y = x + w, w (4 float32) kept in the file ``location``."""
    w = floats("w", [1, 2, 3, 4])
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            entry = w.external_data.add()
            entry.key, entry.value = key, str(value)
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                              [x_input([4])], [Y], [w])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


WEIGHTS = np.array([1, 2, 3, 4], np.float32).tobytes()


def test_a_model_given_as_bytes_never_reads_external_data_relative_to_the_current_directory(
    tmp_path, monkeypatch
):
    # issue 35: location="secret.txt" read that file from the process's directory.
    (tmp_path / "secret.txt").write_bytes(WEIGHTS)
    monkeypatch.chdir(tmp_path)
    proto = external_model("secret.txt")
    for given in (proto, proto.SerializeToString()):
        with pytest.raises(ModelImportError, match=r"initializer 'w' keeps its data in the "
                                                   r"external file 'secret.txt'.*pass from_onnx"):  # fmt: skip
            nbyoc.from_onnx(given)
    f = nbyoc.from_onnx(proto.SerializeToString(), base_dir=tmp_path)
    x = np.zeros(4, np.float32)
    np.testing.assert_array_equal(nbyoc.compile(f, backend=[])(x), [1, 2, 3, 4])
    assert proto.graph.initializer[0].data_location == TensorProto.EXTERNAL  # left as it was


def test_external_data_next_to_a_model_file_is_read(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"pad!" + WEIGHTS)
    onnx.save(external_model("weights.bin", offset=4, length=16), tmp_path / "model.onnx")
    f = nbyoc.from_onnx(tmp_path / "model.onnx")
    np.testing.assert_array_equal(nbyoc.compile(f, backend=[])(np.zeros(4, np.float32)),
                                  [1, 2, 3, 4])  # fmt: skip


@pytest.mark.parametrize(
    "location, message",
    [
        ("../secret.txt", "must be a relative path inside the model's directory"),
        ("sub/../../secret.txt", "must be a relative path inside"),
        ("..\\secret.txt", "must be a relative path inside"),
        ("/etc/passwd", "must be a relative path inside"),
        ("C:\\secret.txt", "must be a relative path inside"),
        ("link.bin", "leads outside the model's directory"),
        ("dir", "is not a file"),
        ("fifo", "is not a file"),
        ("missing.bin", "external file .missing.bin. cannot be read: No such file"),
    ],
)
def test_external_data_must_stay_inside_the_model_directory(tmp_path, location, message):
    (tmp_path / "secret.txt").write_bytes(WEIGHTS)
    folder = tmp_path / "model"
    (folder / "dir").mkdir(parents=True)
    os.symlink(tmp_path / "secret.txt", folder / "link.bin")
    os.mkfifo(folder / "fifo")
    onnx.save(external_model(location), folder / "model.onnx")
    with pytest.raises(ModelImportError, match=message):
        nbyoc.from_onnx(folder / "model.onnx")


@pytest.mark.parametrize(
    "offset, length, message",
    [(64, None, "holds 16 bytes: the rest from offset 64 reach beyond it"),
     (0, 2**40, "holds 16 bytes: 1,099,511,627,776 bytes from offset 0 reach beyond it"),
     (8, 16, "16 bytes from offset 8 reach beyond it"),
     ("-1", 4, "offset '-1' is not a non-negative integer")],
)  # fmt: skip
def test_external_data_offsets_and_lengths_must_lie_within_the_file(tmp_path, offset, length,
                                                                    message):  # fmt: skip
    # issue 35: out-of-range offsets on bytes input escaped as ValueError.
    (tmp_path / "weights.bin").write_bytes(WEIGHTS)
    data = external_model("weights.bin", offset, length).SerializeToString()
    with pytest.raises(ModelImportError, match=message):
        nbyoc.from_onnx(data, base_dir=tmp_path)


def test_a_constant_nodes_external_tensor_is_confined_too(tmp_path, monkeypatch):
    (tmp_path / "secret.txt").write_bytes(WEIGHTS)
    monkeypatch.chdir(tmp_path)
    value = floats("v", [0, 0, 0, 0])
    value.ClearField("raw_data")
    value.data_location = TensorProto.EXTERNAL
    entry = value.external_data.add()
    entry.key, entry.value = "location", "secret.txt"
    data = model([helper.make_node("Constant", [], ["y"], value=value)])
    with pytest.raises(ModelImportError, match="Constant node: attribute 'value' keeps its data"):
        nbyoc.from_onnx(data)


def test_names_that_are_not_utf8_are_refused():
    # A byte flipped in a name: protobuf hands the field over as bytes.
    data = model([helper.make_node("Relu", ["x"], ["y"])], [x_input([4])])
    broken = data.replace(b"Relu", b"R\x80lu")
    with pytest.raises(ModelImportError, match=r"the model's op type b'R\\x80lu' is not UTF-8"):
        nbyoc.from_onnx(broken)
