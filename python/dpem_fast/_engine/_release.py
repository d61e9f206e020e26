"""The release layer: the one place where statistics of private data get their noise.

Every private estimator releases through :class:`ReleaseLayer`, which holds the fit's
calibrated :class:`~dpem_fast._engine._plan.Plan` and key.  It refuses a statistic that
is not in the plan, a wrong shape, a release index beyond the count the plan accounted
for, and a second release of the same (statistic, index) — which would reuse its noise
on a different value and leak the difference.

Noise comes from the core's ChaCha20 streams: the draw of statistic ``name`` at index
``i`` uses the sub-key ``derive_key(key, "release", i, name)`` (block ``b`` of the draw
uses stream ``b``), so adding a statistic or changing the thread count never shifts
another release's noise.  :func:`add_noise` chooses the sampler from the release:

* ``"gaussian"``: i.i.d. N(0, σ²) per entry (ziggurat);
* ``"gaussian"`` on a symmetric statistic: N(0, σ²) on the diagonal and N(0, σ²/2) above
  it, mirrored below, one stream per matrix row (:data:`SYMMETRIC_OFFDIAG`).  This is the
  Gaussian mechanism on the vector ``v(S) = (S_ii; √2 S_ij, i < j)``, whose ℓ2 norm is
  ``‖S‖_F`` exactly, so the specs' Frobenius Δ (:mod:`~dpem_fast._engine._specs`) is its
  sensitivity: σ per coordinate of ``v``, then ``S_ij = v_ij/√2`` is post-processing.
  Analyze-Gauss (Dwork, Talwar, Thakurta & Zhang 2014) puts σ on every upper entry against
  the same Δ (``‖upper(δ)‖ ≤ ‖δ‖_F``, loose off the diagonal); this draw halves the
  off-diagonal variance at the same privacy (issue 41).  The noise matrix is then
  orthogonally invariant (a scaled GOE: ``QᵀEQ`` has the law of ``E``), so a spectral
  method sees the same noise in every basis and its edge is ``√2 σ √d``, not ``2 σ √d``;
* ``"laplace"``: i.i.d. Laplace(0, b) per entry;
* ``"discrete_gaussian"``: the statistic rounded onto the lattice ``γ Z`` plus exact
  discrete Gaussian integers (CKS 2020, Algorithm 3; mirrored for a symmetric statistic),
  mapped back by ``γ ×`` (:mod:`dpem_fast._engine._lattice`).

A symmetric statistic given as its rows (:class:`~dpem_fast._engine._operator.RowProducts`)
is released, for the Gaussian mechanism, as a
:class:`~dpem_fast._engine._operator.ReleasedOperator`: the same release read through its
products, E revealed lazily from the same sub-key (same law); other mechanisms form it.
"""
from __future__ import annotations

import contextlib
import contextvars
import math

import numpy as np

from .._dpcore import _dgauss, _symnoise
from .._dpcore import _rng as _core_rng
from .._dpcore._contract import SAMPLER_BLOCK
from .._rng import KeyDeriver, derive_key
from ..random import _discrete_gaussian_params
from ._lattice import to_lattice
from ._operator import ReleasedOperator, RowProducts
from ._record import SYMMETRIC_OFFDIAG, Release

__all__ = ["ReleaseLayer", "add_noise", "release_key", "noised_value", "observe_releases", "SYMMETRIC_OFFDIAG"]


#: The callbacks of the enclosing :func:`observe_releases` blocks (per thread and context).
_OBSERVERS = contextvars.ContextVar("dpem_fast_release_observers", default=())


@contextlib.contextmanager
def observe_releases(callback):
    """Call ``callback(release, index)`` after each release a private fit makes inside the block.

    A per-release progress hook: every estimator, loop and one-off release (the private domain
    estimate, the private start, the selection's scores) goes through the one release layer, so
    the callback sees them all, in the order they are made.  ``release`` is the plan's public
    :class:`~dpem_fast._engine._record.Release` record (name, mechanism, sensitivity, noise
    scale, count) and ``index`` the release's index (the round); the callback gets nothing
    computed from the data — not the noisy value, not the count of rows — and what it does
    cannot change the fit (it draws no randomness of the fit's streams).  A sequential fit
    (DP-SEP) draws its steps' noise in bulk: the callback then runs once per step, when the
    block is drawn.  An exception raised by the callback propagates and ends the fit, after its
    budget was charged (it is the caller's own code).  Blocks nest; each thread (and each
    ``contextvars`` context) has its own.

    Examples
    --------
    >>> import numpy as np, dpem_fast
    >>> seen = []
    >>> X = np.random.default_rng(0).normal(size=(500, 2)).clip(-3, 3)
    >>> with dpem_fast.observe_releases(lambda r, i: seen.append((r.name, i))):
    ...     _ = dpem_fast.DPKMeans(2, epsilon=1.0, max_iter=2, bounds=(-3, 3), init=None,
    ...                            random_state=0).fit(X)
    >>> seen
    [('counts', 0), ('sums', 0), ('counts', 1), ('sums', 1)]
    """
    if not callable(callback):
        raise TypeError(f"callback must be callable, got {type(callback).__name__}")
    token = _OBSERVERS.set(_OBSERVERS.get() + (callback,))
    try:
        yield callback
    finally:
        _OBSERVERS.reset(token)


