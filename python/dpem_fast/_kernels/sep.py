"""Python face of the DP-SEP kernels (``dpem_fast._dpcore._sep``): the sequential EP passes
over the rows and the projection of the factor onto its clipping ball.

``ep_loop`` (the non-private EP pass), ``sep_loop`` (the private stochastic pass: each batch
adds the release layer's noise to its exactly summed, clipped site update) and
``project_factor``; ``SITE_BLOCK``: the steps of one float partial of a batch's site sum.
They run one row after another by design (EP is sequential), without the block plan of the
additive kernels; nothing they return is private until the estimator has released it.
"""
from __future__ import annotations

from .._dpcore._sep import SITE_BLOCK, ep_loop, project_factor, sep_loop

__all__ = ["ep_loop", "sep_loop", "project_factor", "SITE_BLOCK"]
