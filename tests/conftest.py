import os

import pytest


@pytest.fixture(params=[0, 42])
def global_random_seed(request):
    """Fixed seeds for statistical tests (no test depends on a single lucky seed)."""
    return request.param


def pytest_report_header(config):
    import dpem_fast
    from dpem_fast._config import config_dict

    cfg = config_dict()
    return (
        f"dpem_fast {dpem_fast.__version__}: openmp={cfg['openmp']} n_threads={cfg['n_threads']} "
        f"chacha20={cfg['chacha20_path']} OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}"
    )


@pytest.fixture(scope="session")
def reuters():
    """(counts, vocabulary) of the Reuters sample shipped by the ``lda`` package (test extra);
    its loader leaves a file open, closed here by a collection inside the ignore."""
    import gc
    import warnings

    lda_data = pytest.importorskip("lda.datasets")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        counts, vocab = lda_data.load_reuters(), list(lda_data.load_reuters_vocab())
        gc.collect()
    return counts, vocab