def _observed(release, indices):
    """Tell the enclosing :func:`observe_releases` callbacks about ``release`` at ``indices``."""
    for callback in _OBSERVERS.get():
        for i in indices:
            callback(release, int(i))


_RELEASE_TAG = ("release",)


def release_key(key, index, name):
    """Sub-key of the draw for statistic ``name`` at release index ``index``."""
    return derive_key(key, "release", int(index), name)


def add_noise(value, release, key, n_threads=1, offdiag=None):
    """``value`` plus the noise ``release`` declares, drawn from streams of ``key``.

    Parameters
    ----------
    value : ndarray of shape ``release.shape``
        The exact statistic (float64).
    release : Release
    key : ndarray of uint32, shape (8,)
        The sub-key of this draw (see :func:`release_key`).
    n_threads : int
        Results do not depend on it.
    offdiag : float or None
        Only for the public :func:`noised_value`'s Analyze-Gauss (1.0): the sd above the
        diagonal of a symmetric Gaussian release per unit of σ; None is the release layer's
        :data:`SYMMETRIC_OFFDIAG`.

    Returns
    -------
    ndarray of float64, a new array (a :class:`ReleasedOperator` for a Gaussian symmetric
    statistic given as :class:`RowProducts`).
    """
    if isinstance(value, RowProducts):
        if tuple(value.shape) != tuple(release.shape):
            raise ValueError(f"statistic {release.name!r} has shape {value.shape}, the plan says {release.shape}")
        if release.mechanism == "gaussian" and release.symmetric:
            return ReleasedOperator(value, release.noise_scale, key, n_threads)
        value = value.dense(n_threads)
    value = np.asarray(value, dtype=np.float64)
    shape = value.shape
    if shape != tuple(release.shape):
        raise ValueError(f"statistic {release.name!r} has shape {shape}, the plan says {release.shape}")
    mechanism = release.mechanism
    if mechanism == "discrete_gaussian":
        return _add_discrete_noise(value, release, key, n_threads)
    if mechanism == "gaussian" and release.symmetric:
        # value + noise in one threaded pass (the noise matrix is never formed on its own)
        d = shape[-1]
        batch = math.prod(shape[:-2])
        out = np.empty((batch, d, d))
        _symnoise.fill_symmetric_normal(key, 0, release.noise_scale, out, n_threads,
                                        np.ascontiguousarray(value).reshape(batch, d, d),
                                        SYMMETRIC_OFFDIAG if offdiag is None else offdiag)
        return out.reshape(shape)
    # the noise drawn into the result, then the value added to it (``value + noise``: the same
    # bits, one array fewer)
    out = np.empty(shape)
    if mechanism == "gaussian":
        _core_rng.fill_normal(key, 0, release.noise_scale, out.reshape(-1), n_threads)
    elif mechanism == "laplace":
        _core_rng.fill_laplace(key, 0, release.noise_scale, out.reshape(-1), n_threads)
    else:
        raise ValueError(f"unknown mechanism {mechanism!r}")
    np.add(value, out, out=out)
    return out if out.ndim else out[()]     # 0-d: a scalar, as ``value + noise`` gives


