"""``dpem-fast`` fit / report / sample / accountant: end to end as a subprocess, errors in-process."""
import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import dpem_fast
from dpem_fast._cli import main


def _run(*args, cwd):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "dpem_fast", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(-2, 0.5, (150, 2)), rng.normal(2, 0.5, (150, 2))])
    path = tmp_path / "d.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["height", "weight", "id"])
        w.writerows([[a, b, i] for i, (a, b) in enumerate(X)])
    return tmp_path, X


def test_fit_report_sample_load_score_end_to_end(data):
    d, X = data
    r = _run("fit", "d.csv", "--model", "gmm", "--n-components", "2", "--max-iter", "4", "--epsilon", "1",
             "--bounds", "-3,3", "--columns", "height,weight", "--random-state", "3", "-o", "m.npz", cwd=d)
    assert r.returncode == 0, r.stderr
    assert "epsilon spent 1" in r.stdout
    r = _run("report", "m.npz", cwd=d)
    assert r.returncode == 0 and "neighbouring  : replace" in r.stdout and "columns       : height, weight" in r.stdout
    r = _run("report", "m.npz", "--json", cwd=d)
    rep = json.loads(r.stdout)
    assert rep["estimator"] == "DPGaussianMixture" and rep["privacy"]["epsilon_spent"] == pytest.approx(1.0)
    assert rep["params"]["random_state"] is None and "diagnostics" not in r.stdout
    assert "d.csv" not in r.stdout                 # nor the data file's name
    r = _run("sample", "m.npz", "-n", "200", "-o", "s.csv", "--random-state", "0", cwd=d)
    assert r.returncode == 0, r.stderr
    with open(d / "s.csv") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["height", "weight"] and len(rows) == 201
    S = np.array(rows[1:], dtype=float)
    assert S.min() >= -3 and S.max() <= 3        # clipped to the declared domain
    # the saved model is the one the CLI fitted: same seed, same fit in-process
    model = dpem_fast.load(d / "m.npz")
    ref = dpem_fast.DPGaussianMixture(2, max_iter=4, epsilon=1.0, bounds=(-3.0, 3.0), random_state=3).fit(X)
    assert_array_equal(model.means_, ref.means_)
    assert model.score(X) == ref.score(X)


def test_private_default_domain_and_other_models(data, capsys):
    d, X = data
    np.save(d / "d.npy", X)
    for model, extra in (("kmeans", ["--n-clusters", "2"]), ("fa", ["--n-components", "1"]),
                         ("sep", ["--n-epochs", "2"]), ("gradient-em", ["--max-iter", "2"]),
                         ("gmm", ["--noise", "discrete_gaussian", "--max-iter", "2"])):
        assert main(["fit", str(d / "d.npy"), "--model", model, *extra, "--epsilon", "1", "-o",
                     str(d / f"{model}.npz")]) == 0, capsys.readouterr().err
        m = dpem_fast.load(d / f"{model}.npz")
        assert m.privacy_.epsilon_spent == pytest.approx(1.0, rel=1e-6) and m.n_features_in_ == 2
        if model == "kmeans":
            assert "private estimate" in m.privacy_.data_domain["source"]
    assert main(["fit", str(d / "d.npy"), "--model", "kmeans", "--epsilon", "1", "--bounds-file",
                 str(_bounds_file(d)), "-o", str(d / "kb.npz")]) == 0
    dom = dpem_fast.load(d / "kb.npz").privacy_.data_domain
    assert_array_equal(dom["bounds"][0], [-5, -6]) and dom["source"] == "declared"
    assert main(["accountant"]) == 0 and "noise_multiplier" in capsys.readouterr().out


def _bounds_file(d):
    (d / "b.csv").write_text("column,lower,upper\nx0,-5,5\nx1,-6,6\n")
    return d / "b.csv"


@pytest.mark.parametrize("args, cause", [
    (["fit", "missing.csv", "--model", "gmm", "--epsilon", "1", "-o", "m.npz"], "no such file"),
    (["fit", "d.csv", "--model", "gmm", "--columns", "bmi", "--epsilon", "1", "-o", "m.npz"], "no column 'bmi'"),
    (["fit", "d.csv", "--model", "gmm", "--epsilon", "0", "-o", "m.npz"], "epsilon must be > 0"),
    (["fit", "d.csv", "--model", "gmm", "--epsilon", "1", "--delta", "1", "-o", "m.npz"], "delta"),
    (["fit", "d.csv", "--model", "hmm", "--epsilon", "1", "-o", "m.npz"], "unknown model 'hmm'"),
    (["fit", "d.csv", "--model", "gmm", "--n-compnents", "2", "--epsilon", "1", "-o", "m.npz"],
     "unknown option --n-compnents"),
    (["fit", "bad.csv", "--model", "gmm", "--epsilon", "1", "-o", "m.npz"], "'x' is not a number"),
    (["fit", "d.csv", "--model", "gmm", "--epsilon", "1", "--bounds", "1", "-o", "m.npz"], "expected LO,HI"),
    (["fit", "d.csv", "--model", "bernoulli", "--epsilon", "1", "--data-norm", "2", "-o", "m.npz"],
     "no declared domain"),
    (["report", "d.csv"], "not a dpem_fast model file"),
    (["sample", "missing.npz", "-n", "3", "-o", "s.csv"], "no such file"),
])
def test_user_mistakes_print_one_line_and_exit_nonzero(data, capsys, monkeypatch, args, cause):
    d, _ = data
    (d / "bad.csv").write_text("a,b\n1,x\n")
    monkeypatch.chdir(d)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and cause in err and "Traceback" not in err


def test_sample_refuses_models_without_sampling_and_errors_have_no_traceback(data):
    d, _ = data
    assert main(["fit", str(d / "d.csv"), "--model", "kmeans", "--epsilon", "1", "--data-norm", "5",
                 "--columns", "0,1", "-o", str(d / "k.npz")]) == 0
    r = _run("sample", "k.npz", "-n", "3", "-o", "s.csv", cwd=d)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "does not support sampling" in r.stderr


@pytest.mark.parametrize("command", ["fit", "sample", "report", "accountant", "demo", "config"])
def test_every_subcommand_has_help(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:")
    if command == "fit":
        assert "--n-components" in out and "gradient-em" in out and "private" in out


def test_console_script_is_installed():
    import shutil

    exe = shutil.which("dpem-fast") or shutil.which("dpem-fast", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.skip("dpem-fast is not on PATH (installed without its console scripts)")
    r = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"dpem_fast {dpem_fast.__version__}"
