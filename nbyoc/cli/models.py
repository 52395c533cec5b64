"""What the model subcommands share: ``--shapes`` read into a dict, a model file read into
an nbyoc ``Function``.

>>> parse_shapes(["x=1x3x224x224", "mask=2,7"])
{'x': (1, 3, 224, 224), 'mask': (2, 7)}
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import NbyocError

_SHAPE = re.compile(r"(?P<name>[^=]+)=(?P<dims>\d+(?:[x,]\d+)*|)\Z")


def add_model_arguments(parser) -> None:
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


def read_model(path: str, shapes: dict):
    """The nbyoc ``Function`` of the ONNX model at ``path``, its dynamic dims fixed by
    ``shapes`` where given (the rest stay symbolic)."""
    file = Path(path)
    if not file.is_file():
        raise NbyocError(f"no such model file: {path}")
    if file.suffix.lower() != ".onnx":
        raise NbyocError(f"{path}: the command line reads ONNX models (.onnx files)")
    from ..frontend.onnx import from_onnx

    return from_onnx(str(file), shapes=shapes)
