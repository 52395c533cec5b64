"""``parse``: read the text form back into IR (a ``Function``, or an ``IRModule``).

Accepts what the printer writes, and also nested calls written by hand
(``multiply(add(%a, %b), %c)``). Every node is rebuilt through the normal
constructors, so types are inferred again and checked against the text's
annotations. Errors are ``ParseError``\\ s with the line and column.

>>> import nbyoc
>>> f = nbyoc.parse('''
... fn (%x: Tensor[(3,), float32]) -> Tensor[(3,), float32] {
...   %0 = exp(%x);
...   multiply(%0, %x)
... }''')
>>> f.ret_type
Tensor[(3,), float32]
>>> nbyoc.parse("fn (%x: Tensor[(3,), float32]) { exp(%y) }")
Traceback (most recent call last):
    ...
nbyoc.errors.ParseError: line 1, column 38: %y is not defined; ...
"""

from __future__ import annotations

import base64
import json
import re
import sys
from typing import NamedTuple

import numpy as np

from .. import limits
from ..errors import LimitError, NbyocError, ParseError, shown
from .dtypes import dtype_info
from .nodes import Call, Constant, Function, GlobalVar, IRModule, Tuple, TupleGetItem, Var
from .symbols import parse_size
from .types import FuncType, TensorType, TupleType
from .verify import verify

_TOKEN = re.compile(
    r"""
     (?P<space>\s+)
    |(?P<comment>/\*.*?\*/|//[^\n]*)
    |(?P<local>%[A-Za-z0-9_]+)
    |(?P<global>@[A-Za-z_][A-Za-z0-9_]*)
    |(?P<number>[-+]?(?:\d+\.\d*|\d+)(?:[eE][+-]?\d+)?)
    |(?P<string>"(?:[^"\\\n]|\\.)*")
    |(?P<name>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<punct>->|[()\[\]{},:;=.\-+*%])
    |(?P<bad>.)
    """,
    re.VERBOSE | re.DOTALL,
)


