"""ReleaseLayer.noise_block: the bulk noise of a per-step estimator equals single releases."""
import numpy as np
import pytest
from numpy.testing import assert_array_equal

from dpem_fast._engine import ReleaseLayer, StatSpec, Statistics, make_plan
from dpem_fast._rng import make_key

L2 = {"add_remove": 1.0, "replace": 2.0}


def _plan(J=5, discrete=False):
    specs = (StatSpec("a", (2, 3), L2), StatSpec("c", (2, 2, 2), L2, symmetric=True))
    return make_plan(specs, J, epsilon=1.0, delta=1e-5, neighbouring="replace", accountant="zcdp" if discrete else "gdp",
                     noise="discrete_gaussian" if discrete else "gaussian")


@pytest.mark.parametrize("name", ["a", "c"])
def test_noise_block_equals_single_releases_of_zeros(name):
    plan = _plan()
    shape = plan.releases[name].shape
    block = ReleaseLayer(plan, make_key(3), n_threads=2).noise_block(name, 1, 4)
    single = ReleaseLayer(plan, make_key(3), n_threads=1)
    assert block.shape == (3, *shape)
    for i in range(1, 4):
        assert_array_equal(block[i - 1], single.release(Statistics({name: np.zeros(shape)}), i)[name])
    assert np.all(block != 0)


def test_noise_block_marks_releases_made_and_checks_the_plan():
    layer = ReleaseLayer(_plan(), make_key(0))
    layer.noise_block("a", 0, 2)
    with pytest.raises(ValueError, match="already released at index 1"):
        layer.release(Statistics({"a": np.zeros((2, 3))}), 1)
    with pytest.raises(ValueError, match="already released at index 0"):
        layer.noise_block("a", 0, 5)
    with pytest.raises(ValueError, match="outside the 5 release"):
        layer.noise_block("a", 2, 6)
    with pytest.raises(ValueError, match="not in the privacy plan"):
        layer.noise_block("zz", 0, 1)
    assert layer.noise_block("a", 2, 5).shape == (3, 2, 3)        # the rest is still available
    with pytest.raises(ValueError, match="discrete Gaussian"):
        ReleaseLayer(_plan(discrete=True), make_key(0)).noise_block("a", 0, 1)
