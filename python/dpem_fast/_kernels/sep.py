"""Python face of the DP-SEP kernels (``dpem_fast._dpcore._sep``): the sequential EP passes
over the rows and the projection of the factor onto its clipping ball.

``ep_loop`` (the non-private EP pass), ``sep_loop`` (the private stochastic pass: each step
adds the release layer's noise block to the clipped site update) and ``project_factor``.
They run one row after another by design (EP is sequential), without the block plan of the
additive kernels; nothing they return is private until the estimator has released it.
"""
from __future__ import annotations

from .._dpcore._sep import ep_loop, project_factor, sep_loop

__all__ = ["ep_loop", "sep_loop", "project_factor"]
