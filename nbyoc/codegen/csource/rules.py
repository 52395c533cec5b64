"""C spellings of the elementwise ops, for the csource codegen.

Every op computes in its result dtype (which NumPy's casting rules also
give: ``int32 + float32`` adds in float64, ``int32 / int32`` divides in
float64). ``+ - * /`` and unary ``-`` are C operators; the rest are small
``static inline`` helpers, one per op and dtype, written to match NumPy
bit for bit where C allows it (NaN propagation in ``maximum``, wrapping
integer ``power``, the overflow-free ``sigmoid``).

Each operand is taken in its own dtype of the op's loop (``loop_dtypes``): ``where``
reads its condition as ``_Bool`` (any nonzero value, NaN included, is true), and a
comparison of a signed with an unsigned integer (NumPy's exact int64-uint64 loops) is a
helper that never converts a negative value to unsigned.

>>> helper_name("maximum", ("float32", "float32", "float32"))
'csource_maximum_float32'
>>> print(helper_definition("relu", ("int32", "int32")))
static inline int32_t csource_relu_int32(int32_t a) { return (a >= 0 || a != a) ? a : 0; }
>>> print(helper_definition("less", ("int64", "uint64", "bool")))
static inline _Bool csource_less_int64_uint64_bool(int64_t a, uint64_t b) {
    return a < 0 ? (-1 < 0) : (uint64_t)a < b; }
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...errors import CompileError
from ...ir.dtypes import DTYPES, dtype_info
from . import vecmath


def c_type(dtype: str) -> str:
    """The C type of ``dtype``, spelt from its kind and bits.

    >>> c_type("float64"), c_type("uint8"), c_type("float16"), c_type("bool")
    ('double', 'uint8_t', '_Float16', '_Bool')
    """
    info = dtype_info(dtype)
    if info.is_float:
        return {16: "_Float16", 32: "float", 64: "double"}[info.bits]
    if info.kind == "bool":
        return "_Bool"
    return f"{'u' if info.kind == 'uint' else ''}int{info.bits}_t"


def compute_type(dtype: str) -> str:
    """The C type arithmetic on ``dtype`` is done in: float16 in float, rounded when
    stored (as NumPy computes float16), every other dtype in its own type.

    >>> compute_type("float16"), compute_type("int8")
    ('float', 'int8_t')
    """
    info = dtype_info(dtype)
    return "float" if info.is_float and info.bits < 32 else c_type(dtype)


#: DLPack's type codes by kind (kDLInt, kDLUInt, kDLFloat, kDLBool).
DLPACK_CODES = {"int": 0, "uint": 1, "float": 2, "bool": 6}
#: The dtypes C has a type for: NumPy's own (bfloat16 and the narrow types of ml_dtypes
#: run elsewhere).
C_DTYPES = tuple(d for d in DTYPES if dtype_info(d).native)
C_TYPES = {d: c_type(d) for d in C_DTYPES}
COMPUTE_TYPES = {d: compute_type(d) for d in C_DTYPES}
#: The unsigned type of each integer dtype's width (for arithmetic that must wrap).
UNSIGNED = {d: f"uint{dtype_info(d).bits}_t" for d in C_DTYPES if dtype_info(d).is_integer}
#: (type code, bits) of each dtype, as DLTensor.dtype holds them.
DLPACK_DTYPES = {d: (DLPACK_CODES[dtype_info(d).kind], dtype_info(d).bits) for d in C_DTYPES}

#: Set by a helper that hits an error NumPy would raise; the entry point reports it.
ERROR_FLAG = "nbyoc_error"


def _math(name: str, dtype: str) -> str:
    """The <math.h> function for ``dtype``: ``expf`` for float32 (and float16, computed in
    float), ``exp`` for float64."""
    return name + "f" if dtype_info(dtype).bits <= 32 else name


def _int_power(dtype: str) -> str:
    # NumPy raises on negative exponents and wraps on overflow; unsigned
    # arithmetic wraps in C, so square-and-multiply on unsigned values matches.
    u = UNSIGNED[dtype]
    refuse = (
        f'if (b < 0) {{ {ERROR_FLAG} = "Integers to negative integer powers are not allowed."; '
        f"return 0; }} "
    )
    return (
        (refuse if dtype_info(dtype).kind == "int" else "") + f"{u} r = 1, x = ({u})a, e = ({u})b; "
        f"while (e) {{ if (e & 1) r *= x; x *= x; e >>= 1; }} return ({C_TYPES[dtype]})r;"
    )


def _math_call(function: str):
    return lambda dtype: f"return {_math(function, dtype)}(a);"


def _vectorised(op: str):
    """float32 (and float16, computed in float) through nbyoc's vectorisable function
    (``vecmath``); float64 through libm."""

    def body(dtype: str) -> str:
        info = dtype_info(dtype)
        if info.is_float and info.bits <= 32:
            return f"return {vecmath.function_name(op)}(a);"
        return _sigmoid(dtype) if op == "sigmoid" else f"return {_math(op, dtype)}(a);"

    return body


def _sigmoid(dtype: str) -> str:
    t = COMPUTE_TYPES[dtype]
    return (
        f"{t} e = {_math('exp', dtype)}(-{_math('fabs', dtype)}(a)); "
        f"return a >= 0 ? ({t})1 / (({t})1 + e) : e / (({t})1 + e);"
    )


def _by_kind(float_body, signed_body, unsigned_body=None):
    """A body by the loop dtype's kind (bool computes as unsigned)."""

    def body(dtype):
        kind = dtype_info(dtype).kind
        if kind == "float":
            return float_body(dtype)
        if kind in ("uint", "bool"):
            return (unsigned_body or signed_body)(dtype)
        return signed_body(dtype)

    return body


