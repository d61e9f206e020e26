"""Numpy twin of the (DP-)SEP and EP loops in ``_dpcore._sep`` (test oracle, benchmark baseline).

Layout of a Gaussian "site" over the J component means (natural parameters): an array
``theta`` of shape ``(J, d + d*d)``; row j is ``[eta_j, Lambda_j.ravel()]`` with
``eta_j = Lambda_j m_j`` (precision-weighted mean) and ``Lambda_j`` the precision.
See ``docs/models/stochastic_ep.rst`` ("Privacy analysis in full") for the derivation of the
moment matching.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["split", "join", "moment_match", "site_update", "sep_run", "ep_run", "project_factor"]


def split(theta, d):
    """``(eta (J, d), Lam (J, d, d))`` views of ``theta`` (J, d + d*d)."""
    J = theta.shape[0]
    return theta[:, :d], theta[:, d:].reshape(J, d, d)


def join(eta, lam):
    J, d = eta.shape
    return np.concatenate([eta, lam.reshape(J, d * d)], axis=1)


def moment_match(eta_c, lam_c, x, log_w, s2):
    """Mean, covariance and responsibilities of the tilted distribution.

    The cavity is ``prod_j N(mu_j; m_j, V_j)`` with ``V_j = lam_c[j]^-1``, ``m_j = V_j eta_c[j]``;
    the tilted distribution multiplies it by ``sum_j w_j N(x; mu_j, s2 I)``.

    Returns
    -------
    mean (J, d), cov (J, d, d), r (J,)
    """
    J, d = eta_c.shape
    V = np.linalg.inv(lam_c)
    m = np.einsum("jab,jb->ja", V, eta_c)
    A = V + s2 * np.eye(d)
    diff = x - m
    logz = np.empty(J)
    for j in range(J):
        sign, logdet = np.linalg.slogdet(A[j])
        q = diff[j] @ np.linalg.solve(A[j], diff[j])
        logz[j] = log_w[j] - 0.5 * (d * math.log(2 * math.pi) + logdet + q)
    r = np.exp(logz - logz.max())
    r /= r.sum()
    lam_p = lam_c + np.eye(d) / s2
    Vp = np.linalg.inv(lam_p)
    mp = np.einsum("jab,jb->ja", Vp, eta_c + x / s2)
    delta = mp - m
    mean = m + r[:, None] * delta
    cov = ((1 - r)[:, None, None] * V + r[:, None, None] * Vp
           + (r * (1 - r))[:, None, None] * np.einsum("ja,jb->jab", delta, delta))
    return mean, cov, r


def site_update(theta_c, x, log_w, s2, d):
    """Natural parameters of ``proj[tilted] / cavity`` (the intermediate factor f_n)."""
    eta_c, lam_c = split(theta_c, d)
    mean, cov, r = moment_match(eta_c, lam_c, x, log_w, s2)
    lam_new = np.linalg.inv(cov)
    eta_new = np.einsum("jab,jb->ja", lam_new, mean)
    fn = join(eta_new - eta_c, lam_new - lam_c)
    fn[r == 0.0] = 0.0
    return fn


def _is_pd(lam):
    try:
        np.linalg.cholesky(lam)
        return True
    except np.linalg.LinAlgError:
        return False


def _clip(v, c):
    n = math.sqrt(float(np.sum(v * v)))
    return v * (c / n) if n > c else v


def project_factor(theta, d, clip, lo=None, hi=None):
    """Symmetrise each precision, floor its eigenvalues at 0; with a box ``[lo, hi]``, clamp the
    factor's own mean ``Lambda^+ eta`` into it and rebuild ``eta = Lambda m``; then clip the
    norm to ``clip``."""
    eta, lam = split(theta.copy(), d)
    lam = 0.5 * (lam + np.swapaxes(lam, 1, 2))
    for j in range(lam.shape[0]):
        w, U = np.linalg.eigh(lam[j])
        if w.min() < 0:
            lam[j] = (U * np.maximum(w, 0.0)) @ U.T
            lam[j] = 0.5 * (lam[j] + lam[j].T)
        if lo is not None:
            w = np.maximum(w, 0.0)
            c = U.T @ eta[j]
            m = U @ np.where(w > 0, c / np.where(w > 0, w, 1.0), 0.0)
            eta[j] = lam[j] @ np.clip(m, lo, hi)
    return _clip(join(eta, lam), clip)


def sep_run(X, order, theta_f, theta0, log_w, s2, n, step, clip=math.inf, noise=None, batch=1, lo=None, hi=None,
            site_block=256):
    """SEP / DP-SEP (``noise`` given, one row per batch) over the steps ``order``, in batches of
    ``batch`` steps sharing one cavity; returns (theta_f, skipped).  A batch's clipped sites are
    summed in floats over blocks of ``site_block`` kept steps, the block partials exactly
    (``math.fsum``); the noise is added to ``step * sum`` before the damped factor."""
    X = np.asarray(X, dtype=np.float64)
    d = X.shape[1]
    theta_f = np.array(theta_f, dtype=np.float64)
    skipped = 0
    order = np.asarray(order)
    for bi, a in enumerate(range(0, len(order), batch)):
        theta_c = theta0 + (n - 1) * theta_f
        cav_pd = all(_is_pd(lc) for lc in split(theta_c, d)[1])
        partials, tot = [], np.zeros_like(theta_f)
        kept = 0
        for i in order[a:a + batch]:
            if i < 0:                             # an empty slot (person-level, private only)
                fn = np.zeros_like(theta_f)
            else:
                fn = None
                if cav_pd:
                    try:
                        with np.errstate(all="ignore"):
                            fn = site_update(theta_c, X[i], log_w, s2, d)
                    except np.linalg.LinAlgError:
                        fn = None
                    if fn is not None and not np.all(np.isfinite(fn)):
                        fn = None
                if fn is None:
                    skipped += 1
                    if noise is None:
                        continue
                    fn = np.zeros_like(theta_f)   # private: the step still releases
            tot = tot + _clip(fn, clip)
            kept += 1
            if kept % site_block == 0:
                partials.append(tot)
                tot = np.zeros_like(theta_f)
        if kept == 0:
            continue
        if kept % site_block:
            partials.append(tot)
        stack = np.stack(partials).reshape(len(partials), -1)
        exact = np.array([math.fsum(stack[:, j]) for j in range(stack.shape[1])]).reshape(theta_f.shape)
        y = step * exact
        if noise is not None:
            y = y + noise[bi]
        theta_f = (1 - kept * step) * theta_f + y
        if noise is not None or lo is not None:
            theta_f = project_factor(theta_f, d, clip, lo, hi)
    return theta_f, skipped


def ep_run(X, order, sites, theta0, log_w, s2, damping=1.0):
    """Full EP: one site per row; returns (q, sites, skipped)."""
    X = np.asarray(X, dtype=np.float64)
    d = X.shape[1]
    sites = np.array(sites, dtype=np.float64)
    q = theta0 + sites.sum(axis=0)
    skipped = 0
    for i in order:
        theta_c = q - sites[i]
        if not all(_is_pd(lc) for lc in split(theta_c, d)[1]):
            skipped += 1
            continue
        with np.errstate(all="ignore"):
            fn = site_update(theta_c, X[i], log_w, s2, d)
        if not np.all(np.isfinite(fn)):
            skipped += 1
            continue
        new_site = (1 - damping) * sites[i] + damping * fn
        if not all(_is_pd(lc) for lc in split(theta_c + new_site, d)[1]):
            skipped += 1
            continue
        sites[i] = new_site
        q = theta_c + new_site
    return q, sites, skipped
