"""NumPy functions of the kinds people write, for ``nbyoc.jit``: each with two
signatures of arguments (another shape, often another dtype).

``CASES`` maps a name to (function, first arguments, second arguments); arguments are
made by ``make(seed)`` callables so every test gets fresh arrays. ``STATIC`` names the
compile-time parameters of the functions that have them.
"""

from __future__ import annotations

import numpy as np


def _rand(*shape, dtype="float32", seed=0, low=-2.0, high=2.0):
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, shape).astype(dtype)


def _ints(*shape, dtype="int32", seed=0, low=-50, high=50):
    return np.random.default_rng(seed).integers(low, high, shape).astype(dtype)


# -- the functions -------------------------------------------------------------


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax(x):
    shifted = x - np.max(x, axis=-1, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


def layer_norm(x, gain, bias):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * gain + bias


def rms_norm(x, gain):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6) * gain


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x**3)))


def gelu_sigmoid(x):
    return x / (1.0 + np.exp(-1.702 * x))


def mlp(x, w1, b1, w2, b2):
    hidden = np.maximum(x @ w1 + b1, 0)
    return hidden @ w2 + b2


def logsumexp(x):
    m = x.max(axis=1, keepdims=True)
    return np.log(np.exp(x - m).sum(axis=1)) + m[:, 0]


def cosine_similarity(a, b):
    dots = a @ b.T
    norms = np.sqrt((a * a).sum(axis=1))[:, None] * np.sqrt((b * b).sum(axis=1))[None, :]
    return dots / norms


def squared_distances(a, b):
    aa = np.sum(a * a, axis=1)[:, np.newaxis]
    bb = np.sum(b * b, axis=1)[np.newaxis, :]
    return aa + bb - 2 * np.dot(a, b.T)


def forward_difference(x):
    return x[1:] - x[:-1]


def central_difference_2d(u, h):
    return (u[2:, 1:-1] - u[:-2, 1:-1]) / (2 * h)


def laplacian(u):
    return u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]


def clipped_zscore(x):
    return np.clip((x - x.mean(axis=0)) / (x.std(axis=0) + 1e-6), -3, 3)


def leaky_relu(x):
    return np.where(x > 0, x, 0.01 * x)


def mixed_int_float(i, f):
    return i * 0.5 + f


def horner(x, c0, c1, c2, c3):
    return ((c3 * x + c2) * x + c1) * x + c0


def polynomial(x, coefficients):
    result = np.zeros_like(x)
    for c in coefficients:  # static: unrolled while tracing
        result = result * x + c
    return result


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def swish(x):
    return x * sigmoid(x)


def softplus(x):
    return np.log(1 + np.exp(x))


def mse(a, b):
    return np.mean((a - b) ** 2)


def cross_entropy(logits, onehot):
    return -np.mean(np.sum(onehot * log_softmax(logits), axis=1))


def batch_norm(x, mean, var, gain, bias):
    return (x - mean) / np.sqrt(var + 1e-5) * gain + bias


def min_max_scale(x):
    low, high = x.min(axis=0), x.max(axis=0)
    return (x - low) / (high - low)


def l2_normalise(x):
    return x / np.sqrt((x * x).sum(axis=1, keepdims=True))


def attention(q, k, v):
    scores = q @ k.T / np.sqrt(q.shape[-1])
    return softmax(scores) @ v


def residual(features, weights, target):
    return target - features @ weights


def accuracy(logits, labels):
    return np.mean(np.argmax(logits, axis=1) == labels)


def count_positive(x):
    return (x > 0).sum()


def relu6(x):
    return np.minimum(np.maximum(x, 0), 6)


def huber(prediction, target, delta):
    r = np.abs(prediction - target)
    return np.where(r < delta, 0.5 * r * r, delta * (r - 0.5 * delta))


def polynomial_features(x):
    return np.concatenate([x, x**2, x**3], axis=1)


def stacked_sum(x, y):
    return np.stack([x, y, x * y], axis=0).sum(axis=0)


def reshape_transpose(x):
    return x.reshape(4, -1).T


def outer_by_broadcast(x, y):
    return x[:, None] * y[None, :]


def outer(x, y):
    return np.outer(x, y)


