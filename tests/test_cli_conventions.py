"""The command line's conventions (issue 39, item 5): ``-o -`` is standard output and status lines
go to stderr; ``--epsilon inf`` is a non-private fit said before any work; the lists of models come
from the registry (the help, the quick start page, the message of ``sample`` on a model that cannot);
the audit says what it audited in words."""
import csv
import io
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import dpem_fast
from dpem_fast._cli import main, models
from dpem_fast._cli._parser import sampling_models


def _run(*args, cwd):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "dpem_fast", *args], cwd=cwd, capture_output=True, env=env,
                          timeout=120)


@pytest.fixture
def table(tmp_path):
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(-2, 0.5, (150, 2)), rng.normal(2, 0.5, (150, 2))])
    with open(tmp_path / "d.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["height", "weight"])
        w.writerows(X.tolist())
    return tmp_path


FIT = ["fit", "d.csv", "--model", "gmm", "--n-components", "2", "--max-iter", "3", "--bounds", "-3,3",
       "--random-state", "1"]


def test_dash_output_is_standard_output_and_status_goes_to_stderr(table):
    r = _run(*FIT, "--epsilon", "1", "-o", "-", cwd=table)
    assert r.returncode == 0, r.stderr
    assert not (table / "-").exists()
    (table / "piped.npz").write_bytes(r.stdout)         # the model file's bytes, nothing else
    m = dpem_fast.load(table / "piped.npz")
    assert m.privacy_.epsilon_spent == pytest.approx(1.0)
    assert r.stderr.decode().startswith("fitted DPGaussianMixture on 2 columns") and b"standard output" in r.stderr
    r = _run("sample", "piped.npz", "-n", "50", "--random-state", "0", "-o", "-", cwd=table)
    assert r.returncode == 0 and not (table / "-").exists()
    rows = list(csv.reader(io.StringIO(r.stdout.decode())))
    assert rows[0] == ["height", "weight"] and len(rows) == 51
    assert r.stderr.decode().strip() == "wrote 50 synthetic rows to standard output (post-processing of the private model)"
    # to a file, the same rows; the status line on stderr, nothing on stdout
    f = _run("sample", "piped.npz", "-n", "50", "--random-state", "0", "-o", "s.csv", cwd=table)
    assert f.stdout == b"" and (table / "s.csv").read_bytes() == r.stdout


def test_epsilon_inf_is_a_non_private_fit_said_before_the_fit(table, capsys, monkeypatch):
    monkeypatch.chdir(table)
    assert main([*FIT, "--epsilon", "inf", "-o", str(table / "np.npz")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("warning: --epsilon inf: a NON-PRIVATE fit") and "must not be published" in err[0]
    assert "not private (epsilon=inf)" in err[-1]
    m = dpem_fast.load(table / "np.npz")
    assert m.privacy_ is None
    assert main(["report", str(table / "np.npz")]) == 0
    assert "guarantee     : NONE - fitted without privacy (epsilon=inf)" in capsys.readouterr().out
    # nan: refused before anything is read (the data file does not even exist)
    assert main(["fit", str(table / "missing.csv"), "--model", "gmm", "--epsilon", "nan", "-o", "x.npz"]) == 2
    err = capsys.readouterr().err
    assert "--epsilon: nan is not a privacy level" in err and "missing.csv" not in err


def test_sample_on_a_model_that_cannot_names_those_that_can(table, capsys):
    can = [name for name, cls in models().items() if callable(getattr(cls, "sample", None))]
    assert sampling_models() == can and {"gmm", "bernoulli", "poisson", "mixed"} <= set(can)
    assert "kmeans" not in can
    assert main(["fit", str(table / "d.csv"), "--model", "kmeans", "--n-clusters", "2", "--epsilon", "1",
                 "--data-norm", "5", "-o", str(table / "k.npz")]) == 0
    capsys.readouterr()
    assert main(["sample", str(table / "k.npz"), "-n", "3", "-o", str(table / "s.csv")]) == 2
    err = capsys.readouterr().err
    assert f"DPKMeans does not support sampling (models that do: {', '.join(can)})" in err


def test_help_and_quickstart_list_every_model(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    for name in models():
        assert re.search(rf"\b{re.escape(name)}\b", out), name
    assert "sample from: " + ", ".join(sampling_models()) in out
    with pytest.raises(SystemExit):
        main(["sample", "--help"])
    assert ", ".join(sampling_models()) in " ".join(capsys.readouterr().out.split())
    text = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "quickstart.rst").read_text()
    listed = re.search(r"Models: (.*?); model\s+options", text, re.S).group(1)
    assert set(re.findall(r"``([a-z-]+)``", listed)) == set(models())
    sampled = re.search(r"``sample`` is post-processing of the released model \((.*?)\)", text, re.S).group(1)
    assert set(re.findall(r"``([a-z-]+)``", sampled)) == set(sampling_models())


def test_audit_says_what_it_audited_in_words(capsys):
    assert main(["audit", "--model", "bernoulli", "--epsilon", "1", "--scope", "fit", "--trials", "2000",
                 "--random-state", "0", "--max-iter", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("DPBernoulliMixture: the whole fit, gdp bound") and "'fit'" not in out
    assert main(["audit", "--model", "bernoulli", "--epsilon", "1", "--scope", "iteration", "--trials", "2000",
                 "--random-state", "0", "--max-iter", "2"]) == 0
    assert capsys.readouterr().out.startswith("DPBernoulliMixture: one iteration (all its releases), gdp bound")
    assert main(["audit", "--model", "bernoulli", "--epsilon", "1", "--trials", "2000", "--random-state", "0",
                 "--max-iter", "2", "--statistic", "first_moments"]) == 0
    assert capsys.readouterr().out.startswith("DPBernoulliMixture: release 'first_moments', gdp bound")
