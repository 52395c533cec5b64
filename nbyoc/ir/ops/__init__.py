"""The built-in ops. Importing this package registers them; each module holds
the type rules, NumPy references and builder functions of one family."""

from .elementwise import (
    abs,
    add,
    divide,
    exp,
    log,
    maximum,
    minimum,
    multiply,
    negative,
    power,
    relu,
    sigmoid,
    sqrt,
    subtract,
    tanh,
)
from .reduce import max, mean, sum
from .tensor import concatenate, matmul, reshape, transpose

__all__ = [
    "abs", "add", "concatenate", "divide", "exp", "log", "matmul", "max", "maximum", "mean",
    "minimum", "multiply", "negative", "power", "relu", "reshape", "sigmoid", "sqrt",
    "subtract", "sum", "tanh", "transpose",
]  # fmt: skip
