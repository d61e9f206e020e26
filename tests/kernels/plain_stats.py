"""Engine ``Statistics`` as the oracles' plain dict: the numpy twins in ``dpem_fast._reference``
import nothing of the engine, so they return ``{name: array, "n_rows", "loglik", ...}``."""


def plain(stats):
    """``stats`` (a ``Statistics`` or already a dict) as a dict of its arrays and diagnostics."""
    if isinstance(stats, dict):
        return stats
    return {**stats.arrays, "n_rows": stats.n_rows, "loglik": stats.loglik, "n_clipped": stats.n_clipped}
