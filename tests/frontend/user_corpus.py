"""A second corpus for ``nbyoc.jit``: functions a data scientist would plausibly
decorate, written as they would write them (not to suit nbyoc), in five kinds:
statistics, signal processing, physics and simulations with fixed-count Python loops,
losses and metrics, and feature engineering.

``CASES`` maps a name to a ``Case``: the function, two signatures of arguments, and,
when nbyoc does not run it as written, the start of the error it gives (``refused``)
and the rewrite that does run (``rewrite``). The tests (tests/frontend/test_user_corpus.py)
hold every case to its record, so that a change that makes one run as written fails
until its record says so; ``bench/test_jit.py`` times the ones that run.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def _rand(*shape, dtype="float32", seed=0, low=-2.0, high=2.0):
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, shape).astype(dtype)


def _ints(*shape, dtype="int64", seed=0, low=0, high=10):
    return np.random.default_rng(seed).integers(low, high, shape).astype(dtype)


@dataclass(frozen=True)
class Case:
    function: Callable
    first: Callable[[], list]
    second: Callable[[], list]
    kind: str
    refused: str | None = None  # the start of nbyoc's error for the function as written
    rewrite: Callable | None = None  # what runs instead, computing the same
    static: tuple[str, ...] = ()  # compile-time parameters (jit's static_argnames)


# -- statistics ---------------------------------------------------------------------


def zscore_columns(x):
    return (x - x.mean(axis=0)) / x.std(axis=0)


def skewness(x):
    centred = x - x.mean(axis=-1, keepdims=True)
    return (centred**3).mean(axis=-1) / centred.std(axis=-1) ** 3


def excess_kurtosis(x):
    centred = x - x.mean()
    return (centred**4).mean() / (centred**2).mean() ** 2 - 3.0


def covariance(x):
    centred = x - x.mean(axis=0)
    return centred.T @ centred / (x.shape[0] - 1)


def pearson(x, y):
    dx, dy = x - x.mean(), y - y.mean()
    return (dx * dy).sum() / np.sqrt((dx**2).sum() * (dy**2).sum())


def weighted_average(x, w):
    return np.average(x, axis=0, weights=w)


def weighted_average_rewritten(x, w):
    return (x * w[:, None]).sum(axis=0) / w.sum()


def moving_average(x, window):
    c = np.cumsum(x, axis=-1)
    return (c[..., window:] - c[..., :-window]) / window


def row_medians(x):
    return np.median(x, axis=1)


def winsorize(x):
    low, high = np.percentile(x, [5, 95])
    return np.clip(x, low, high)


def ewma(x, alpha):
    out = np.empty_like(x)
    out[0] = x[0]
    for i in range(1, x.shape[0]):
        out[i] = alpha * x[i] + (1 - alpha) * out[i - 1]
    return out


def summary_features(x):
    return {"mean": x.mean(axis=1), "std": x.std(axis=1), "max": x.max(axis=1),
            "range": np.ptp(x, axis=1)}  # fmt: skip


Moments = namedtuple("Moments", ["mean", "variance"])


def moments(x):
    return Moments(x.mean(axis=0), x.var(axis=0))


# -- signal processing ----------------------------------------------------------------


def frame_energy_db(x, frame):
    frames = x.reshape(-1, frame)
    return 10 * np.log10((frames**2).mean(axis=1) + 1e-10)


def pre_emphasis(x):
    return np.concatenate([x[:1], x[1:] - 0.97 * x[:-1]])


def hann_frames(frames):
    n = frames.shape[-1]
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / (n - 1))
    return frames * window


def zero_crossing_rate(x):
    return (np.diff(np.sign(x), axis=-1) != 0).mean(axis=-1)


def dft_magnitude(x):
    n = x.shape[-1]
    k = np.arange(n)
    angle = 2 * np.pi * np.outer(k, k) / n
    re, im = x @ np.cos(angle), -(x @ np.sin(angle))
    return np.sqrt(re**2 + im**2)


def autocorrelation(x, lag):
    centred = x - x.mean()
    return (centred[:-lag] * centred[lag:]).sum() / (centred**2).sum()


def moving_sum_convolve(x):
    return np.convolve(x, np.ones(5), mode="valid")


def resample_linear(t_new, t, x):
    return np.interp(t_new, t, x)


def peak_to_rms(x):
    return np.abs(x).max(axis=-1) / np.sqrt((x**2).mean(axis=-1))


# -- physics and simulations (fixed-count Python loops) -------------------------------


def harmonic_oscillator(position, velocity, dt):
    for _ in range(10):
        velocity = velocity - dt * position
        position = position + dt * velocity
    return position, velocity


def pairwise_gravity(p):
    d = p[None, :, :] - p[:, None, :]
    r2 = (d**2).sum(axis=-1) + 1e-3
    return (d / r2[..., None] ** 1.5).sum(axis=1)


def heat_diffusion(u):
    for _ in range(5):
        inner = u[1:-1] + 0.25 * (u[2:] - 2 * u[1:-1] + u[:-2])
        u = np.concatenate([u[:1], inner, u[-1:]])
    return u


def life_step(board):
    neighbours = sum(np.roll(np.roll(board, i, 0), j, 1)
                     for i in (-1, 0, 1) for j in (-1, 0, 1) if (i, j) != (0, 0))  # fmt: skip
    return ((neighbours == 3) | ((board == 1) & (neighbours == 2))).astype(board.dtype)


def logistic_map(x, r):
    for _ in range(20):
        x = r * x * (1 - x)
    return x


def kinetic_and_potential(x, v, k, m):
    return 0.5 * m * (v**2).sum(), 0.5 * k * (x**2).sum()


def noisy_positions(x):
    return x + np.random.normal(0.0, 0.1, x.shape)


# -- losses and metrics -------------------------------------------------------------


def binary_cross_entropy(p, y):
    eps = 1e-7
    return -np.mean(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps))


def hinge_loss(scores, y):
    return np.maximum(0, 1 - y * scores).mean()


def focal_loss(p, y):
    pt = np.where(y == 1, p, 1 - p)
    return -(((1 - pt) ** 2) * np.log(np.clip(pt, 1e-6, 1.0))).mean()


def kl_divergence(p, q):
    return np.sum(p * np.log(p / q), axis=-1)


def triplet_loss(anchor, positive, negative):
    near = ((anchor - positive) ** 2).sum(axis=1)
    far = ((anchor - negative) ** 2).sum(axis=1)
    return np.maximum(near - far + 0.2, 0).mean()


def smooth_l1(prediction, target):
    d = np.abs(prediction - target)
    return np.where(d < 1, 0.5 * d**2, d - 0.5).sum()


def dice(prediction, target):
    overlap = (prediction * target).sum()
    return 2 * overlap / (prediction.sum() + target.sum() + 1e-6)


def top1_accuracy(logits, labels):
    return (logits.argmax(axis=1) == labels).mean()


def one_hot(labels, classes):
    return np.eye(classes)[labels]


def one_hot_rewritten(labels, classes):
    return (labels[..., None] == np.arange(classes)).astype(np.float64)


def nll_of_labels(logits, labels):
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -log_probs[np.arange(logits.shape[0]), labels].mean()


def ridge_loss(w, x, y):
    residual = x @ w - y
    return (residual**2).mean() + 0.01 * (w**2).sum()


def positive_mean(x):
    return x[x > 0].mean()


# -- feature engineering ------------------------------------------------------------


def log_features(x):
    return np.log1p(np.maximum(x, 0))


def interactions(x):
    return np.concatenate([x, x**2, x[:, :1] * x[:, 1:2]], axis=1)


def bucketize(x, edges):
    return np.digitize(x, edges)


def bucketize_rewritten(x, edges):
    return np.searchsorted(edges, x, side="right")


def ranks(x):
    return np.argsort(np.argsort(x, axis=-1), axis=-1)


def fill_nan_with_column_mean(x):
    return np.where(np.isnan(x), np.nanmean(x, axis=0), x)


def clip_and_scale(x):
    clipped = np.clip(x, -1.5, 1.5)
    return (clipped - clipped.min(axis=0)) / (clipped.max(axis=0) - clipped.min(axis=0))


def cyclical_hour(hours):
    angle = 2 * np.pi * hours / 24
    return np.stack([np.sin(angle), np.cos(angle)], axis=-1)


def first_reading_zeroed(x):
    y = x * 2
    y[0] = 0
    return y


def top_k_mean(x):
    return np.sort(x, axis=1)[:, -3:].mean(axis=1)


def norm_features(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def pairwise_manhattan(a, b):
    return np.abs(a[:, None, :] - b[None, :, :]).sum(axis=-1)


def _nan_rows(seed):
    x = _rand(50, 4, seed=seed)
    x[::7, seed % 4] = np.nan
    return x


def _probabilities(*shape, seed=0):
    p = _rand(*shape, seed=seed, low=0.05, high=1.0)
    return p / p.sum(axis=-1, keepdims=True)


F64 = "float64"
# fmt: off
CASES: dict[str, Case] = {
    # statistics
    "zscore_columns": Case(zscore_columns, lambda: [_rand(200, 6)], lambda: [_rand(30, 3, dtype=F64)],
                           "statistics"),
    "skewness": Case(skewness, lambda: [_rand(8, 300)], lambda: [_rand(400, dtype=F64)], "statistics"),
    "excess_kurtosis": Case(excess_kurtosis, lambda: [_rand(500)], lambda: [_rand(20, 20, dtype=F64)],
                            "statistics"),
    "covariance": Case(covariance, lambda: [_rand(100, 5)], lambda: [_rand(40, 3, dtype=F64)],
                       "statistics"),
    "pearson": Case(pearson, lambda: [_rand(300), _rand(300, seed=1)],
                    lambda: [_rand(50, dtype=F64), _rand(50, seed=1, dtype=F64)], "statistics"),
    "weighted_average": Case(weighted_average, lambda: [_rand(40, 3), _rand(40, seed=1, low=0.1)],
                             lambda: [_rand(9, 2, dtype=F64), _rand(9, seed=1, low=0.1, dtype=F64)],
                             "statistics", refused="numpy.average is not supported by nbyoc.jit",
                             rewrite=weighted_average_rewritten),
    "moving_average": Case(moving_average, lambda: [_rand(4, 100), 5], lambda: [_rand(60, dtype=F64), 3],
                           "statistics", static=("window",)),
    "row_medians": Case(row_medians, lambda: [_rand(10, 31)], lambda: [_rand(3, 8, dtype=F64)],
                        "statistics"),
    "winsorize": Case(winsorize, lambda: [_rand(200)], lambda: [_rand(10, 10, dtype=F64)], "statistics"),
    "ewma": Case(ewma, lambda: [_rand(12, 4), 0.3], lambda: [_rand(6, dtype=F64), 0.5], "statistics"),
    "summary_features": Case(summary_features, lambda: [_rand(7, 40)], lambda: [_rand(3, 5, dtype=F64)],
                             "statistics"),
    "moments": Case(moments, lambda: [_rand(50, 4)], lambda: [_rand(9, 2, dtype=F64)], "statistics"),
    # signal processing
    "frame_energy_db": Case(frame_energy_db, lambda: [_rand(1600), 160],
                            lambda: [_rand(256, dtype=F64), 64], "signal", static=("frame",)),
    "pre_emphasis": Case(pre_emphasis, lambda: [_rand(1000)], lambda: [_rand(17, dtype=F64)], "signal"),
    "hann_frames": Case(hann_frames, lambda: [_rand(20, 64)], lambda: [_rand(3, 16, dtype=F64)],
                        "signal"),
    "zero_crossing_rate": Case(zero_crossing_rate, lambda: [_rand(6, 200)],
                               lambda: [_rand(50, dtype=F64)], "signal"),
    "dft_magnitude": Case(dft_magnitude, lambda: [_rand(4, 32)], lambda: [_rand(2, 16, dtype=F64)],
                          "signal"),
    "autocorrelation": Case(autocorrelation, lambda: [_rand(400), 3], lambda: [_rand(60, dtype=F64), 7],
                            "signal", static=("lag",)),
    "moving_sum_convolve": Case(moving_sum_convolve, lambda: [_rand(100)], lambda: [_rand(30, dtype=F64)],
                                "signal"),
    "resample_linear": Case(resample_linear,
                            lambda: [np.linspace(0, 9, 37, dtype="float32"),
                                     np.arange(10, dtype="float32"), _rand(10)],
                            lambda: [np.linspace(0, 4, 9), np.arange(5.0), _rand(5, dtype=F64)],
                            "signal"),
    "peak_to_rms": Case(peak_to_rms, lambda: [_rand(5, 100)], lambda: [_rand(30, dtype=F64)], "signal"),
    # physics and simulations
    "harmonic_oscillator": Case(harmonic_oscillator, lambda: [_rand(100), _rand(100, seed=1), 0.01],
                                lambda: [_rand(3, dtype=F64), _rand(3, seed=1, dtype=F64), 0.1],
                                "physics"),
    "pairwise_gravity": Case(pairwise_gravity, lambda: [_rand(30, 3)], lambda: [_rand(5, 2, dtype=F64)],
                             "physics"),
    "heat_diffusion": Case(heat_diffusion, lambda: [_rand(64)], lambda: [_rand(10, dtype=F64)], "physics"),
    "life_step": Case(life_step, lambda: [_ints(16, 16, high=2)], lambda: [_ints(8, 5, high=2, dtype="int32")],
                      "physics"),
    "logistic_map": Case(logistic_map, lambda: [_rand(100, low=0.1, high=0.9), 3.7],
                         lambda: [_rand(4, 4, low=0.1, high=0.9, dtype=F64), 2.5], "physics"),
    "kinetic_and_potential": Case(kinetic_and_potential,
                                  lambda: [_rand(50, 3), _rand(50, 3, seed=1), 2.0, 0.5],
                                  lambda: [_rand(4, dtype=F64), _rand(4, seed=1, dtype=F64), 1.0, 1.0],
                                  "physics"),
    # (no rewrite inside: draw the noise outside and pass it in)
    "noisy_positions": Case(noisy_positions, lambda: [_rand(10)], lambda: [_rand(3, 2, dtype=F64)],
                            "physics", refused="numpy.random.normal inside nbyoc.jit would draw once"),
    # losses and metrics
    "binary_cross_entropy": Case(binary_cross_entropy,
                                 lambda: [_rand(100, low=0.01, high=0.99), _ints(100, high=2).astype("float32")],
                                 lambda: [_rand(7, low=0.01, high=0.99, dtype=F64), _ints(7, high=2).astype(F64)],
                                 "losses"),
    "hinge_loss": Case(hinge_loss, lambda: [_rand(64), np.sign(_rand(64, seed=1))],
                       lambda: [_rand(5, dtype=F64), np.sign(_rand(5, seed=1, dtype=F64))], "losses"),
    "focal_loss": Case(focal_loss, lambda: [_rand(80, low=0.01, high=0.99), _ints(80, high=2)],
                       lambda: [_rand(9, low=0.01, high=0.99, dtype=F64), _ints(9, high=2, dtype="int32")],
                       "losses"),
    "kl_divergence": Case(kl_divergence, lambda: [_probabilities(6, 10), _probabilities(6, 10, seed=1)],
                          lambda: [_probabilities(4).astype(F64), _probabilities(4, seed=1).astype(F64)],
                          "losses"),
    "triplet_loss": Case(triplet_loss, lambda: [_rand(16, 8), _rand(16, 8, seed=1), _rand(16, 8, seed=2)],
                         lambda: [_rand(3, 2, dtype=F64), _rand(3, 2, seed=1, dtype=F64),
                                  _rand(3, 2, seed=2, dtype=F64)], "losses"),
    "smooth_l1": Case(smooth_l1, lambda: [_rand(100), _rand(100, seed=1)],
                      lambda: [_rand(4, 4, dtype=F64), _rand(4, 4, seed=1, dtype=F64)], "losses"),
    "dice": Case(dice, lambda: [_rand(32, 32, low=0, high=1), _ints(32, 32, high=2).astype("float32")],
                 lambda: [_rand(8, dtype=F64, low=0, high=1), _ints(8, high=2).astype(F64)], "losses"),
    "top1_accuracy": Case(top1_accuracy, lambda: [_rand(50, 10), _ints(50)],
                          lambda: [_rand(7, 3, dtype=F64), _ints(7, high=3, dtype="int32")], "losses"),
    "one_hot": Case(one_hot, lambda: [_ints(20), 10], lambda: [_ints(3, 2, high=4, dtype="int32"), 4],
                    "losses", static=("classes",), refused="a graph value holds no data",
                    rewrite=one_hot_rewritten),
    "nll_of_labels": Case(nll_of_labels, lambda: [_rand(32, 10), _ints(32)],
                          lambda: [_rand(5, 3, dtype=F64), _ints(5, high=3)], "losses"),
    "ridge_loss": Case(ridge_loss, lambda: [_rand(8), _rand(100, 8, seed=1), _rand(100, seed=2)],
                       lambda: [_rand(3, dtype=F64), _rand(20, 3, seed=1, dtype=F64),
                                _rand(20, seed=2, dtype=F64)], "losses"),
    "positive_mean": Case(positive_mean, lambda: [_rand(1000)], lambda: [_rand(5, 5, dtype=F64)], "losses"),
    # feature engineering
    "log_features": Case(log_features, lambda: [_rand(30, 4)], lambda: [_rand(9, dtype=F64)], "features"),
    "interactions": Case(interactions, lambda: [_rand(20, 3)], lambda: [_rand(4, 2, dtype=F64)],
                         "features"),
    "bucketize": Case(bucketize, lambda: [_rand(50), np.linspace(-2, 2, 9, dtype="float32")],
                      lambda: [_rand(4, 3, dtype=F64), np.array([-1.0, 0.0, 1.0])], "features",
                      refused="numpy.digitize: needs bins known when tracing",
                      rewrite=bucketize_rewritten),
    "ranks": Case(ranks, lambda: [_rand(6, 20)], lambda: [_rand(9, dtype=F64)], "features"),
    "fill_nan_with_column_mean": Case(fill_nan_with_column_mean, lambda: [_nan_rows(1)],
                                      lambda: [_nan_rows(2).astype(F64)], "features"),
    "clip_and_scale": Case(clip_and_scale, lambda: [_rand(40, 5)], lambda: [_rand(6, 2, dtype=F64)],
                           "features"),
    "cyclical_hour": Case(cyclical_hour, lambda: [_ints(24, high=24).astype("float32")],
                          lambda: [_ints(3, 4, high=24).astype(F64)], "features"),
    "first_reading_zeroed": Case(first_reading_zeroed, lambda: [_rand(5, 3)],
                                 lambda: [_rand(4, 2, dtype=F64)], "features"),
    "top_k_mean": Case(top_k_mean, lambda: [_rand(10, 20)], lambda: [_rand(3, 5, dtype=F64)], "features"),
    "norm_features": Case(norm_features, lambda: [_rand(25, 6)], lambda: [_rand(4, 3, dtype=F64)],
                          "features"),
    "pairwise_manhattan": Case(pairwise_manhattan, lambda: [_rand(12, 4), _rand(9, 4, seed=1)],
                               lambda: [_rand(3, 2, dtype=F64), _rand(2, 2, seed=1, dtype=F64)],
                               "features"),
}
# fmt: on
