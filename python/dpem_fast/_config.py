"""Build and runtime configuration report."""
from __future__ import annotations

import os
import platform
import sys

__all__ = ["show_config", "config_dict"]

_SIMD = {0: "baseline (generic C vectors)", 1: "AVX2", 2: "AVX-512F"}


def config_dict() -> dict:
    """The facts :func:`show_config` prints, as a dict."""
    import numpy as np

    from ._version import __version__
    from ._dpcore import _kmeans, _rng, _rowprod
    from ._threads import effective_n_threads

    try:
        from ._dpcore import _build_info

        build = dict(_build_info.BUILD_INFO)
    except ImportError:  # pragma: no cover
        build = {}
    return {
        "version": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "numpy": np.__version__,
        "openmp": _rng.openmp_enabled(),
        "n_threads": effective_n_threads(None),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "chacha20_path": _SIMD.get(_rng.simd_level(), "unknown"),
        "kmeans_path": _kmeans.simd_path(),
        # PCA/FA's released operator: its row product and basis passes (the same bits on each)
        "operator_path": "AVX-512F" if _rowprod.WIDE else ("AVX2+FMA" if _rowprod.FAST else "portable C"),
        **build,
    }


def show_config(file=None) -> None:
    """Print version, OpenMP status, thread count, the keystream, k-means and released-operator
    code paths and build flags."""
    cfg = config_dict()
    w = max(len(k) for k in cfg)
    for k, v in cfg.items():
        print(f"{k:<{w}} : {v}", file=file or sys.stdout)
