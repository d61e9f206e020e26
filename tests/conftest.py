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