def _const(text: str):
    return lambda dtype: text


def _float_floor_divide(dtype: str) -> str:
    # NumPy's npy_floor_divide: exact through fmod, the quotient rounded toward -inf.
    t, m = COMPUTE_TYPES[dtype], lambda f: _math(f, dtype)
    return (
        f"if (b == 0) return a / b; {t} mod = {m('fmod')}(a, b); {t} div = (a - mod) / b; "
        f"if (mod && ((b < 0) != (mod < 0))) div -= 1; "
        f"if (!div) return {m('copysign')}(0, a / b); "
        f"{t} q = {m('floor')}(div); if (div - q > 0.5) q += 1; return q;"
    )


def _float_mod(dtype: str) -> str:
    # NumPy's npy_remainder: the divisor's sign; a zero remainder takes it too.
    t, m = COMPUTE_TYPES[dtype], lambda f: _math(f, dtype)
    return (
        f"{t} mod = {m('fmod')}(a, b); if (b == 0) return mod; "
        f"if (mod) {{ if ((b < 0) != (mod < 0)) mod += b; }} "
        f"else mod = {m('copysign')}(0, b); return mod;"
    )


# x // 0 and x % 0 are 0 for integers in NumPy; INT_MIN // -1 wraps (-fwrapv) and
# INT_MIN % -1 is 0 (C leaves both undefined, so -1 is handled apart).
_SIGNED_FLOOR_DIVIDE = (
    "if (b == 0) return 0; if (b == -1) return -a; "
    "return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));"
)
_SIGNED_MOD = (
    "if (b == 0 || b == -1) return 0; { int64_t r = a % b; "
    "return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }"
)


@dataclass(frozen=True)
class CRule:
    """How csource computes one elementwise op: a C ``operator`` the macros apply
    directly (infix for two operands, prefix for one), or the ``body`` of a ``static
    inline`` helper taking ``a`` (``b``, ``c``). Operands arrive in the compute type of
    the op's loop dtype (``nbyoc.ir.ops.elementwise.loop_dtypes``), which is what
    ``body`` is given; the result is converted to the op's dtype."""

    arity: int
    operator: str | None = None
    body: Callable[[str], str] | None = None


def _float_or_int(float_body: Callable[[str], str], int_body: Callable[[str], str]):
    return lambda dtype: (float_body if dtype_info(dtype).is_float else int_body)(dtype)


