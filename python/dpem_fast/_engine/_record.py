"""What a private fit released, and why it is private."""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Release", "PrivacyRecord", "NOT_PRIVATE", "SYMMETRIC_OFFDIAG"]

#: sd above the diagonal of a symmetric Gaussian release, per unit of its noise scale σ (the
#: Frobenius-weighted draw, :mod:`~dpem_fast._engine._release`).
SYMMETRIC_OFFDIAG = 2.0 ** -0.5

NOT_PRIVATE = "computed from the private data: not private, do not publish"


@dataclass(frozen=True)
class Release:
    """One noisy statistic of a fit's plan.

    Attributes
    ----------
    name : str
        Statistic, e.g. ``"counts"``, ``"first_moments"``, ``"second_moments"``.
    mechanism : str
        ``"gaussian"`` (noise_scale = standard deviation σ), ``"laplace"`` (noise_scale =
        Laplace scale b) or ``"discrete_gaussian"`` (exact ``N_Z(0, σ_Z²)`` integers on the
        lattice ``granularity · Z``: noise_scale = ``granularity · σ_Z``, sensitivity =
        ``granularity · Δ_int``, the rounding-widened integer sensitivity of
        :mod:`dpem_fast._engine._lattice`).
    norm : str
        Norm of the sensitivity, ``"l2"`` (Gaussian) or ``"l1"`` (Laplace).
    sensitivity : float
        Sensitivity in the working units (rows in the model's domain) under the
        record's neighbouring relation.
    noise_scale : float
        σ or b in the working units.
    shape : tuple
        Shape of the statistic.
    symmetric : bool
        Symmetric matrices: the noise is drawn on the upper triangle (diagonal included)
        and mirrored, so the release is exactly symmetric.  Gaussian: sd σ on the diagonal
        and σ/√2 above it (:data:`SYMMETRIC_OFFDIAG`, the Frobenius-weighted draw of
        :mod:`~dpem_fast._engine._release`); discrete Gaussian: σ on every upper entry.
    count : int
        How many times the statistic is released in one fit (once per iteration for
        the EM statistics, once for a one-off release such as the domain estimate).
    granularity : float or None
        Lattice step γ of a discrete release (a power of two; 1 for integer statistics).
    size : int
        Number of noised coordinates (the upper triangle of a symmetric statistic).
    """

    name: str
    mechanism: str
    norm: str
    sensitivity: float
    noise_scale: float
    shape: tuple
    symmetric: bool = False
    count: int = 1
    granularity: float | None = None
    size: int | None = None

    @property
    def offdiagonal_sd(self) -> float:
        """The noise sd of one entry off the diagonal of a symmetric statistic (σ/√2 for the
        Gaussian, else σ; on the diagonal, and for any other statistic, ``noise_scale``)."""
        if self.symmetric and self.mechanism == "gaussian":
            return self.noise_scale * SYMMETRIC_OFFDIAG
        return self.noise_scale

    @property
    def noise_multiplier(self) -> float:
        """σ/Δ (Gaussian, discrete Gaussian) or b/Δ = 1/ε (Laplace)."""
        return self.noise_scale / self.sensitivity

    def event(self):
        """The accounting event of one release, from this record alone."""
        from .. import accounting as acc

        if self.mechanism == "gaussian":
            return acc.GaussianEvent(self.noise_multiplier)
        if self.mechanism == "laplace":
            return acc.LaplaceEvent(self.sensitivity / self.noise_scale)
        g = self.granularity        # a power of two: the divisions are exact
        return acc.DiscreteGaussianEvent(self.noise_scale / g, self.sensitivity / g, self.size)


@dataclass(frozen=True)
class PrivacyRecord:
    """A readable, re-accountable record of a private fit.

    ``event`` is the whole plan as events tagged with the neighbouring relation, so the
    guarantee can be recomputed with another accountant of that relation or library.
    ``releases`` maps each statistic's name to its :class:`Release`.  ``private`` is
    False only when the user opted into a domain computed from the raw data: the noise
    is then as recorded but the guarantee does not hold.  ``joint_multiplier``, when set,
    is the noise multiplier of each iteration's releases accounted jointly as one Gaussian
    mechanism (see :mod:`dpem_fast._engine._plan`); the iteration part of ``event`` is then
    ``SelfComposedEvent(GaussianEvent(joint_multiplier), n_iter)``.  ``delta_tail`` is a δ
    spent outside ``event`` (a private selection's wall time, which can tell its rare runs of more
    than T_max trials apart, :mod:`dpem_fast.model_selection`): ``event`` covers every released
    value and is accounted at ``delta - delta_tail``; with the wall time the guarantee is
    ``(epsilon_spent, delta)``; 0 for a single fit.

    ``privacy_unit`` says what one neighbour differs by (issue 27): ``"row"`` — one row is
    added, removed or replaced (``neighbouring``) — or ``"group"``: all the rows of one group
    (a person) are, after each group was bounded to at most ``max_rows_per_group`` rows (a
    public constant; None for a row-level fit).  Every sensitivity in ``releases`` is then the
    group's, and the event's tags carry the unit, so that re-accounting it stays a
    person-level guarantee.  Nothing in the record depends on the number of groups or their
    sizes.
    """

    mechanism: str
    neighbouring: str
    accountant: str
    epsilon: float
    delta: float
    epsilon_spent: float
    n_iter: int
    releases: dict
    event: object
    data_domain: dict
    notes: tuple = field(default=())
    private: bool = True
    noise: str = "gaussian"
    joint_multiplier: float | None = None
    delta_tail: float = 0.0
    privacy_unit: str = "row"
    max_rows_per_group: int | None = None

    @property
    def event_delta(self) -> float:
        """The δ at which ``event`` re-accounts to ``epsilon_spent``: ``delta - delta_tail``."""
        return float(self.delta) - float(self.delta_tail)

    def to_dp_event(self, accountant="rdp"):
        """``event`` as Google's ``dp_accounting.DpEvent`` (needs ``dpem_fast[interop]``).

        Account it under :func:`dpem_fast.interop.neighboring_relation` at :attr:`event_delta`;
        ``accountant``: ``"rdp"`` or ``"pld"``, the dp-accounting accountant it is for (they read
        a replace-one Gaussian differently): :func:`dpem_fast.interop.to_dp_event`.

        .. versionadded:: 0.1 (issue 38)
        """
        from ..interop.dp_accounting import to_dp_event
        return to_dp_event(self, accountant=accountant)

    def __str__(self) -> str:
        """The readable record (:mod:`dpem_fast._engine._report`: the one renderer, also behind
        :func:`dpem_fast.privacy_report` and ``dpem-fast report``)."""
        from ._report import record_lines
        return "\n".join(record_lines(self))
