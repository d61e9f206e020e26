"""``python -m dpem_fast.accounting`` and where the paper's plan lives."""
import functools

import pytest

import dpem_fast.accounting as accounting
import dpem_fast.mixture as mixture
from dpem_fast.accounting import (ComposedEvent, GaussianEvent,
                                  GDPAccountant, SelfComposedEvent)
from dpem_fast.accounting import __main__ as cli
from dpem_fast.accounting import _table


def test_plan_is_the_mixture_papers_not_the_accounting_packages():
    assert "dpem_plan" in mixture.__all__
    assert callable(mixture.dpem_plan)
    assert "dpem_plan" not in accounting.__all__
    assert not hasattr(accounting, "dpem_plan")
    assert not hasattr(_table, "dpem_plan")
    for name in ("noise_table", "format_noise_table",
                 "default_table_accountants"):
        assert name in accounting.__all__


def test_ggg_plan_structure():
    plan = mixture.dpem_plan("GGG", 3, 5, 2.0)
    g = GaussianEvent(2.0)
    assert plan == ComposedEvent([SelfComposedEvent(ComposedEvent(
        [g, SelfComposedEvent(g, 3), SelfComposedEvent(g, 3)]), 5)])
    with pytest.raises(ValueError, match="scenario"):
        mixture.dpem_plan("GLG", 3, 5)


def test_cli_prints_the_ggg_noise_table(capsys):
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("DP-EM GGG plan, K=10, J=20: 420 Gaussian releases")
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    names = [r.split("|")[1].strip() for r in rows[1:]]
    assert names == ["Linear", "Advanced", "zCDP (classic)", "zCDP (tight)",
                     "MA (integer λ)", "RDP", "GDP (exact)"]
    gdp = rows[-1].split("|")[2:-1]
    assert [c.strip() for c in gdp] == ["502.3", "120.8", "65.29", "35.54",
                                        "19.65"]
    # the exact row: 420 Gaussian releases at z are sqrt(420)/z-GDP
    plan = functools.partial(mixture.dpem_plan, "GGG", 10, 20)
    assert GDPAccountant().compose(plan(65.29)).get_epsilon(1e-4) == (
        pytest.approx(1.0, abs=1e-3))
    assert out.rstrip().endswith("δ = 0.0001")


def test_the_printed_table_is_the_papers_plan(capsys):
    """The command composes J (2K + 1) Gaussian releases itself (the accounting package imports no
    model); what it prints is the table of the mixture paper's plan."""
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    paper = _table.noise_table(functools.partial(mixture.dpem_plan, "GGG", 10, 20), (0.1, 0.5, 1, 2, 4), 1e-4,
                               _table.default_table_accountants(include_pld=False))
    assert _table.format_noise_table(paper) in out
