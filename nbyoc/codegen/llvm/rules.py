"""Scalar expressions of the elementwise ops, as Numba source, for the llvm codegen.

Operands arrive already converted to the op's result dtype (so ``int32 +
float32`` adds in float64, as NumPy does), and every result is converted to
that dtype again, because Numba widens small integers (int32 + int32 is int64
in Numba): converting back wraps exactly as NumPy's int32 arithmetic does.

>>> scalar_expression("maximum", ["a", "b"], "float32")
'np.float32(np.maximum(a, b))'
>>> scalar_expression("add", ["a", "np.int32(2)"], "int32")
'np.int32(a + np.int32(2))'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...ir.dtypes import DTYPES, dtype_info
from ...ir.signs import nonpositive

#: Dtypes Numba cannot compute with on the CPU (no typing, loads, stores or arithmetic):
#: floats narrower than float32, i.e. float16 and bfloat16. A kernel holds their arrays
#: as the bits (the unsigned integer of the same width) and their values in float32,
#: rounded to the dtype after every op, as NumPy's own float16 loops do
#: (``nbyoc.runtime.llvm.half``, ``nbyoc.runtime.llvm.bfloat16``).
EMULATED = tuple(d for d in DTYPES if dtype_info(d).is_float and dtype_info(d).bits < 32)
#: Each emulated dtype's conversions, as the kernel module imports them: its bits to
#: their float32 value, a value to the dtype's bits, a value rounded to the dtype.
CONVERSIONS = {
    "float16": ("half_value", "half_bits", "round_half"),
    "bfloat16": ("bfloat16_value", "bfloat16_bits", "round_bfloat16"),
}
#: How the kernel stores each emulated dtype's arrays: its bits, as the unsigned integer
#: of the same width.
STORAGE = {
    d: next(u for u in DTYPES if dtype_info(u).kind == "uint" and dtype_info(u).bits == b)
    for d, b in ((d, dtype_info(d).bits) for d in EMULATED)
}
#: The dtype an emulated dtype's values are computed in.
VALUE_DTYPE = next(d for d in DTYPES if dtype_info(d).is_float and dtype_info(d).bits == 32)
#: The Numba spelling of each computed dtype's scalar constructor (NumPy's type,
#: np.bool_ for bool).
NP_TYPES = {d: "np.bool_" if dtype_info(d).kind == "bool" else f"np.{d}" for d in DTYPES}
#: The kernel-module import lines the emulated dtypes need.
EMULATION_IMPORTS = (
    "from nbyoc.runtime.llvm.half import half_bits, half_value, round_half",
    "from nbyoc.runtime.llvm.bfloat16 import bfloat16_bits, bfloat16_value, round_bfloat16",
)


def storage_dtype(dtype: str) -> str:
    """The dtype a kernel's arrays of ``dtype`` are held in (float16: uint16 bits).

    >>> storage_dtype("float16"), storage_dtype("float32")
    ('uint16', 'float32')
    """
    return STORAGE.get(dtype, dtype)


def value_dtype(dtype: str) -> str:
    """The dtype a kernel computes values of ``dtype`` in (float16: float32)."""
    return VALUE_DTYPE if dtype in STORAGE else dtype


#: The Numba type of each dtype Numba has (it names its scalar types as NumPy does, bool
#: aside); float16 values are float32 and its arrays uint16 (``EMULATED``).
NUMBA_TYPES = {
    d: "nbt.boolean" if dtype_info(d).kind == "bool" else f"nbt.{d}"
    for d in {*map(storage_dtype, DTYPES), *map(value_dtype, DTYPES)}
}


def array_type(dtype: str, ndim: int, layout: str = "C") -> str:
    """The Numba type of an array parameter of ``dtype`` elements (as stored), in the
    kernel module's spelling: C-contiguous unless ``layout`` says otherwise.

    >>> array_type("float16", 2), array_type("float32", 1, "A")
    ('nbt.Array(nbt.uint16, 2, "C")', 'nbt.Array(nbt.float32, 1, "A")')
    """
    return f'nbt.Array({NUMBA_TYPES[storage_dtype(dtype)]}, {ndim}, "{layout}")'


def scalar_type(dtype: str) -> str:
    """The Numba type of a scalar parameter holding a ``dtype`` value (float16: float32).

    >>> scalar_type("float16"), scalar_type("bool")
    ('nbt.float32', 'nbt.boolean')
    """
    return NUMBA_TYPES[value_dtype(dtype)]


def load(element: str, dtype: str) -> str:
    """Source turning an array element of ``dtype``, as stored, into its value.

    >>> load("a[i0]", "float16"), load("a[i0]", "int8")
    ('half_value(a[i0])', 'a[i0]')
    """
    return f"{CONVERSIONS[dtype][0]}({element})" if dtype in STORAGE else element


def store(value: str, dtype: str) -> str:
    """Source turning a value of ``dtype`` into what its arrays store."""
    return f"{CONVERSIONS[dtype][1]}({value})" if dtype in STORAGE else value


#: Helper functions emitted into the kernel module when used: name -> source. They are
#: ordinary functions, not inline="always": LLVM inlines them all the same (the loops
#: still vectorize), while inlining them in Numba's IR made every op a dozen more
#: statements for Numba's passes to walk (a 20-op chain compiled in 6.3 s, now 2.1 s).
#: They are written without branches where they can be (np.maximum/np.minimum clamps,
#: copysign, one division for sigmoid): compiled on its own, a helper's branches were
#: threaded into constant-folded paths that vectorized worse once inlined (chain10 at
#: 1024x1024: 7.5 ms, 6.6 ms without the branches, 6.3 ms inlined by Numba).
HELPERS = {
    "nbyoc_ipow": """\
