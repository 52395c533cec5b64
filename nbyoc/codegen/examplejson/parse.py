"""Reading ExampleJSON text (see ``nbyoc.codegen.examplejson`` for the format) into
one typed ``ir.Function`` per subgraph.

Every line is checked as it is read; a problem raises ``ParseError`` naming
the line and what was expected: a missing subgraph name, an unknown op (with
the known ones), a wrong number of inputs, an undefined or repeated id, a
declared shape or dtype that the inputs do not give, malformed numbers or data.

>>> subgraphs = parse_examplejson('''
... subgraph_0
...   input 0 10 10
...   input 1 10 10
...   add 2 inputs: 0 1 shape: 10 10
... ''')
>>> subgraphs["subgraph_0"].ret_type
Tensor[(10, 10), float32]
"""

from __future__ import annotations

import base64

import numpy as np

from ...errors import NbyocError, ParseError, shown
from ...ir.names import check_symbol
from ...ir.nodes import Call, Constant, Expr, Function, Tuple, Var
from ...ir.op import get_op, list_ops
from ...ir.types import TensorType
from .format import ATTR_PREFIX, FROM_GUIDE, NODE_KEYS

KEYWORDS = ("input", "const", "output")


def parse_examplejson(text: str) -> dict[str, Function]:
    """Subgraph name -> its function (inputs in declaration order), in file order."""
    if not isinstance(text, str):
        raise ParseError(f"ExampleJSON must be text, got {type(text).__name__}")
    subgraphs: dict[str, Function] = {}
    current: _Subgraph | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        tokens = raw.split("#", 1)[0].split()
        if not tokens:
            continue
        if len(tokens) == 1 and tokens[0] not in KEYWORDS and tokens[0] not in _op_names():
            if current is not None:
                subgraphs[current.name] = current.finish()
            name = tokens[0]
            try:
                check_symbol(name, "subgraph name")
            except NbyocError as e:
                raise ParseError(str(e), number) from None
            if name in subgraphs or (current is not None and current.name == name):
                raise ParseError(f"subgraph {shown(name)} is defined twice", number)
            current = _Subgraph(name, number)
            continue
        if current is None:
            raise ParseError(
                f"expected a subgraph name (a line holding one name) before {shown(tokens[0])}",
                number,
            )
        current.line(tokens, number)
    if current is not None:
        subgraphs[current.name] = current.finish()
    if not subgraphs:
        raise ParseError("no subgraph: the text should start with a line holding a subgraph name")
    return subgraphs


def _op_names() -> set[str]:
    return set(list_ops()) | set(FROM_GUIDE)


def _int(token: str, what: str, line: int) -> int:
    try:
        return int(token)
    except ValueError:
        raise ParseError(f"expected {what} (an integer), found {shown(token)}", line) from None


def _sections(tokens: list[str], line: int) -> dict[str, list[str]]:
    """``key: values... key: values...`` -> {key: values}."""
    sections: dict[str, list[str]] = {}
    key = None
    for token in tokens:
        if token.endswith(":"):
            key = token[:-1]
            if key in sections:
                raise ParseError(f"{shown(token)} appears twice", line)
            sections[key] = []
        elif key is None:
            raise ParseError(f"expected a keyword such as 'inputs:' before {shown(token)}", line)
        else:
            sections[key].append(token)
    return sections


