"""DP-EM plans and noise tables."""
import functools
import math

from ._calibration import (calibrate_epsilon_per_release,
                           calibrate_noise_multiplier)
from ._dp_composition import (AdvancedAccountant, LinearAccountant,
                              classic_gaussian_epsilon)
from ._events import ComposedEvent, GaussianEvent, LaplaceEvent, SelfComposedEvent
from ._gdp import GDPAccountant
from ._rdp_accountants import MomentsAccountant, RDPAccountant
from ._validation import check_choice, check_int, check_open_unit, check_positive
from ._zcdp import ZCDPAccountant

__all__ = ["dpem_plan", "noise_table", "format_noise_table",
           "default_table_accountants"]


def dpem_plan(scenario, n_components, n_iter, parameter=1.0, *,
              delta_per_release=1e-8):
    """Composed event of DP-EM for a mixture of Gaussians (Park et al. 2017, Sec. 4-5).

    Parameters
    ----------
    scenario : {"GGG", "LLG"}
        ``"GGG"``: Gaussian mechanism for mixing weights (once), means and
        covariances (K times each) per iteration: ``J (2K + 1)`` Gaussian
        releases, each with noise multiplier ``parameter`` relative to its
        own sensitivity (Eq. 12, 14, 17).  ``"LLG"``: Laplace with
        ``eps_i = parameter`` for weights and means (``J (K + 1)``
        releases) and ``J K`` Gaussian releases for covariances calibrated
        by the paper's ``sigma = sqrt(2 log(1.25/delta_i)) Delta / eps_i``,
        i.e. noise multiplier ``sqrt(2 log(1.25/delta_i)) / eps_i``.
    n_components : int
        K.
    n_iter : int
        J.
    parameter : float
        Noise multiplier (GGG) or per-release epsilon (LLG).
    delta_per_release : float
        delta_i of the LLG covariance releases (paper: 1e-6 or 1e-8).

    Returns
    -------
    ComposedEvent
    """
    scenario = check_choice("scenario", scenario, ("GGG", "LLG"))
    k = check_int("n_components", n_components)
    j = check_int("n_iter", n_iter)
    parameter = check_positive("parameter", parameter)
    if scenario == "GGG":
        g = GaussianEvent(parameter)
        one_iter = ComposedEvent([g, SelfComposedEvent(g, k),
                                  SelfComposedEvent(g, k)])
    else:
        d = check_open_unit("delta_per_release", delta_per_release)
        lap = LaplaceEvent(parameter)
        gauss = GaussianEvent(classic_gaussian_epsilon(1.0, d) / parameter)
        one_iter = ComposedEvent([lap, SelfComposedEvent(lap, k),
                                  SelfComposedEvent(gauss, k)])
    return ComposedEvent([SelfComposedEvent(one_iter, j)])


def default_table_accountants(delta_per_release=1e-8, include_pld=False):
    """``{name: factory}`` used by :func:`noise_table` by default."""
    accts = {
        "Linear": functools.partial(LinearAccountant,
                                    delta_per_release=delta_per_release),
        "Advanced": functools.partial(AdvancedAccountant,
                                      delta_per_release=delta_per_release),
        "zCDP (classic)": functools.partial(ZCDPAccountant,
                                            conversion="classic"),
        "zCDP (tight)": ZCDPAccountant,
        "MA (integer λ)": MomentsAccountant,
        "RDP": RDPAccountant,
        "GDP (exact)": GDPAccountant,
    }
    if include_pld:
        from ._pld import PLDAccountant
        accts["PLD"] = functools.partial(PLDAccountant,
                                         value_discretization_interval=1e-3)
    return accts


def noise_table(plan, epsilons=(0.1, 0.5, 1, 2, 4), delta=1e-4,
                accountants=None, *, parameter="noise_multiplier"):
    """Noise each accountant needs for the same (epsilon, delta).

    Parameters
    ----------
    plan : callable
        ``plan(param) -> DpEvent`` (e.g. ``functools.partial(dpem_plan,
        "GGG", 10, 20)``).
    epsilons : sequence of float
    delta : float
    accountants : dict {name: factory}, optional
        Default :func:`default_table_accountants`.  Accountants that do not
        support the plan are skipped (``None`` entries).
    parameter : {"noise_multiplier", "epsilon_per_release"}
        What ``param`` is: noise multipliers are minimised, per-release
        epsilons maximised.

    Returns
    -------
    dict
        ``{"parameter", "delta", "epsilons", "rows": {name: [value or None]}}``
        where each value is the calibrated parameter (``None`` when the
        accountant does not support the plan or the target is unreachable).
    """
    check_choice("parameter", parameter,
                 ("noise_multiplier", "epsilon_per_release"))
    delta = check_open_unit("delta", delta)
    eps_list = [check_positive("epsilon", e) for e in epsilons]
    if accountants is None:
        accountants = default_table_accountants()
    calib = (calibrate_noise_multiplier if parameter == "noise_multiplier"
             else calibrate_epsilon_per_release)
    rows = {}
    for name, factory in accountants.items():
        if not factory().supports(plan(1.0)):
            rows[name] = [None] * len(eps_list)
            continue
        vals = []
        for eps in eps_list:
            try:
                vals.append(calib(plan, eps, delta, factory, xtol=1e-6))
            except ValueError:
                vals.append(None)
        rows[name] = vals
    return {"parameter": parameter, "delta": delta, "epsilons": eps_list,
            "rows": rows}


def format_noise_table(table, fmt="markdown", digits=4):
    """Render :func:`noise_table` output as a markdown (or plain) table."""
    check_choice("fmt", fmt, ("markdown", "text"))
    head = [table["parameter"] + " \\ ε"] + [f"{e:g}" for e in table["epsilons"]]
    body = [[name] + ["—" if v is None else f"{v:.{digits}g}" for v in vals]
            for name, vals in table["rows"].items()]
    widths = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]

    def line(cells):
        cells = [c.ljust(w) if i == 0 else c.rjust(w)
                 for i, (c, w) in enumerate(zip(cells, widths))]
        return ("| " + " | ".join(cells) + " |") if fmt == "markdown" \
            else "  ".join(cells)

    out = [line(head)]
    if fmt == "markdown":
        out.append("|" + "|".join("-" * (w + 2) if i == 0 else
                                  "-" * (w + 1) + ":"
                                  for i, w in enumerate(widths)) + "|")
    out += [line(r) for r in body]
    out.append("")
    out.append(f"δ = {table['delta']:g}")
    return "\n".join(out)


def _is_finite(x):
    return x is not None and math.isfinite(x)