#: The ops csource lowers, op -> rule: the table its support comes from (an op without a
#: row is never offered to csource, so it runs elsewhere).
C_RULES: dict[str, CRule] = {
    "add": CRule(2, operator="+"),
    "subtract": CRule(2, operator="-"),
    "multiply": CRule(2, operator="*"),
    "divide": CRule(2, operator="/"),
    # NumPy's test: NaN wins.
    "maximum": CRule(2, body=lambda dtype: "return (a >= b || a != a) ? a : b;"),
    "minimum": CRule(2, body=lambda dtype: "return (a <= b || a != a) ? a : b;"),
    "power": CRule(2, body=_float_or_int(lambda d: f"return {_math('pow', d)}(a, b);", _int_power)),
    "negative": CRule(1, operator="-"),
    "abs": CRule(1, body=_float_or_int(_math_call("fabs"), lambda d: "return a < 0 ? -a : a;")),
    "exp": CRule(1, body=_vectorised("exp")),
    "log": CRule(1, body=_vectorised("log")),
    "sqrt": CRule(1, body=_math_call("sqrt")),
    "tanh": CRule(1, body=_vectorised("tanh")),
    "sigmoid": CRule(1, body=_vectorised("sigmoid")),
    "relu": CRule(1, body=lambda dtype: "return (a >= 0 || a != a) ? a : 0;"),
    "floor_divide": CRule(2, body=_by_kind(
        _float_floor_divide, _const(_SIGNED_FLOOR_DIVIDE), _const("return b ? a / b : 0;"))),
    "mod": CRule(2, body=_by_kind(
        _float_mod, _const(_SIGNED_MOD), _const("return b ? a % b : 0;"))),
    "fmod": CRule(2, body=_by_kind(
        lambda d: f"return {_math('fmod', d)}(a, b);",
        _const("return (b == 0 || b == -1) ? 0 : a % b;"), _const("return b ? a % b : 0;"))),
    "floor": CRule(1, body=_by_kind(_math_call("floor"), _const("return a;"))),
    "ceil": CRule(1, body=_by_kind(_math_call("ceil"), _const("return a;"))),
    # rint rounds halves to even in the default rounding mode
    "round": CRule(1, body=_by_kind(_math_call("rint"), _const("return a;"))),
    "sign": CRule(1, body=_by_kind(
        _const("return a > 0 ? 1 : (a < 0 ? -1 : (a == 0 ? 0 : a));"),
        _const("return (a > 0) - (a < 0);"), _const("return a > 0;"))),
    "reciprocal": CRule(1, body=_const("return 1 / a;")),
    "sin": CRule(1, body=_math_call("sin")),
    "cos": CRule(1, body=_math_call("cos")),
    "erf": CRule(1, body=_vectorised("erf")),
    # accurate near 0: float32 by vecmath's, double by C99's (as NumPy's loops)
    "log1p": CRule(1, body=_vectorised("log1p")),
    "expm1": CRule(1, body=_vectorised("expm1")),
    "equal": CRule(2, operator="=="),
    "not_equal": CRule(2, operator="!="),
    "less": CRule(2, operator="<"),
    "less_equal": CRule(2, operator="<="),
    "greater": CRule(2, operator=">"),
    "greater_equal": CRule(2, operator=">="),
    "logical_and": CRule(2, operator="&&"),
    "logical_or": CRule(2, operator="||"),
    "logical_xor": CRule(2, body=_const("return (a != 0) != (b != 0);")),
    "logical_not": CRule(1, operator="!"),
    "isnan": CRule(1, body=_by_kind(_const("return a != a;"), _const("return 0;"))),
    "isinf": CRule(1, body=_by_kind(_const("return isinf(a);"), _const("return 0;"))),
    "where": CRule(3, body=_const("return a ? b : c;")),
    "cast": CRule(1, operator="+"),  # converted to the result type by the macro
    "identity": CRule(1, operator="+"),
    "broadcast_to": CRule(1, operator="+"),  # the macros' operand strides broadcast
}  # fmt: skip


#: The C operators that compare (the rules of the comparison ops).
COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")


