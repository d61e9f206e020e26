"""The backend works from outside: a separate package's own prange loop over the cimported
samplers reproduces dpem_fast's output exactly, for any thread count."""
import numpy as np
import pytest
from fractions import Fraction

import dpem_fast.random as dr
from dpem_consumer import discrete_gaussian


@pytest.mark.parametrize("sigma2", [1, 2.5, Fraction(7, 3), 1e4])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_equals_dpem_fast_sampler(sigma2, n_threads):
    n = 3 * 4096 + 17
    ours = discrete_gaussian(sigma2, n, random_state=11, n_threads=n_threads)
    assert np.array_equal(ours, dr.discrete_gaussian(sigma2, n, random_state=11, n_threads=1))


def test_law_first_moments():
    z = discrete_gaussian(9.0, 200_000, random_state=3, n_threads=2)
    assert abs(z.mean()) < 5 * 3.0 / np.sqrt(z.size)
    assert z.var() == pytest.approx(9.0, rel=0.02)
