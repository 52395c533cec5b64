"""The constants of nbyoc's vectorisable float32 functions, shared by the llvm kernels
(``nbyoc.runtime.llvm.vecmath``, Numba) and the csource kernels
(``nbyoc.codegen.csource.vecmath``, C), so that both compute the same approximations.

Each value is used rounded to float32. The polynomial coefficients are near-minimax
fits made for nbyoc (Lawson's iteratively reweighted least squares over Chebyshev
nodes, then rounded to float32); each fit's error is given beside it.

>>> import numpy as np
>>> float(np.float32(LN2_HI)) == LN2_HI  # n * LN2_HI is exact
True
"""

from __future__ import annotations

# Rounding to an integer by adding 1.5 * 2**23: the float's low bits then hold the
# integer, and nothing converts a float to an integer (which is undefined for NaN).
ROUNDER = 12582912.0
# ln 2 in two parts (Cody and Waite): n * LN2_HI is exact for every n used here.
LN2_HI = 0.693359375
LN2_LO = -2.12194440e-4
LOG2E = 1.4426950408889634
# exp's input is clamped to [EXP_LOW, EXP_HIGH]: beyond them float32 gives 0 or inf.
EXP_LOW, EXP_HIGH = -104.0, 89.0
# exp(r) = 1 + r + r**2 * q(r) on |r| <= ln(2) / 2, q = E[0] + E[1] r + ... + E[4] r**4
# (fit error 1.3e-7 relative to q, which is scaled by r**2 <= 0.12).
EXP = (0.5, 0.16666577756404877, 0.04166685417294502, 0.008363140746951103,
       0.001390128512866795)  # fmt: skip
# log(1 + f) = f - f**2 / 2 + f**3 * P(f) on sqrt(1/2) - 1 <= f <= sqrt(2) - 1,
# P = L[0] + L[1] f + ... + L[7] f**7 (fit error 4.7e-7 relative to P, scaled by
# |f|**3 <= 0.071).
LOG = (0.3333333134651184, -0.25000303983688354, 0.20001201331615448,
       -0.16641581058502197, 0.14209945499897003, -0.1298927664756775,
       0.12655697762966156, -0.07974214106798172)  # fmt: skip
# tanh(x) = x + x**3 * P(x**2) on |x| < TANH_SMALL, P = T[0] + T[1] z + ... + T[4] z**4
# (fit error 1.6e-7 relative to P, scaled by x**2 / (1 - x**2 / 3) <= 0.45); from
# TANH_SMALL on, 1 - 2 / (e**2|x| + 1) has no cancellation.
TANH_SMALL = 0.625
TANH = (-0.333333283662796, 0.13332770764827728, -0.053850963711738586, 0.020997390151023865,
        -0.006096977740526199)  # fmt: skip
# erf(x) = x + x * Q(x**2) on |x| < ERF_SMALL, Q = Q[0] + Q[1] z + ... + Q[6] z**6 (fit
# error 8.6e-10 relative to erf(x) / x).
ERF_SMALL = 0.9
ERF_Q = (0.12837916612625122, -0.37612634897232056, 0.11283715069293976, -0.02686050906777382,
         0.005203859880566597, -0.0008175646653398871, 8.513130887877196e-05)  # fmt: skip
# erfc(x) = e**(-x**2) / x * H(1 / x) on ERF_SMALL <= x <= ERF_LARGE, H = H[0] + H[1] t
# + ... + H[10] t**10 in t = 1 / x - ERF_HC (fit error 1.2e-8 relative); from x = 3.92
# on, erf(x) rounds to 1.
ERF_LARGE = 4.0
ERF_HC = 0.6805555555555556
ERF_H = (0.4799998998641968, -0.17111308872699738, 0.009360571391880512, 0.05625058338046074,
         -0.06483965367078781, 0.04499505087733269, -0.016506509855389595, -0.00858868658542633,
         0.026840832084417343, -0.03510059043765068, 0.021404515951871872)  # fmt: skip
