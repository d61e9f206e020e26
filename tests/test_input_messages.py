"""Issue 39, item 3: a refused table names the column and the real fix, quotes no value of the
data and no row count (column names are public, the rows are not), and is refused before the
budget is charged."""
import re

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import dpem_fast
from dpem_fast import accounting as acc
from dpem_fast._cli import main

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

#: the values of the private rows below: none may appear in a message (nor the row count, 37)
SECRET_VALUES = ("12345.678", "913", "zebra", "2024")
N_ROWS = 37


def _frame(rng, missing=None, extra=None):
    df = pd.DataFrame({"age": rng.uniform(20, 60, N_ROWS), "bmi": rng.uniform(18, 35, N_ROWS),
                       "income": np.full(N_ROWS, 12345.678)})
    if missing is not None:
        df.loc[[4, 17], missing] = np.nan
    for name, values in (extra or {}).items():
        df[name] = values
    return df


def _assert_private(message):
    for value in SECRET_VALUES:
        assert value not in message, f"a data value ({value}) leaks through: {message}"
    assert not re.search(rf"\b({N_ROWS}|2|4|17)\b rows?", message) and str(N_ROWS) not in message
    assert len(message) < 400, message


def _estimators():
    from dpem_fast.cluster import DPKMeans
    from dpem_fast.decomposition import DPFactorAnalysis
    from dpem_fast.mixture import DPGaussianMixture, DPMixedMixture, DPPoissonMixture, DPStochasticEP
    box = dict(bounds=(0.0, 20000.0))
    return [DPGaussianMixture(2, epsilon=1.0, **box), DPKMeans(2, epsilon=1.0, **box),
            DPFactorAnalysis(1, epsilon=1.0, **box), DPPoissonMixture(2, epsilon=1.0),
            DPStochasticEP(2, epsilon=1.0), DPMixedMixture(2, epsilon=1.0, **box)]


def _ledger(est):
    return acc.BudgetLedger(10.0, 1e-3, neighbouring=getattr(est, "neighbouring", "replace"))


@pytest.mark.parametrize("est", _estimators(), ids=lambda e: type(e).__name__)
def test_missing_values_name_the_column_and_the_fix_before_any_charge(est):
    ledger = _ledger(est)
    est.set_params(budget=ledger)
    df = _frame(np.random.default_rng(0), missing="bmi")
    with pytest.raises(ValueError) as info:
        est.fit(df)
    message = str(info.value)
    assert message.startswith("Input X contains NaN")         # scikit-learn's checks match this
    assert "column 'bmi'" in message and "'age'" not in message
    assert "drop the rows" in message and "impute" in message
    assert "HistGradientBoosting" not in message
    _assert_private(message)
    assert ledger.entries == [] and not hasattr(est, "privacy_")
    if isinstance(est, dpem_fast.DPMixedMixture):
        assert "'other' category" in message
    # an array: the column's index
    with pytest.raises(ValueError, match=r"Input X contains NaN \(missing values\) in column 1: "):
        est.fit(df.to_numpy())
    assert ledger.entries == []


def test_mixed_categorical_missing_values_are_the_other_category():
    """Unchanged: a categorical column's missing values are its "other" slot, not a refusal."""
    df = _frame(np.random.default_rng(1), extra={"city": ["a", "b", None] * 12 + ["a"]})
    m = dpem_fast.DPMixedMixture(2, epsilon=np.inf, categories={"city": ["a", "b"]}, random_state=0).fit(df)
    assert m.category_probs_ is not None


@pytest.mark.parametrize("extra, fix", [
    ({"city": ["zebra"] * N_ROWS}, r"X: column 'city' is not numeric: DPGaussianMixture takes numeric "
                                   r"columns only.*DPMixedMixture"),
    ({"when": pd.date_range("2024-01-01", periods=N_ROWS)}, r"X: column 'when' holds timestamps: convert "
                                                           r"each to a number \(e\.g\. seconds"),
])
def test_a_text_or_timestamp_column_is_named_with_the_fix(extra, fix):
    ledger = acc.BudgetLedger(10.0, 1e-3)
    est = dpem_fast.DPGaussianMixture(2, epsilon=1.0, bounds=(0.0, 20000.0), budget=ledger)
    with pytest.raises(ValueError, match=fix) as info:
        est.fit(_frame(np.random.default_rng(2), extra=extra))
    _assert_private(str(info.value))
    assert ledger.entries == []


