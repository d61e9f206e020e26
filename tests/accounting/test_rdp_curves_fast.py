"""The restructured subsampled-Gaussian sums against exhaustive references:
every binomial term is still summed (no truncation)."""
import math

import numpy as np
import pytest
from scipy import special

from dpem_fast.accounting import _rdp


def _log_a_integer_previous(q, z, int_orders):
    """The previous implementation: one flat logsumexp of all terms."""
    n = np.asarray(int_orders, dtype=np.int64)
    lf = special.gammaln(np.arange(n.max() + 1, dtype=float) + 1.0)
    lengths = n + 1
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    nn = np.repeat(n, lengths)
    k = np.arange(lengths.sum()) - np.repeat(starts, lengths)
    x = k * (k - 1.0) / (2.0 * z * z)
    with np.errstate(divide="ignore"):
        log_em1 = x + np.log(-np.expm1(-x))
    terms = (lf[nn] - lf[k] - lf[nn - k] + k * math.log(q)
             + (nn - k) * math.log1p(-q) + log_em1)
    return np.array([special.logsumexp(terms[s:s + m])
                     for s, m in zip(starts, lengths)])


def _log_a_fractional_previous(q, z, frac_orders, block=64, max_terms=200_000):
    """The previous implementation (scipy logsumexp)."""
    a_all = np.asarray(frac_orders, dtype=float)
    out = np.empty(a_all.size)
    if a_all.size == 0:
        return out
    logq, log1mq = math.log(q), math.log1p(-q)
    z0 = z * z * (log1mq - logq) + 0.5
    inv2z2 = 1.0 / (2.0 * z * z)
    pos = np.full(a_all.size, -np.inf)
    neg = np.full(a_all.size, -np.inf)
    active = np.arange(a_all.size)
    start = 0
    while active.size:
        a = a_all[active][:, None]
        i = np.arange(start, start + block, dtype=float)[None, :]
        lbin = (special.gammaln(a + 1) - special.gammaln(i + 1)
                - special.gammaln(a - i + 1))
        sign = special.gammasgn(a - i + 1)
        j = a - i
        t1 = (lbin + j * log1mq + i * logq + (i * i - i) * inv2z2
              + special.log_ndtr((z0 - i) / z))
        t2 = (lbin + j * logq + i * log1mq + (j * j - j) * inv2z2
              + special.log_ndtr((j - z0) / z))
        terms = np.logaddexp(t1, t2)
        p_terms = np.where(sign > 0, terms, -np.inf)
        n_terms = np.where(sign < 0, terms, -np.inf)
        pos[active] = np.logaddexp(pos[active],
                                   special.logsumexp(p_terms, axis=1))
        neg[active] = np.logaddexp(neg[active],
                                   special.logsumexp(n_terms, axis=1))
        tail = terms[:, -block // 4:].max(axis=1)
        done = (tail < pos[active] - 30.0) & (start + block > a[:, 0])
        # Past i > alpha the series alternates with decreasing terms: the
        # remainder is at most the largest tail term; add it (soundness).
        pos[active[done]] = np.logaddexp(pos[active[done]], tail[done])
        start += block
        if start >= max_terms:  # pragma: no cover - safety net
            out[active[~done]] = np.inf
            pos[active[~done]] = np.inf
            done[:] = True
        active = active[~done]
        block = min(block * 2, 4096)
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = np.where(neg < pos, neg - pos, 0.0)
        out = pos + np.log1p(-np.exp(diff))
    out[neg >= pos] = np.inf  # cancellation failure: give up soundly
    return out


def _log_a_integer_mpmath(q, z, n):
    mp = pytest.importorskip("mpmath")
    with mp.workdps(40):
        q_, z_ = mp.mpf(q), mp.mpf(z)
        total = mp.fsum(mp.binomial(n, k) * (1 - q_) ** (n - k) * q_ ** k
                        * mp.expm1(mp.mpf(k * (k - 1)) / (2 * z_ * z_))
                        for k in range(2, n + 1))
        return float(mp.log(total))


CASES = [(0.01, 1.0222897936331787), (1e-4, 0.7), (0.3, 4.0), (0.9, 0.3),
         (1e-8, 0.5), (0.05, 20.0)]


@pytest.mark.parametrize("q,z", CASES)
def test_integer_sum_equals_previous_on_default_grid(q, z):
    a = np.asarray(_rdp.DEFAULT_ORDERS)
    ints = a[a == np.round(a)].astype(np.int64)
    new = _rdp.log_a_integer(q, z, ints)
    old = _log_a_integer_previous(q, z, ints)
    np.testing.assert_allclose(new, old, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("q,z", CASES[:4])
def test_integer_sum_equals_mpmath(q, z):
    orders = [2, 3, 8, 17, 64, 256, 1000]
    new = _rdp.log_a_integer(q, z, orders)
    for n, v in zip(orders, new):
        exact = _log_a_integer_mpmath(q, z, n)
        assert v == pytest.approx(exact, rel=1e-12, abs=1e-12)


def test_integer_sum_any_order_subset():
    a = np.asarray(_rdp.DEFAULT_ORDERS)
    ints = a[a == np.round(a)].astype(np.int64)
    full = _rdp.log_a_integer(0.02, 1.3, ints)
    rng = np.random.default_rng(0)
    for _ in range(5):
        pick = np.sort(rng.choice(ints.size, 7, replace=False))
        np.testing.assert_allclose(_rdp.log_a_integer(0.02, 1.3, ints[pick]),
                                   full[pick], rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("q,z", CASES)
def test_fractional_series_equals_previous_on_default_grid(q, z):
    a = np.asarray(_rdp.DEFAULT_ORDERS)
    frac = a[a != np.round(a)]
    new = _rdp.log_a_fractional(q, z, frac)
    old = _log_a_fractional_previous(q, z, frac)
    np.testing.assert_allclose(new, old, rtol=1e-12, atol=1e-15)
