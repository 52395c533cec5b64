"""ONNX models as nbyoc functions: ``nbyoc.from_onnx``, and ``Backend``, an
``onnx.backend.base.Backend`` so ONNX's own test runner can drive nbyoc.

The importer walks the graph once: graph inputs that are not initializers become
parameters, initializers and ``Constant`` nodes constants, and each node goes
through its converter (``converters.CONVERTERS``: op type -> one small function,
versioned by the opset where ONNX changed the op's meaning). Shape arithmetic folds
while importing, because nbyoc shapes are static: ``Shape`` of a tensor is a known
value, and a node whose inputs are all known is computed at once (on the host).

Needs the ``onnx`` package (``pip install 'nbyoc[onnx]'``); ``import nbyoc`` does not.

>>> import onnx, nbyoc
>>> from onnx import helper, TensorProto
>>> graph = helper.make_graph(
...     [helper.make_node("Relu", ["x"], ["y"])], "g",
...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
>>> f = nbyoc.from_onnx(helper.make_model(graph), shapes={"x": (2, 4)})
>>> f.params[0]
Var(x: Tensor[(2, 4), float32])
>>> import numpy as np
>>> nbyoc.compile(f)(np.array([[-1, 2, -3, 4]] * 2, np.float32))[0]
array([0., 2., 0., 4.], dtype=float32)
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from numpy.typing import ArrayLike

from ...errors import MissingDependencyError, NbyocError

if TYPE_CHECKING:
    import onnx

    from ...ir.nodes import Function

INSTALL = "pip install 'nbyoc[onnx]'"


def require_onnx():
    """The ``onnx`` module, or a MissingDependencyError saying what to install."""
    try:
        import onnx
    except ImportError:
        raise MissingDependencyError(
            f"reading ONNX models needs the onnx package: {INSTALL}"
        ) from None
    return onnx


def from_onnx(
    model: str | os.PathLike[str] | bytes | onnx.ModelProto,
    shapes: Mapping[str, Sequence[int | None]] | None = None,
    constants: Mapping[str, ArrayLike] | None = None,
    base_dir: str | os.PathLike[str] | None = None, qdq: str = "integer",
) -> Function:  # fmt: skip
    """The nbyoc ``Function`` computing an ONNX model.

    ``model``: a path, the model's bytes, or an ``onnx.ModelProto``. ``base_dir``: the
    directory a model's external data files are read from (by default the model file's
    own; a model given as bytes or a ModelProto with external data needs it). External
    data is read only from inside that directory. ``shapes``:
    ``{input name: shape}`` fixes dynamic dims (``-1``, named or unknown; ``None``
    keeps one dynamic); the dims not fixed stay symbolic. ``constants``:
    ``{input name: array}`` to fix graph inputs as constants (for inputs an op needs
    the value of, such as a reshape's target shape). ``qdq``: ``"integer"`` (the default)
    computes a quantised model's DequantizeLinear -> MatMul/Conv/Gemm -> QuantizeLinear
    as integer products requantised once, as ONNX Runtime, OpenVINO and TensorRT run
    them (each product bit for bit Runtime's default session's: ``onnx.qdq``);
    ``"float"`` as its graph says, the product of the dequantised values (as Runtime
    does with its graph optimisations off).

    Parameters are the graph inputs that are not initializers, in order, named after
    them (made valid identifiers); the body returns the graph outputs in order (a
    tuple when several). A model with ops nbyoc lacks fails with one error listing
    every unsupported op type with its count and domain.
    """
    require_onnx()
    from .importer import import_model

    if qdq not in ("float", "integer"):
        raise NbyocError(f"qdq must be 'float' or 'integer', got {qdq!r}")
    return import_model(model, shapes or {}, constants or {}, base_dir, qdq)


def __getattr__(name):
    if name == "Backend":  # imports onnx's backend base class: only when asked for
        require_onnx()
        from .backend import Backend

        return Backend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