def mixed_signs(loop: tuple[str, ...]) -> bool:
    """Whether a loop (operand dtypes, then the result's) reads a signed and an unsigned
    integer: C would convert the signed one to unsigned, a negative value to a huge one.

    >>> mixed_signs(("int64", "uint64", "bool")), mixed_signs(("int16", "int16", "bool"))
    (True, False)
    """
    return {"int", "uint"} <= {dtype_info(d).kind for d in loop[:-1]}


def is_helper(op: str, loop: tuple[str, ...]) -> bool:
    """True if ``op`` on loop dtypes ``loop`` is computed by a ``static inline`` helper
    rather than a C operator."""
    return C_RULES[op].operator is None or mixed_signs(loop)


def _mixed_comparison(operator: str, loop: tuple[str, ...]) -> str:
    # A negative signed operand is below every unsigned value, so the answer is the
    # operator's on (-1, 0); otherwise both values fit the unsigned type.
    if dtype_info(loop[0]).kind == "int":
        return f"return a < 0 ? (-1 {operator} 0) : ({UNSIGNED[loop[0]]})a {operator} b;"
    return f"return b < 0 ? (0 {operator} -1) : a {operator} ({UNSIGNED[loop[1]]})b;"


def helper_body(op: str, loop: tuple[str, ...]) -> str:
    """The C body of the helper computing ``op`` on loop dtypes ``loop``."""
    rule = C_RULES[op]
    if rule.body is not None:
        return rule.body(loop[-2])  # the op's compute dtype: its (last) operand's
    if rule.operator in COMPARISONS and mixed_signs(loop):
        return _mixed_comparison(rule.operator, loop)
    raise CompileError(f"internal: csource computes {op} on {loop[:-1]} by C's {rule.operator}")


def can_fail(op: str, loop: tuple[str, ...]) -> bool:
    """Can ``op`` on loop dtypes ``loop`` report an error (set ``ERROR_FLAG``)?

    >>> can_fail("power", ("int32",) * 3), can_fail("power", ("float32",) * 3)
    (True, False)
    >>> can_fail("add", ("int32",) * 3)
    False
    """
    return is_helper(op, loop) and ERROR_FLAG in helper_body(op, loop)


def helper_name(op: str, loop: tuple[str, ...]) -> str:
    """The helper computing ``op`` on loop dtypes ``loop`` (the operands', then the
    result's): named by the operands' one dtype (or each of theirs, when they differ),
    then the result's when that differs."""
    *operands, out = loop
    compute = operands[-1]
    taken = compute if len(set(operands)) == 1 else "_".join(operands)
    tail = "" if out == compute else f"_{out}"
    return f"csource_{op}_{taken}{tail}"


def helper_definition(op: str, loop: tuple[str, ...]) -> str:
    """The ``static inline`` C function computing ``op`` on operands of loop dtypes
    ``loop[:-1]`` (each taken in its compute type: float for float16), returning
    ``loop[-1]``."""
    *operands, out = loop
    params = ", ".join(f"{COMPUTE_TYPES[d]} {x}" for d, x in zip(operands, "abc"))
    name = helper_name(op, loop)
    return f"static inline {C_TYPES[out]} {name}({params}) {{ {helper_body(op, loop)} }}"


def c_literal(value, dtype: str) -> str:
    """An exact C literal for one element (hex floats; INT_MIN spelt safely).

    >>> c_literal(0.5, "float32"), c_literal(float("-inf"), "float64"), c_literal(-2**63, "int64")
    ('0x1.0000000000000p-1f', '-INFINITY', '(-9223372036854775807LL - 1)')
    """
    if dtype_info(dtype).is_float:
        v = float(value)
        if v != v:
            return "NAN"
        if v in (float("inf"), float("-inf")):
            return "INFINITY" if v > 0 else "-INFINITY"
        return v.hex() + ("f" if dtype_info(dtype).bits == 32 else "")
    info = dtype_info(dtype)
    v = int(value)
    suffix = {"int": "LL", "uint": "ULL"}.get(info.kind, "") if info.bits == 64 else ""
    low = info.min
    if v == low and v < 0:
        return f"({low + 1}{suffix} - 1)"
    return f"{v}{suffix}"
