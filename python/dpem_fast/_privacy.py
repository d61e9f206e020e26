"""What a private fit released, and why it is private."""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Release", "PrivacyRecord", "NOT_PRIVATE"]

NOT_PRIVATE = "computed from the private data: not private, do not publish"


@dataclass(frozen=True)
class Release:
    """One noisy statistic released at every iteration.

    Attributes
    ----------
    name : str
        Statistic, e.g. ``"counts"``, ``"first_moments"``, ``"second_moments"``.
    mechanism : str
        ``"gaussian"`` (noise_scale = standard deviation σ) or ``"laplace"``
        (noise_scale = Laplace scale b).
    norm : str
        Norm of the sensitivity, ``"l2"`` (Gaussian) or ``"l1"`` (Laplace).
    sensitivity : float
        Sensitivity in the scaled units (rows in the unit ball) under the
        record's neighbouring relation.
    noise_scale : float
        σ or b in the scaled units.
    shape : tuple
        Shape of the statistic (for symmetric matrices, the noise is on the
        upper triangle including the diagonal).
    """

    name: str
    mechanism: str
    norm: str
    sensitivity: float
    noise_scale: float
    shape: tuple

    @property
    def noise_multiplier(self) -> float:
        """σ/Δ (Gaussian) or b/Δ = 1/ε (Laplace)."""
        return self.noise_scale / self.sensitivity


@dataclass(frozen=True)
class PrivacyRecord:
    """A readable, re-accountable record of a private fit.

    ``event`` is the whole plan as dp_accounting-style events, so the
    guarantee can be recomputed with another accountant or library.
    """

    mechanism: str
    neighbouring: str
    accountant: str
    epsilon: float
    delta: float
    epsilon_spent: float
    n_iter: int
    releases: tuple
    event: object
    data_domain: dict
    notes: tuple = field(default=())

    def __str__(self) -> str:
        lines = [
            f"mechanism     : {self.mechanism}",
            f"neighbouring  : {self.neighbouring}",
            f"accountant    : {self.accountant}",
            f"target        : (epsilon={self.epsilon:g}, delta={self.delta:g})",
            f"spent         : epsilon={self.epsilon_spent:.6g} at delta={self.delta:g}",
            f"iterations    : {self.n_iter} (fixed; no data-dependent stopping)",
            "releases per iteration (scaled units, rows in the unit ball):",
        ]
        for r in self.releases:
            lines.append(
                f"  {r.name:<15} {r.mechanism:<8} {r.norm}-sensitivity={r.sensitivity:.4g} "
                f"noise={r.noise_scale:.4g} (multiplier {r.noise_multiplier:.4g}) shape={r.shape}"
            )
        dom = self.data_domain
        lines.append(
            f"data domain   : radius={dom['radius']:.6g} "
            + ("(FROM THE DATA: not private)" if dom["from_data"] else "(declared)")
        )
        lines.extend(f"note          : {n}" for n in self.notes)
        return "\n".join(lines)