class Token(NamedTuple):
    kind: str
    text: str
    offset: int


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens (comments and white space dropped), ending in "eof"."""
    tokens = []
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind == "bad":
            what = "an unclosed /* comment" if text.startswith("/*", m.start()) else repr(m.group())
            raise ParseError(f"unexpected {what}", *line_and_column(text, m.start()))
        if kind != "space" and kind != "comment":
            tokens.append(Token(kind, m.group(), m.start()))
    # Several end markers, so looking one or two tokens ahead never runs off the list.
    tokens += [Token("eof", "end of text", len(text))] * 3
    return tokens


def line_and_column(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of ``offset`` in ``text``."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def parse(text: str) -> Function | IRModule:
    """Parse the text form: ``fn (...) {...}`` gives a Function, ``def @main ...`` a module."""
    try:
        return verify(_Parser(text).program())
    except RecursionError:
        raise ParseError("the text nests too deeply; bind inner values to %names") from None


#: Punctuation that ends a symbolic size in a type.
_NOT_IN_SIZES = frozenset(["[", "]", "{", "}", ";", ":", "=", ".", "->"])


class _Parser:
    def __init__(self, text: str):
        if not isinstance(text, str):
            raise ParseError(f"parse() takes a str, got {type(text).__name__}")
        self.text = text
        self.tokens = tokenize(text)
        self.pos = 0
        self.depth = 0  # brackets open around what is being parsed
        self.max_depth = limits.get("nesting")

    # -- token helpers --------------------------------------------------------

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[self.pos + ahead]

    def next(self) -> Token:
        tok = self.tokens[self.pos]
        if tok.kind != "eof":
            self.pos += 1
        return tok

    def accept(self, text: str) -> bool:
        if self.peek().text == text and self.peek().kind in ("punct", "name"):
            self.pos += 1
            return True
        return False

    def expect(self, text: str, what: str | None = None) -> Token:
        tok = self.peek()
        if tok.text != text or tok.kind not in ("punct", "name"):
            self.fail(f"expected {what or repr(text)}, found {shown(tok.text)}", tok)
        return self.next()

    def expect_kind(self, kind: str, what: str) -> Token:
        tok = self.peek()
        if tok.kind != kind:
            self.fail(f"expected {what}, found {shown(tok.text)}", tok)
        return self.next()

    def fail(self, message: str, tok: Token):
        raise ParseError(message, *line_and_column(self.text, tok.offset))

    def build(self, tok: Token, make, *args):
        """Construct a node, turning IR errors into ParseErrors at ``tok``."""
        try:
            return make(*args)
        except ParseError as e:
            if e.line is not None:
                raise
            raise ParseError(str(e), *line_and_column(self.text, tok.offset)) from None
        except LimitError as e:
            line, column = line_and_column(self.text, tok.offset)
            raise e.within(f"line {line}, column {column}") from None
        except NbyocError as e:
            raise ParseError(str(e), *line_and_column(self.text, tok.offset)) from e

    def nested(self, tok: Token, parse, *args):
        """``parse(*args)`` inside the bracket at ``tok``: refused (``LimitError``) deeper
        than the limit ``nesting``, before the parser recurses that deep."""
        self.depth += 1
        try:
            if self.depth > self.max_depth:
                line, column = line_and_column(self.text, tok.offset)
                limits.check("nesting", self.depth, f"line {line}, column {column}: brackets")
            return parse(*args)
        finally:
            self.depth -= 1

    def comma_list(self, close: str, item) -> list:
        items = []
        while not self.accept(close):
            items.append(item())
            if not self.accept(","):
                self.expect(close, f"',' or {shown(close)}")
                break
        return items

    # -- programs -------------------------------------------------------------

    def program(self):
        tok = self.peek()
        if tok.text == "fn":
            self.next()
            func = self.function({})
            self.expect_kind("eof", "the end of the text after the function")
            return func
        if tok.text == "def":
            return self.module()
        self.fail(f"expected 'fn' or 'def' to start, found {shown(tok.text)}", tok)

    def module(self) -> IRModule:
        # First pass: signatures only, so calls may refer to functions defined later.
        start, signatures = self.pos, {}
        while self.peek().kind != "eof":
            self.expect("def", "'def' or the end of the text")
            name_tok = self.expect_kind("global", "a function name like @main")
            params, ret, _, _ = self.signature()
            if ret is None:
                self.fail(f"{name_tok.text} needs a return type ('-> ...')", name_tok)
            name = name_tok.text[1:]
            if name in signatures:
                self.fail(f"{name_tok.text} is defined twice", name_tok)
            signatures[name] = self.build(
                name_tok, GlobalVar, name, FuncType([p.type for _, p in params], ret)
            )
            self.skip_block()
        self.pos = start
        functions = {}
        while self.peek().kind != "eof":
            self.expect("def")
            name = self.next().text[1:]
            functions[name] = self.function(signatures)
        return self.build(self.tokens[0], IRModule, functions)

    def signature(self):
        self.expect("(")
        params = self.comma_list(")", self.param)
        ret = ret_tok = None
        if self.accept("->"):
            ret_tok = self.peek()
            ret = self.type()
        attrs = {}
        if self.accept("attrs"):
            self.expect("(")
            for key, value in self.comma_list(")", self.keyword):
                attrs[key] = value
        return params, ret, ret_tok, attrs

    def param(self):
        tok = self.expect_kind("local", "a parameter like %x")
        self.expect(":")
        type_tok = self.peek()
        t = self.type()
        return tok, self.build(type_tok, Var, tok.text[1:], t)

    def function(self, globals_: dict) -> Function:
        params, ret, ret_tok, attrs = self.signature()
        scope = {}
        for tok, var in params:
            if tok.text in scope:
                self.fail(f"parameter {tok.text} is declared twice", tok)
            scope[tok.text] = var
        body_tok = self.peek()
        body = self.block(scope, globals_)
        func = self.build(body_tok, Function, [v for _, v in params], body, attrs)
        if ret is not None and ret != func.ret_type:
            self.fail(
                f"declared return type {ret!r}, but the body has type {func.ret_type!r}", ret_tok
            )
        return func

    def skip_block(self):
        open_tok = self.expect("{")
        depth = 1
        while depth:
            tok = self.next()
            if tok.kind == "eof":
                self.fail("this '{' is never closed", open_tok)
            depth += (tok.text == "{") - (tok.text == "}") if tok.kind == "punct" else 0

    def block(self, scope: dict, globals_: dict):
        self.expect("{")
        while self.peek().kind == "local" and self.peek(1).text == "=":
            tok = self.next()
            self.next()
            if tok.text in scope:
                self.fail(f"{tok.text} is already bound; each name is bound once", tok)
            scope[tok.text] = self.expr(scope, globals_)
            self.expect(";", "';' after the binding")
        result = self.expr(scope, globals_)
        self.expect("}", "'}' after the result")
        return result

    # -- types ----------------------------------------------------------------

    def type(self):
        tok = self.peek()
        if self.accept("Tensor"):
            self.expect("[")
            self.expect("(")
            dims = self.comma_list(")", self.dimension)
            self.expect(",")
            dtype = self.expect_kind("name", "a dtype like float32").text
            self.expect("]")
            return self.build(tok, TensorType, dims, dtype)
        if self.accept("("):
            return self.build(tok, TupleType, self.nested(tok, self.comma_list, ")", self.type))
        self.fail(f"expected a type like Tensor[(10, 10), float32], found {shown(tok.text)}", tok)

    def dimension(self):
        """An int, or a symbolic size written as the printer writes it (``n``,
        ``2*n + 1``, ``floordiv(n + 1, 2)``): the tokens up to the next ``,`` or ``)``
        outside brackets, read by ``parse_size``."""
        first, depth, end = self.peek(), 0, self.pos
        while True:
            tok = self.tokens[end]
            if tok.kind == "eof" or (depth == 0 and tok.text in (",", ")")):
                break
            if tok.kind not in ("number", "name", "punct") or tok.text in _NOT_IN_SIZES:
                break
            depth += {"(": 1, ")": -1}.get(tok.text, 0)
            end += 1
        if end == self.pos + 1 and first.kind == "number":
            return self.integer("a dimension")
        if end == self.pos:
            self.fail(f"expected a dimension (an int or a size like n), found {shown(first.text)}",
                      first)  # fmt: skip
        last = self.tokens[end - 1]
        source = self.text[first.offset : last.offset + len(last.text)]
        self.pos = end
        return self.build(first, parse_size, source)

    def integer(self, what: str) -> int:
        tok = self.expect_kind("number", what)
        if not re.fullmatch(r"[-+]?\d+", tok.text):
            self.fail(f"expected {what} (an integer), found {shown(tok.text)}", tok)
        return self.int_value(tok)

    def int_value(self, tok: Token) -> int:
        """The integer ``tok`` spells; one longer than Python converts is a ParseError."""
        most = getattr(sys, "get_int_max_str_digits", lambda: 0)()  # Python >= 3.10.7
        digits = len(tok.text.lstrip("+-"))
        if digits > most > 0:
            self.fail(f"an integer of {digits} digits is longer than Python converts "
                      f"(sys.get_int_max_str_digits() = {most})", tok)  # fmt: skip
        return int(tok.text)

    # -- expressions ----------------------------------------------------------

    def expr(self, scope: dict, globals_: dict):
        tok = self.peek()
        if tok.kind == "local":
            self.next()
            if tok.text not in scope:
                self.fail(f"{tok.text} is not defined; bind it first or add it as a parameter", tok)
            value = scope[tok.text]
            while self.accept("."):
                value = self.build(tok, TupleGetItem, value, self.integer("a tuple index"))
            return value
        if tok.kind == "global":
            self.next()
            if tok.text[1:] not in globals_:
                self.fail(
                    f"{tok.text} is not a function of this module (use 'def' to define it)", tok
                )
            self.expect("(")
            args = self.nested(tok, self.comma_list, ")", lambda: self.expr(scope, globals_))
            return self.build(tok, Call, globals_[tok.text[1:]], args)
        if tok.text == "const" and tok.kind == "name":
            self.next()
            return self.constant(tok)
        if tok.kind == "name":
            self.next()
            self.expect("(")
            args, attrs = [], {}

            def argument():
                if self.peek().kind == "name" and self.peek(1).text == "=":
                    key, value = self.keyword()
                    attrs[key] = value
                elif attrs:
                    self.fail("positional operands must come before attributes", self.peek())
                else:
                    args.append(self.expr(scope, globals_))

            self.nested(tok, self.comma_list, ")", argument)
            return self.build(tok, Call, tok.text, args, attrs)
        if self.accept("("):
            fields = self.nested(tok, self.comma_list, ")", lambda: self.expr(scope, globals_))
            return self.build(tok, Tuple, fields)
        self.fail(
            f"expected an expression (%name, op(...), const(...), (...)), found {shown(tok.text)}",
            tok,
        )

    def keyword(self):
        key = self.expect_kind("name", "an attribute name").text
        self.expect("=")
        return key, self.attr_value()

    def attr_value(self):
        tok = self.peek()
        if tok.kind == "string":
            self.next()
            try:
                return json.loads(tok.text)  # the printer writes strings as JSON does
            except ValueError as e:
                self.fail(f"bad string {tok.text}: {getattr(e, 'msg', e)}", tok)
        if tok.text in ("[", "(") and tok.kind == "punct":
            self.next()
            close = "]" if tok.text == "[" else ")"
            return tuple(self.nested(tok, self.comma_list, close, self.attr_value))
        if tok.kind == "name" and tok.text in ("True", "False", "None"):
            self.next()
            return {"True": True, "False": False, "None": None}[tok.text]
        if tok.kind == "name" and tok.text == "fn":  # a control-flow op's body
            self.next()
            return self.nested(tok, self.function, {})
        if tok.kind == "name" and tok.text not in ("nan", "inf"):
            self.next()
            return tok.text  # a bare word, such as a dtype
        return self.number()

    def number(self):
        """An int or float, including ``nan``, ``inf`` and ``-inf``."""
        negative = self.accept("-")
        tok = self.next()
        if tok.kind == "name" and tok.text in ("nan", "inf"):
            value = float(tok.text)
        elif tok.kind == "number":
            integer = re.fullmatch(r"[-+]?\d+", tok.text)
            value = self.int_value(tok) if integer else float(tok.text)
        else:
            self.fail(f"expected a number, found {shown(tok.text)}", tok)
        return -value if negative else value

    def constant(self, tok: Token) -> Constant:
        self.expect("(")
        if self.peek().text == "base64":
            fields = dict(self.comma_list(")", self.keyword))
            return self.build(tok, _decode_constant, fields)
        literal_tok = self.peek()
        literal = self.literal()
        self.expect(",")
        self.expect("dtype", "dtype=... after the constant's value")
        self.expect("=")
        dtype = self.expect_kind("name", "a dtype like float32").text
        self.expect(")")
        return self.build(literal_tok, _literal_constant, literal, dtype)

    def literal(self):
        tok = self.peek()
        if self.accept("["):
            return self.nested(tok, self.comma_list, "]", self.literal)
        if tok.kind == "name" and tok.text in ("True", "False"):  # a bool constant's element
            self.next()
            return tok.text == "True"
        return self.number()


def _flatten(values):
    if isinstance(values, list):
        for v in values:
            yield from _flatten(v)
    else:
        yield values


def _literal_constant(values, dtype: str) -> Constant:
    t = TensorType((), dtype)  # validates the dtype
    if dtype_info(t.dtype).is_integer and any(isinstance(v, float) for v in _flatten(values)):
        raise ParseError(f"an {dtype} constant cannot hold the non-integer values {shown(values)}")
    try:
        return Constant(np.asarray(values, dtype=dtype))
    except (ValueError, OverflowError, TypeError) as e:
        raise ParseError(f"bad constant value: {e}") from None


def _decode_constant(fields: dict) -> Constant:
    if set(fields) != {"base64", "shape", "dtype"}:
        raise ParseError(f"const(base64=..., shape=..., dtype=...) expected, got {sorted(fields)}")
    t = TensorType(fields["shape"], fields["dtype"])
    try:
        raw = base64.b64decode(fields["base64"], validate=True)
    except (ValueError, TypeError) as e:  # binascii.Error, non-ASCII text, not a string
        raise ParseError(f"bad base64 data in constant: {e}") from None
    if len(raw) != t.size * t.itemsize:
        raise ParseError(
            f"constant data has {len(raw)} bytes, but {t!r} needs {t.size * t.itemsize}"
        )
    return Constant(np.frombuffer(raw, dtype=np.dtype(t.dtype).newbyteorder("<")).reshape(t.shape))
