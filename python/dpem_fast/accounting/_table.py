"""Noise tables: the noise each accountant needs for one plan and target."""
import functools
import math

from ._calibration import (_calibrate_epsilon_per_release,
                           _calibrate_noise_multiplier)
from ._dp_composition import AdvancedAccountant, LinearAccountant
from ._gdp import GDPAccountant
from ._rdp_accountants import MomentsAccountant, RDPAccountant
from ._validation import check_choice, check_delta, check_positive
from ._zcdp import ZCDPAccountant

__all__ = ["noise_table", "format_noise_table", "default_table_accountants"]


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
        accts["PLD"] = PLDAccountant
    return accts


def noise_table(plan, epsilons=(0.1, 0.5, 1, 2, 4), delta=1e-4,
                accountants=None, *, parameter="noise_multiplier"):
    """Noise each accountant needs for the same (epsilon, delta).

    Parameters
    ----------
    plan : callable
        ``plan(param) -> DpEvent`` (e.g. ``functools.partial(
        dpem_fast.mixture.dpem_plan, "GGG", 10, 20)``).
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
    delta = check_delta("delta", delta)        # the policy once, not per cell
    eps_list = [check_positive("epsilon", e) for e in epsilons]
    if accountants is None:
        accountants = default_table_accountants()
    calib = (_calibrate_noise_multiplier if parameter == "noise_multiplier"
             else _calibrate_epsilon_per_release)
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
