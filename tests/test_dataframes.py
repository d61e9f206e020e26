"""pandas DataFrames in and out: feature_names_in_, saved with the model, sample() as a DataFrame."""
import numpy as np
import pytest
from numpy.testing import assert_array_equal

import dpem_fast

pd = pytest.importorskip("pandas")
# small fits, about frames, not utility: their noise warnings are not the point here
pytestmark = pytest.mark.filterwarnings("ignore::dpem_fast.NoiseDominatedWarning")

RNG = np.random.default_rng(1)
X = np.concatenate([RNG.normal(-2, 0.5, (80, 3)), RNG.normal(2, 0.5, (80, 3))])
COLS = ["height", "weight", "age"]

MODELS = [
    dpem_fast.DPGaussianMixture(2, epsilon=1.0, max_iter=3, bounds=(-4, 4), random_state=0),
    dpem_fast.DPBernoulliMixture(2, epsilon=1.0, max_iter=3, binarize=0.0, random_state=0),
    dpem_fast.DPGradientEM(epsilon=1.0, max_iter=3, means_init=np.ones(3), random_state=0),
    dpem_fast.DPStochasticEP(2, epsilon=10.0, n_epochs=2, bounds=(-4, 4), component_variance=0.25, random_state=0),
    dpem_fast.DPKMeans(2, epsilon=1.0, max_iter=3, data_norm=5.0, random_state=0),
    dpem_fast.DPFactorAnalysis(1, epsilon=1.0, data_norm=5.0, random_state=0),
]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: type(m).__name__)
def test_frames_keep_feature_names_and_fit_like_arrays(model, tmp_path):
    df = pd.DataFrame(X, columns=COLS)
    a = dpem_fast.load(model.fit(X).save(tmp_path / "a.npz"))
    f = model.fit(df)
    assert_array_equal(f.feature_names_in_, COLS)
    assert not hasattr(a, "feature_names_in_")
    assert f.score(df) == a.score(X)               # same numbers as the array fit
    loaded = dpem_fast.load(f.save(tmp_path / "f.npz"))
    assert_array_equal(loaded.feature_names_in_, COLS)
    assert loaded.score(df) == f.score(df)
    with pytest.raises(ValueError, match="feature names"):
        f.score(df[COLS[::-1]])                    # columns in another order are refused


@pytest.mark.parametrize("model", MODELS[:2], ids=lambda m: type(m).__name__)
def test_sample_returns_a_shuffled_frame_when_fitted_on_one(model):
    rng = np.random.default_rng(2)
    big = np.concatenate([rng.normal(-2, 0.5, (1000, 3)), rng.normal(2, 0.5, (1000, 3))])
    model.fit(pd.DataFrame(big, columns=COLS))
    assert model.n_components_ == 2                # both clusters resolved (160 rows would drop one)
    model.weights_ = np.array([0.5, 0.5])          # a noisy fit may weigh one component far more
    S, y = model.sample(400, random_state=0)
    assert isinstance(S, pd.DataFrame) and list(S.columns) == COLS and len(S) == 400
    # rows are not grouped by component: the labels change many times along the rows
    assert np.count_nonzero(np.diff(y)) > 100
    model.fit(X)
    assert isinstance(model.sample(5, random_state=0)[0], np.ndarray)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: type(m).__name__)
def test_a_group_column_is_taken_out_of_the_features(model):
    """``groups="person"`` names a column of the frame: its ids bound the rows per person and
    it is not a feature (issue 27)."""
    person = np.repeat(np.arange(40), 4)
    df = pd.DataFrame(X, columns=COLS).assign(person=person)
    m = model.set_params(max_rows_per_group=2)
    a = m.fit(df, groups="person")
    assert_array_equal(a.feature_names_in_, COLS)
    assert a.privacy_.privacy_unit == "group"
    first = {k: np.array(v) for k, v in vars(a).items() if k.endswith("_") and isinstance(v, np.ndarray)}
    b = m.fit(df[COLS], groups=person)
    for k, v in first.items():
        assert_array_equal(getattr(b, k), v, err_msg=k)
    with pytest.raises(ValueError, match="no column 'who'"):
        m.fit(df, groups="who")
    model.set_params(max_rows_per_group=None)