def test_an_array_of_text_names_the_column_index():
    X = np.array([[1.0, "zebra"], [2.0, "913"]] * 20, dtype=object)
    with pytest.raises(ValueError, match="X: column 1 is not numeric") as info:
        dpem_fast.DPGaussianMixture(2, epsilon=np.inf).fit(X)
    assert "zebra" not in str(info.value)


def test_mixed_timestamp_column_is_told_to_convert_or_drop():
    ledger = acc.BudgetLedger(10.0, 1e-3)
    df = _frame(np.random.default_rng(3), extra={"when": pd.date_range("2024-01-01", periods=N_ROWS)})
    with pytest.raises(ValueError, match=r"column 'when' \(datetime64\[\w+\]\) holds timestamps: convert it to "
                                         r"a number .* or drop it") as info:
        dpem_fast.DPMixedMixture(2, epsilon=1.0, bounds=(0.0, 20000.0), budget=ledger).fit(df)
    assert "declare its categories" not in str(info.value)
    assert ledger.entries == []


def test_lda_missing_counts_name_the_column():
    X = sp.csr_matrix(np.ones((N_ROWS, 5)))
    X.data[7] = np.nan                      # row 1, column 2
    with pytest.raises(ValueError, match=r"Input X contains NaN \(missing values\) in column 2: "
                                         "DPLatentDirichletAllocation") as info:
        dpem_fast.DPLatentDirichletAllocation(2, epsilon=np.inf).fit(X)
    _assert_private(str(info.value))


def test_synth_report_refuses_missing_numbers_naming_the_column():
    rng = np.random.default_rng(4)
    real, synth = _frame(rng, missing="age"), _frame(rng)
    with pytest.raises(ValueError, match=r"real_holdout: Input contains NaN \(missing values\) in numeric "
                                         r"column\(s\) 'age': drop or impute") as info:
        dpem_fast.synth_report(real, synth)
    _assert_private(str(info.value))


def test_synth_report_refuses_infinite_values_and_empty_tables_and_bins_a_constant_column():
    """Issue 39, item 6: an infinite value would fall into an outer bin and void the correlations
    without a word; an empty table failed inside numpy; a constant hold-out column (``income``)
    was refused as a bad ``grid`` nobody passed."""
    rng = np.random.default_rng(5)
    real, synth = _frame(rng), _frame(rng)
    synth.loc[3, "bmi"] = np.inf
    with pytest.raises(ValueError, match=r"synthetic: infinite values in numeric column\(s\) 'bmi'") as info:
        dpem_fast.synth_report(real, synth)
    _assert_private(str(info.value))
    with pytest.raises(ValueError, match="real_holdout: no rows"):
        dpem_fast.synth_report(real.iloc[:0], synth)
    report = dpem_fast.synth_report(real, _frame(rng))
    assert report.column_tvd["income"] == 0.0 and np.isfinite(report.corr_error)


@pytest.mark.parametrize("model, extra", [("gmm", []), ("mixed", ["--category", "city=a|b"])])
def test_cli_blank_cells_are_missing_values_not_text(tmp_path, capsys, model, extra):
    city = model == "mixed"
    rows = ["age,bmi" + ",city" * city] + [f"{20 + i},{'' if i in (3, 9) else 20 + i / 10}" + f",{'ab'[i % 2]}" * city
                                          for i in range(N_ROWS)]
    path = tmp_path / "t.csv"
    path.write_text("\n".join(rows) + "\n")
    assert main(["fit", str(path), "--model", model, "--epsilon", "1", "--bounds", "0,100", *extra,
                 "-o", str(tmp_path / "m.npz")]) == 2
    err = capsys.readouterr().err
    assert "column 'bmi' has missing values (empty cells): drop or fill those rows" in err
    assert "not numeric" not in err and "--category bmi" not in err
    assert not re.search(r"\bline \d", err) and str(N_ROWS) not in err
