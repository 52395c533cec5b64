"""C spellings of the elementwise ops, for the csource codegen.

Every op computes in its result dtype (which NumPy's casting rules also
give: ``int32 + float32`` adds in float64, ``int32 / int32`` divides in
float64). ``+ - * /`` and unary ``-`` are C operators; the rest are small
``static inline`` helpers, one per op and dtype, written to match NumPy
bit for bit where C allows it (NaN propagation in ``maximum``, wrapping
integer ``power``, the overflow-free ``sigmoid``).

>>> helper_name("maximum", "float32")
'csource_maximum_float32'
>>> print(helper_definition("relu", "int32"))
static inline int32_t csource_relu_int32(int32_t a) { return (a >= 0 || a != a) ? a : 0; }
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...ir.dtypes import DTYPES, dtype_info


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
C_TYPES = {d: c_type(d) for d in DTYPES}
COMPUTE_TYPES = {d: compute_type(d) for d in DTYPES}
#: The unsigned type of each integer dtype's width (for arithmetic that must wrap).
UNSIGNED = {d: f"uint{dtype_info(d).bits}_t" for d in DTYPES if dtype_info(d).is_integer}
#: (type code, bits) of each dtype, as DLTensor.dtype holds them.
DLPACK_DTYPES = {d: (DLPACK_CODES[dtype_info(d).kind], dtype_info(d).bits) for d in DTYPES}

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


def _sigmoid(dtype: str) -> str:
    t = COMPUTE_TYPES[dtype]
    return (
        f"{t} e = {_math('exp', dtype)}(-{_math('fabs', dtype)}(a)); "
        f"return a >= 0 ? ({t})1 / (({t})1 + e) : e / (({t})1 + e);"
    )


@dataclass(frozen=True)
class CRule:
    """How csource computes one elementwise op in its result dtype: a C ``operator``
    the macros apply directly (infix for two operands, prefix for one), or the ``body``
    (given the dtype) of a ``static inline`` helper taking ``a`` (and ``b``)."""

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
    "exp": CRule(1, body=_math_call("exp")),
    "log": CRule(1, body=_math_call("log")),
    "sqrt": CRule(1, body=_math_call("sqrt")),
    "tanh": CRule(1, body=_math_call("tanh")),
    "sigmoid": CRule(1, body=_sigmoid),
    "relu": CRule(1, body=lambda dtype: "return (a >= 0 || a != a) ? a : 0;"),
}


def is_helper(op: str) -> bool:
    """True if ``op`` is computed by a ``static inline`` helper rather than an operator."""
    return C_RULES[op].operator is None


def helper_name(op: str, dtype: str) -> str:
    return f"csource_{op}_{dtype}"


def helper_definition(op: str, dtype: str) -> str:
    """The ``static inline`` C function computing ``op`` in ``dtype``."""
    t = C_TYPES[dtype]
    rule = C_RULES[op]
    params = f"{t} a, {t} b" if rule.arity == 2 else f"{t} a"
    return f"static inline {t} {helper_name(op, dtype)}({params}) {{ {rule.body(dtype)} }}"


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
