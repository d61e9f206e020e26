"""The privacy report (issue 39, item 4): one renderer for Python (``privacy_report``,
``str(privacy_)``) and the command line's ``report``; every release once, in plan order, with its
noise in the data's own units; the box and how it was found; the live components; nothing that is
neither released nor public."""
import csv
import json
import pickle
import re
import sys
import warnings

import numpy as np
import pytest

import dpem_fast
from dpem_fast import ModelFormatError, _persist, privacy_report
from dpem_fast._cli import main
from dpem_fast._engine._base import PrivateEM
from dpem_fast._engine._report import GLOSSES, _domain_columns, _num, record_lines

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent / "estimators"))
from examples import EXAMPLES  # noqa: E402


def _blobs(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal([-2, 40], [0.5, 5], (n // 2, 2)), rng.normal([2, 60], [0.5, 5], (n // 2, 2))])


def _section(text, header, stop):
    """The release names of the lines between ``header`` and the first line starting with ``stop``."""
    lines = text.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(header))
    out = []
    for line in lines[i + 1:]:
        if line.startswith(stop):
            break
        out.append(line.split()[0])
    return out


def _fit(est, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X)


def test_python_and_cli_reports_are_identical(tmp_path, capsys):
    """The command line prints exactly what ``privacy_report`` returns for the model fitted in
    Python with the same seed: the saved file keeps the plan order of the releases."""
    X = _blobs()
    with open(tmp_path / "d.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["delay", "distance"])
        w.writerows(X.tolist())
    assert main(["fit", str(tmp_path / "d.csv"), "--model", "gmm", "--n-components", "2", "--max-iter", "5",
                 "--epsilon", "2", "--random-state", "3", "-o", str(tmp_path / "m.npz")]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "m.npz")]) == 0
    out = capsys.readouterr().out
    ref = _fit(dpem_fast.DPGaussianMixture(2, max_iter=5, epsilon=2.0, random_state=3), X)
    text = privacy_report(ref, columns=["delay", "distance"])
    assert out.endswith(text + "\n") and out.count("privacy report:") == 1
    assert list(ref.privacy_.releases)[:3] == ["domain_scale", "domain_refine", "domain_outside"]
    loaded = dpem_fast.load(tmp_path / "m.npz")
    assert list(loaded.privacy_.releases) == list(ref.privacy_.releases)
    assert str(loaded.privacy_) == str(ref.privacy_)
    # the JSON report names the plan order too (its objects' keys are sorted)
    assert main(["report", str(tmp_path / "m.npz"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["release_order"] == list(ref.privacy_.releases)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_release_once_in_plan_order(name):
    """Each release has one line in the readable list and one in the accounting detail, in the
    order of the plan: the engine's plan rebuilt from the public parameters where the model has
    one, else the order the fit released them (``observe_releases``)."""
    factory, data = EXAMPLES[name]
    seen = []
    X = data()
    with dpem_fast.observe_releases(lambda r, i: seen.append(r.name) if r.name not in seen else None):
        m = _fit(factory(), X)
    names = list(m.privacy_.releases)
    assert sorted(names) == sorted(seen)
    if isinstance(m, PrivateEM):
        n_public = m._public_rows(X.shape[0])
        assert names == list(m._private_plan(n_public, m.n_features_in_)[0].releases)
    else:
        assert names == seen
    text = privacy_report(m)
    assert _section(text, "releases, in plan order", "units") == names
    assert _section(text, "accounting detail", "  each iteration's") == names or \
        _section(text, "accounting detail", ("box", "data domain", "note", "guarantee")) == names
    for n in names:
        assert n in GLOSSES, f"release {n!r} has no gloss"
    # the record's own text is the report's body (with the columns' names; str(privacy_) has none),
    # less the record's note of the live count, which the report's own line above says once
    own = [ln for ln in record_lines(m.privacy_, _domain_columns(m, None))
           if not re.match(r"note +: n_(components|clusters)_ = ", ln)]
    assert text.endswith("\n".join(own))
    assert len(re.findall(r"live of", text)) <= 1
    assert _section(str(m.privacy_), "releases, in plan order", "units") == names


def test_estimated_box_report_says_how_and_survives_a_file(tmp_path):
    m = _fit(dpem_fast.DPMixedMixture(2, epsilon=3.0, max_iter=3, categories={"x1": 3}, random_state=1),
             np.column_stack([_blobs()[:, 0], np.arange(3000) % 3, _blobs()[:, 1]]))
    text = privacy_report(m)
    names = list(m.privacy_.releases)
    assert names[:5] == ["domain_scale", "domain_refine", "domain_outside", "marginals", "pairs"]
    assert _section(text, "releases, in plan order", "units") == names
    assert "box           : privately estimated" in text and "deliberately coarse" in text and "bounds=" in text
    assert re.search(r"\n    x0 .*\n    x2 ", text)          # the numeric columns by name (x1 is categorical)
    assert re.search(r"\n    \[0\] .*\n    \[1\] ", str(m.privacy_))   # the record alone has no names
    m.save(tmp_path / "m.npz")
    assert privacy_report(dpem_fast.load(tmp_path / "m.npz")) == text


def test_noise_in_the_data_units():
    """σ on a sum of working-unit rows is σ · scale_j on column j's sum, σ · scale_j² on its sum of
    squares; counts stay in rows; the units line gives the map."""
    X = _blobs()
    m = _fit(dpem_fast.DPGaussianMixture(2, epsilon=1.0, max_iter=3, bounds=([-5, 0], [5, 100]), random_state=0), X)
    rec, text = m.privacy_, privacy_report(m, columns=["delay", "distance"])
    scale = rec.data_domain["scale"]
    lines = {}
    for line in text.splitlines():          # the readable list comes first, then the accounting detail
        if line.startswith("  "):
            lines.setdefault(line.split()[0], line)
    s1, s2 = rec.releases["first_moments"].noise_scale, rec.releases["second_moments"].noise_scale
    assert f"delay {_num(s1 * scale[0])}, distance {_num(s1 * scale[1])} (the column's units)" in lines["first_moments"]
    assert f"delay {_num(s2 * scale[0] ** 2)}, distance {_num(s2 * scale[1] ** 2)} (its units squared)" \
        in lines["second_moments"]
    assert f"noise sd {_num(rec.releases['counts'].noise_scale)} rows" in lines["counts"]
    units = next(line for line in text.splitlines() if line.startswith("units"))
    assert "(x - centre) / scale" in units and f"delay {_num(scale[0])}, distance {_num(scale[1])}" in units
    assert "box           : declared" in text and "delay    -5 .. 5" in text and "distance 0 .. 100" in text
    # a model with a fixed domain says its noise is in the working units
    b = _fit(EXAMPLES["bernoulli"][0](), EXAMPLES["bernoulli"][1]())
    assert "other noise in the model's working units (fixed by the model)" in privacy_report(b)


def test_components_live_and_dropped():
    m = _fit(dpem_fast.DPGaussianMixture(6, epsilon=0.5, max_iter=3, bounds=(-4, 100), random_state=0), _blobs(600))
    text = privacy_report(m)
    assert m.n_components_ < 6
    assert f"components    : {m.n_components_} live of 6 asked ({6 - m.n_components_} dropped" in text
    k = _fit(EXAMPLES["kmeans"][0](), EXAMPLES["kmeans"][1]())
    assert f"clusters      : {k.n_clusters_}" in privacy_report(k)


def test_nothing_but_released_or_public_quantities():
    """A declared-domain fit's report is a function of the plan and the live count: two tables of
    the same size that clip very different numbers of rows (a diagnostic, not released) give the
    same report; the report of the public state (a pickle, a file) is the report."""
    X = _blobs()
    Y = X.copy()
    Y[::2, 1] = 1e6                       # half the rows far outside the declared box
    est = dict(n_components=1, epsilon=1.0, max_iter=3, bounds=([-5, 0], [5, 100]), random_state=0)
    a, b = _fit(dpem_fast.DPGaussianMixture(**est), X), _fit(dpem_fast.DPGaussianMixture(**est), Y)
    assert a.diagnostics_["n_rows_clipped"] != b.diagnostics_["n_rows_clipped"]
    assert privacy_report(a) == privacy_report(b)
    assert str(b.diagnostics_["n_rows_clipped"]) not in privacy_report(b)
    assert "how many rows were clipped is not released" in privacy_report(a)
    # an estimated box: every number shown is in the record (released) or the public parameters
    c = _fit(dpem_fast.DPGaussianMixture(2, epsilon=1.0, max_iter=3, random_state=0), X)
    assert privacy_report(pickle.loads(pickle.dumps(c))) == privacy_report(c)
    cov = c.privacy_.data_domain["coverage"]
    assert f"{float(cov['outside_released']):.0f} of {float(cov['rows_released']):.0f} released rows" in \
        privacy_report(c)
    assert str(len(X)) not in privacy_report(c)          # the true row count is not released


def test_a_file_without_release_order_still_loads(tmp_path):
    m = _fit(EXAMPLES["kmeans"][0](), EXAMPLES["kmeans"][1]())
    m.save(tmp_path / "m.npz")
    meta, arrays = _persist._read(tmp_path / "m.npz")
    assert meta["release_order"] == list(m.privacy_.releases)

    def rewrite(edit, out):
        mb = json.dumps(edit(dict(meta))).encode()
        entries = dict(arrays, __meta__=np.frombuffer(mb, np.uint8),
                       __sha256__=np.frombuffer(_persist._digest(mb, arrays).encode(), np.uint8))
        with open(out, "wb") as fh:
            np.savez(fh, **entries)
        return out

    old = dpem_fast.load(rewrite(lambda x: {k: v for k, v in x.items() if k != "release_order"}, tmp_path / "o.npz"))
    assert list(old.privacy_.releases) == sorted(m.privacy_.releases)       # name order, as before
    for bad in (["counts"], ["counts"] * 4, "counts"):
        with pytest.raises(ModelFormatError, match="release_order"):
            dpem_fast.load(rewrite(lambda x: {**x, "release_order": bad}, tmp_path / "b.npz"))


def test_not_private_model_report():
    m = dpem_fast.DPGaussianMixture(2, epsilon=float("inf"), max_iter=3).fit(_blobs())
    text = privacy_report(m)
    assert "NONE - fitted without privacy" in text and re.search(r"components\s+: 2", text)


def test_the_released_radius_is_glossed_and_shown_with_the_box():
    """A declared box much wider than the rows: the fit releases the rows' radius (issue 40), and
    the report says what that release is and that the fit works in the smaller ball."""
    import warnings
    import numpy as np
    from dpem_fast import DPGaussianMixture, privacy_report
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(6000, 3)), 40 * rng.normal(size=(20, 3))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = DPGaussianMixture(2, bounds=(-100, 100), neighbouring="add_remove", max_iter=3,
                              random_state=0).fit(X)
    text = privacy_report(m)
    assert "domain_radius" in m.privacy_.releases and m.privacy_.data_domain["radius"] < 1
    assert "no description" not in text
    assert "the private radius: a histogram of the rows' norms" in text
    assert "radius      : released (domain_radius)" in text
