"""The kernel layer: the Python face of every compiled kernel, in one place.

Each module wraps one family of ``dpem_fast._dpcore`` kernels (validation of the arrays, the
block plan, the block-order sums) and returns additive statistics; nothing here is private on
its own — statistics leave a fit only through the engine's release layer.  The estimators and
the public :mod:`dpem_fast.kernels` import the kernels from here only.

``gmm`` (the fused Gaussian-mixture E-step), ``bernoulli``, ``kmeans``, ``moments`` (sums and
second moments: factor analysis), ``gradem`` (gradient EM), ``lda`` (the LDA E-step); here,
:func:`all_finite` and :func:`all_binary`, the kernels' threaded input checks.
"""
from .._dpcore._contract import all_binary, all_finite

__all__ = ["all_binary", "all_finite"]