@njit(error_model="numpy")
def nbyoc_ipow(a, b):
    # NumPy refuses negative integer exponents; square-and-multiply wraps like NumPy.
    if b < 0:
        raise ValueError("Integers to negative integer powers are not allowed.")
    result = a - a + 1
    while b:
        if b & 1:
            result = result * a
        a = a * a
        b >>= 1
    return result
""",
    # Integer division by zero traps (SIGFPE) in Numba's //, % and np.fmod, and so does
    # INT_MIN // -1; NumPy gives 0 for x // 0 and x % 0 and wraps INT_MIN // -1.
    "nbyoc_ifloordiv": """\
@njit(error_model="numpy")
def nbyoc_ifloordiv(a, b):
    if b == 0:
        return a - a
    if b == -1:
        return -a
    return a // b
""",
    # NumPy's float floor division (npy_floor_divide): exact through fmod, the quotient
    # rounded toward -inf; floor(a / b) would round a / b first (-3.5 // 0.7 is -6 in
    # float32, not -5). ``one`` carries the dtype, so float32 stays float32.
    "nbyoc_ffloordiv": """\
@njit(error_model="numpy")
def nbyoc_ffloordiv(a, b, one):
    if b == 0:
        return a / b
    mod = np.fmod(a, b)
    div = (a - mod) / b
    if mod != 0 and ((b < 0) != (mod < 0)):
        div = div - one
    if div == 0:
        return np.copysign(one - one, a / b)
    q = np.floor(div)
    if div - q > one / (one + one):
        q = q + one
    return q
""",
    "nbyoc_imod": """\
@njit(error_model="numpy")
def nbyoc_imod(a, b):
    if b == 0 or b == -1:
        return a - a
    return a % b
""",
    "nbyoc_ifmod": """\
@njit(error_model="numpy")
def nbyoc_ifmod(a, b):
    # C's remainder (the dividend's sign) from Python's (the divisor's).
    if b == 0 or b == -1:
        return a - a
    r = a % b
    if r != 0 and (r < 0) != (a < 0):
        r = r - b
    return r
""",
    "nbyoc_sigmoid": """\