def gather_rows(x):
    return x[np.array([2, 0, 1, 2])] * 2


def squeeze_column(x):
    return x[:, :1].squeeze(1) + np.squeeze(x[:, 1:2], axis=1)


def broadcast_bias(x, b):
    return x + np.broadcast_to(b, x.shape)


def to_uint8(x):
    return (np.clip(x, 0, 1) * 255).astype(np.uint8)


def to_float64(x):
    return x.astype(np.float64) / 3


def trigonometry(x, y):
    return np.tanh(x) * np.cos(y) + np.sin(x * y)


def unbiased_variance(x):
    return x.var(axis=0, ddof=1)


def row_products(x):
    return x.prod(axis=1)


def matrix_vector(w, v):
    return np.dot(w, v) + 1


def weighted_sum(x, y, alpha, beta):
    return alpha * x + beta * y


def integer_arithmetic(a):
    return (a // 3 + a % 3) * 2 - abs(a)


def integer_mean(a):
    return np.mean(a, axis=0)


def total(x):
    return np.sum(x)


def reduce_to_axis(x, axis):
    return x.sum(axis=axis) / x.shape[axis]


def two_outputs(x):
    return x.min(axis=1), x.max(axis=1)


def rounding(x):
    return np.round(x) + np.floor(x) - np.ceil(x)


def sign_and_abs(x):
    return np.sign(x) * np.abs(x) ** 0.5


def nan_safe(x):
    return np.where(np.isnan(x), 0.0, x)


#: name -> (function, first signature's arguments, second signature's arguments)
CASES = {
    "softmax": (softmax, lambda: [_rand(4, 16)], lambda: [_rand(3, 7, 5, dtype="float64")]),
    "log_softmax": (log_softmax, lambda: [_rand(4, 16)], lambda: [_rand(8, 3, dtype="float64")]),
    "layer_norm": (
        layer_norm,
        lambda: [_rand(6, 32), _rand(32, seed=1), _rand(32, seed=2)],
        lambda: [_rand(2, 3, 8, dtype="float64"), _rand(8, seed=1), _rand(8, seed=2)],
    ),
    "rms_norm": (
        rms_norm,
        lambda: [_rand(6, 32), _rand(32, seed=1)],
        lambda: [_rand(3, 10, dtype="float64"), _rand(10, seed=1, dtype="float64")],
    ),
    "gelu_tanh": (gelu_tanh, lambda: [_rand(64, 8)], lambda: [_rand(100, dtype="float64")]),
    "gelu_sigmoid": (gelu_sigmoid, lambda: [_rand(64, 8)], lambda: [_rand(5, 5, 5)]),
    "mlp": (
        mlp,
        lambda: [
            _rand(8, 16),
            _rand(16, 32, seed=1),
            _rand(32, seed=2),
            _rand(32, 4, seed=3),
            _rand(4, seed=4),
        ],
        lambda: [
            _rand(3, 5, dtype="float64"),
            _rand(5, 7, seed=1, dtype="float64"),
            _rand(7, seed=2, dtype="float64"),
            _rand(7, 2, seed=3, dtype="float64"),
            _rand(2, seed=4, dtype="float64"),
        ],
    ),
    "logsumexp": (logsumexp, lambda: [_rand(5, 9)], lambda: [_rand(2, 30, dtype="float64")]),
    "cosine_similarity": (
        cosine_similarity,
        lambda: [_rand(6, 4), _rand(5, 4, seed=1)],
        lambda: [_rand(3, 8, dtype="float64"), _rand(3, 8, seed=1, dtype="float64")],
    ),
    "squared_distances": (
        squared_distances,
        lambda: [_rand(6, 3), _rand(4, 3, seed=1)],
        lambda: [_rand(2, 5, dtype="float64"), _rand(7, 5, seed=1, dtype="float64")],
    ),
    "forward_difference": (
        forward_difference,
        lambda: [_rand(10)],
        lambda: [_rand(5, 3, dtype="float64")],
    ),
    "central_difference_2d": (
        central_difference_2d,
        lambda: [_rand(8, 9), 0.1],
        lambda: [_rand(5, 5, dtype="float64"), 0.25],
    ),
    "laplacian": (laplacian, lambda: [_rand(8, 9)], lambda: [_rand(4, 4, dtype="float64")]),
    "clipped_zscore": (clipped_zscore, lambda: [_rand(20, 3)], lambda: [_rand(9, dtype="float64")]),
    "leaky_relu": (leaky_relu, lambda: [_rand(7, 7)], lambda: [_rand(12, dtype="float64")]),
    "mixed_int_float": (
        mixed_int_float,
        lambda: [_ints(4, 5), _rand(4, 5)],
        lambda: [_ints(6, dtype="int64"), _rand(6, dtype="float64")],
    ),
    "horner": (
        horner,
        lambda: [_rand(30), 1.0, -0.5, 0.25, 2.0],
        lambda: [_rand(3, 4, dtype="float64"), 1, 2, 3, 4],
    ),
    "polynomial": (
        polynomial,
        lambda: [_rand(30), (1.0, -2.0, 0.5)],
        lambda: [_rand(2, 3, dtype="float64"), (3.0, 0.0, 1.0, -1.0)],
    ),
    "sigmoid": (sigmoid, lambda: [_rand(40)], lambda: [_rand(4, 4, dtype="float64")]),
    "swish": (swish, lambda: [_rand(40)], lambda: [_rand(4, 4, dtype="float64")]),
    "softplus": (softplus, lambda: [_rand(40)], lambda: [_rand(4, 4, dtype="float64")]),
    "mse": (
        mse,
        lambda: [_rand(10), _rand(10, seed=1)],
        lambda: [_rand(3, 3, dtype="float64"), _rand(3, 3, seed=1, dtype="float64")],
    ),
    "cross_entropy": (
        cross_entropy,
        lambda: [_rand(5, 4), np.eye(4, dtype="float32")[[0, 1, 2, 3, 0]]],
        lambda: [_rand(3, 6, dtype="float64"), np.eye(6)[[5, 0, 2]]],
    ),
    "batch_norm": (
        batch_norm,
        lambda: [
            _rand(4, 3),
            _rand(3, seed=1),
            _rand(3, seed=2, low=0.5),
            _rand(3, seed=3),
            _rand(3, seed=4),
        ],
        lambda: [
            _rand(2, 5, dtype="float64"),
            _rand(5, seed=1, dtype="float64"),
            _rand(5, seed=2, low=0.5, dtype="float64"),
            _rand(5, seed=3, dtype="float64"),
            _rand(5, seed=4, dtype="float64"),
        ],
    ),
    "min_max_scale": (min_max_scale, lambda: [_rand(10, 3)], lambda: [_rand(6, dtype="float64")]),
    "l2_normalise": (l2_normalise, lambda: [_rand(5, 8)], lambda: [_rand(2, 3, dtype="float64")]),
    "attention": (
        attention,
        lambda: [_rand(6, 8), _rand(5, 8, seed=1), _rand(5, 4, seed=2)],
        lambda: [
            _rand(2, 3, dtype="float64"),
            _rand(4, 3, seed=1, dtype="float64"),
            _rand(4, 2, seed=2, dtype="float64"),
        ],
    ),
    "residual": (
        residual,
        lambda: [_rand(10, 3), _rand(3, seed=1), _rand(10, seed=2)],
        lambda: [
            _rand(4, 2, dtype="float64"),
            _rand(2, seed=1, dtype="float64"),
            _rand(4, seed=2, dtype="float64"),
        ],
    ),
    "accuracy": (
        accuracy,
        lambda: [_rand(8, 3), _ints(8, low=0, high=3, dtype="int64")],
        lambda: [_rand(5, 4, dtype="float64"), _ints(5, low=0, high=4, dtype="int32")],
    ),
    "count_positive": (count_positive, lambda: [_rand(20)], lambda: [_ints(3, 4)]),
    "relu6": (relu6, lambda: [_rand(30, low=-8, high=8)], lambda: [_ints(10)]),
    "huber": (
        huber,
        lambda: [_rand(12), _rand(12, seed=1), 1.0],
        lambda: [_rand(3, 3, dtype="float64"), _rand(3, 3, seed=1, dtype="float64"), 0.5],
    ),
    "polynomial_features": (
        polynomial_features,
        lambda: [_rand(4, 2)],
        lambda: [_rand(2, 3, dtype="float64")],
    ),
    "stacked_sum": (
        stacked_sum,
        lambda: [_rand(3, 4), _rand(3, 4, seed=1)],
        lambda: [_rand(5, dtype="float64"), _rand(5, seed=1, dtype="float64")],
    ),
    "reshape_transpose": (
        reshape_transpose,
        lambda: [_rand(2, 8)],
        lambda: [_rand(12, dtype="float64")],
    ),
    "outer_by_broadcast": (
        outer_by_broadcast,
        lambda: [_rand(3), _rand(4, seed=1)],
        lambda: [_ints(2), _rand(5, seed=1, dtype="float64")],
    ),
    "outer": (
        outer,
        lambda: [_rand(3), _rand(4, seed=1)],
        lambda: [_rand(6, dtype="float64"), _rand(2, seed=1, dtype="float64")],
    ),
    "gather_rows": (gather_rows, lambda: [_rand(3, 4)], lambda: [_ints(5, dtype="int64")]),
    "squeeze_column": (
        squeeze_column,
        lambda: [_rand(5, 3)],
        lambda: [_rand(2, 2, dtype="float64")],
    ),
    "broadcast_bias": (
        broadcast_bias,
        lambda: [_rand(4, 3), _rand(3, seed=1)],
        lambda: [_rand(2, 2, 5, dtype="float64"), _rand(1, 5, seed=1)],
    ),
    "to_uint8": (
        to_uint8,
        lambda: [_rand(16, low=-0.5, high=1.5)],
        lambda: [_rand(2, 3, dtype="float64", low=-0.5, high=1.5)],
    ),
    "to_float64": (to_float64, lambda: [_rand(7)], lambda: [_ints(2, 3)]),
    "trigonometry": (
        trigonometry,
        lambda: [_rand(10), _rand(10, seed=1)],
        lambda: [_rand(2, 2, dtype="float64"), _rand(2, 2, seed=1, dtype="float64")],
    ),
    "unbiased_variance": (
        unbiased_variance,
        lambda: [_rand(10, 3)],
        lambda: [_rand(5, dtype="float64")],
    ),
    "row_products": (
        row_products,
        lambda: [_rand(4, 5, low=0.5, high=1.5)],
        lambda: [_ints(3, 4, low=-3, high=4)],
    ),
    "matrix_vector": (
        matrix_vector,
        lambda: [_rand(4, 6), _rand(6, seed=1)],
        lambda: [_rand(2, 3, dtype="float64"), _rand(3, seed=1, dtype="float64")],
    ),
    "weighted_sum": (
        weighted_sum,
        lambda: [_rand(9), _rand(9, seed=1), 0.3, 2.0],
        lambda: [_ints(4), _ints(4, seed=1), 2, 3],
    ),
    "integer_arithmetic": (
        integer_arithmetic,
        lambda: [_ints(20)],
        lambda: [_ints(4, 4, dtype="int64")],
    ),
    "integer_mean": (integer_mean, lambda: [_ints(6, 3)], lambda: [_ints(5, dtype="int64")]),
    "total": (total, lambda: [_rand(3, 4)], lambda: [_ints(10, dtype="int64")]),
    "reduce_to_axis": (
        reduce_to_axis,
        lambda: [_rand(3, 4), 1],
        lambda: [_rand(2, 5, dtype="float64"), 0],
    ),
    "two_outputs": (two_outputs, lambda: [_rand(4, 6)], lambda: [_ints(3, 2)]),
    "rounding": (
        rounding,
        lambda: [_rand(20, low=-4, high=4)],
        lambda: [_rand(3, 3, dtype="float64", low=-4, high=4)],
    ),
    "sign_and_abs": (sign_and_abs, lambda: [_rand(20)], lambda: [_rand(4, dtype="float64")]),
    "nan_safe": (
        nan_safe,
        lambda: [np.array([1.0, np.nan, -2.0, np.nan], np.float32)],
        lambda: [np.array([[np.nan, 3.0], [4.0, np.nan]])],
    ),
}

#: Compile-time parameters of the functions that have them.
STATIC = {"polynomial": ["coefficients"], "reduce_to_axis": ["axis"]}
