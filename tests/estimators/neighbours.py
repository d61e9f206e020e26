"""Brute-force neighbours of a table, for the sensitivity checks of released counts."""
import numpy as np


def worst_changes(count, X, candidates):
    """``{"add_remove": [ℓ2, ℓ1], "replace": [ℓ2, ℓ1]}``: the largest change of ``count(X)`` when
    one row of X is removed, or replaced by one of ``candidates``."""
    base = count(X)
    worst = {"add_remove": [0.0, 0.0], "replace": [0.0, 0.0]}
    for i in range(X.shape[0]):
        diff = base - count(np.delete(X, i, axis=0))
        worst["add_remove"] = np.maximum(worst["add_remove"], [np.linalg.norm(diff), np.abs(diff).sum()])
        for r in candidates:
            Y = X.copy()
            Y[i] = r
            diff = base - count(Y)
            worst["replace"] = np.maximum(worst["replace"], [np.linalg.norm(diff), np.abs(diff).sum()])
    return worst