class ReleaseLayer:
    """The gateway through which a fit's statistics leave: noise as the plan says.

    Parameters
    ----------
    plan : Plan
        The calibrated plan; only its releases can be made, each at most
        ``release.count`` times (indices ``0 .. count - 1``), each index once; a statistic the
        plan marks open-ended (``plan.open_ended``: its event accounts for a random number of
        releases) at any index ``>= 0``, each once.
    key : ndarray of uint32, shape (8,)
        The fit's key.
    n_threads : int
    """

    def __init__(self, plan, key, n_threads=1):
        self._plan = plan
        self._key = np.array(key, dtype=np.uint32)
        self._keys = KeyDeriver(self._key)     # release_key's sub-keys, the keyed hash set up once
        self._n_threads = int(n_threads)
        self._made = set()

    @property
    def releases(self):
        """The plan's releases by name (public: noise scales and sensitivities)."""
        return self._plan.releases

    def release(self, statistics, index):
        """Noisy copies of ``statistics`` (a mapping name -> array) at release ``index``.

        Returns
        -------
        dict of str to ndarray
            Only the released names; nothing else of ``statistics`` (its diagnostics)
            is passed on.
        """
        out = {}
        releases = self._plan.releases
        for name in statistics:
            r = releases.get(name)
            if r is None:
                raise ValueError(f"statistic {name!r} is not in the privacy plan {list(self._plan.releases)}")
            if not (0 <= index < r.count or (index >= 0 and name in self._plan.open_ended)):
                raise ValueError(f"statistic {name!r}: release index {index} is outside the "
                                 f"{r.count} release(s) the plan accounts for")
            if (name, index) in self._made:
                raise ValueError(f"statistic {name!r} was already released at index {index}")
        for name, value in statistics.items():
            r = releases[name]
            key = self._keys.derive(_RELEASE_TAG, index, (name,))      # = release_key(key, index, name)
            out[name] = add_noise(value, r, key, self._n_threads)
            self._made.add((name, index))
            _observed(r, (index,))
        return out

    def noise_block(self, name, start, stop):
        """The noise of releases ``start .. stop - 1`` of statistic ``name``, in bulk.

        For an estimator whose per-release update runs in one compiled loop (a sequential,
        per-step algorithm): row ``i - start`` of the result is exactly the noise that
        ``release({name: zeros}, i)`` would add (the same stream ``("release", i, name)``),
        and every index in the range is marked as made, so none of them can be released
        again.  The caller adds row ``i - start`` to its statistic at step ``i``; nothing
        else may see the rows.  Only continuous mechanisms (a discrete Gaussian release also
        rounds its value onto a lattice, which a noise array cannot do).

        Returns
        -------
        ndarray of float64, shape ``(stop - start, *shape)``
        """
        r = self._plan.releases.get(name)
        if r is None:
            raise ValueError(f"statistic {name!r} is not in the privacy plan {list(self._plan.releases)}")
        start, stop = int(start), int(stop)
        if not 0 <= start <= stop <= r.count:
            raise ValueError(f"statistic {name!r}: release indices {start}..{stop - 1} are outside the "
                             f"{r.count} release(s) the plan accounts for")
        if r.mechanism == "discrete_gaussian":
            raise ValueError(f"statistic {name!r}: a discrete Gaussian release rounds its value onto a "
                             "lattice; draw it with release(), not as a block of noise")
        made = [i for i in range(start, stop) if (name, i) in self._made]
        if made:
            raise ValueError(f"statistic {name!r} was already released at index {made[0]}")
        zeros = np.zeros(tuple(r.shape))
        out = np.empty((stop - start, *tuple(r.shape)))
        for i in range(start, stop):
            out[i - start] = add_noise(zeros, r, self._keys.derive(("release",), i, (name,)), self._n_threads)
        self._made.update((name, i) for i in range(start, stop))
        _observed(r, range(start, stop))
        return out


def _add_discrete_noise(value, release, key, n_threads):
    """``γ (round(value / γ) + Z)``, Z exact discrete Gaussian integers N_Z(0, σ_Z²)."""
    gamma = release.granularity
    sigma_z = release.noise_scale / gamma            # exact: γ is a power of two
    # the sampler takes σ² exactly (a float is an exact rational): round the square up so
    # that the drawn noise is never below the σ_Z the plan accounted for
    params = _discrete_gaussian_params(float(np.nextafter(sigma_z * sigma_z, np.inf)))
    k = to_lattice(value, gamma, release.name)
    if release.symmetric:
        d = value.shape[-1]
        z = np.empty((int(np.prod(value.shape[:-2], dtype=np.int64)), d, d), dtype=np.int64)
        overflow = np.zeros(z.shape[0] * d, dtype=np.uint8)
        _dgauss.fill_symmetric_discrete_gaussian(key, 0, params, z, overflow, n_threads)
    else:
        z = np.empty(value.size, dtype=np.int64)
        overflow = np.zeros(-(-z.size // SAMPLER_BLOCK), dtype=np.uint8)
        _dgauss.fill_discrete_gaussian(key, 0, params, z, overflow, n_threads)
    if overflow.any():      # probability below exp(-64) per draw; never a wrong value
        raise OverflowError(f"statistic {release.name!r}: a discrete Gaussian draw left the exact range")
    return (k + z.reshape(value.shape)).astype(np.float64) * gamma


def noised_value(value, noise_scale, key, mechanism, symmetric=False, granularity=None, n_threads=1):
    """:func:`add_noise` of a bare value (sensitivity 1, one release): the public
    :func:`dpem_fast.kernels.add_noise`, whose caller calibrates ``noise_scale`` itself.
    ``symmetric``: False, True (σ on every upper entry: Analyze-Gauss, for a caller whose
    sensitivity is ``‖upper(δ)‖``) or ``"frobenius"`` (the engine's draw, σ/√2 above the
    diagonal, for a sensitivity ``‖δ‖_F``)."""
    if symmetric not in (False, True, "frobenius"):
        raise ValueError(f"symmetric must be False, True or 'frobenius', got {symmetric!r}")
    release = Release("value", mechanism, "l1" if mechanism == "laplace" else "l2", 1.0, noise_scale,
                      value.shape, bool(symmetric), 1, granularity)
    return add_noise(value, release, key, n_threads, offdiag=1.0 if symmetric is True else None)
