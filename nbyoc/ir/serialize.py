"""The JSON form of the IR: ``to_json`` / ``from_json``, never pickle.

Values are numbered: a function's parameters first, then its nodes in
evaluation order; every operand refers to an earlier number. Constants are
stored inline as base64 (little-endian), or, when a list is passed, appended
to that list as arrays and referred to by index (so archives can store them
as ``.npy`` files).

>>> import nbyoc
>>> x = nbyoc.var("x", (3,))
>>> f = nbyoc.function([x], nbyoc.exp(x) * 2.0)
>>> g = from_json(to_json(f))
>>> nbyoc.ir.structural_equal(f, g)
True
>>> arrays = []
>>> text = to_json(f, constants=arrays)
>>> [a.dtype.name for a in arrays]
['float32']
"""

from __future__ import annotations

import base64
import json

import numpy as np

from .. import limits
from ..errors import LimitError, LoadError, NbyocError, shown
from .dtypes import from_bits
from .nodes import Call, Constant, Expr, Function, GlobalVar, IRModule, Tuple, TupleGetItem, Var
from .op import get_op
from .traversal import post_order
from .types import FuncType, TensorType, TupleType
from .verify import verify

FORMAT = "nbyoc-ir"
VERSION = 1


def to_json(node: Function | IRModule, constants: list[np.ndarray] | None = None) -> str:
    """The JSON text of a function or module (see the module docstring)."""
    writer = _Writer(constants)
    if isinstance(node, IRModule):
        kind, funcs = "module", [writer.function(f, name) for name, f in node.functions.items()]
    elif isinstance(node, Function):
        kind, funcs = "function", [writer.function(node, None)]
    else:
        raise TypeError(f"to_json takes a Function or an IRModule, got {node!r}")
    doc = {"format": FORMAT, "version": VERSION, "kind": kind, "functions": funcs,
           "constants": writer.constants}  # fmt: skip
    return json.dumps(doc, separators=(",", ":"))


def from_json(text: str | bytes, constants: list[np.ndarray] | None = None) -> Function | IRModule:
    """Rebuild a function or module from ``to_json`` text; malformed input raises ``LoadError``.

    ``constants`` supplies the arrays when the text was written with a list.
    """
    limits.check_json_nesting(text, "the JSON document")
    try:
        doc = json.loads(text)
    except (ValueError, TypeError, RecursionError) as e:
        raise LoadError(f"not valid JSON: {e}") from None
    try:
        return verify(_Reader(doc, constants).read())
    except (LoadError, LimitError):
        raise
    except NbyocError as e:
        raise LoadError(f"the graph in this JSON is invalid: {e}") from e
    except RecursionError:  # only with the nesting limit raised past what Python allows
        raise LoadError(
            "the JSON nests deeper than Python's recursion limit allows; lower the limit "
            "nbyoc.limits 'nesting'"
        ) from None


class _Writer:
    def __init__(self, external: list | None):
        self.external = external
        self.constants: list[dict] = []

    def function(self, func: Function, name: str | None) -> dict:
        numbers = {p: i for i, p in enumerate(func.params)}
        nodes = []
        for node in post_order([func.body]):
            if node not in numbers:
                numbers[node] = len(func.params) + len(nodes)
                nodes.append(self.node(node, numbers))
        out = {
            "params": [{"name": p.name_hint, **_tensor_type(p.type)} for p in func.params],
            "nodes": nodes,
            "result": numbers[func.body],
            "ret": _type(func.ret_type),
            "attrs": dict(func.attrs),
        }
        if name is not None:
            out["name"] = name
        return out

    def node(self, node: Expr, numbers: dict) -> dict:
        if isinstance(node, Call):
            args = [numbers[a] for a in node.args]
            if isinstance(node.op, GlobalVar):
                return {"kind": "call", "function": node.op.name_hint, "args": args}
            specs = node.op.attrs
            attrs = {
                # (a body: a function document of its own, sharing the constants)
                k: self.function(v, None) if isinstance(v, Function) else specs[k].to_json(v)
                for k, v in node.attrs.items()
            }
            return {"kind": "call", "op": node.op.name, "args": args, "attrs": attrs}
        if isinstance(node, Constant):
            return {"kind": "constant", "index": self.constant(node.data)}
        if isinstance(node, Tuple):
            return {"kind": "tuple", "fields": [numbers[f] for f in node.fields]}
        if isinstance(node, TupleGetItem):
            return {"kind": "get", "value": numbers[node.tuple_value], "index": node.index}
        raise LoadError(f"free variable %{node.name_hint} cannot be serialised; verify() first")

    def constant(self, data: np.ndarray) -> int:
        entry = _tensor_type(TensorType(data.shape, data.dtype))
        if self.external is None:
            little = data.astype(data.dtype.newbyteorder("<"), copy=False)
            entry["base64"] = base64.b64encode(little.tobytes()).decode("ascii")
        else:
            entry["external"] = len(self.external)
            self.external.append(data)
        self.constants.append(entry)
        return len(self.constants) - 1