@njit(error_model="numpy")
def nbyoc_sigmoid(x):
    # exp of a non-positive number never overflows, so both branches are exact. (float32
    # takes vecmath's sigmoid_f32; the caller converts the result to the op's dtype.)
    e = np.exp(-np.abs(x))
    return (1.0 if x >= 0 else e) / (1.0 + e)
""",
    # float32 exp, log, tanh, sigmoid and erf: nbyoc's own, which vectorise (libm's are
    # one call per element: tanhf took 15 ms for 2**20 elements on 2 threads, NumPy's
    # SIMD tanh 2.8 ms), imported from ``nbyoc.runtime.llvm.vecmath``.
    **{
        f"{op}_f32": f"from nbyoc.runtime.llvm.vecmath import {op}_f32\n"
        for op in ("exp", "exp_nonpositive", "log", "tanh", "sigmoid", "erf", "log1p", "expm1")
    },
}


@dataclass(frozen=True)
class ScalarRule:
    """How llvm computes one elementwise op on one element: ``expression(args, dtype)``
    gives the Numba source (operands already in the op's loop dtypes, see
    ``nbyoc.ir.ops.elementwise.loop_dtypes``; ``dtype`` is the result's),
    ``helpers(dtype)`` the HELPERS it calls. A rule that depends on the operands' dtypes
    or the call's attributes gives ``typed(args, loop, attrs)`` instead."""

    expression: Callable[[list[str], str], str] | None = None
    helpers: Callable[[str], list[str]] = lambda dtype: []
    typed: Callable[[list[str], tuple, dict], str] | None = None
    #: Computed by a polynomial or a math library call (tens of instructions per
    #: element): a loop of such ops is bound by arithmetic, not memory.
    heavy: bool = False


def cast(expression: str, dtype: str) -> str:
    """Source converting ``expression`` to a value of ``dtype`` (an emulated dtype:
    rounded to it, held in float32).

    >>> cast("a + b", "int32"), cast("a + b", "float16")
    ('np.int32(a + b)', 'round_half(a + b)')
    """
    if dtype in STORAGE:
        return f"{CONVERSIONS[dtype][2]}({expression})"
    return f"{NP_TYPES[dtype]}({expression})"


def _infix(symbol: str) -> ScalarRule:
    return ScalarRule(lambda args, dtype: cast(f"{args[0]} {symbol} {args[1]}", dtype))


def _numpy(function: str, heavy: bool = False) -> ScalarRule:
    # NumPy's own scalar function: maximum/minimum propagate NaN and lower to selects,
    # not branches (a conditional expression is several basic blocks, and Numba's SSA
    # and reaching-definition passes grow with blocks times variables).
    return ScalarRule(
        lambda args, dtype: cast(f"np.{function}({', '.join(args)})", dtype), heavy=heavy
    )


def _vectorised(op: str, other: ScalarRule) -> ScalarRule:
    """float32 ``op`` by ``nbyoc.runtime.llvm.vecmath`` (see HELPERS), others by ``other``."""
    helper = f"{op}_f32"

    def expression(args, dtype):
        if value_dtype(dtype) == VALUE_DTYPE:  # float32, or float16 computed in float32
            return cast(f"{helper}({args[0]})", dtype)
        return other.expression(args, dtype)

    def helpers(dtype):
        if value_dtype(dtype) == VALUE_DTYPE:
            return [helper]
        return other.helpers(dtype)

    return ScalarRule(expression, helpers, heavy=True)


def _compare(symbol: str) -> ScalarRule:
    return ScalarRule(lambda args, dtype: f"np.bool_({args[0]} {symbol} {args[1]})")


def _truth(symbol: str) -> ScalarRule:
    # NumPy's truth value: nonzero (NaN included) is True.
    return ScalarRule(lambda args, dtype: f"np.bool_(({args[0]} != 0) {symbol} ({args[1]} != 0))")


def _by_kind(float_rule: ScalarRule, other: ScalarRule) -> ScalarRule:
    """``float_rule`` where the loop computes in a float dtype, else ``other``."""

    def typed(args, loop, attrs):
        rule = float_rule if dtype_info(loop[0]).is_float else other
        return rule.typed(args, loop, attrs) if rule.typed else rule.expression(args, loop[-1])

    def helpers(dtype):
        return (float_rule if dtype_info(dtype).is_float else other).helpers(dtype)

    return ScalarRule(helpers=helpers, typed=typed)


def _helper(name: str) -> ScalarRule:
    return ScalarRule(
        lambda args, dtype: cast(f"{name}({', '.join(args)})", dtype), lambda dtype: [name]
    )


def _same(args, dtype):
    return cast(args[0], dtype)


def _sign(args, loop, attrs):
    dtype = loop[-1]
    if dtype_info(dtype).kind == "uint":  # Numba's np.sign wraps unsigned values to -1
        return cast(f"{args[0]} > 0", dtype)
    return cast(f"np.sign({args[0]})", dtype)


def _power(args, dtype):
    if dtype_info(dtype).is_integer:
        return cast(f"nbyoc_ipow({args[0]}, {args[1]})", dtype)
    return cast(f"{args[0]} ** {args[1]}", dtype)


#: The elementwise ops llvm lowers, op -> rule: the table the backend's support comes
#: from (an op without a row is never offered to llvm, so it runs elsewhere).
SCALAR_RULES: dict[str, ScalarRule] = {
    "add": _infix("+"),
    "subtract": _infix("-"),
    "multiply": _infix("*"),
    "divide": _infix("/"),
    "maximum": _numpy("maximum"),
    "minimum": _numpy("minimum"),
    "power": ScalarRule(
        _power, lambda dtype: ["nbyoc_ipow"] if dtype_info(dtype).is_integer else [], heavy=True
    ),
    "negative": ScalarRule(lambda args, dtype: cast(f"-{args[0]}", dtype)),
    "abs": _numpy("abs"),
    "exp": _vectorised("exp", _numpy("exp")),
    "log": _vectorised("log", _numpy("log")),
    "sqrt": _numpy("sqrt"),
    "tanh": _vectorised("tanh", _numpy("tanh")),
    "sigmoid": _vectorised(
        "sigmoid",
        ScalarRule(
            lambda args, dtype: cast(f"nbyoc_sigmoid({args[0]})", dtype),
            lambda dtype: ["nbyoc_sigmoid"],
        ),
    ),
    "relu": ScalarRule(
        lambda args, dtype: cast(f"np.maximum({args[0]}, {cast('0', dtype)})", dtype)
    ),
    "floor_divide": _by_kind(
        ScalarRule(
            lambda args, dtype: cast(
                f"nbyoc_ffloordiv({args[0]}, {args[1]}, {cast('1', dtype)})", dtype
            ),
            lambda dtype: ["nbyoc_ffloordiv"],
        ),
        _helper("nbyoc_ifloordiv"),
    ),
    "mod": _by_kind(_numpy("remainder"), _helper("nbyoc_imod")),
    "fmod": _by_kind(_numpy("fmod"), _helper("nbyoc_ifmod")),
    "floor": _by_kind(_numpy("floor"), ScalarRule(_same)),
    "ceil": _by_kind(_numpy("ceil"), ScalarRule(_same)),
    "round": _by_kind(_numpy("rint"), ScalarRule(_same)),
    "sign": ScalarRule(typed=_sign),
    "reciprocal": ScalarRule(lambda args, dtype: cast(f"{cast('1', dtype)} / {args[0]}", dtype)),
    "sin": _numpy("sin", heavy=True),
    "cos": _numpy("cos", heavy=True),
    "erf": _vectorised("erf", ScalarRule(lambda args, dtype: cast(f"math.erf({args[0]})", dtype))),
    # accurate near 0: float32 by vecmath's, float64 by libm's (as NumPy's loops)
    "log1p": _vectorised("log1p", _numpy("log1p", heavy=True)),
    "expm1": _vectorised("expm1", _numpy("expm1", heavy=True)),
    "equal": _compare("=="),
    "not_equal": _compare("!="),
    "less": _compare("<"),
    "less_equal": _compare("<="),
    "greater": _compare(">"),
    "greater_equal": _compare(">="),
    "logical_and": _truth("&"),
    "logical_or": _truth("|"),
    "logical_xor": _truth("^"),
    "logical_not": ScalarRule(lambda args, dtype: f"np.bool_({args[0]} == 0)"),
    "isnan": _by_kind(_numpy("isnan"), ScalarRule(lambda args, dtype: "np.bool_(False)")),
    "isinf": _by_kind(_numpy("isinf"), ScalarRule(lambda args, dtype: "np.bool_(False)")),
    "where": ScalarRule(lambda args, dtype: f"({args[1]} if {args[0]} else {args[2]})"),
    "cast": ScalarRule(typed=lambda args, loop, attrs: cast(args[0], loop[-1])),
    "identity": ScalarRule(_same),
    "broadcast_to": ScalarRule(_same),  # the loop nest's indexing does the broadcasting
}


def is_heavy(op: str) -> bool:
    """Whether ``op`` costs tens of instructions per element (``ScalarRule.heavy``).

    >>> is_heavy("tanh"), is_heavy("divide"), is_heavy("reshape")
    (True, False, False)
    """
    rule = SCALAR_RULES.get(op)
    return rule is not None and rule.heavy


def helpers_for(op: str, dtype: str) -> list[str]:
    """Names of the helpers an op needs (``dtype``: its loop's operand dtype)."""
    return SCALAR_RULES[op].helpers(dtype)


def scalar_expression(op: str, args: list[str], dtype: str, loop=None, attrs=None) -> str:
    """Numba source computing ``op`` on ``args`` (already in the loop's operand dtypes,
    ``loop``; by default all ``dtype``), giving ``dtype``."""
    rule = SCALAR_RULES[op]
    if rule.typed is not None:
        loop = loop or (dtype,) * (len(args) + 1)
        return rule.typed(args, loop, attrs or {})
    return rule.expression(args, dtype)


#: Cheaper float32 helpers for an op whose operand has a known sign (``nbyoc.ir.signs``):
#: op -> (helper, test of the operand). Softmax's ``exp(x - max(x))`` never overflows.
SIGNED_HELPERS = {"exp": ("exp_nonpositive_f32", nonpositive)}


def call_expression(node, args: list[str], loop) -> tuple[str, list[str]]:
    """Numba source computing the elementwise call ``node`` on ``args`` (its operands'
    values, in the loop dtypes ``loop``), and the names of the helpers it needs."""
    op = node.op.name
    signed = SIGNED_HELPERS.get(op)
    if signed and value_dtype(loop[0]) == VALUE_DTYPE and signed[1](node.args[0]):
        return cast(f"{signed[0]}({args[0]})", node.type.dtype), [signed[0]]
    expression = scalar_expression(op, args, node.type.dtype, loop, node.attrs)
    return expression, helpers_for(op, loop[0])


def literal(value, dtype: str) -> str:
    """An exact Numba literal of ``dtype`` for one element.

    >>> literal(0.1, "float32"), literal(float("nan"), "float64"), literal(-3, "int64")
    ('np.float32(0.10000000149011612)', 'np.float64(np.nan)', 'np.int64(-3)')
    """
    if dtype_info(dtype).is_float:
        import numpy as np

        v = float(np.dtype(dtype).type(value))
        if v != v:
            text = "np.nan"
        elif v in (float("inf"), float("-inf")):
            text = "np.inf" if v > 0 else "-np.inf"
        else:
            text = repr(v)
        return cast(text, value_dtype(dtype))  # a float16 value is exact in float32
    return cast(str(int(value)), dtype)
