"""What the model subcommands share: ``--shapes`` read into a dict, a model file read
into an ONNX ``ModelProto`` (``load_onnx``) and into an nbyoc ``Function``
(``read_model``), and the facts of its graph inputs and outputs (``declared``).

>>> parse_shapes(["x=1x3x224x224", "mask=2,7"])
{'x': (1, 3, 224, 224), 'mask': (2, 7)}
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ModelImportError, NbyocError

if TYPE_CHECKING:
    from ..ir.nodes import Function

_SHAPE = re.compile(r"(?P<name>[^=]+)=(?P<dims>\d+(?:[x,]\d+)*|)\Z")


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments every model subcommand takes: the model file, the backends in
    priority order, and ``--shapes`` for its dynamic dims."""
    parser.add_argument("model", help="an .onnx file")
    parser.add_argument(
        "--backend", action="append",
        help="a backend to offload to, repeatable, in priority order (default: llvm)",
    )  # fmt: skip
    parser.add_argument(
        "--shapes", nargs="+", metavar="NAME=DIMS",
        help="fix input dims, e.g. x=1x3x224x224 (dims not fixed stay symbolic)",
    )  # fmt: skip


def parse_shapes(items: list[str] | None) -> dict[str, tuple[int, ...]]:
    """``NAME=1x3x224x224`` (or ``NAME=1,3,224,224``; ``NAME=`` for a scalar) per item."""
    shapes = {}
    for item in items or []:
        match = _SHAPE.match(item)
        if match is None:
            raise NbyocError(f"--shapes takes NAME=DIMxDIMx..., e.g. x=1x3x224x224; got {item!r}")
        dims = re.split(r"[x,]", match["dims"]) if match["dims"] else []
        shapes[match["name"]] = tuple(int(d) for d in dims)
    return shapes


def load_onnx(path: str) -> Any:
    """The ``onnx.ModelProto`` in the file at ``path``, its external data left unread;
    an nbyoc error for a missing file, another suffix than .onnx, or bytes that are no
    ONNX model."""
    file = Path(path)
    if not file.is_file():
        raise NbyocError(f"no such model file: {path}")
    if file.suffix.lower() != ".onnx":
        raise NbyocError(f"{path}: the command line reads ONNX models (.onnx files)")
    from ..frontend.onnx import require_onnx

    require_onnx()
    from ..frontend.onnx.importer import load_model

    model = load_model(str(file))
    # (protobuf reads many byte strings as some message: a model has a graph and says
    # which IR version it is written in)
    if not model.ir_version or not model.HasField("graph"):
        raise ModelImportError(f"{path}: not an ONNX model (no IR version or no graph)")
    return model


def read_model(path: str, shapes: dict[str, tuple[int, ...]], model: Any = None) -> Function:
    """The nbyoc ``Function`` of the ONNX model at ``path`` (``model``: its ``ModelProto``
    when already loaded), its dynamic dims fixed by ``shapes`` where given (the rest stay
    symbolic)."""
    from ..frontend.onnx import from_onnx

    model = load_onnx(path) if model is None else model
    return from_onnx(model, shapes=shapes, base_dir=os.path.dirname(os.path.abspath(path)))


def require_fixed_shapes(func: Function) -> None:
    """Refuse a function with dynamic dims left: running it on random inputs needs
    sizes (any would do, so the user picks them)."""
    dynamic = [p for p in func.params if p.type.symbols]
    if dynamic:
        named = ", ".join(f"{p.name_hint} {p.type.shape}" for p in dynamic)
        example = "x".join(str(d) if isinstance(d, int) else "1" for d in dynamic[0].type.shape)
        raise NbyocError(
            f"inputs with dynamic dims: {named}; give their sizes, e.g. "
            f"--shapes {dynamic[0].name_hint}={example}"
        )


@dataclass(frozen=True)
class Declared:
    """A graph input or output as the model declares it: ``shape`` holds a number per
    fixed dim and the name of a dynamic one (``"?"`` when unnamed; None: no shape
    declared); ``dtype`` is nbyoc's name for the element type (ONNX's, lower case, for a
    type nbyoc lacks)."""

    name: str
    shape: tuple[int | str, ...] | None
    dtype: str


def shape_text(shape: Sequence[int | str] | None) -> str:
    """A shape as Python writes a tuple, its dynamic dims by name; "unknown" for None.

    >>> shape_text(["N", 3]), shape_text((5,)), shape_text(())
    ('(N, 3)', '(5,)', '()')
    """
    if shape is None:
        return "unknown"
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def check_shapes(shapes: dict[str, tuple[int, ...]], inputs: list[Declared]) -> None:
    """Refuse ``--shapes`` that name no graph input, or give an input another rank or
    another number where the model fixes a dim."""
    by_name = {i.name: i for i in inputs}
    for name, shape in shapes.items():
        if name not in by_name:
            raise NbyocError(f"--shapes {name}: the model has no input {name!r} "
                             f"(its inputs: {', '.join(by_name)})")  # fmt: skip
        if not fits(shape, by_name[name].shape):
            raise NbyocError(f"--shapes {name}={'x'.join(map(str, shape))} does not fit input "
                             f"{name!r} of shape {shape_text(by_name[name].shape)} "
                             f"(named dims are free)")  # fmt: skip


def fits(shape: tuple[int, ...], declared: tuple[int | str, ...] | None) -> bool:
    """Whether ``shape`` fits a declared one: its rank, and its numbers where fixed.

    >>> fits((2, 3), ("N", 3)), fits((2, 4), ("N", 3)), fits((3,), None)
    (True, False, True)
    """
    if declared is None:
        return True
    return len(shape) == len(declared) and all(
        isinstance(d, str) or d == n for d, n in zip(declared, shape)
    )


def declared(model: Any) -> tuple[list[Declared], list[Declared]]:
    """The graph inputs that are not initializers, and the graph outputs, of ``model``
    (a ``ModelProto``), in order."""
    graph = model.graph
    initialized = {t.name for t in graph.initializer}
    inputs = [_declared(i) for i in graph.input if i.name not in initialized]
    return inputs, [_declared(o) for o in graph.output]


def _declared(info: Any) -> Declared:
    import onnx

    from ..frontend.onnx.dtypes import ONNX_TO_NBYOC

    if not info.type.HasField("tensor_type"):
        return Declared(info.name, None, info.type.WhichOneof("value") or "unknown")
    tensor = info.type.tensor_type
    code = tensor.elem_type
    dtype = ONNX_TO_NBYOC.get(code) or onnx.TensorProto.DataType.Name(code).lower()
    if not tensor.HasField("shape"):
        return Declared(info.name, None, dtype)
    dims = tuple(
        d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else (d.dim_param or "?")
        for d in tensor.shape.dim
    )
    return Declared(info.name, dims, dtype)