class _Subgraph:
    def __init__(self, name: str, line: int):
        self.name, self.start = name, line
        self.values: dict[int, Expr] = {}
        self.inputs: list[Var] = []
        self.last: int | None = None
        self.outputs: list[int] | None = None

    def define(self, ident: int, value: Expr, line: int) -> None:
        if ident in self.values:
            raise ParseError(f"id {ident} is already defined in subgraph {shown(self.name)}", line)
        self.values[ident] = value

    def lookup(self, ident: int, line: int) -> Expr:
        if ident not in self.values:
            raise ParseError(
                f"id {ident} is not defined (yet) in subgraph {shown(self.name)}", line
            )
        return self.values[ident]

    def line(self, tokens: list[str], line: int) -> None:
        head = tokens[0]
        if head == "output":
            if self.outputs is not None:
                raise ParseError("a subgraph has one 'output' line", line)
            ids = [_int(t, "an output id", line) for t in tokens[1:]]
            if not ids:
                raise ParseError("'output' needs at least one id", line)
            for ident in ids:
                self.lookup(ident, line)
            self.outputs = ids
            return
        if len(tokens) < 2:
            raise ParseError(f"expected an id after {shown(head)}", line)
        ident = _int(tokens[1], "an id", line)
        if head == "input":
            rest = tokens[2:]
            cut = next((k for k, t in enumerate(rest) if t.endswith(":")), len(rest))
            dims = [_int(d, "a dimension", line) for d in rest[:cut]]
            extra = _sections(rest[cut:], line)
            if set(extra) - {"dtype"}:
                raise ParseError(
                    f"input takes only 'dtype:' after its dims, got {sorted(extra)}", line
                )
            dtype = self._one(extra.get("dtype", ["float32"]), "dtype", line)
            var = self._build(line, lambda: Var(f"in{len(self.inputs)}", TensorType(dims, dtype)))
            self.inputs.append(var)
            self.define(ident, var, line)
        elif head == "const":
            self.define(ident, self._constant(_sections(tokens[2:], line), line), line)
        else:
            self.define(ident, self._call(head, _sections(tokens[2:], line), line), line)
            self.last = ident

    @staticmethod
    def _one(values: list[str], what: str, line: int) -> str:
        if len(values) != 1:
            raise ParseError(f"{what}: takes one value, got {values}", line)
        return values[0]

    @staticmethod
    def _build(line: int, make):
        try:
            return make()
        except ParseError:
            raise
        except NbyocError as e:
            raise ParseError(str(e), line) from None

    def _constant(self, sections: dict, line: int) -> Constant:
        if set(sections) != {"shape", "dtype", "data"}:
            raise ParseError("const needs 'shape:', 'dtype:' and 'data:' (base64)", line)
        dims = [_int(d, "a dimension", line) for d in sections["shape"]]
        dtype = self._one(sections["dtype"], "dtype", line)
        t = self._build(line, lambda: TensorType(dims, dtype))
        try:
            raw = base64.b64decode("".join(sections["data"]), validate=True)
        except ValueError as e:  # binascii.Error, or non-ASCII text, which base64 never holds
            raise ParseError(f"bad base64 data: {e}", line) from None
        if len(raw) != t.size * t.itemsize:
            raise ParseError(
                f"const data has {len(raw)} bytes, {t!r} needs {t.size * t.itemsize}", line
            )
        return Constant(np.frombuffer(raw, np.dtype(t.dtype).newbyteorder("<")).reshape(t.shape))

    def _call(self, name: str, sections: dict, line: int) -> Call:
        op_name = FROM_GUIDE.get(name, name)
        if op_name not in list_ops():
            known = ", ".join(sorted(_op_names()))
            raise ParseError(f"unknown op {shown(name)}; known ops: {known}", line)
        op = get_op(op_name)
        for required in ("inputs", "shape"):
            if required not in sections:
                raise ParseError(f"{name} needs '{required}:'", line)
        args = [self.lookup(_int(t, "an input id", line), line) for t in sections.pop("inputs")]
        if (op.arity is None and not args) or (op.arity is not None and len(args) != op.arity):
            want = "one or more" if op.arity is None else str(op.arity)
            raise ParseError(f"{name} takes {want} inputs, got {len(args)}", line)
        shape = tuple(_int(d, "a dimension", line) for d in sections.pop("shape"))
        dtype = self._one(sections.pop("dtype", ["float32"]), "dtype", line)
        attrs = {}
        for written, values in sections.items():
            key = written[len(ATTR_PREFIX) :] if written.startswith(ATTR_PREFIX) else written
            if key not in op.attrs or (key in NODE_KEYS) != (written != key):
                raise ParseError(
                    f"{name} has no attribute {shown(key)}; it takes "
                    f"{', '.join(op.attrs) or 'none'}",
                    line,
                )
            try:
                attrs[key] = op.attrs[key].from_tokens(values)
            except ValueError as e:
                raise ParseError(f"{name}: attribute {shown(key)} {e}", line) from None
        call = self._build(line, lambda: Call(op, args, attrs))
        if call.type.shape != shape or call.type.dtype != dtype:
            raise ParseError(
                f"{name} declares shape ({' '.join(map(str, shape))}) {dtype}, but its inputs give "
                f"{call.type!r}",
                line,
            )
        return call

    def finish(self) -> Function:
        if self.last is None:
            raise ParseError(f"subgraph {shown(self.name)} computes nothing", self.start)
        ids = self.outputs if self.outputs is not None else [self.last]
        outputs = [self.values[i] for i in ids]
        body = outputs[0] if len(outputs) == 1 else Tuple(outputs)
        # Inputs that no output needs stay arguments, as in the guide's runtime.
        return Function(self.inputs, body, {"global_symbol": self.name})
