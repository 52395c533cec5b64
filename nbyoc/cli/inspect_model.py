"""``nbyoc inspect MODEL.onnx``: what an ONNX model declares (inputs and outputs with
their dynamic dims by name, opsets, IR version, producer), its ops counted by type, which
of those nbyoc's importer converts and which it refuses, and with ``--backend`` how many
op calls each backend would take. It reads the model and never runs it.

>>> from onnx import helper, TensorProto
>>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
>>> graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]),
...     helper.make_node("Hardmax", ["r"], ["y"])], "g", [x],
...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
>>> facts = model_facts(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
>>> facts["inputs"], facts["refused"]
([{'name': 'x', 'shape': ['N', 4], 'dtype': 'float32'}], ['Hardmax (ai.onnx)'])
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any

from ..errors import NbyocError
from ..runtime.report_text import text_table
from .models import (
    Declared,
    add_model_arguments,
    check_shapes,
    declared,
    load_onnx,
    parse_shapes,
    read_model,
    shape_text,
)


def add_parser(commands: Any) -> None:
    inspect = commands.add_parser(
        "inspect",
        help="an ONNX model's inputs, outputs, opsets and ops, and which ops nbyoc imports",
    )
    add_model_arguments(inspect)
    inspect.add_argument("--json", action="store_true", help="print the facts as JSON")
    inspect.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..transform.support import check_known

    for backend in args.backend or []:
        check_known(backend)
    shapes = parse_shapes(args.shapes)
    model = load_onnx(args.model)
    check_shapes(shapes, declared(model)[0])
    facts = {"model": args.model, **model_facts(model)}
    if args.backend:
        facts["op_calls"] = _op_calls(args.model, model, args.backend, shapes)
    print(json.dumps(facts, indent=1) if args.json else _text(facts))
    return 0


def model_facts(model: Any) -> dict[str, Any]:
    """What ``model`` (an ``onnx.ModelProto``) declares and the ops it uses, as plain
    data: ``inputs``, ``outputs``, ``ir_version``, ``producer``, ``opsets`` (domain ->
    version), ``ops`` (one row per op type and domain: its count, subgraphs' nodes
    included, and whether nbyoc converts it), ``refused`` (those it does not)."""
    from ..frontend.onnx.control_flow import nested_nodes
    from ..frontend.onnx.importer import MAX_OPSET, MIN_OPSET, converts

    opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    opset = opsets.get("ai.onnx", 0)
    counts = Counter((n.domain or "ai.onnx", n.op_type) for n, _ in nested_nodes(model.graph.node))
    ops = [
        {"op_type": op, "domain": domain, "count": count,
         "converted": converts(op, "" if domain == "ai.onnx" else domain, opset)}
        for (domain, op), count in sorted(counts.items())
    ]  # fmt: skip
    inputs, outputs = declared(model)
    producer = " ".join(p for p in (model.producer_name, model.producer_version) if p)
    facts = {
        "ir_version": model.ir_version,
        "producer": producer or None,
        "opsets": opsets,
        "inputs": [_shown(d) for d in inputs],
        "outputs": [_shown(d) for d in outputs],
        "ops": ops,
        "refused": [f"{row['op_type']} ({row['domain']})" for row in ops if not row["converted"]],
    }
    if not MIN_OPSET <= opset <= MAX_OPSET:
        facts["opset_refused"] = f"nbyoc imports ai.onnx opsets {MIN_OPSET} to {MAX_OPSET}"
    return facts


def _shown(value: Declared) -> dict[str, Any]:
    shape = None if value.shape is None else list(value.shape)
    return {"name": value.name, "shape": shape, "dtype": value.dtype}


def _op_calls(path: str, model: Any, backends: list[str],
              shapes: dict[str, tuple[int, ...]]) -> dict[str, Any]:  # fmt: skip
    """The backends asked (in priority order) and the op calls each would take (the
    host's too) as ``nbyoc.explain`` partitions the model; the reason instead when the
    model does not import (an op refused, a dim whose size its import needs)."""
    from ..explanation import explain

    try:
        func = read_model(path, shapes, model)
    except NbyocError as e:
        return {"backends": backends, "error": str(e)}
    return {"backends": backends, "counts": explain(func, backends).counts()}


def _text(facts: dict[str, Any]) -> str:
    opsets = ", ".join(f"{domain} {version}" for domain, version in facts["opsets"].items())
    lines = [
        f"{facts['model']}: IR version {facts['ir_version']}, opsets {opsets or 'none'}, "
        f"made by {facts['producer'] or 'an unnamed producer'}"
    ]
    if "opset_refused" in facts:
        lines.append(f"(the opset is refused: {facts['opset_refused']})")
    for kind in ("inputs", "outputs"):
        rows = [[v["name"], shape_text(v["shape"]), v["dtype"]] for v in facts[kind]]
        lines += ["", text_table([kind[:-1], "shape", "dtype"], rows)]
    ops = facts["ops"]
    rows = [[r["op_type"], r["domain"], r["count"], "yes" if r["converted"] else "REFUSED"]
            for r in ops]  # fmt: skip
    nodes = sum(r["count"] for r in ops)
    table = text_table(["op type", "domain", "nodes", "imported"], rows, right={"nodes"})
    lines += ["", f"{nodes} nodes of {len(ops)} op types", table]
    refused = ", ".join(facts["refused"]) or "none"
    lines += ["", f"op types nbyoc does not import: {refused}"]
    if "op_calls" in facts:
        calls = facts["op_calls"]
        asked = ", ".join(calls["backends"])
        if "error" in calls:
            lines.append(f"op calls per backend ({asked}): the model does not import: "
                         f"{calls['error']}")  # fmt: skip
        else:
            taken = ", ".join(f"{b} {n}" for b, n in calls["counts"].items()) or "no op calls"
            order = ", in priority order" if len(calls["backends"]) > 1 else ""
            lines.append(f"op calls per backend ({asked}{order}): {taken}")
    return "\n".join(lines)