def _tensor_type(t: TensorType) -> dict:
    # (a symbolic size is stored as its text, which TensorType parses back)
    return {"shape": [d if d.__class__ is int else str(d) for d in t.shape], "dtype": t.dtype}


def _type(t) -> dict:
    if isinstance(t, TupleType):
        return {"fields": [_type(f) for f in t.fields]}
    return _tensor_type(t)


class _Reader:
    """Reads the document defensively: every field is checked before it is used."""

    def __init__(self, doc, external: list | None):
        self.doc = doc
        self.external = external
        self.where = "document"

    def fail(self, message: str):
        raise LoadError(f"{self.where}: {message}")

    def field(self, obj, key: str, kind, optional: bool = False):
        if not isinstance(obj, dict):
            self.fail(f"expected an object, got {type(obj).__name__}")
        if key not in obj:
            if optional:
                return None
            self.fail(f"missing field {shown(key)}")
        value = obj[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            expected = getattr(kind, "__name__", kind)
            self.fail(f"field {shown(key)} should be {expected}, got {shown(value)}")
        return value

    def read(self):
        doc = self.doc
        if self.field(doc, "format", str) != FORMAT:
            self.fail(f"not an nbyoc IR document (format {shown(doc['format'])})")
        version = self.field(doc, "version", int)
        if version > VERSION:
            self.fail(
                f"format version {version} is newer than this nbyoc reads "
                f"({VERSION}); upgrade nbyoc"
            )
        self.constants = [
            self.constant(i, c) for i, c in enumerate(self.field(doc, "constants", list))
        ]
        kind = self.field(doc, "kind", str)
        funcs = self.field(doc, "functions", list)
        if kind == "function":
            if len(funcs) != 1:
                self.fail("a function document holds exactly one function")
            return self.function(funcs[0], {})
        if kind != "module":
            self.fail(f"kind must be 'function' or 'module', got {shown(kind)}")
        return self.module(funcs)

    def module(self, funcs: list) -> IRModule:
        # Signatures first, so a function may call one stored after it.
        signatures = {}
        for i, f in enumerate(funcs):
            self.where = f"functions[{i}]"
            name = self.field(f, "name", str)
            if name in signatures:
                self.fail(f"function {shown(name)} is stored twice")
            params = [self.tensor_type(p) for p in self.field(f, "params", list)]
            try:
                signatures[name] = GlobalVar(name, FuncType(params, self.type(f.get("ret"))))
            except LimitError:  # a stored type too deep: the message says where
                raise
            except NbyocError as e:
                self.fail(str(e))
        functions = {}
        for i, f in enumerate(funcs):
            functions[f["name"]] = self.function(f, signatures, f"functions[{i}]")
        return IRModule(functions)  # verify() then checks each callee's type

    def function(self, f, globals_: dict, where: str = "functions[0]") -> Function:
        self.where = where
        values: list[Expr] = [
            Var(self.field(p, "name", str), self.tensor_type(p))
            for p in self.field(f, "params", list)
        ]
        params = list(values)
        for j, node in enumerate(self.field(f, "nodes", list)):
            self.where = f"{where}.nodes[{j}]"
            try:
                values.append(self.node(node, values, globals_))
            except LimitError as e:
                raise e.within(self.where) from None
            except LoadError:
                raise
            except NbyocError as e:
                self.fail(str(e))
        self.where = where
        result = self.field(f, "result", int)
        if not 0 <= result < len(values):
            self.fail(f"result {result} refers to no value")
        func = Function(params, values[result], self.field(f, "attrs", dict))
        if "ret" in f and self.type(f["ret"]) != func.ret_type:
            self.fail(f"stored return type {f['ret']} disagrees with the body's {func.ret_type!r}")
        return func

    def node(self, node, values: list, globals_: dict) -> Expr:
        kind = self.field(node, "kind", str)
        if kind == "call":
            args = [self.ref(a, values) for a in self.field(node, "args", list)]
            callee = self.field(node, "function", str, optional=True)
            if callee is not None:
                if callee not in globals_:
                    self.fail(f"calls unknown function {shown(callee)}")
                return Call(globals_[callee], args)
            op = get_op(self.field(node, "op", str))
            attrs = self.field(node, "attrs", dict)
            where = self.where
            bodies = {
                k: self.function(v, {}, f"{where}.attrs.{k}")
                for k, v in attrs.items()
                if k in op.attrs and op.attrs[k].kind == "function" and isinstance(v, dict)
            }
            self.where = where
            return Call(op, args, {**self.attrs(op, attrs), **bodies})
        if kind == "constant":
            index = self.field(node, "index", int)
            if not 0 <= index < len(self.constants):
                self.fail(f"constant index {index} out of range")
            return self.constants[index]
        if kind == "tuple":
            return Tuple([self.ref(v, values) for v in self.field(node, "fields", list)])
        if kind == "get":
            return TupleGetItem(
                self.ref(self.field(node, "value", int), values), self.field(node, "index", int)
            )
        self.fail(f"unknown node kind {shown(kind)}")

    def ref(self, index, values: list) -> Expr:
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(values):
            self.fail(f"operand {shown(index)} does not refer to an earlier value")
        return values[index]

    @staticmethod
    def attrs(op, attrs: dict) -> dict:
        """Attributes read back by their specs (an unknown name is left for Call to refuse)."""
        specs = op.attrs
        return {
            k: specs[k].from_json(op.name, k, v) if k in specs else v
            for k, v in attrs.items()
            if not (k in specs and specs[k].kind == "function" and isinstance(v, dict))
        }

    def type(self, obj, depth: int = 1):
        if isinstance(obj, dict) and "fields" in obj:
            # Checked on the way down: a type too deep to build is refused before the
            # reader itself recurses that deep.
            limits.check("nesting", depth, f"{self.where}: a stored tuple type")
            return TupleType([self.type(f, depth + 1) for f in self.field(obj, "fields", list)])
        return self.tensor_type(obj)

    def tensor_type(self, obj) -> TensorType:
        shape = self.field(obj, "shape", list)
        dtype = self.field(obj, "dtype", str)
        try:
            return TensorType(shape, dtype)
        except NbyocError as e:
            self.fail(str(e))

    def constant(self, i: int, entry) -> Constant:
        self.where = f"constants[{i}]"
        t = self.tensor_type(entry)
        if "external" in entry:
            k = self.field(entry, "external", int)
            if self.external is None or not 0 <= k < len(self.external):
                self.fail(f"refers to external array {k}, which was not supplied")
            data = from_bits(np.asarray(self.external[k]), t.dtype)
            if data.shape != t.shape or data.dtype != np.dtype(t.dtype):
                self.fail(f"external array is {data.dtype}{list(data.shape)}, expected {t!r}")
            return Constant(data)
        try:
            raw = base64.b64decode(self.field(entry, "base64", str), validate=True)
        except ValueError as e:  # binascii.Error, or non-ASCII text
            self.fail(f"bad base64 data: {e}")
        if len(raw) != t.size * t.itemsize:
            self.fail(f"holds {len(raw)} bytes, {t!r} needs {t.size * t.itemsize}")
        return Constant(np.frombuffer(raw, np.dtype(t.dtype).newbyteorder("<")).reshape(t.shape))
